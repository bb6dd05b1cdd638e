"""Kafka message schemas that kafka-python does not ship, in Kafka's own JSON schema format.

Each ``<Name>.json`` here is read by kafka-python's loader (``load_json=__name__``) exactly as its
bundled schemas are, so these messages get the same generated encoders and decoders. The field
layouts follow Kafka's published message definitions (``clients/src/main/resources/common/message``).
Users: :mod:`protocol.inter_broker` (the ZooKeeper-mode inter-broker APIs) and
:mod:`protocol.kip848` (ConsumerGroupHeartbeat/ConsumerGroupDescribe, and the consumer-group
record values of ``__consumer_offsets`` from ``group-coordinator/src/main/resources/common/message``),
:mod:`protocol.kip714` (GetTelemetrySubscriptions/PushTelemetry) and :mod:`protocol.kip932` (share
groups, their ``__consumer_offsets`` records and the ``__share_group_state`` records from
``share-coordinator/src/main/resources/common/message``). ``tests/protocol/test_kip932_layout.py``
pins the layouts of the share, telemetry and newest transaction schemas to Kafka 4.1's files.
"""
