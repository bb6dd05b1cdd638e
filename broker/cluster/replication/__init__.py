"""Replication between brokers: the follower side (:mod:`.fetcher`). The leader side lives in
:class:`broker.replica.partition.Partition` and the Fetch handler.

Imports: the replica manager, broker/cluster/interbroker.py and protocol/; nothing from the request
layer or above.
"""
