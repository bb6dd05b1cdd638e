"""A consume-transform-produce application, run as a subprocess by the exactly-once tests.

``python tests/txn/ctp_app.py CLIENT BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID IDLE_EXIT_S``

Reads INPUT as member of GROUP (read_committed, no auto commit), and for every poll writes
``out:<value>`` to OUTPUT (same partition) and the consumer's positions with
``send_offsets_to_transaction``, all in one transaction, then commits. Prints
``committed <n>`` after each commit so the test knows when to SIGKILL it. Exits after
IDLE_EXIT_S seconds without input. CLIENT is ``confluent`` or ``kafka-python``.
"""

from __future__ import annotations

import sys
import time


def run_confluent(bootstrap: str, inp: str, out: str, group: str, tid: str, idle_exit: float) -> None:
    from confluent_kafka import Consumer, Producer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 1000})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    c.subscribe([inp])
    n = 0
    last = time.monotonic()
    while time.monotonic() - last < idle_exit:
        msgs = [m for m in c.consume(20, 0.5) if not m.error()]
        if not msgs:
            continue
        last = time.monotonic()
        p.begin_transaction()
        for m in msgs:
            p.produce(out, value=b"out:" + (m.value() or b""), key=m.key(), partition=m.partition() or 0)
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        n += len(msgs)
        print(f"committed {n}", flush=True)
    c.close()


def run_kafka_python(bootstrap: str, inp: str, out: str, group: str, tid: str, idle_exit: float) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(inp, bootstrap_servers=bootstrap, group_id=group, isolation_level="read_committed",
                      enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=6000,
                      heartbeat_interval_ms=1000, max_poll_records=20)
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=5)
    p.init_transactions()
    n = 0
    last = time.monotonic()
    while time.monotonic() - last < idle_exit:
        batches = c.poll(timeout_ms=500)
        msgs = [m for ms in batches.values() for m in ms]
        if not msgs:
            continue
        last = time.monotonic()
        p.begin_transaction()
        for m in msgs:
            p.send(out, value=b"out:" + m.value, key=m.key, partition=m.partition)
        offsets = {tp: OffsetAndMetadata(c.position(tp), "", -1) for tp in c.assignment()}
        p.send_offsets_to_transaction(offsets, c.group_metadata())
        p.commit_transaction()
        n += len(msgs)
        print(f"committed {n}", flush=True)
    c.close()


if __name__ == "__main__":
    client, bootstrap, inp, out, group, tid, idle = sys.argv[1:8]
    fn = run_confluent if client == "confluent" else run_kafka_python
    fn(bootstrap, inp, out, group, tid, float(idle))
