"""KIP-932 (share groups) message classes kafka-python 3.0 lacks, built by its own JSON-schema
machinery, as :mod:`protocol.kip848` does for consumer groups.

Requests and responses (ShareGroupHeartbeat 76, ShareGroupDescribe 77, ShareFetch 78,
ShareAcknowledge 79, and the admin APIs DescribeShareGroupOffsets 90, AlterShareGroupOffsets 91,
DeleteShareGroupOffsets 92, and the share coordinator's inter-broker InitializeShareGroupState 83,
ReadShareGroupState 84, WriteShareGroupState 85, DeleteShareGroupState 86) are registered by API key in :mod:`protocol.messages`. The ``ApiData``
classes are record values: share groups in ``__consumer_offsets``
(:mod:`groupcoord.share.records`) and share-partition state in ``__share_group_state``
(:mod:`groupcoord.share.state`). Schemas live in :mod:`protocol.schemas`. No I/O.
"""

from __future__ import annotations

from kafka.protocol.api_data import ApiData
from kafka.protocol.api_message import ApiMessage

_SCHEMAS = "protocol.schemas"


class ShareGroupHeartbeatRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareFetchRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareFetchResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareAcknowledgeRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareAcknowledgeResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class AlterShareGroupOffsetsRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class AlterShareGroupOffsetsResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class InitializeShareGroupStateRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class InitializeShareGroupStateResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ReadShareGroupStateRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ReadShareGroupStateResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class WriteShareGroupStateRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class WriteShareGroupStateResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class DeleteShareGroupStateRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class DeleteShareGroupStateResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareGroupMetadataValue(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareGroupMemberMetadataValue(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareGroupTargetAssignmentMetadataValue(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareGroupTargetAssignmentMemberValue(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareGroupCurrentMemberAssignmentValue(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareSnapshotValue(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ShareUpdateValue(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


MESSAGES = [ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
            ShareGroupDescribeRequest, ShareGroupDescribeResponse,
            ShareFetchRequest, ShareFetchResponse,
            ShareAcknowledgeRequest, ShareAcknowledgeResponse,
            DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse,
            AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse,
            DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
            InitializeShareGroupStateRequest, InitializeShareGroupStateResponse,
            ReadShareGroupStateRequest, ReadShareGroupStateResponse,
            WriteShareGroupStateRequest, WriteShareGroupStateResponse,
            DeleteShareGroupStateRequest, DeleteShareGroupStateResponse]
