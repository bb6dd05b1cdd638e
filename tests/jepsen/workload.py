"""The clients: Jepsen's Kafka queue workload, driven by stock confluent-kafka (librdkafka) clients.

Theory of operation: every client is a thread in this (root-namespace) process, talking to the
brokers through the bridge. Each value written is a unique integer (one counter for the run),
so a read names exactly which write it saw. A client does one operation at a time and logs it
to the :class:`~tests.jepsen.history.History` as an invocation and a completion:

* :class:`Sender`: an idempotent, ``acks=all`` producer (``acks=1``, not idempotent, on request) writing its own partition, one value per
  ``send`` (produce + flush: the delivery report is the completion). A delivery error is ``info``
  (the write may or may not have happened); a fatal producer error makes it a new process.
* :class:`Transactor`: a transactional producer writing 2-3 partitions per ``txn``, committing most
  and aborting some on purpose (so aborted reads are possible to see).
* :class:`Reader`: a consumer by ``assign`` (all partitions, from the start), read_uncommitted or
  read_committed, logging each non-empty ``poll``.
* :class:`GroupReader`: a consumer by ``subscribe`` in a group (classic or KIP-848
  ``group.protocol=consumer``), logging its rebalance callbacks, each ``poll``, a synchronous
  ``commit`` of its position after each poll, and a ``committed`` offset fetch after each
  assignment.

After the run, :func:`final_read` reads every partition from 0 to its end (both isolation levels)
with a fresh consumer, so the checker can tell lost writes from writes nobody read yet.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .history import History

TOPIC = "jepsen"

quiet = logging.getLogger("samsa.jepsen.clients")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False

COMMON: dict[str, Any] = {"logger": quiet, "socket.timeout.ms": 10000, "socket.connection.setup.timeout.ms": 5000,
                          "reconnect.backoff.max.ms": 1000, "topic.metadata.refresh.interval.ms": 2000}


def create_topic(bootstrap: str, partitions: int, timeout: float = 60.0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **COMMON})
    fut = admin.create_topics([NewTopic(TOPIC, partitions, 3, config={"min.insync.replicas": "2",
                                                                      "unclean.leader.election.enable": "false"})])
    fut[TOPIC].result(timeout)


class Client(threading.Thread):
    """A client thread; ``process`` names it in the history and changes when the client is rebuilt."""

    kind = "client"
    _procs = itertools.count()

    def __init__(self, hist: History, bootstrap: str, stop: threading.Event, values: itertools.count,
                 seed: int) -> None:
        super().__init__(daemon=True, name=self.kind)
        self.hist, self.bootstrap, self.stop_event, self.values = hist, bootstrap, stop, values
        self.rng = random.Random(seed)
        self.process = self.new_process()
        self.errors = 0

    def new_process(self) -> str:
        self.process = f"{self.kind}-{next(Client._procs)}"
        return self.process

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.session()
            except Exception as e:  # noqa: BLE001 - a client crash is an event of the run, not the end of it
                self.errors += 1
                self.hist.add("info", self.process, "crash", repr(e)[:300])
                self.new_process()
                time.sleep(0.5)

    def session(self) -> None:
        raise NotImplementedError


class Sender(Client):
    kind = "send"

    def __init__(self, *args: Any, partition: int, acks: str = "all", **kw: Any) -> None:
        self.partition, self.acks = partition, acks
        super().__init__(*args, **kw)

    def session(self) -> None:
        # idempotence needs acks=all; an acks=1 run (what Kafka's contract allows to lose) goes without
        producer = Producer({"bootstrap.servers": self.bootstrap, **COMMON, "enable.idempotence": self.acks == "all",
                             "acks": self.acks, "linger.ms": 0, "message.timeout.ms": 10000,
                             "request.timeout.ms": 5000})
        try:
            while not self.stop_event.is_set():
                v = next(self.values)
                inv = self.hist.invoke(self.process, "send", {"partition": self.partition, "value": v})
                result: list[Any] = []
                producer.produce(TOPIC, value=str(v).encode(), partition=self.partition,
                                 on_delivery=lambda err, msg, result=result: result.append((err, msg)))
                producer.flush(15.0)
                if not result:
                    self.hist.complete("info", inv, {"partition": self.partition, "value": v, "error": "no report"})
                    raise RuntimeError("no delivery report in 15 s")
                err, msg = result[0]
                if err is None:
                    self.hist.complete("ok", inv, {"partition": self.partition, "value": v, "offset": msg.offset()})
                else:
                    self.hist.complete("info", inv, {"partition": self.partition, "value": v, "error": str(err)})
                    if err.fatal():
                        raise KafkaException(err)
                    time.sleep(0.1)
        finally:
            producer.flush(1.0)


class Transactor(Client):
    kind = "txn"

    def __init__(self, *args: Any, partitions: int, txn_id: str, abort_ratio: float = 0.2, **kw: Any) -> None:
        self.partitions, self.txn_id, self.abort_ratio = partitions, txn_id, abort_ratio
        super().__init__(*args, **kw)

    def session(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, **COMMON, "transactional.id": self.txn_id,
                             "linger.ms": 0, "message.timeout.ms": 10000, "request.timeout.ms": 5000,
                             "transaction.timeout.ms": 20000})
        producer.init_transactions(30.0)
        while not self.stop_event.is_set():
            n = self.rng.choice((2, 3)) if self.partitions >= 3 else min(2, self.partitions)
            parts = self.rng.sample(range(self.partitions), n)
            writes = [[p, next(self.values)] for p in parts]
            commit = self.rng.random() >= self.abort_ratio
            inv = self.hist.invoke(self.process, "txn", {"writes": writes, "commit": commit})
            offsets: dict[int, int] = {}
            try:
                producer.begin_transaction()
                for p, v in writes:
                    producer.produce(TOPIC, value=str(v).encode(), partition=p,
                                     on_delivery=lambda err, msg, v=v, offsets=offsets: offsets.__setitem__(
                                         v, msg.offset() if err is None else -1))
                producer.flush(15.0)
                end = producer.commit_transaction if commit else producer.abort_transaction
                for attempt in range(3):
                    try:
                        end(15.0)
                        break
                    except KafkaException as e:   # a retriable error: the same call may be repeated
                        if attempt == 2 or not (isinstance(e.args[0], KafkaError) and e.args[0].retriable()):
                            raise
            except KafkaException as e:
                err = e.args[0]
                if isinstance(err, KafkaError) and err.txn_requires_abort():
                    try:
                        producer.abort_transaction(15.0)
                        self.hist.complete("fail", inv, {"writes": writes, "commit": commit, "error": str(err)})
                        continue
                    except KafkaException:
                        pass
                self.hist.complete("info", inv, {"writes": writes, "commit": commit, "error": str(err)})
                raise   # unknown producer state: a new producer (same transactional.id fences the old one)
            done = [[p, v, offsets.get(v, -1)] for p, v in writes]
            if any(o is None or o < 0 for _, _, o in done):
                self.hist.complete("info", inv, {"writes": writes, "commit": commit, "error": "no offsets"})
            else:
                self.hist.complete("ok", inv, {"writes": done, "commit": commit})


def _records(msgs: list[Any]) -> list[list[int]]:
    out = []
    for m in msgs:
        if m.error() is None and m.value() is not None:
            out.append([m.partition(), m.offset(), int(m.value())])
    return out


class Reader(Client):
    kind = "read"

    def __init__(self, *args: Any, partitions: int, isolation: str, **kw: Any) -> None:
        self.partitions, self.isolation = partitions, isolation
        super().__init__(*args, **kw)

    def session(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, **COMMON, "group.id": f"jepsen-assign-{self.process}",
                      "enable.auto.commit": False, "isolation.level": self.isolation,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
        try:
            c.assign([TopicPartition(TOPIC, p, 0) for p in range(self.partitions)])
            self.hist.add("info", self.process, "assign", {"group": None, "partitions": list(range(self.partitions))})
            while not self.stop_event.is_set():
                inv = self.hist.invoke(self.process, "poll", {"isolation": self.isolation, "group": None})
                msgs = c.consume(500, 1.0)
                self.hist.complete("ok", inv, {"isolation": self.isolation, "group": None, "records": _records(msgs)})
        finally:
            c.close()


class GroupReader(Client):
    kind = "group"

    def __init__(self, *args: Any, group: str, protocol: str, isolation: str, **kw: Any) -> None:
        self.group, self.protocol, self.isolation = group, protocol, isolation
        super().__init__(*args, **kw)

    def session(self) -> None:
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, **COMMON, "group.id": self.group,
                                "enable.auto.commit": False, "isolation.level": self.isolation,
                                "auto.offset.reset": "earliest", "group.protocol": self.protocol}
        if self.protocol == "classic":
            conf.update({"session.timeout.ms": 8000, "heartbeat.interval.ms": 1000})
        c = Consumer(conf)
        owned: set[int] = set()
        fresh: list[int] = []

        def on_assign(consumer: Any, parts: list[TopicPartition]) -> None:
            ps = [tp.partition for tp in parts]
            owned.update(ps)
            fresh.extend(ps)
            self.hist.add("info", self.process, "assign", {"group": self.group, "partitions": ps})

        def on_revoke(consumer: Any, parts: list[TopicPartition]) -> None:
            ps = [tp.partition for tp in parts]
            owned.difference_update(ps)
            self.hist.add("info", self.process, "revoke", {"group": self.group, "partitions": ps})

        def on_lost(consumer: Any, parts: list[TopicPartition]) -> None:
            ps = [tp.partition for tp in parts]
            owned.difference_update(ps)
            self.hist.add("info", self.process, "lost", {"group": self.group, "partitions": ps})

        # confluent-kafka (un)assigns after these callbacks itself (incrementally under KIP-848)
        c.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        try:
            while not self.stop_event.is_set():
                inv = self.hist.invoke(self.process, "poll", {"isolation": self.isolation, "group": self.group})
                msgs = c.consume(200, 1.0)
                recs = _records(msgs)
                self.hist.complete("ok", inv, {"isolation": self.isolation, "group": self.group, "records": recs})
                if fresh:
                    parts = sorted(set(fresh))
                    fresh.clear()
                    self._committed(c, parts)
                if recs:
                    self._commit(c, recs, owned)
        finally:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass

    def _committed(self, c: Any, parts: list[int]) -> None:
        inv = self.hist.invoke(self.process, "committed", {"group": self.group, "partitions": parts})
        try:
            tps = c.committed([TopicPartition(TOPIC, p) for p in parts], timeout=5.0)
        except KafkaException as e:
            self.hist.complete("info", inv, {"group": self.group, "error": str(e.args[0])})
            return
        self.hist.complete("ok", inv, {"group": self.group, "offsets": [[tp.partition, tp.offset] for tp in tps
                                                                         if tp.offset >= 0]})

    def _commit(self, c: Any, recs: list[list[int]], owned: set[int]) -> None:
        nxt: dict[int, int] = {}
        for p, o, _v in recs:
            if p in owned:
                nxt[p] = max(nxt.get(p, 0), o + 1)
        if not nxt:
            return
        offsets = [[p, o] for p, o in sorted(nxt.items())]
        inv = self.hist.invoke(self.process, "commit", {"group": self.group, "offsets": offsets})
        try:
            res = c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets], asynchronous=False)
        except KafkaException as e:
            err = e.args[0]
            definite = isinstance(err, KafkaError) and err.code() in (
                KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS,
                KafkaError.FENCED_INSTANCE_ID, KafkaError.STALE_MEMBER_EPOCH, KafkaError._ASSIGNMENT_LOST)
            self.hist.complete("fail" if definite else "info", inv,
                               {"group": self.group, "offsets": offsets, "error": str(err)})
            return
        bad = [tp for tp in (res or []) if tp.error is not None]
        if bad:
            self.hist.complete("info", inv, {"group": self.group, "offsets": offsets,
                                             "error": "; ".join(str(tp.error) for tp in bad)})
        else:
            self.hist.complete("ok", inv, {"group": self.group, "offsets": offsets})


def final_read(hist: History, bootstrap: str, partitions: int, isolation: str, timeout: float = 60.0) -> bool:
    """Read every partition from offset 0 to its end; log it as one poll. True when every end was reached."""
    c = Consumer({"bootstrap.servers": bootstrap, **COMMON, "group.id": f"jepsen-final-{isolation}",
                  "enable.auto.commit": False, "isolation.level": isolation, "auto.offset.reset": "earliest"})
    proc = f"final-{isolation}"
    inv = hist.invoke(proc, "poll", {"isolation": isolation, "group": None, "final": True})
    recs: list[list[int]] = []
    reached = False
    try:
        ends = {}
        for p in range(partitions):
            lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10.0)
            ends[p] = hi
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        pos = {p: -1 for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msgs = c.consume(1000, 1.0)
            recs.extend(_records(msgs))
            for m in msgs:
                if m.error() is None:
                    pos[m.partition()] = max(pos[m.partition()], m.offset())
            # position() passes transaction markers and aborted records too
            cur = {tp.partition: tp.offset for tp in c.position([TopicPartition(TOPIC, p) for p in range(partitions)])}
            if all(cur.get(p, -1) >= ends[p] or (ends[p] == 0) for p in range(partitions)):
                reached = True
                break
    finally:
        c.close()
        hist.complete("ok", inv, {"isolation": isolation, "group": None, "final": True, "records": recs,
                                  "reached_end": reached})
    return reached
