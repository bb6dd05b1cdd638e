"""ZooKeeper mode (its layout, :mod:`broker.cluster.zk_data`, lies below, for security's stores
too): the client the brokers and the controller use (:mod:`.client`), the ZooKeeper-backed topic registry (:mod:`.topics`), the
broker's cluster membership, the ZooKeeper :class:`~broker.cluster.support.MetadataSupport`
(:mod:`.cluster`) and the local server process (:mod:`.server`)
used by ``samsa cluster up`` and the tests.

Imports: the services it drives (replication, controller, metadata cache, security listeners,
inter-broker client), txn/ and protocol/; nothing from the request layer or above.
"""
