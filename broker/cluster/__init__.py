"""The cluster: how brokers agree on metadata and copy each other's partitions.

:mod:`.support` is the one seam between single broker and cluster (Kafka's ``MetadataSupport``):
the request layer asks it, never which mode it runs in; a single broker is a cluster of one
(``LocalMetadataSupport``). Kafka's ZooKeeper mode: :mod:`.zk_data` (the znode layout, no I/O,
low enough for the security stores), :mod:`.zk` (the client, the ZooKeeper-backed topic
registry, the broker's membership as ``ZkMetadataSupport`` and the local server process), :mod:`.controller` (one broker
decides leaders and ISRs and tells the others by LeaderAndIsr/UpdateMetadata), :mod:`.replication`
(the replica fetcher), :mod:`.metadata_cache` (each broker's view of brokers and partitions),
:mod:`.metadata` (the topic registry; a single broker keeps it in a local file, a cluster of one),
:mod:`.interbroker` (the Kafka client brokers use to talk to each other) and :mod:`.features`.

Imports: the replica manager (:mod:`broker.replica`), configuration, security, the logs and the
protocol; never the request layer (:mod:`broker.apis`) or the composition root above it.
"""
