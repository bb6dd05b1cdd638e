"""Followers fetch from leaders (Kafka's ``ReplicaFetcherManager`` / ``ReplicaFetcherThread``).

Theory of operation: one :class:`ReplicaFetcher` task per source broker batches every partition
this broker follows from that leader into one Fetch request (``replica_id`` = our broker id,
``fetch_offset`` = our log end offset), appends what comes back with the leader's offsets and
epochs, and takes the leader's high watermark. The fetches run in an incremental fetch session
(KIP-227, :mod:`.fetch_session_handler`): after the first full Fetch each one names only the
partitions whose fetch offset (or log start, epoch) moved, and the leader answers only those with
records, a new high watermark or an error, so a round costs what moved, not every partition
followed. A partition added to a fetcher (we became its
follower) is first *truncated*: OffsetForLeaderEpoch asks the leader where our latest leader
epoch ended on its log, and everything past that (a divergent tail written by an old leader
that was never committed) is dropped, as KIP-101 describes. When a fetch says the offset is out
of range, the follower truncates to the leader's log end (our log is longer) or restarts at the
leader's log start (we fell behind its retention).

Every change to a followed partition goes through the replica manager (``append_records_as_follower``,
``truncate_follower``, ``restart_follower_at``), never the partition's log directly.

The fetch loop is the acks=all latency path: a produce waits until the followers' *next* fetch
reports the new log end offset, so each round appends and sends the next Fetch at once (no
backoff unless something failed). In the steady state (nothing to truncate or back off) the
rounds run in the connection's read callback (:class:`_Stream`), not in this fetcher's task: a
response is appended and the next Fetch written the moment it is read, instead of after
whatever else the event loop has queued (producers' requests on a broker that also leads). The request is written and the response read by the
hand-written v12 codec in ``protocol/fetch_codec.py`` (records stay views of the response frame,
each batch's CRC is checked and its records are never walked, as Kafka's ``appendAsFollower``).

Errors that mean "the leadership moved" (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...) make
the partition wait for the controller's next LeaderAndIsr; connection failures back off for
``replica.fetch.backoff.ms``, and so does a partition whose fetched data cannot be appended here
(KAFKA_STORAGE_ERROR: a full disk), alone, while the fetcher's other partitions go on.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import Protocol

from kafka.protocol.consumer import OffsetForLeaderEpochRequest
from kafka.protocol.data_container import DataContainer

from protocol.errors import ErrorCode, KafkaError
from protocol.fetch_codec import (
    FetchPartitionRequest,
    PartitionData,
    decode_fetch_response,
    encode_fetch_request,
)

from ...metrics import BrokerMetrics
from ...replica import trace
from ...replica.partition import Partition, TopicPartition
from ..interbroker import BrokerClient, Channel
from ..support import ClusterBroker
from .fetch_session_handler import FetchSessionHandler, FetchState

log = logging.getLogger("samsa.replication")

OFFSET_FOR_LEADER_EPOCH_VERSION = 4
_LEADERSHIP_MOVED = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                     ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ErrorCode.LEADER_NOT_AVAILABLE}


class FollowerBroker(ClusterBroker, Protocol):
    """What a replica fetcher reads of its broker: the cluster's view, and its metrics."""

    @property
    def metrics(self) -> BrokerMetrics | None: ...


class ReplicaFetcherManager:
    def __init__(self, broker: FollowerBroker) -> None:
        self.broker = broker
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.by_partition: dict[TopicPartition, int] = {}

    def add_partition(self, part: Partition, leader_id: int) -> None:
        self.remove_partition(part.tp)
        f = self.fetchers.get(leader_id)
        if f is None:
            f = self.fetchers[leader_id] = ReplicaFetcher(self.broker, leader_id)
            f.start()
        f.add(part)
        self.by_partition[part.tp] = leader_id

    def remove_partition(self, tp: TopicPartition) -> None:
        leader = self.by_partition.pop(tp, None)
        if leader is not None and leader in self.fetchers:
            self.fetchers[leader].remove(tp)

    async def shutdown(self) -> None:
        for f in list(self.fetchers.values()):
            await f.stop()
        self.fetchers.clear()
        self.by_partition.clear()


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader."""

    def __init__(self, broker: FollowerBroker, leader_id: int) -> None:
        self.broker = broker
        self.leader_id = leader_id
        self.partitions: dict[TopicPartition, Partition] = {}
        # KIP-227: after the first, each Fetch names only the partitions whose fetch offset moved
        self.session = FetchSessionHandler(f"broker={broker.broker_id} leader={leader_id}")
        self.needs_truncation: set[TopicPartition] = set()
        # partitions whose fetch offset is beyond the leader's log end (an unclean election left
        # us longer): ask for the end of the leader's *current* epoch, i.e. its log end offset
        self.beyond_leader_end: set[TopicPartition] = set()
        self.delayed_until: dict[TopicPartition, float] = {}   # partitions backing off after a failed append
        self.client: BrokerClient | None = None
        self.task: asyncio.Task[None] | None = None
        self.wakeup = asyncio.Event()
        cfg = broker.config
        self.max_wait_ms = cfg.int("replica.fetch.wait.max.ms")
        self.min_bytes = cfg.int("replica.fetch.min.bytes")
        self.max_bytes = cfg.int("replica.fetch.response.max.bytes")
        self.partition_max_bytes = cfg.int("replica.fetch.max.bytes")
        self.backoff = cfg.int("replica.fetch.backoff.ms") / 1000
        self.timeout = cfg.int("replica.socket.timeout.ms") / 1000

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"replica-fetcher-{self.leader_id}")

    async def stop(self) -> None:
        task = self.task
        if task is not None:
            # Cancelled until it is done: on Python 3.11 ``asyncio.wait_for`` (the inter-broker
            # client's requests) swallows a cancellation that arrives as the request completes
            # (gh-86296), the fetch loop then goes on, and awaiting the task once hung a broker's
            # shutdown until SIGKILL (it had begun to follow a new leader a millisecond before).
            for _ in range(100):
                task.cancel()
                done, _pending = await asyncio.wait({task}, timeout=0.1)
                if done:
                    break
            else:
                log.warning("[ReplicaFetcher broker=%d leader=%d] Fetcher did not stop within 10 s of "
                            "being cancelled; shutting down without it", self.broker.broker_id, self.leader_id)
            if task.done() and not task.cancelled():
                task.exception()  # (retrieved: it ended with an error already logged, or none)
        if self.client is not None:
            self.client.close()

    def add(self, part: Partition) -> None:
        self.partitions[part.tp] = part
        self.needs_truncation.add(part.tp)
        self.wakeup.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self.needs_truncation.discard(tp)
        self.beyond_leader_end.discard(tp)
        self.delayed_until.pop(tp, None)

    def _delayed(self, tp: TopicPartition, now: float) -> bool:
        """Whether tp sits out its backoff after a failed append (Kafka's delayed PartitionFetchState)."""
        until = self.delayed_until.get(tp)
        if until is None:
            return False
        if now >= until:
            del self.delayed_until[tp]
            return False
        return True

    def _connect(self) -> BrokerClient | None:
        info = self.broker.metadata_support.live_broker(self.leader_id)
        if info is None:
            return None
        ep = info.endpoint(self.broker.inter_broker_listener)
        if self.client is None or (self.client.host, self.client.port) != (ep.host, ep.port):
            if self.client is not None:
                self.client.close()
            self.session.reset()
            self.client = BrokerClient(ep.host, ep.port, f"samsa-replica-fetcher-{self.broker.broker_id}")
        return self.client

    async def _run(self) -> None:
        while True:
            if not self.partitions:
                self.wakeup.clear()
                await self.wakeup.wait()
                continue
            client = self._connect()
            if client is None:
                await asyncio.sleep(self.backoff)
                continue
            try:
                if self.needs_truncation:
                    await self._truncate(client)
                await self._fetch_once(client)
            except asyncio.CancelledError:
                raise
            except ConnectionError as e:
                self.session.reset()  # the request in flight may or may not have reached the leader
                log.warning("[ReplicaFetcher broker=%d leader=%d] Error fetching: %s; retrying in %.1f s",
                            self.broker.broker_id, self.leader_id, e, self.backoff)
                await asyncio.sleep(self.backoff)
            except Exception:
                self.session.reset()
                log.exception("[ReplicaFetcher broker=%d leader=%d] Unexpected error", self.broker.broker_id,
                              self.leader_id)
                await asyncio.sleep(self.backoff)

    async def _truncate(self, client: BrokerClient) -> None:
        """KIP-101: truncate each newly followed partition to where our latest epoch ends on the leader."""
        R = OffsetForLeaderEpochRequest
        now = time.monotonic()
        tps = [tp for tp in self.needs_truncation if tp in self.partitions and not self._delayed(tp, now)]
        if not tps:
            return
        by_topic: dict[str, list[DataContainer]] = {}
        for tp in tps:
            part = self.partitions[tp]
            epoch = part.leader_epoch if tp in self.beyond_leader_end else part.log.latest_epoch
            by_topic.setdefault(tp.topic, []).append(R.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=tp.partition, current_leader_epoch=part.leader_epoch, leader_epoch=epoch))
        req = R(replica_id=self.broker.broker_id, topics=[R.OffsetForLeaderTopic(topic=t, partitions=ps)
                                                          for t, ps in by_topic.items()])
        resp = await client.send(req, OFFSET_FOR_LEADER_EPOCH_VERSION, timeout=self.timeout)
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                followed = self.partitions.get(tp)
                if followed is None or tp not in self.needs_truncation:
                    continue
                part = followed
                code = ErrorCode(p.error_code)
                if code != ErrorCode.NONE:
                    if code in _LEADERSHIP_MOVED:
                        continue  # retried on the next round; the controller will tell us more
                    log.warning("OffsetForLeaderEpoch for %s failed: %s", tp, code.name)
                    continue
                leo = part.log_end_offset
                if tp in self.beyond_leader_end and p.end_offset >= 0:
                    target = min(leo, p.end_offset)  # KIP-101's unclean case: down to the leader's end
                    self.beyond_leader_end.discard(tp)
                elif p.end_offset < 0 or part.log.latest_epoch < 0:
                    target = min(leo, part.high_watermark)  # no epoch information: fall back to the HW
                else:
                    target = min(leo, p.end_offset)
                if target < leo:
                    log.info("[Partition %s broker=%d] Truncating to offset %d (leader epoch %d ends there on leader "
                             "%d; log end offset was %d)", tp, self.broker.broker_id, target, p.leader_epoch,
                             self.leader_id, leo)
                    self.broker.replica_manager.truncate_follower(part, target)
                self.needs_truncation.discard(tp)

    async def _fetch_once(self, client: BrokerClient) -> None:
        request = self._next_request(client)
        if request is None:
            await asyncio.sleep(self.backoff / 4)
            return
        frame, corr = request
        payload = await client.send_frame(frame, timeout=self.timeout + self.max_wait_ms / 1000)
        if self._handle_response(client, payload, corr):
            await asyncio.sleep(self.backoff / 2)
            return
        if self._steady():
            await self._stream(client)

    def _steady(self) -> bool:
        """Nothing but fetching to do: no partition to truncate or sitting out a backoff."""
        return bool(self.partitions) and not self.needs_truncation and not self.delayed_until

    def _next_request(self, client: BrokerClient) -> tuple[bytes, int] | None:
        """The next Fetch for the partitions ready to fetch: (frame, correlation id), or None.
        Within the fetch session (fetch_session_handler.py) it names only the partitions whose
        fetch state changed."""
        max_bytes = self.partition_max_bytes
        ready: list[tuple[TopicPartition, FetchState]]
        if self.needs_truncation or self.delayed_until:
            now = time.monotonic()
            ready = [(tp, (p.log.log_end_offset, p.log.log_start_offset, p.leader_epoch, max_bytes))
                     for tp, p in self.partitions.items()
                     if tp not in self.needs_truncation and not self._delayed(tp, now)]
        else:  # the steady state: every partition is fetched
            ready = [(tp, (p.log.log_end_offset, p.log.log_start_offset, p.leader_epoch, max_bytes))
                     for tp, p in self.partitions.items()]
        if not ready:
            return None
        plan = self.session.build(ready)
        by_topic: dict[str, list[FetchPartitionRequest]] = {}
        for tp, (offset, start, epoch, limit) in plan.send:
            by_topic.setdefault(tp.topic, []).append(FetchPartitionRequest(tp.partition, epoch, offset, start, limit))
        forgotten: dict[str, list[int]] = {}
        for tp in plan.forgotten:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        # hot path: hand-written codec (protocol/fetch_codec.py), records stay views of the frame
        corr = client.next_correlation_id()
        frame = encode_fetch_request(corr, client.client_id, list(by_topic.items()),
                                     replica_id=self.broker.broker_id, max_wait_ms=self.max_wait_ms,
                                     min_bytes=self.min_bytes, max_bytes=self.max_bytes,
                                     session_id=plan.session_id, session_epoch=plan.epoch,
                                     forgotten=list(forgotten.items()))
        if trace.ON:
            for tp, (offset, _start, _epoch, _limit) in plan.send:
                trace.event("fsend", tp.topic, tp.partition, offset)
        return frame, corr

    def _handle_response(self, client: BrokerClient, payload: bytes | memoryview, corr: int) -> bool:
        """Append what the leader sent. Returns True if leadership moved (back off a little)."""
        if trace.ON:
            trace.event("fgot", self.leader_id, len(payload))
        try:
            resp = decode_fetch_response(payload)
        except (ValueError, IndexError, struct.error) as e:
            client.close()
            raise ConnectionError(f"malformed Fetch response from broker {self.leader_id}: {e}") from e
        if resp.correlation_id != corr:
            client.close()
            raise ConnectionError(f"correlation id {resp.correlation_id} does not match request {corr}")
        if not self.session.handle_response(resp.error_code, resp.session_id):
            return False  # the leader lost our fetch session: the next Fetch is a full one
        rm = self.broker.replica_manager
        partitions = self.partitions
        moved = False
        for t in resp.topics:
            topic = t.topic
            assert topic is not None
            for p in t.partitions:
                # (a plain tuple finds a TopicPartition key: same hash, equal)
                followed = partitions.get((topic, p.partition_index))  # type: ignore[call-overload]
                if followed is None:  # no longer followed from this leader
                    continue
                part = followed
                tp = part.tp
                if p.error_code == 0:  # ErrorCode.NONE (IntEnum lookups cost, once per round)
                    try:
                        assert isinstance(p.records, memoryview)  # decode_fetch_response's views
                        n = rm.append_records_as_follower(part, p.records, p.high_watermark, p.log_start_offset)
                        if trace.ON:
                            trace.event("fappend", tp.topic, tp.partition, part.log_end_offset)
                        if n and self.broker.metrics is not None:  # BrokerTopicMetrics.ReplicationBytesIn
                            self.broker.metrics.topic_stats.replicated_in(tp.topic, n)
                    except KafkaError as e:
                        log.warning("[Partition %s broker=%d] Cannot append fetched data: %s; re-truncating "
                                    "in %.1f s", tp, self.broker.broker_id, e, self.backoff)
                        self.needs_truncation.add(tp)
                        # a full or failing disk fails every retry alike: sit out replica.fetch.backoff.ms
                        self.delayed_until[tp] = time.monotonic() + self.backoff
                    continue
                code = ErrorCode(p.error_code)
                if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self._handle_out_of_range(tp, part, p)
                elif code in _LEADERSHIP_MOVED:
                    moved = True
                else:
                    log.warning("[Partition %s broker=%d] Fetch from leader %d failed: %s", tp,
                                self.broker.broker_id, self.leader_id, code.name)
        return moved

    async def _stream(self, client: BrokerClient) -> None:
        """The steady state: each response is handled, and the next Fetch sent, in the channel's
        read callback (a :class:`_Stream` listening on it), not by this task waking up behind
        whatever else the event loop has queued. On a broker that also leads partitions and
        serves producers, that wait was ~1 ms at the median and 5-6 ms at p99 of every follower
        round at 10,000 acks=all msg/s (bench/replication_trace.py). Returns when anything but
        fetching is to be done (a partition to truncate or back off, leadership moved, the
        partitions changed to none); raises ConnectionError as ``send_frame`` would."""
        channel = await client.channel()
        stream = _Stream(self, client, channel, asyncio.get_running_loop())
        try:
            moved = await stream.run()
        except (OSError, TimeoutError, EOFError) as e:
            client.close()
            raise ConnectionError(f"{client.host}:{client.port}: {e or type(e).__name__}") from e
        finally:
            stream.stop()
        if moved:
            await asyncio.sleep(self.backoff / 2)

    def _handle_out_of_range(self, tp: TopicPartition, part: Partition, p: PartitionData) -> None:
        if part.log_end_offset >= p.log_start_offset:
            # our log is longer than the leader's: truncate to its log end offset
            self.needs_truncation.add(tp)
            self.beyond_leader_end.add(tp)
        else:
            start = max(p.log_start_offset, 0)
            log.info("[Partition %s broker=%d] Fetch offset %d is below the leader's log start; restarting at %d",
                     tp, self.broker.broker_id, part.log_end_offset, start)
            self.broker.replica_manager.restart_follower_at(part, start)


class _Stream:
    """A replica fetcher's fetch loop driven by response arrivals (see ReplicaFetcher._stream)."""

    def __init__(self, fetcher: ReplicaFetcher, client: BrokerClient, channel: Channel,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.fetcher, self.client, self.channel, self.loop = fetcher, client, channel, loop
        self.done: asyncio.Future[bool] = loop.create_future()  # True: leadership moved
        self.corr = -1
        # One timer for the whole stream, not one per request: each send only moves the
        # deadline, and the timer, when it fires early, is set again for the deadline (a timer
        # made and cancelled each round cost ~2 us of the round's CPU).
        self.timer: asyncio.TimerHandle | None = None
        self.deadline = 0.0
        self.timeout = fetcher.timeout + fetcher.max_wait_ms / 1000

    async def run(self) -> bool:
        if self.channel.frames or not self._send():  # (a frame already queued belongs to roundtrip)
            return False
        self.channel.listener = self
        return await self.done

    def _send(self) -> bool:
        request = self.fetcher._next_request(self.client)
        transport = self.channel.transport
        if request is None or transport is None or self.channel.closed:
            return False
        frame, self.corr = request
        transport.write(frame)
        self.deadline = self.loop.time() + self.timeout
        if self.timer is None:
            self.timer = self.loop.call_at(self.deadline, self._timed_out)
        return True

    def on_frame(self, frame: bytes | memoryview) -> None:
        # (the timer stays: the next send moves its deadline, _finish stops it)
        try:
            moved = self.fetcher._handle_response(self.client, frame, self.corr)
        except Exception as e:  # ConnectionError (a broken response) or a bug: the task decides
            self._finish(e)
            return
        if moved or not self.fetcher._steady() or self.done.done():
            self._finish(moved)
        elif not self._send():
            self._finish(False)

    def on_failure(self, exc: BaseException) -> None:
        self._finish(exc if isinstance(exc, Exception) else EOFError(str(exc)))

    def _timed_out(self) -> None:
        self.timer = None
        if self.loop.time() < self.deadline:  # a response came and another request went since
            self.timer = self.loop.call_at(self.deadline, self._timed_out)
            return
        self._finish(TimeoutError(f"no Fetch response within {self.timeout:.1f} s"))

    def _finish(self, outcome: bool | Exception) -> None:
        self.stop()
        if not self.done.done():
            if isinstance(outcome, Exception):
                self.done.set_exception(outcome)
            else:
                self.done.set_result(outcome)

    def stop(self) -> None:
        """Let go of the channel (the task was cancelled, or the stream ended)."""
        if self.channel.listener is self:
            self.channel.listener = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
