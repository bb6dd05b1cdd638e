"""Replication between brokers: the follower side (:mod:`.fetcher`). The leader side lives in
:class:`broker.replica_manager.Partition` and the Fetch handler."""
