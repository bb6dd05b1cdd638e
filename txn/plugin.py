"""Binds the transaction coordinator to a running broker.

The broker imports this module on start and awaits :func:`start` (and :func:`stop` on
shutdown). Here the coordinator's small storage interface (``txn/storage.py``) is implemented
on the broker's partitions:

* ``__transaction_state`` (``transaction.state.log.num.partitions`` partitions, compacted) is
  created by the first FindCoordinator for a transactional id (``broker/auto_topic_creation.py``),
  as in Kafka; coordinator records are appended to it as plain v2 batches and an existing
  topic is read back at start-up for ``replay()``;
* a transaction marker is a control batch appended to the data partition through
  :func:`write_marker`, the same function the WriteTxnMarkers handler uses, so the partition's
  producer state closes the transaction, its last stable offset moves and an abort lands in
  the ``.txnindex``. A marker on a ``__consumer_offsets`` partition is then announced to the
  group coordinator, which publishes (commit) or drops (abort) the transaction's offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.producer import AddPartitionsToTxnRequest, WriteTxnMarkersRequest

from log.log import AppendInfo, Log
from protocol.errors import ErrorCode, KafkaError
from protocol.records import ATTR_CONTROL, BatchHeader, ValidatedRecords, validate_batches

from . import transaction_log as tlog
from .coordinator import CONSUMER_OFFSETS_TOPIC, TransactionConfig, TransactionCoordinator
from .markers import TxnMarker, build_batch, build_marker_batch, iter_batch_records

log = logging.getLogger("samsa.txn")


# --- what this module needs of the broker (which it sits below, so cannot import) -------------

class ClusterClient(Protocol):
    """The broker's view of the cluster (broker.cluster.support.MetadataSupport): partition
    leaders, and requests to peers; a single broker is a cluster of one that leads everything."""

    @property
    def clustered(self) -> bool: ...

    def leader_of(self, topic: str, partition: int) -> int: ...

    async def send_to_broker(self, broker_id: int, request: ApiMessage, version: int,
                             timeout: float = 30.0) -> ApiMessage: ...


class HostedPartition(Protocol):
    """A partition this broker hosts, as marker writes and ``__transaction_state`` reads use it."""

    @property
    def leader_epoch(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def log(self) -> Log: ...

    @property
    def log_start_offset(self) -> int: ...

    def append(self, records: ValidatedRecords, *, required_acks: int = -1) -> AppendInfo: ...

    async def wait_for_replication(self, required_offset: int, timeout: float) -> None: ...


class ReplicaManager(Protocol):
    def get_partition(self, topic: str, partition: int) -> HostedPartition: ...

    async def append_internal(self, topic: str, partition: int, records: ValidatedRecords,
                              timeout: float = 30.0,
                              on_appended: Callable[[int], None] | None = None) -> AppendInfo: ...


class OffsetsCompletion(Protocol):
    """The group coordinator, told about markers on ``__consumer_offsets`` partitions."""

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool,
                             offset: int | None = None) -> None: ...

    def transaction_marker_committed(self, offsets_partition: int, offset: int) -> None: ...


class VerifyingBroker(Protocol):
    """A broker whose transaction coordinator (if any) verifies transactional produces."""

    @property
    def txn_coordinator(self) -> TransactionCoordinator | None: ...


class TxnBroker(VerifyingBroker, Protocol):
    """What markers and verification need of the broker: its id, the cluster's metadata,
    partitions and group coordinator."""

    @property
    def broker_id(self) -> int: ...

    @property
    def metadata_support(self) -> ClusterClient: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def group_coordinator(self) -> OffsetsCompletion | None: ...


async def write_marker(broker: TxnBroker, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
    """Append ``marker``'s control batch to ``topic-partition``; Kafka's error code as result.

    On a ``__consumer_offsets`` partition the group coordinator applies the marker as soon as it
    is in the log (publishing the transaction's offsets on commit, dropping them on abort), and
    the offsets become visible to OffsetFetch once the marker is replicated. In a
    cluster a partition led by another broker gets the marker through WriteTxnMarkers to its
    leader (Kafka's TransactionMarkerChannelManager); here the append waits for the ISR.
    """
    cluster = broker.metadata_support  # a single broker leads every partition itself
    leader = cluster.leader_of(topic, partition)
    if leader < 0:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if leader != broker.broker_id:
        return await _write_marker_remote(cluster, leader, topic, partition, marker)
    try:
        part = broker.replica_manager.get_partition(topic, partition)
        info = part.append(validate_batches(build_marker_batch(marker, partition_leader_epoch=part.leader_epoch)),
                           required_acks=-1)
        if topic == CONSUMER_OFFSETS_TOPIC:
            # Applied once, when written (log/coordinator_runtime.py), never again when replicated.
            _complete_offsets(broker, partition, marker, info.last_offset)
        if part.high_watermark <= info.last_offset:
            await part.wait_for_replication(info.last_offset + 1, 30.0)
    except KafkaError as e:
        if e.code is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            log.warning("Writing %s marker of producer %d to %s-%d failed: %s",
                        "COMMIT" if marker.commit else "ABORT", marker.producer_id, topic, partition, e)
        return e.code
    if topic == CONSUMER_OFFSETS_TOPIC:
        gc = broker.group_coordinator
        if gc is not None:
            gc.transaction_marker_committed(partition, info.last_offset)
    return ErrorCode.NONE


async def _write_marker_remote(cluster: ClusterClient, leader: int, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
    R = WriteTxnMarkersRequest
    M = R.WritableTxnMarker
    req = R(markers=[M(producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                       transaction_result=marker.commit, coordinator_epoch=marker.coordinator_epoch,
                       topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])])])
    try:
        resp = await cluster.send_to_broker(leader, req, 1)
    except ConnectionError as e:
        log.info("Transaction marker for %s-%d could not reach leader %d: %s", topic, partition, leader, e)
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode(resp.markers[0].topics[0].partitions[0].error_code)


def _complete_offsets(broker: TxnBroker, partition: int, marker: TxnMarker, offset: int) -> None:
    gc = broker.group_coordinator
    if gc is not None:
        try:
            gc.complete_transaction(partition, marker.producer_id, marker.commit, offset)
        except Exception:
            log.exception("Group coordinator failed to complete transactional offsets of producer %d",
                          marker.producer_id)


# Retriable coordinator answers become NOT_ENOUGH_REPLICAS, which every producer retries (as
# Kafka's ReplicaManager does for transaction verification, KIP-890).
_VERIFY_RETRIABLE = {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                     ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}


def verify_transactional_produce(broker: VerifyingBroker, transactional_id: str | None, topic: str,
                                 partition: int, batches: Iterable[BatchHeader]) -> ErrorCode:
    """Transaction verification for Produce (KIP-890 part 1): NONE, or the partition's error code.

    A transactional batch is only written if its partition is part of the producer's open
    transaction at the coordinator, with the same producer id and epoch. This stops a late or
    zombie Produce from opening a transaction in a partition that no marker will ever close
    (a "hanging transaction" that would hold the last stable offset back forever).
    ``batches`` are the validated headers (``protocol.records.BatchHeader``).
    """
    coord = broker.txn_coordinator
    if coord is None:
        return ErrorCode.NONE
    for h in batches:
        if not h.is_transactional or h.is_control:
            continue
        if not transactional_id:
            return ErrorCode.INVALID_TXN_STATE
        code = coord.verify_partitions(transactional_id, h.producer_id, h.producer_epoch,
                                       [(topic, partition)])[(topic, partition)]
        if code is ErrorCode.NONE:
            continue
        if code in _VERIFY_RETRIABLE:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        if code is ErrorCode.PRODUCER_FENCED:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        return code
    return ErrorCode.NONE


async def verify_remotely(broker: TxnBroker, transactional_id: str, producer_id: int, producer_epoch: int,
                          topic: str, partition: int, add: bool = False) -> ErrorCode | None:
    """In a cluster whose transaction coordinator for ``transactional_id`` is another broker: ask it
    (AddPartitionsToTxn v4 ``verify_only``, KIP-890's broker-to-broker form) whether the partition
    is in the producer's open transaction -- or, with ``add`` (transactions v2), have it added
    (AddPartitionsToTxn v5, ``verify_only`` false). None when the coordinator is this broker (or
    there is no cluster): verify or add locally."""
    coord = broker.txn_coordinator
    cluster = broker.metadata_support  # a single broker coordinates every transactional id itself
    if coord is None:
        return None
    leader = cluster.leader_of(tlog.TRANSACTION_STATE_TOPIC, coord.partition_for(transactional_id))
    if leader == broker.broker_id:
        return None
    if leader < 0:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE

    R = AddPartitionsToTxnRequest
    T = R.AddPartitionsToTxnTransaction
    req = R(transactions=[T(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
                            verify_only=not add, topics=[T.AddPartitionsToTxnTopic(name=topic, partitions=[partition])])])
    try:
        resp = await cluster.send_to_broker(leader, req, 5 if add else 4)
        return ErrorCode(resp.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code)
    except (ConnectionError, IndexError) as e:
        log.info("Verifying %s-%d with the transaction coordinator (broker %d) failed: %s", topic, partition,
                 leader, e)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE


async def verify_transactional_produce_in_cluster(broker: TxnBroker, transactional_id: str | None,
                                                  topic: str, partition: int,
                                                  batches: Iterable[BatchHeader],
                                                  add: bool = False) -> ErrorCode:
    """:func:`verify_transactional_produce`, asking the coordinator broker when it is another one.

    ``add`` (Produce v12+, transactions v2, KIP-890 part 2): rather than refusing a partition that
    is not yet in the transaction, the leader has the coordinator add it (starting the
    transaction if none is open), as Kafka's ``AddPartitionsToTxnManager`` does."""
    txn = [h for h in batches if h.is_transactional and not h.is_control]
    if txn and transactional_id:
        code = await verify_remotely(broker, transactional_id, txn[0].producer_id, txn[0].producer_epoch,
                                     topic, partition, add)
        if code is None and add:
            code = await add_partition_locally(broker, transactional_id, txn[0].producer_id,
                                               txn[0].producer_epoch, topic, partition)
        if code is not None:
            if code in _VERIFY_RETRIABLE:
                return ErrorCode.NOT_ENOUGH_REPLICAS
            if code is ErrorCode.PRODUCER_FENCED:
                return ErrorCode.INVALID_PRODUCER_EPOCH
            return code
    return verify_transactional_produce(broker, transactional_id, topic, partition, batches)


async def add_partition_locally(broker: TxnBroker, transactional_id: str, producer_id: int, producer_epoch: int,
                                topic: str, partition: int) -> ErrorCode | None:
    """Transactions v2 on the coordinator broker itself: add the partition to the producer's
    transaction (NONE), or the coordinator's error; None without a coordinator."""
    coord = broker.txn_coordinator
    if coord is None:
        return None
    try:
        await coord.add_partitions(transactional_id, producer_id, producer_epoch, [(topic, partition)], 2)
    except KafkaError as e:
        return e.code
    return ErrorCode.NONE


class BrokerTransactionStorage:
    """:class:`txn.storage.TransactionStorage` on the broker's own partitions."""

    def __init__(self, broker: TxnBroker) -> None:
        self.broker = broker

    async def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]], *,
                     on_appended: Callable[[int], None] | None = None) -> None:
        rm = self.broker.replica_manager
        await rm.append_internal(tlog.TRANSACTION_STATE_TOPIC, partition,
                                 validate_batches(build_batch(list(records))), on_appended=on_appended)

    def read(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]:
        return list(self._read(partition))

    def _read(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        try:
            part = self.broker.replica_manager.get_partition(tlog.TRANSACTION_STATE_TOPIC, partition)
        except KafkaError:
            return
        for raw in part.log.read_batch_bytes(part.log_start_offset):
            for attrs, rec in iter_batch_records(raw):
                if attrs & ATTR_CONTROL or rec.key is None:
                    continue
                yield bytes(rec.key), None if rec.value is None else bytes(rec.value)

    async def write_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
        return await write_marker(self.broker, topic, partition, marker)


# The plugin hooks: broker/server.py calls them by module name (COMPONENTS) with the broker
# itself, which this layer cannot import (it is above txn/): a dynamic boundary, hence Any.
async def start(broker: Any) -> None:
    config = TransactionConfig.from_properties(lambda name: broker.config.get(name))
    existing = broker.topics.get(tlog.TRANSACTION_STATE_TOPIC)
    if existing is not None:
        # The partition count of an existing topic wins: ids are hashed onto it.
        config.num_partitions = existing.num_partitions
    # AddOffsetsToTxn must name the same __consumer_offsets partition the group coordinator uses.
    gc_partitions = getattr(getattr(getattr(broker, "group_coordinator", None), "config", None),
                            "offsets_topic_num_partitions", None)
    if isinstance(gc_partitions, int) and gc_partitions > 0:
        config.offsets_num_partitions = gc_partitions
    coord = TransactionCoordinator(BrokerTransactionStorage(broker), broker.producer_ids, config,
                                   fault=str(broker.config["transaction.fault.injection"]) or None)
    if broker.metadata_support.clustered:
        # coordinate the transactional ids of the __transaction_state partitions led here
        coord.loaded = True
        broker.replica_manager.leadership_listeners.append(
            lambda tp, is_leader, _epoch: _on_leadership(coord, tp.topic, tp.partition, is_leader))
    else:
        await coord.load()
    coord.start_background()
    broker.txn_coordinator = coord


def _on_leadership(coord: TransactionCoordinator, topic: str, partition: int, is_leader: bool) -> None:
    if topic == tlog.TRANSACTION_STATE_TOPIC and is_leader:
        coord.load_partition(partition)


async def stop(broker: object) -> None:
    coord = getattr(broker, "txn_coordinator", None)
    if coord is not None:
        await coord.stop()
