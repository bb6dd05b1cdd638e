"""Samsa's KIP-932 (share groups), KIP-714 (telemetry), KIP-966/KIP-1142 and transactions-v2
message layouts pinned to Apache Kafka 4.1's own message definitions.

``KAFKA_41`` below is transcribed from Kafka's JSON files on the 4.1 branch
(``clients/src/main/resources/common/message/*.json``, the coordinator record values from
``group-coordinator/src/main/resources/common/message`` and
``share-coordinator/src/main/resources/common/message``), tree as of apache/kafka commit
487af011ca5a186306298f7b861fbcce4f86e12b (KAFKA-19444, the last change to those directories on
the 4.1 branch before 4.1.0, as carried by the confluentinc/kafka 4.1 branch): for each schema
its API key (record type for coordinator values), validVersions and flexibleVersions, and per
version the fields in wire order -- path, type, whether nullable, and the tag and default of a
tagged field. Samsa's schema (``protocol/schemas`` or kafka-python's bundled one, whichever the
codec loads) must lay out every version it serves exactly so, and the broker must advertise no
version Kafka 4.1 does not define. The frames further down are laid out byte by byte from the same
files, so the codec is checked against the wire format rather than against itself.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import struct
import uuid
from pathlib import Path
from typing import Any

import kafka.protocol.schemas
import pytest

import broker.apis
from groupcoord.share import records as share_records
from groupcoord.share import state as share_state
from protocol import kip932
from protocol.framing import FrameDecoder
from protocol.messages import REQUEST_CLASSES, RESPONSE_CLASSES, decode_body, encode_response, parse_header

SAMSA_SCHEMAS = Path(__file__).resolve().parents[2] / "protocol" / "schemas"
KAFKA_PYTHON_SCHEMAS = Path(kafka.protocol.schemas.__file__).parent / "resources"

# name: (apiKey or record type, validVersions, flexibleVersions, {version: fields in wire order})
KAFKA_41: dict[str, tuple[int, str, str, dict[int, str]]] = {
    "ShareGroupHeartbeatRequest": (76, "1", "0+", {
        1: """
            GroupId string
            MemberId string
            MemberEpoch int32
            RackId string nullable
            SubscribedTopicNames []string nullable
        """,
    }),
    "ShareGroupHeartbeatResponse": (76, "1", "0+", {
        1: """
            ThrottleTimeMs int32
            ErrorCode int16
            ErrorMessage string nullable
            MemberId string nullable
            MemberEpoch int32
            HeartbeatIntervalMs int32
            Assignment Assignment nullable
            Assignment.TopicPartitions []TopicPartitions
            Assignment.TopicPartitions.TopicId uuid
            Assignment.TopicPartitions.Partitions []int32
        """,
    }),
    "ShareGroupDescribeRequest": (77, "1", "0+", {
        1: """
            GroupIds []string
            IncludeAuthorizedOperations bool
        """,
    }),
    "ShareGroupDescribeResponse": (77, "1", "0+", {
        1: """
            ThrottleTimeMs int32
            Groups []DescribedGroup
            Groups.ErrorCode int16
            Groups.ErrorMessage string nullable
            Groups.GroupId string
            Groups.GroupState string
            Groups.GroupEpoch int32
            Groups.AssignmentEpoch int32
            Groups.AssignorName string
            Groups.Members []Member
            Groups.Members.MemberId string
            Groups.Members.RackId string nullable
            Groups.Members.MemberEpoch int32
            Groups.Members.ClientId string
            Groups.Members.ClientHost string
            Groups.Members.SubscribedTopicNames []string
            Groups.Members.Assignment Assignment
            Groups.Members.Assignment.TopicPartitions []TopicPartitions
            Groups.Members.Assignment.TopicPartitions.TopicId uuid
            Groups.Members.Assignment.TopicPartitions.TopicName string
            Groups.Members.Assignment.TopicPartitions.Partitions []int32
            Groups.AuthorizedOperations int32
        """,
    }),
    "ShareFetchRequest": (78, "1", "0+", {
        1: """
            GroupId string nullable
            MemberId string nullable
            ShareSessionEpoch int32
            MaxWaitMs int32
            MinBytes int32
            MaxBytes int32
            MaxRecords int32
            BatchSize int32
            Topics []FetchTopic
            Topics.TopicId uuid
            Topics.Partitions []FetchPartition
            Topics.Partitions.PartitionIndex int32
            Topics.Partitions.AcknowledgementBatches []AcknowledgementBatch
            Topics.Partitions.AcknowledgementBatches.FirstOffset int64
            Topics.Partitions.AcknowledgementBatches.LastOffset int64
            Topics.Partitions.AcknowledgementBatches.AcknowledgeTypes []int8
            ForgottenTopicsData []ForgottenTopic
            ForgottenTopicsData.TopicId uuid
            ForgottenTopicsData.Partitions []int32
        """,
    }),
    "ShareFetchResponse": (78, "1", "0+", {
        1: """
            ThrottleTimeMs int32
            ErrorCode int16
            ErrorMessage string nullable
            AcquisitionLockTimeoutMs int32
            Responses []ShareFetchableTopicResponse
            Responses.TopicId uuid
            Responses.Partitions []PartitionData
            Responses.Partitions.PartitionIndex int32
            Responses.Partitions.ErrorCode int16
            Responses.Partitions.ErrorMessage string nullable
            Responses.Partitions.AcknowledgeErrorCode int16
            Responses.Partitions.AcknowledgeErrorMessage string nullable
            Responses.Partitions.CurrentLeader LeaderIdAndEpoch
            Responses.Partitions.CurrentLeader.LeaderId int32
            Responses.Partitions.CurrentLeader.LeaderEpoch int32
            Responses.Partitions.Records records
            Responses.Partitions.AcquiredRecords []AcquiredRecords
            Responses.Partitions.AcquiredRecords.FirstOffset int64
            Responses.Partitions.AcquiredRecords.LastOffset int64
            Responses.Partitions.AcquiredRecords.DeliveryCount int16
            NodeEndpoints []NodeEndpoint
            NodeEndpoints.NodeId int32
            NodeEndpoints.Host string
            NodeEndpoints.Port int32
            NodeEndpoints.Rack string nullable
        """,
    }),
    "ShareAcknowledgeRequest": (79, "1", "0+", {
        1: """
            GroupId string nullable
            MemberId string nullable
            ShareSessionEpoch int32
            Topics []AcknowledgeTopic
            Topics.TopicId uuid
            Topics.Partitions []AcknowledgePartition
            Topics.Partitions.PartitionIndex int32
            Topics.Partitions.AcknowledgementBatches []AcknowledgementBatch
            Topics.Partitions.AcknowledgementBatches.FirstOffset int64
            Topics.Partitions.AcknowledgementBatches.LastOffset int64
            Topics.Partitions.AcknowledgementBatches.AcknowledgeTypes []int8
        """,
    }),
    "ShareAcknowledgeResponse": (79, "1", "0+", {
        1: """
            ThrottleTimeMs int32
            ErrorCode int16
            ErrorMessage string nullable
            Responses []ShareAcknowledgeTopicResponse
            Responses.TopicId uuid
            Responses.Partitions []PartitionData
            Responses.Partitions.PartitionIndex int32
            Responses.Partitions.ErrorCode int16
            Responses.Partitions.ErrorMessage string nullable
            Responses.Partitions.CurrentLeader LeaderIdAndEpoch
            Responses.Partitions.CurrentLeader.LeaderId int32
            Responses.Partitions.CurrentLeader.LeaderEpoch int32
            NodeEndpoints []NodeEndpoint
            NodeEndpoints.NodeId int32
            NodeEndpoints.Host string
            NodeEndpoints.Port int32
            NodeEndpoints.Rack string nullable
        """,
    }),
    "InitializeShareGroupStateRequest": (83, "0", "0+", {
        0: """
            GroupId string
            Topics []InitializeStateData
            Topics.TopicId uuid
            Topics.Partitions []PartitionData
            Topics.Partitions.Partition int32
            Topics.Partitions.StateEpoch int32
            Topics.Partitions.StartOffset int64
        """,
    }),
    "InitializeShareGroupStateResponse": (83, "0", "0+", {
        0: """
            Results []InitializeStateResult
            Results.TopicId uuid
            Results.Partitions []PartitionResult
            Results.Partitions.Partition int32
            Results.Partitions.ErrorCode int16
            Results.Partitions.ErrorMessage string nullable
        """,
    }),
    "ReadShareGroupStateRequest": (84, "0", "0+", {
        0: """
            GroupId string
            Topics []ReadStateData
            Topics.TopicId uuid
            Topics.Partitions []PartitionData
            Topics.Partitions.Partition int32
            Topics.Partitions.LeaderEpoch int32
        """,
    }),
    "ReadShareGroupStateResponse": (84, "0", "0+", {
        0: """
            Results []ReadStateResult
            Results.TopicId uuid
            Results.Partitions []PartitionResult
            Results.Partitions.Partition int32
            Results.Partitions.ErrorCode int16
            Results.Partitions.ErrorMessage string nullable
            Results.Partitions.StateEpoch int32
            Results.Partitions.StartOffset int64
            Results.Partitions.StateBatches []StateBatch
            Results.Partitions.StateBatches.FirstOffset int64
            Results.Partitions.StateBatches.LastOffset int64
            Results.Partitions.StateBatches.DeliveryState int8
            Results.Partitions.StateBatches.DeliveryCount int16
        """,
    }),
    "WriteShareGroupStateRequest": (85, "0", "0+", {
        0: """
            GroupId string
            Topics []WriteStateData
            Topics.TopicId uuid
            Topics.Partitions []PartitionData
            Topics.Partitions.Partition int32
            Topics.Partitions.StateEpoch int32
            Topics.Partitions.LeaderEpoch int32
            Topics.Partitions.StartOffset int64
            Topics.Partitions.StateBatches []StateBatch
            Topics.Partitions.StateBatches.FirstOffset int64
            Topics.Partitions.StateBatches.LastOffset int64
            Topics.Partitions.StateBatches.DeliveryState int8
            Topics.Partitions.StateBatches.DeliveryCount int16
        """,
    }),
    "WriteShareGroupStateResponse": (85, "0", "0+", {
        0: """
            Results []WriteStateResult
            Results.TopicId uuid
            Results.Partitions []PartitionResult
            Results.Partitions.Partition int32
            Results.Partitions.ErrorCode int16
            Results.Partitions.ErrorMessage string nullable
        """,
    }),
    "DeleteShareGroupStateRequest": (86, "0", "0+", {
        0: """
            GroupId string
            Topics []DeleteStateData
            Topics.TopicId uuid
            Topics.Partitions []PartitionData
            Topics.Partitions.Partition int32
        """,
    }),
    "DeleteShareGroupStateResponse": (86, "0", "0+", {
        0: """
            Results []DeleteStateResult
            Results.TopicId uuid
            Results.Partitions []PartitionResult
            Results.Partitions.Partition int32
            Results.Partitions.ErrorCode int16
            Results.Partitions.ErrorMessage string nullable
        """,
    }),
    "DescribeShareGroupOffsetsRequest": (90, "0", "0+", {
        0: """
            Groups []DescribeShareGroupOffsetsRequestGroup
            Groups.GroupId string
            Groups.Topics []DescribeShareGroupOffsetsRequestTopic nullable
            Groups.Topics.TopicName string
            Groups.Topics.Partitions []int32
        """,
    }),
    "DescribeShareGroupOffsetsResponse": (90, "0", "0+", {
        0: """
            ThrottleTimeMs int32
            Groups []DescribeShareGroupOffsetsResponseGroup
            Groups.GroupId string
            Groups.Topics []DescribeShareGroupOffsetsResponseTopic
            Groups.Topics.TopicName string
            Groups.Topics.TopicId uuid
            Groups.Topics.Partitions []DescribeShareGroupOffsetsResponsePartition
            Groups.Topics.Partitions.PartitionIndex int32
            Groups.Topics.Partitions.StartOffset int64
            Groups.Topics.Partitions.LeaderEpoch int32
            Groups.Topics.Partitions.ErrorCode int16
            Groups.Topics.Partitions.ErrorMessage string nullable
            Groups.ErrorCode int16
            Groups.ErrorMessage string nullable
        """,
    }),
    "AlterShareGroupOffsetsRequest": (91, "0", "0+", {
        0: """
            GroupId string
            Topics []AlterShareGroupOffsetsRequestTopic
            Topics.TopicName string
            Topics.Partitions []AlterShareGroupOffsetsRequestPartition
            Topics.Partitions.PartitionIndex int32
            Topics.Partitions.StartOffset int64
        """,
    }),
    "AlterShareGroupOffsetsResponse": (91, "0", "0+", {
        0: """
            ThrottleTimeMs int32
            ErrorCode int16
            ErrorMessage string nullable
            Responses []AlterShareGroupOffsetsResponseTopic
            Responses.TopicName string
            Responses.TopicId uuid
            Responses.Partitions []AlterShareGroupOffsetsResponsePartition
            Responses.Partitions.PartitionIndex int32
            Responses.Partitions.ErrorCode int16
            Responses.Partitions.ErrorMessage string nullable
        """,
    }),
    "DeleteShareGroupOffsetsRequest": (92, "0", "0+", {
        0: """
            GroupId string
            Topics []DeleteShareGroupOffsetsRequestTopic
            Topics.TopicName string
        """,
    }),
    "DeleteShareGroupOffsetsResponse": (92, "0", "0+", {
        0: """
            ThrottleTimeMs int32
            ErrorCode int16
            ErrorMessage string nullable
            Responses []DeleteShareGroupOffsetsResponseTopic
            Responses.TopicName string
            Responses.TopicId uuid
            Responses.ErrorCode int16
            Responses.ErrorMessage string nullable
        """,
    }),
    "ShareGroupMetadataValue": (11, "0", "0+", {
        0: """
            Epoch int32
            MetadataHash int64
        """,
    }),
    "ShareGroupMemberMetadataValue": (10, "0", "0+", {
        0: """
            RackId string nullable
            ClientId string
            ClientHost string
            SubscribedTopicNames []string
        """,
    }),
    "ShareGroupTargetAssignmentMetadataValue": (12, "0", "0+", {
        0: """
            AssignmentEpoch int32
        """,
    }),
    "ShareGroupTargetAssignmentMemberValue": (13, "0", "0+", {
        0: """
            TopicPartitions []TopicPartition
            TopicPartitions.TopicId uuid
            TopicPartitions.Partitions []int32
        """,
    }),
    "ShareGroupCurrentMemberAssignmentValue": (14, "0", "0+", {
        0: """
            MemberEpoch int32
            PreviousMemberEpoch int32
            State int8
            AssignedPartitions []TopicPartitions
            AssignedPartitions.TopicId uuid
            AssignedPartitions.Partitions []int32
        """,
    }),
    "ShareSnapshotValue": (0, "0", "0+", {
        0: """
            SnapshotEpoch int32
            StateEpoch int32
            LeaderEpoch int32
            StartOffset int64
            CreateTimestamp int64
            WriteTimestamp int64
            StateBatches []StateBatch
            StateBatches.FirstOffset int64
            StateBatches.LastOffset int64
            StateBatches.DeliveryState int8
            StateBatches.DeliveryCount int16
        """,
    }),
    "ShareUpdateValue": (1, "0", "0+", {
        0: """
            SnapshotEpoch int32
            LeaderEpoch int32
            StartOffset int64
            StateBatches []StateBatch
            StateBatches.FirstOffset int64
            StateBatches.LastOffset int64
            StateBatches.DeliveryState int8
            StateBatches.DeliveryCount int16
        """,
    }),
    "ConsumerGroupMetadataValue": (3, "0", "0+", {
        0: """
            Epoch int32
            MetadataHash int64 tag=0 default=0
        """,
    }),
    "GetTelemetrySubscriptionsRequest": (71, "0", "0+", {
        0: """
            ClientInstanceId uuid
        """,
    }),
    "GetTelemetrySubscriptionsResponse": (71, "0", "0+", {
        0: """
            ThrottleTimeMs int32
            ErrorCode int16
            ClientInstanceId uuid
            SubscriptionId int32
            AcceptedCompressionTypes []int8
            PushIntervalMs int32
            TelemetryMaxBytes int32
            DeltaTemporality bool
            RequestedMetrics []string
        """,
    }),
    "PushTelemetryRequest": (72, "0", "0+", {
        0: """
            ClientInstanceId uuid
            SubscriptionId int32
            Terminating bool
            CompressionType int8
            Metrics bytes
        """,
    }),
    "PushTelemetryResponse": (72, "0", "0+", {
        0: """
            ThrottleTimeMs int32
            ErrorCode int16
        """,
    }),
    "ListConfigResourcesRequest": (74, "0-1", "0+", {
        0: """
        """,
        1: """
            ResourceTypes []int8
        """,
    }),
    "ListConfigResourcesResponse": (74, "0-1", "0+", {
        0: """
            ThrottleTimeMs int32
            ErrorCode int16
            ConfigResources []ConfigResource
            ConfigResources.ResourceName string
        """,
        1: """
            ThrottleTimeMs int32
            ErrorCode int16
            ConfigResources []ConfigResource
            ConfigResources.ResourceName string
            ConfigResources.ResourceType int8
        """,
    }),
    "DescribeTopicPartitionsRequest": (75, "0", "0+", {
        0: """
            Topics []TopicRequest
            Topics.Name string
            ResponsePartitionLimit int32
            Cursor Cursor nullable
            Cursor.TopicName string
            Cursor.PartitionIndex int32
        """,
    }),
    "DescribeTopicPartitionsResponse": (75, "0", "0+", {
        0: """
            ThrottleTimeMs int32
            Topics []DescribeTopicPartitionsResponseTopic
            Topics.ErrorCode int16
            Topics.Name string nullable
            Topics.TopicId uuid
            Topics.IsInternal bool
            Topics.Partitions []DescribeTopicPartitionsResponsePartition
            Topics.Partitions.ErrorCode int16
            Topics.Partitions.PartitionIndex int32
            Topics.Partitions.LeaderId int32
            Topics.Partitions.LeaderEpoch int32
            Topics.Partitions.ReplicaNodes []int32
            Topics.Partitions.IsrNodes []int32
            Topics.Partitions.EligibleLeaderReplicas []int32 nullable
            Topics.Partitions.LastKnownElr []int32 nullable
            Topics.Partitions.OfflineReplicas []int32
            Topics.TopicAuthorizedOperations int32
            NextCursor Cursor nullable
            NextCursor.TopicName string
            NextCursor.PartitionIndex int32
        """,
    }),
    "EndTxnRequest": (26, "0-5", "3+", {
        5: """
            TransactionalId string
            ProducerId int64
            ProducerEpoch int16
            Committed bool
        """,
    }),
    "EndTxnResponse": (26, "0-5", "3+", {
        5: """
            ThrottleTimeMs int32
            ErrorCode int16
            ProducerId int64
            ProducerEpoch int16
        """,
    }),
    "ProduceRequest": (0, "3-13", "9+", {
        12: """
            TransactionalId string nullable
            Acks int16
            TimeoutMs int32
            TopicData []TopicProduceData
            TopicData.Name string
            TopicData.PartitionData []PartitionProduceData
            TopicData.PartitionData.Index int32
            TopicData.PartitionData.Records records nullable
        """,
        13: """
            TransactionalId string nullable
            Acks int16
            TimeoutMs int32
            TopicData []TopicProduceData
            TopicData.TopicId uuid
            TopicData.PartitionData []PartitionProduceData
            TopicData.PartitionData.Index int32
            TopicData.PartitionData.Records records nullable
        """,
    }),
    "ProduceResponse": (0, "3-13", "9+", {
        12: """
            Responses []TopicProduceResponse
            Responses.Name string
            Responses.PartitionResponses []PartitionProduceResponse
            Responses.PartitionResponses.Index int32
            Responses.PartitionResponses.ErrorCode int16
            Responses.PartitionResponses.BaseOffset int64
            Responses.PartitionResponses.LogAppendTimeMs int64
            Responses.PartitionResponses.LogStartOffset int64
            Responses.PartitionResponses.RecordErrors []BatchIndexAndErrorMessage
            Responses.PartitionResponses.RecordErrors.BatchIndex int32
            Responses.PartitionResponses.RecordErrors.BatchIndexErrorMessage string nullable
            Responses.PartitionResponses.ErrorMessage string nullable
            Responses.PartitionResponses.CurrentLeader LeaderIdAndEpoch tag=0 default=None
            Responses.PartitionResponses.CurrentLeader.LeaderId int32
            Responses.PartitionResponses.CurrentLeader.LeaderEpoch int32
            ThrottleTimeMs int32
            NodeEndpoints []NodeEndpoint tag=0 default=None
            NodeEndpoints.NodeId int32
            NodeEndpoints.Host string
            NodeEndpoints.Port int32
            NodeEndpoints.Rack string nullable
        """,
        13: """
            Responses []TopicProduceResponse
            Responses.TopicId uuid
            Responses.PartitionResponses []PartitionProduceResponse
            Responses.PartitionResponses.Index int32
            Responses.PartitionResponses.ErrorCode int16
            Responses.PartitionResponses.BaseOffset int64
            Responses.PartitionResponses.LogAppendTimeMs int64
            Responses.PartitionResponses.LogStartOffset int64
            Responses.PartitionResponses.RecordErrors []BatchIndexAndErrorMessage
            Responses.PartitionResponses.RecordErrors.BatchIndex int32
            Responses.PartitionResponses.RecordErrors.BatchIndexErrorMessage string nullable
            Responses.PartitionResponses.ErrorMessage string nullable
            Responses.PartitionResponses.CurrentLeader LeaderIdAndEpoch tag=0 default=None
            Responses.PartitionResponses.CurrentLeader.LeaderId int32
            Responses.PartitionResponses.CurrentLeader.LeaderEpoch int32
            ThrottleTimeMs int32
            NodeEndpoints []NodeEndpoint tag=0 default=None
            NodeEndpoints.NodeId int32
            NodeEndpoints.Host string
            NodeEndpoints.Port int32
            NodeEndpoints.Rack string nullable
        """,
    }),
    "TxnOffsetCommitRequest": (28, "0-5", "3+", {
        5: """
            TransactionalId string
            GroupId string
            ProducerId int64
            ProducerEpoch int16
            GenerationId int32
            MemberId string
            GroupInstanceId string nullable
            Topics []TxnOffsetCommitRequestTopic
            Topics.Name string
            Topics.Partitions []TxnOffsetCommitRequestPartition
            Topics.Partitions.PartitionIndex int32
            Topics.Partitions.CommittedOffset int64
            Topics.Partitions.CommittedLeaderEpoch int32
            Topics.Partitions.CommittedMetadata string nullable
        """,
    }),
    "TxnOffsetCommitResponse": (28, "0-5", "3+", {
        5: """
            ThrottleTimeMs int32
            Topics []TxnOffsetCommitResponseTopic
            Topics.Name string
            Topics.Partitions []TxnOffsetCommitResponsePartition
            Topics.Partitions.PartitionIndex int32
            Topics.Partitions.ErrorCode int16
        """,
    }),
    "AddPartitionsToTxnRequest": (24, "0-5", "3+", {
        5: """
            Transactions []AddPartitionsToTxnTransaction
            Transactions.TransactionalId string
            Transactions.ProducerId int64
            Transactions.ProducerEpoch int16
            Transactions.VerifyOnly bool
            Transactions.Topics []AddPartitionsToTxnTopic
            Transactions.Topics.Name string
            Transactions.Topics.Partitions []int32
        """,
    }),
    "AddPartitionsToTxnResponse": (24, "0-5", "3+", {
        5: """
            ThrottleTimeMs int32
            ErrorCode int16
            ResultsByTransaction []AddPartitionsToTxnResult
            ResultsByTransaction.TransactionalId string
            ResultsByTransaction.TopicResults []AddPartitionsToTxnTopicResult
            ResultsByTransaction.TopicResults.Name string
            ResultsByTransaction.TopicResults.ResultsByPartition []AddPartitionsToTxnPartitionResult
            ResultsByTransaction.TopicResults.ResultsByPartition.PartitionIndex int32
            ResultsByTransaction.TopicResults.ResultsByPartition.PartitionErrorCode int16
        """,
    }),
    "InitProducerIdRequest": (22, "0-6", "2+", {
        5: """
            TransactionalId string nullable
            TransactionTimeoutMs int32
            ProducerId int64
            ProducerEpoch int16
        """,
        6: """
            TransactionalId string nullable
            TransactionTimeoutMs int32
            ProducerId int64
            ProducerEpoch int16
            Enable2Pc bool
            KeepPreparedTxn bool
        """,
    }),
    "InitProducerIdResponse": (22, "0-6", "2+", {
        5: """
            ThrottleTimeMs int32
            ErrorCode int16
            ProducerId int64
            ProducerEpoch int16
        """,
        6: """
            ThrottleTimeMs int32
            ErrorCode int16
            ProducerId int64
            ProducerEpoch int16
            OngoingTxnProducerId int64
            OngoingTxnProducerEpoch int16
        """,
    }),
}

# Record types (the key's leading int16) of the coordinator records, from the *Key.json files.
KAFKA_41_RECORD_TYPES = {
    "ShareGroupMemberMetadata": 10, "ShareGroupMetadata": 11, "ShareGroupTargetAssignmentMetadata": 12,
    "ShareGroupTargetAssignmentMember": 13, "ShareGroupCurrentMemberAssignment": 14,
    "ShareSnapshot": 0, "ShareUpdate": 1,
}


def _versions(spec: str | None) -> range:
    if spec is None or spec == "none":
        return range(0)
    if spec.endswith("+"):
        return range(int(spec[:-1]), 100)
    lo, _, hi = spec.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def _load(name: str) -> dict[str, Any]:
    path = SAMSA_SCHEMAS / f"{name}.json"
    if not path.exists():
        path = KAFKA_PYTHON_SCHEMAS / f"{name}.json"
    return dict(json.loads(re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M)))


def _layout(schema: dict[str, Any], version: int) -> list[str]:
    structs = {s["name"]: s["fields"] for s in schema.get("commonStructs", [])}
    out: list[str] = []

    def walk(fields: list[dict[str, Any]], prefix: str) -> None:
        for f in fields:
            if version not in _versions(f.get("versions")):
                continue
            line = f"{prefix}{f['name']} {f['type']}"
            if version in _versions(f.get("nullableVersions")):
                line += " nullable"
            if version in _versions(f.get("taggedVersions")):
                line += f" tag={f['tag']} default={f.get('default')}"
            out.append(line)
            sub = f.get("fields") or structs.get(f["type"].removeprefix("[]"))
            if sub:
                walk(sub, f"{prefix}{f['name']}.")

    walk(schema["fields"], "")
    return out


@pytest.mark.parametrize("name", sorted(KAFKA_41))
def test_layout_matches_kafka_41(name: str) -> None:
    key, valid, flexible, layouts = KAFKA_41[name]
    ours = _load(name)
    assert ours.get("apiKey", key) == key
    if (SAMSA_SCHEMAS / f"{name}.json").exists():
        # Samsa's own schemas define exactly Kafka 4.1's versions.
        assert _versions(ours["validVersions"]) == _versions(valid)
    for v, fields in layouts.items():
        assert v in _versions(ours["validVersions"]), f"{name} v{v} missing"
        assert (v in _versions(ours["flexibleVersions"])) == (v in _versions(flexible)), f"{name} v{v}"
        assert _layout(ours, v) == [line.strip() for line in fields.strip().splitlines()], f"{name} v{v}"


def _registry() -> dict[int, Any]:
    for mod in pkgutil.iter_modules(broker.apis.__path__):
        importlib.import_module(f"broker.apis.{mod.name}")
    return broker.apis.REGISTRY


@pytest.mark.parametrize("name", sorted(n for n in KAFKA_41 if n.endswith("Request")))
def test_advertised_versions_are_kafka_41_versions(name: str) -> None:
    key, valid, _flexible, _layouts = KAFKA_41[name]
    spec = _registry()[key]
    served = range(spec.min_version, spec.max_version + 1)
    assert set(served) <= set(_versions(valid)), f"{name}: Samsa serves {served}, Kafka 4.1 defines {valid}"


# --- frames laid out byte by byte from Kafka's files ---------------------------------------------

def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _cstr(s: str | None) -> bytes:  # compact (nullable) string
    if s is None:
        return b"\x00"
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _carray(items: list[bytes]) -> bytes:
    return _uvarint(len(items) + 1) + b"".join(items)


TAGS = b"\x00"  # an empty tagged-field section
TOPIC = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def test_share_group_heartbeat_request_v1_frame() -> None:
    body = (_cstr("g") + _cstr("m-1") + struct.pack(">i", 0) + _cstr(None)
            + _carray([_cstr("t1"), _cstr("t2")]) + TAGS)
    head = struct.pack(">hhih", 76, 1, 9, 4) + b"java" + TAGS
    wire = struct.pack(">i", len(head) + len(body)) + head + body
    [frame] = FrameDecoder().feed(wire)
    header = parse_header(frame)
    req = decode_body(header, frame)
    assert (req.group_id, req.member_id, req.member_epoch, req.rack_id) == ("g", "m-1", 0, None)
    assert req.subscribed_topic_names == ["t1", "t2"]
    again = REQUEST_CLASSES[76][1](group_id="g", member_id="m-1", member_epoch=0, rack_id=None,
                                   subscribed_topic_names=["t1", "t2"])
    again.with_header(correlation_id=9, client_id="java")
    assert bytes(again.encode(header=True, framed=True)) == wire


def test_share_fetch_response_v1_records_are_not_nullable() -> None:
    """ShareFetchResponse.Records is nullable in v0 only: v1 sends an empty record set as length 0
    (compact length 1); the Java client refuses a null there."""
    partition = (struct.pack(">ih", 3, 0) + _cstr(None) + struct.pack(">h", 0) + _cstr(None)
                 + struct.pack(">ii", 2, 7) + TAGS  # CurrentLeader
                 + _uvarint(1)  # Records: empty, not null
                 + _carray([struct.pack(">qqh", 10, 12, 1) + TAGS]) + TAGS)
    body = (struct.pack(">ih", 0, 0) + _cstr(None) + struct.pack(">i", 15000)
            + _carray([TOPIC.bytes + _carray([partition]) + TAGS]) + _carray([]) + TAGS)
    R = RESPONSE_CLASSES[78]
    P = R.ShareFetchableTopicResponse.PartitionData
    resp = R(throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=15000,
             responses=[R.ShareFetchableTopicResponse(topic_id=TOPIC, partitions=[P(
                 partition_index=3, error_code=0, error_message=None, acknowledge_error_code=0,
                 acknowledge_error_message=None, current_leader=P.LeaderIdAndEpoch(leader_id=2, leader_epoch=7),
                 records=b"", acquired_records=[P.AcquiredRecords(first_offset=10, last_offset=12,
                                                                 delivery_count=1)])])],
             node_endpoints=[])
    wire = encode_response(78, 1, 5, resp)
    assert wire == struct.pack(">iib", len(body) + 5, 5, 0) + body
    field = next(f for f in R._struct.fields["responses"].array_of.fields["partitions"].array_of.fields.values()
                 if f.name == "records")
    assert not field.nullable_for_version_q(1) and field.nullable_for_version_q(0)


def test_share_group_records_are_kafka_41s() -> None:
    # Keys: int16 record type, then the key's version-0 (non-flexible) fields.
    key, value = share_records.group_epoch_record("grp", 4)
    assert key == struct.pack(">hh", KAFKA_41_RECORD_TYPES["ShareGroupMetadata"], 3) + b"grp"
    # Value: int16 version 0, Epoch int32, MetadataHash int64, empty tagged fields.
    assert value == struct.pack(">hiq", 0, 4, 0) + TAGS
    decoded = share_records.decode_share_value(kip932.ShareGroupMetadataValue, struct.pack(">hiq", 0, 4, -5) + TAGS)
    assert (decoded.epoch, decoded.metadata_hash) == (4, -5)
    for name, const in [("ShareGroupMemberMetadata", share_records.SHARE_MEMBER_METADATA),
                        ("ShareGroupTargetAssignmentMetadata", share_records.SHARE_TARGET_ASSIGNMENT_METADATA),
                        ("ShareGroupTargetAssignmentMember", share_records.SHARE_TARGET_ASSIGNMENT_MEMBER),
                        ("ShareGroupCurrentMemberAssignment", share_records.SHARE_CURRENT_MEMBER_ASSIGNMENT)]:
        assert const == KAFKA_41_RECORD_TYPES[name]
    key, value = share_records.current_assignment_record("grp", "m", 5, 4, {TOPIC: {1, 0}})
    assert key == struct.pack(">hh", 14, 3) + b"grp" + struct.pack(">h", 1) + b"m"
    assert value == (struct.pack(">hiib", 0, 5, 4, 0)
                     + _carray([TOPIC.bytes + _carray([struct.pack(">i", 0), struct.pack(">i", 1)]) + TAGS]) + TAGS)


def test_share_state_records_are_kafka_41s() -> None:
    key = ("grp", TOPIC, 2)
    assert share_state.SHARE_SNAPSHOT == KAFKA_41_RECORD_TYPES["ShareSnapshot"]
    assert share_state.SHARE_UPDATE == KAFKA_41_RECORD_TYPES["ShareUpdate"]
    k, value = share_state.update_record(key, 3, 6, 100, [(100, 104, 2, 1)])
    assert k == struct.pack(">hh", 1, 3) + b"grp" + TOPIC.bytes + struct.pack(">i", 2)
    # ShareUpdateValue: SnapshotEpoch int32, LeaderEpoch int32, StartOffset int64,
    # StateBatches [FirstOffset int64, LastOffset int64, DeliveryState int8, DeliveryCount int16].
    assert value == (struct.pack(">hiiq", 0, 3, 6, 100)
                     + _carray([struct.pack(">qqbh", 100, 104, 2, 1) + TAGS]) + TAGS)
    # ShareSnapshotValue: SnapshotEpoch, StateEpoch, LeaderEpoch int32; StartOffset,
    # CreateTimestamp, WriteTimestamp int64; StateBatches as above.
    snap = (struct.pack(">hiiiqqq", 0, 1, 2, 3, 50, 1_700_000_000_000, 1_700_000_000_001)
            + _carray([struct.pack(">qqbh", 50, 60, 0, 2) + TAGS]) + TAGS)
    v = kip932.ShareSnapshotValue.decode(snap[2:], version=0, header=False)
    assert (v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset) == (1, 2, 3, 50)
    assert (v.create_timestamp, v.write_timestamp) == (1_700_000_000_000, 1_700_000_000_001)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in v.state_batches] == \
        [(50, 60, 0, 2)]
    assert share_state.decode_key(share_state.encode_key(share_state.SHARE_SNAPSHOT, key)) == (0, key)
