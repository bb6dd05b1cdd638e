"""The replica manager and the partitions it holds: Kafka's ``ReplicaManager`` and ``Partition``.

:mod:`.replica_manager` owns every local partition's log and runs ``appendRecords`` and
``fetchMessages``; :mod:`.purgatory` parks acks=all produces and long-poll fetches
(``DelayedProduce``, ``ParkedFetch``) until follower progress or new data completes them;
:mod:`.partition` keeps a partition's leader state (ISR, high watermark, follower progress);
:mod:`.fetch_session` is KIP-227's incremental fetch session cache; :mod:`.log_dirs` takes a
failed log dir offline and moves partitions between dirs (JBOD).

Imports: the logs (:mod:`log`), the protocol and configuration; never the request layer, the
cluster's ZooKeeper code or the composition root.
"""
