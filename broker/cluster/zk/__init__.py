"""ZooKeeper mode: Kafka's ZooKeeper layout (:mod:`.zk_data`), the client the brokers and the
controller use (:mod:`.client`), the ZooKeeper-backed topic registry (:mod:`.topics`), the
broker's cluster membership (:mod:`.cluster`) and the local server process (:mod:`.server`)
used by ``samsa cluster up`` and the tests.

Imports: the services it drives (replication, controller, metadata cache, security listeners,
inter-broker client), txn/ and protocol/; nothing from the request layer or above.
"""
