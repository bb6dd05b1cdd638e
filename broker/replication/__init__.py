"""Replication between brokers: the follower side (:mod:`.fetcher`). The leader side lives in
:class:`broker.partition.Partition` and the Fetch handler.

Imports: the replica manager, broker/interbroker.py and protocol/; nothing from the request
layer or above.
"""
