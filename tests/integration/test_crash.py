"""Crash safety: SIGKILL the broker under an idempotent producer, restart it, lose nothing.

An idempotent confluent-kafka producer (acks=all, unbounded retries and
delivery timeout) sends keyed messages from its own thread while the main
thread SIGKILLs the broker ``KILLS`` times, each time once more messages have
been acknowledged, and restarts it on the same port and data dir.  Then:

* every acknowledged message is in the log exactly once, at the offset its
  delivery report gave (an ack means it was appended; a retry of an
  unacknowledged batch after the restart must be recognised as a duplicate by
  the recovered producer state, never appended twice);
* nothing that was never sent appears, and per partition the sequence numbers
  rise with the offsets (idempotence forbids reordering);
* right after each SIGKILL the data dir passes ``check_log(allow_torn_tail=True)``
  (only the unflushed tail may be torn), and after the final clean shutdown
  it passes ``log.check.check_log`` outright.

Segments are kept small (``log.segment.bytes``) so that rolls, index files
and recovery across several segments are all exercised.

A SIGKILL only kills the process: the page cache survives, so acknowledged
appends must too; what a crash may leave is a torn tail, which recovery on
restart has to truncate.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.brokers import SamsaBroker
from tests.support.logcheck import assert_log_ok

pytestmark = pytest.mark.slow

PARTITIONS = 3
KILLS = 4
TOTAL = 12_000
ACKS_BETWEEN_KILLS = 2_000
SEGMENT_BYTES = 64 * 1024  # ~280 KB per partition in total: several segments each
PROGRESS_GUARD_S = 180.0  # liveness bound: fail instead of hanging forever; not a speed assertion


class AckingProducer:
    """Runs an idempotent Producer on its own thread; records every delivery report."""

    def __init__(self, bootstrap: str, topic: str, codec: str = "none"):
        self.topic = topic
        self.acked: dict[int, tuple[int, int]] = {}  # seq -> (partition, offset)
        self.delivery_errors: list[str] = []
        self.fatal_errors: list[str] = []
        self.sent = 0
        self.undelivered: int | None = None
        self.failure: BaseException | None = None
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "retries": 2147483647,
                "message.timeout.ms": 0,  # 0 = infinite delivery timeout
                "linger.ms": 5,
                "compression.type": codec,
                "retry.backoff.ms": 100,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "queue.buffering.max.messages": 2000,  # keep in-flight data bounded while the broker is down
                "error_cb": self._on_error,
            }
        )
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="crash-producer", daemon=True)

    def _on_error(self, err) -> None:
        if err.fatal():
            self.fatal_errors.append(str(err))

    def _on_delivery(self, err, msg) -> None:
        seq = int(msg.key()[1:])
        if err is not None:
            self.delivery_errors.append(f"seq {seq}: {err}")
        else:
            self.acked[seq] = (msg.partition(), msg.offset())

    def _run(self) -> None:
        try:
            seq = 0
            while seq < TOTAL and not self.fatal_errors and not self.stopping.is_set():
                try:
                    self.producer.produce(
                        self.topic,
                        key=f"k{seq}".encode(),
                        value=f"v{seq}".encode(),
                        on_delivery=self._on_delivery,
                    )
                except BufferError:
                    self.producer.poll(0.05)
                    continue
                seq += 1
                self.sent = seq
                self.producer.poll(0)
            deadline = time.monotonic() + PROGRESS_GUARD_S
            while not self.stopping.is_set() and time.monotonic() < deadline:
                if self.producer.flush(0.5) == 0:
                    break
            self.undelivered = len(self.producer)
        except BaseException as e:  # surfaced by the test thread
            self.failure = e
        finally:
            if self.stopping.is_set():
                self.producer.purge()
                self.producer.flush(0)


def wait_for(predicate, what: str, producer: AckingProducer) -> None:
    deadline = time.monotonic() + PROGRESS_GUARD_S
    while not predicate():
        assert not producer.fatal_errors, f"producer fatal error: {producer.fatal_errors}"
        assert producer.failure is None, f"producer thread failed: {producer.failure!r}"
        assert time.monotonic() < deadline, (
            f"no progress for {PROGRESS_GUARD_S}s waiting for {what}: sent={producer.sent} acked={len(producer.acked)}"
        )
        time.sleep(0.02)


def consume_all(
    bootstrap: str, topic: str, partitions: int = PARTITIONS
) -> list[tuple[int, int, bytes, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"crash-check-{topic}",
            "enable.auto.commit": False,
            "check.crcs": True,
        }
    )
    out: list[tuple[int, int, bytes, bytes]] = []
    try:
        highs = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        positions = {p: -1 for p in range(partitions)}
        deadline = time.monotonic() + PROGRESS_GUARD_S
        while any(positions[p] + 1 < highs[p] for p in range(partitions)) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                assert msg.error() is None, f"consumer error: {msg.error()}"
                p, o, k, v = msg.partition(), msg.offset(), msg.key(), msg.value()
                assert p is not None and o is not None and k is not None and v is not None
                out.append((p, o, k, v))
                positions[p] = o
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_sigkill_under_idempotent_producer(broker_factory, codec: str) -> None:
    broker = broker_factory({"num.partitions": PARTITIONS, "log.segment.bytes": SEGMENT_BYTES})
    if not isinstance(broker, SamsaBroker):
        pytest.skip("needs a broker with durable storage (Tansu runs in memory here)")
    topic = "crash"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)]).values():
        f.result(timeout=30)
    del admin

    producer = AckingProducer(broker.bootstrap, topic, codec)
    producer.thread.start()
    unacked_at_kill: list[int] = []
    try:
        for kill in range(1, KILLS + 1):
            target = kill * ACKS_BETWEEN_KILLS
            wait_for(
                lambda t=target: len(producer.acked) >= t, f"{target} acks before kill #{kill}", producer
            )
            broker.kill()
            unacked_at_kill.append(producer.sent - len(producer.acked))
            assert_log_ok(broker.data_dir, allow_torn_tail=True)
            # Let the producer notice, queue and retry against a dead port for a moment.
            time.sleep(0.5)
            broker.restart()
        wait_for(
            lambda: not producer.thread.is_alive(), "the producer to send and flush everything", producer
        )
    finally:
        if producer.thread.is_alive():  # the test failed early: do not leave a retrying producer behind
            producer.stopping.set()
            producer.thread.join(30)
    assert producer.failure is None, repr(producer.failure)
    assert not producer.fatal_errors, producer.fatal_errors
    assert not producer.delivery_errors, producer.delivery_errors[:20]
    assert producer.undelivered == 0, f"{producer.undelivered} messages never delivered"
    assert producer.sent == TOTAL
    assert broker.starts == KILLS + 1
    # The test only means something if messages were in flight when the broker died.
    assert any(n > 0 for n in unacked_at_kill), f"nothing was in flight at any kill: {unacked_at_kill}"

    records = consume_all(broker.bootstrap, topic)
    problems: list[str] = []
    seen: dict[int, tuple[int, int]] = {}
    last: dict[int, int] = {}
    for partition, offset, key, value in records:
        seq = int(key[1:])
        if value != f"v{seq}".encode():
            problems.append(f"seq {seq}: value {value!r}")
        if seq in seen:
            problems.append(f"seq {seq} twice: at {seen[seq]} and {(partition, offset)}")
        seen[seq] = (partition, offset)
        if seq >= TOTAL:
            problems.append(f"seq {seq} was never sent")
        if partition in last and seq <= last[partition]:
            problems.append(
                f"partition {partition}: seq {seq} at offset {offset} after seq {last[partition]}"
            )
        last[partition] = seq
    lost = sorted(s for s in producer.acked if s not in seen)
    if lost:
        problems.append(f"{len(lost)} acknowledged messages missing, first {lost[:20]}")
    moved = [
        (s, producer.acked[s], seen[s]) for s in producer.acked if s in seen and seen[s] != producer.acked[s]
    ]
    if moved:
        problems.append(f"{len(moved)} messages not at their acknowledged offset, first {moved[:10]}")
    assert not problems, "\n".join(problems[:40])
    # Every message was acknowledged (flush returned 0), so the log holds exactly TOTAL records.
    assert len(records) == TOTAL

    broker.stop()
    assert_log_ok(broker.data_dir)


def test_sigterm_is_a_clean_shutdown(broker_factory) -> None:
    """SIGTERM: the broker exits 0 leaving a log that needs no recovery, and comes back whole.

    The idempotent producer keeps its producer id across the restart, so its
    next sequence numbers must be accepted (the broker restored its producer
    state) without duplicates or errors.
    """
    broker = broker_factory({"num.partitions": 1, "log.segment.bytes": SEGMENT_BYTES})
    if not isinstance(broker, SamsaBroker):
        pytest.skip("needs a broker with durable storage (Tansu runs in memory here)")
    topic = "clean"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        f.result(timeout=30)
    del admin

    acked: list[int] = []
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(msg.offset())

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 0,
            "error_cb": lambda err: errors.append(f"error_cb: {err}") if err.fatal() else None,
        }
    )

    def send(start: int, stop: int) -> None:
        for seq in range(start, stop):
            producer.produce(topic, key=f"k{seq}".encode(), value=f"v{seq}".encode(), on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(PROGRESS_GUARD_S) == 0

    send(0, 3000)
    assert broker.stop() == 0, "SIGTERM should end in a clean exit"
    assert_log_ok(broker.data_dir)  # strict: a clean shutdown leaves no torn tail
    broker.restart()
    send(3000, 6000)
    assert not errors, errors[:10]
    assert acked == list(range(6000))

    records = consume_all(broker.bootstrap, topic, partitions=1)
    assert [(o, k, v) for _, o, k, v in records] == [
        (i, f"k{i}".encode(), f"v{i}".encode()) for i in range(6000)
    ]


def test_retried_batch_after_sigkill_is_a_duplicate(broker_factory) -> None:
    """An idempotent batch resent after the broker crashed is recognised, not appended twice.

    Raw protocol, so the retry is certain rather than left to a client's timing:
    InitProducerId, append batches with sequences 0..4, SIGKILL, restart, then
    send batch 4 again with the same producer id, epoch and sequence.  Kafka
    answers a duplicate of one of the last five batches with NONE and the
    offset it was first written at (the producer state is rebuilt from the
    snapshot and log on start-up); the log end offset must not move.  The next
    new sequence must then be accepted right after it.
    """
    from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from tests.support.rawclient import RawClient

    broker = broker_factory({"num.partitions": 1})
    if not isinstance(broker, SamsaBroker):
        pytest.skip("needs a broker with durable storage (Tansu runs in memory here)")
    topic = "dup"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        f.result(timeout=30)
    del admin

    def batch(pid: int, epoch: int, seq: int, n: int = 10) -> bytes:
        b = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=False,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            batch_size=1 << 20,
        )
        for i in range(n):
            b.append(i, timestamp=None, key=None, value=f"s{seq + i}".encode(), headers=[])
        return bytes(b.build())

    with RawClient(broker.host, broker.port) as c:
        init = c.roundtrip(
            InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
            2,
            InitProducerIdResponse,
        )
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        for k in range(5):
            assert c.produce(topic, 0, batch(pid, epoch, 10 * k)) == (0, 10 * k)

    broker.kill()
    broker.restart()

    with RawClient(broker.host, broker.port) as c:
        assert c.produce(topic, 0, batch(pid, epoch, 40)) == (0, 40), (
            "a retried batch must get its first offset"
        )
        err, hw, _ = c.fetch(topic, 0, 0, max_bytes=1)
        assert (err, hw) == (0, 50), "the duplicate must not be appended"
        assert c.produce(topic, 0, batch(pid, epoch, 50)) == (0, 50)
        err, hw, records = c.fetch(topic, 0, 0)
        assert (err, hw) == (0, 60)
        assert [r.value for r in records] == [f"s{i}".encode() for i in range(60)]
