"""KIP-848 message classes kafka-python 3.0 lacks, built by its own JSON-schema machinery.

kafka-python generates a message class from a Kafka JSON schema when a subclass of
``ApiMessage`` (requests, responses) or ``ApiData`` (plain data) is declared; ``load_json``
tells its loader which package holds the ``<ClassName>.json`` file. The schemas live in
:mod:`protocol.schemas`. :mod:`protocol.messages` adds the request/response classes here to its
registry by API key; :mod:`groupcoord.consumer.records` encodes and decodes the
``__consumer_offsets`` record values with the ``ApiData`` classes.
"""

from __future__ import annotations

from kafka.protocol.api_data import ApiData
from kafka.protocol.api_message import ApiMessage

_SCHEMAS = "protocol.schemas"


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ConsumerGroupMetadataValue(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ConsumerGroupPartitionMetadataValue(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ConsumerGroupMemberMetadataValue(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ConsumerGroupTargetAssignmentMetadataValue(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ConsumerGroupTargetAssignmentMemberValue(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ConsumerGroupCurrentMemberAssignmentValue(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


MESSAGES = [ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
            ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse]
