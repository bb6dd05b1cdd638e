"""The controller of a ZooKeeper-mode cluster: :mod:`.controller` (elections and the event loop),
:mod:`.channel` (requests to the brokers).

Imports: broker/cluster/zk/, broker/cluster/interbroker.py and protocol/; nothing from the request layer or above.
"""
