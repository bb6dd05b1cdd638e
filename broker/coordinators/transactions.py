"""The transaction coordinator on the broker's partitions, and the broker's side of KIP-890.

* ``__transaction_state`` (``transaction.state.log.num.partitions`` partitions, compacted) is
  created by the first FindCoordinator for a transactional id (``broker/auto_topic_creation.py``),
  as in Kafka; coordinator records are appended to it as plain v2 batches and an existing topic
  is read back at start-up for ``replay()``.
* :class:`TransactionMarkerWriter` (Kafka's ``TransactionMarkerChannelManager``): a marker is a
  control batch appended to the data partition, the same path the WriteTxnMarkers handler uses,
  so the partition's producer state closes the transaction, its last stable offset moves and an
  abort lands in the ``.txnindex``. A marker on a ``__consumer_offsets`` partition is then
  announced to the group coordinator, which publishes (commit) or drops (abort) the
  transaction's offsets. In a cluster a partition led by another broker gets the marker
  through WriteTxnMarkers to its leader.
* :class:`TransactionVerifier` (Kafka's ``AddPartitionsToTxnManager``): a transactional Produce
  is only written to a partition of the producer's open transaction, asking the coordinator
  broker when it is another one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.producer import AddPartitionsToTxnRequest, WriteTxnMarkersRequest

from groupcoord.coordinator import GroupCoordinator
from protocol.errors import ErrorCode, KafkaError
from protocol.records import ATTR_CONTROL, BatchHeader, validate_batches
from txn import transaction_log as tlog
from txn.coordinator import CONSUMER_OFFSETS_TOPIC, TransactionConfig, TransactionCoordinator
from txn.markers import TxnMarker, build_batch, build_marker_batch, iter_batch_records
from txn.producer_ids import ProducerIdManager

from ..cluster.metadata import TopicRegistry
from ..config.properties import BrokerConfig
from ..replica.replica_manager import ReplicaManager, TopicPartition
from .partition_writer import CoordinatorLoader, CoordinatorPartitionWriter

log = logging.getLogger("samsa.txn")


class InterBrokerChannel(Protocol):
    """What the transaction glue needs of the cluster: who leads a partition, and a request to
    another broker (raising ConnectionError when it cannot be reached)."""

    def leader_of(self, topic: str, partition: int) -> int: ...

    async def send_to_broker(self, broker_id: int, request: ApiMessage, version: int,
                             timeout: float = 30.0) -> ApiMessage: ...


class TransactionMarkerWriter:
    """Writes COMMIT/ABORT markers to data partitions (local, or through their leader)."""

    def __init__(self, replica_manager: ReplicaManager, broker_id: int, channel: InterBrokerChannel | None,
                 groups: GroupCoordinator | None) -> None:
        self.replica_manager = replica_manager
        self.broker_id = broker_id
        self.channel = channel
        self.groups = groups  # told about markers on __consumer_offsets

    async def write_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
        """Append ``marker``'s control batch to ``topic-partition``; Kafka's error code as result.

        On a ``__consumer_offsets`` partition the group coordinator applies the marker as soon
        as it is in the log, and the offsets become visible to OffsetFetch once the marker is
        replicated. A partition led by another broker gets the marker through WriteTxnMarkers
        to its leader; here the append waits for the ISR.
        """
        if self.channel is not None:
            leader = self.channel.leader_of(topic, partition)
            if leader < 0:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if leader != self.broker_id:
                return await self._write_remote(self.channel, leader, topic, partition, marker)
        try:
            part = self.replica_manager.get_partition(topic, partition)
            info = part.append(validate_batches(build_marker_batch(marker, partition_leader_epoch=part.leader_epoch)),
                               required_acks=-1)
            if topic == CONSUMER_OFFSETS_TOPIC:
                # Applied once, when written (log/coordinator_runtime.py), never again when replicated.
                self._complete_offsets(partition, marker, info.last_offset)
            if part.high_watermark <= info.last_offset:
                await part.wait_for_replication(info.last_offset + 1, 30.0)
        except KafkaError as e:
            if e.code is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                log.warning("Writing %s marker of producer %d to %s-%d failed: %s",
                            "COMMIT" if marker.commit else "ABORT", marker.producer_id, topic, partition, e)
            return e.code
        if topic == CONSUMER_OFFSETS_TOPIC and self.groups is not None:
            self.groups.transaction_marker_committed(partition, info.last_offset)
        return ErrorCode.NONE

    @staticmethod
    async def _write_remote(channel: InterBrokerChannel, leader: int, topic: str, partition: int,
                            marker: TxnMarker) -> ErrorCode:
        R = WriteTxnMarkersRequest
        M = R.WritableTxnMarker
        req = R(markers=[M(producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                           transaction_result=marker.commit, coordinator_epoch=marker.coordinator_epoch,
                           topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])])])
        try:
            resp = await channel.send_to_broker(leader, req, 1)
        except ConnectionError as e:
            log.info("Transaction marker for %s-%d could not reach leader %d: %s", topic, partition, leader, e)
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode(resp.markers[0].topics[0].partitions[0].error_code)

    def _complete_offsets(self, partition: int, marker: TxnMarker, offset: int) -> None:
        if self.groups is None:
            return
        try:
            self.groups.complete_transaction(partition, marker.producer_id, marker.commit, offset)
        except Exception:
            log.exception("Group coordinator failed to complete transactional offsets of producer %d",
                          marker.producer_id)


# Retriable coordinator answers become NOT_ENOUGH_REPLICAS, which every producer retries (as
# Kafka's ReplicaManager does for transaction verification, KIP-890).
_VERIFY_RETRIABLE = {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                     ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}


def _as_produce_error(code: ErrorCode) -> ErrorCode:
    if code in _VERIFY_RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if code is ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


class TransactionVerifier:
    """Transaction verification for Produce and TxnOffsetCommit (KIP-890), Kafka's
    ``AddPartitionsToTxnManager``: the coordinator is this broker's, or another broker's in a
    cluster (asked through ``channel``)."""

    def __init__(self, coordinator: TransactionCoordinator, broker_id: int,
                 channel: InterBrokerChannel | None) -> None:
        self.coordinator = coordinator
        self.broker_id = broker_id
        self.channel = channel

    def verify_local(self, transactional_id: str | None, topic: str, partition: int,
                     batches: Iterable[BatchHeader]) -> ErrorCode:
        """NONE, or the partition's error code: a transactional batch is only written if its
        partition is part of the producer's open transaction at the coordinator, with the same
        producer id and epoch. This stops a late or zombie Produce from opening a transaction in
        a partition that no marker will ever close (a "hanging transaction" that would hold the
        last stable offset back forever)."""
        for h in batches:
            if not h.is_transactional or h.is_control:
                continue
            if not transactional_id:
                return ErrorCode.INVALID_TXN_STATE
            code = self.coordinator.verify_partitions(transactional_id, h.producer_id, h.producer_epoch,
                                                      [(topic, partition)])[(topic, partition)]
            if code is not ErrorCode.NONE:
                return _as_produce_error(code)
        return ErrorCode.NONE

    async def verify_remotely(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              topic: str, partition: int, add: bool = False) -> ErrorCode | None:
        """In a cluster whose transaction coordinator for ``transactional_id`` is another broker:
        ask it (AddPartitionsToTxn v4 ``verify_only``) whether the partition is in the producer's
        open transaction -- or, with ``add`` (transactions v2), have it added (AddPartitionsToTxn
        v5, ``verify_only`` false). None when the coordinator is this broker (or there is no
        cluster): verify or add locally."""
        channel = self.channel
        if channel is None:
            return None
        leader = channel.leader_of(tlog.TRANSACTION_STATE_TOPIC, self.coordinator.partition_for(transactional_id))
        if leader == self.broker_id:
            return None
        if leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        R = AddPartitionsToTxnRequest
        T = R.AddPartitionsToTxnTransaction
        req = R(transactions=[T(transactional_id=transactional_id, producer_id=producer_id,
                                producer_epoch=producer_epoch, verify_only=not add,
                                topics=[T.AddPartitionsToTxnTopic(name=topic, partitions=[partition])])])
        try:
            resp = await channel.send_to_broker(leader, req, 5 if add else 4)
            return ErrorCode(resp.results_by_transaction[0].topic_results[0].results_by_partition[0]
                             .partition_error_code)
        except (ConnectionError, IndexError) as e:
            log.info("Verifying %s-%d with the transaction coordinator (broker %d) failed: %s", topic, partition,
                     leader, e)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE

    async def add_locally(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          topic: str, partition: int) -> ErrorCode:
        """Transactions v2 on the coordinator broker itself: add the partition to the producer's
        transaction (NONE), or the coordinator's error."""
        try:
            await self.coordinator.add_partitions(transactional_id, producer_id, producer_epoch,
                                                  [(topic, partition)], 2)
        except KafkaError as e:
            return e.code
        return ErrorCode.NONE

    async def verify_produce(self, transactional_id: str | None, topic: str, partition: int,
                             batches: Sequence[BatchHeader], add: bool = False) -> ErrorCode:
        """:meth:`verify_local`, asking the coordinator broker when it is another one.

        ``add`` (Produce v12+, transactions v2, KIP-890 part 2): rather than refusing a partition
        that is not yet in the transaction, the leader has the coordinator add it (starting the
        transaction if none is open), as Kafka's ``AddPartitionsToTxnManager`` does."""
        txn = [h for h in batches if h.is_transactional and not h.is_control]
        if txn and transactional_id:
            pid, epoch = txn[0].producer_id, txn[0].producer_epoch
            code = await self.verify_remotely(transactional_id, pid, epoch, topic, partition, add)
            if code is None and add:
                code = await self.add_locally(transactional_id, pid, epoch, topic, partition)
            if code is not None:
                return _as_produce_error(code)
        return self.verify_local(transactional_id, topic, partition, batches)


class ReplicaTransactionStorage:
    """:class:`txn.storage.TransactionStorage` on ``__transaction_state`` and the data partitions."""

    def __init__(self, writer: CoordinatorPartitionWriter, loader: CoordinatorLoader,
                 markers: TransactionMarkerWriter) -> None:
        self.writer = writer
        self.loader = loader
        self.markers = markers

    async def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]], *,
                     on_appended: Callable[[int], None] | None = None) -> None:
        await self.writer.append(tlog.TRANSACTION_STATE_TOPIC, partition, build_batch(list(records)), on_appended)

    def read(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]:
        return list(self._read(partition))

    def _read(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        for raw in self.loader.batches(tlog.TRANSACTION_STATE_TOPIC, partition):
            for attrs, rec in iter_batch_records(raw):
                if attrs & ATTR_CONTROL or rec.key is None:
                    continue
                yield bytes(rec.key), None if rec.value is None else bytes(rec.value)

    async def write_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
        return await self.markers.write_marker(topic, partition, marker)


class TransactionLeadership:
    """In a cluster: coordinate the transactional ids of the ``__transaction_state`` partitions
    led here."""

    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coordinator = coordinator

    def __call__(self, tp: TopicPartition, is_leader: bool, _leader_epoch: int) -> None:
        if tp.topic == tlog.TRANSACTION_STATE_TOPIC and is_leader:
            self.coordinator.load_partition(tp.partition)


async def start_transaction_coordinator(config: BrokerConfig, replica_manager: ReplicaManager,
                                        topics: TopicRegistry, producer_ids: ProducerIdManager,
                                        markers: TransactionMarkerWriter, offsets_num_partitions: int,
                                        clustered: bool) -> TransactionCoordinator:
    """Build the transaction coordinator, load what this broker coordinates, start its timers."""
    txn_config = TransactionConfig.from_properties(config.get)
    existing = topics.get(tlog.TRANSACTION_STATE_TOPIC)
    if existing is not None:
        # The partition count of an existing topic wins: ids are hashed onto it.
        txn_config.num_partitions = existing.num_partitions
    # AddOffsetsToTxn must name the same __consumer_offsets partition the group coordinator uses.
    txn_config.offsets_num_partitions = offsets_num_partitions
    storage = ReplicaTransactionStorage(CoordinatorPartitionWriter(replica_manager),
                                        CoordinatorLoader(replica_manager), markers)
    coord = TransactionCoordinator(storage, producer_ids, txn_config,
                                   fault=str(config["transaction.fault.injection"]) or None)
    if clustered:
        coord.loaded = True
        replica_manager.leadership_listeners.append(TransactionLeadership(coord))
    else:
        await coord.load()
    coord.start_background()
    return coord
