"""SamsaBroker: a real Samsa broker inside the test process, for application test suites.

    with SamsaBroker() as kafka:
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
        kafka.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=3, topic="orders")

In-process, not a child process: the broker runs on its own thread with its own event loop.
Why: (1) startup. A child interpreter pays Python's start and the broker's imports (~0.6 s
here) on every broker and every restart; in-process that is paid once per test session and a
broker is ready in tens of milliseconds (bench/embedded.py). (2) The fault hook is a plain
object (:class:`broker.testing.faults.FaultPlan`) handed to the broker, so a rule is live the
moment ``inject`` returns and recorded requests are Python objects: a child process would need
a control channel with its own protocol and races. What in-process costs: the broker shares
the GIL with the test (its clients mostly wait on sockets, so this is small), and ``kill``
cannot be a real SIGKILL: it is emulated (below). ``brokers=3`` runs real cluster processes
(one per broker, and a ZooKeeper) because cluster brokers and their ZooKeeper sessions are
built to be one per process: there kill, pause and restart are real signals to a broker's
process and injected faults reach each broker through a control channel
(:mod:`broker.testing.cluster`, :mod:`broker.testing.child`); pass ``broker=<id>``.

``kill()`` is what SIGKILL leaves behind: listening sockets and connections are dropped, no
log is flushed or closed cleanly, no producer snapshot, checkpoint or clean-shutdown marker is
written, no coordinator or group state is saved; the next ``restart()`` runs log recovery as
after a crash. (Data written with write(2) is in the page cache, as it would be after a real
SIGKILL.) ``pause()`` stops the broker's event loop where it stands (as SIGSTOP would):
connections stay open, requests wait in socket buffers, no timer fires; ``resume()`` goes on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from log.log import Log

from ..config.properties import BrokerConfig
from ..console import ConsoleSidecar
from ..hooks import Fault, HookedRequest
from ..server import Broker
from .cluster import ClusterRule, EmbeddedCluster
from .faults import FaultPlan, RecordedRequest, Rule, api_key, error_code
from .helpers import KafkaHelpers

try:
    import uvloop

    _new_loop: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
except ImportError:  # optional: the broker's loop is faster with it, correct without
    _new_loop = asyncio.new_event_loop

if TYPE_CHECKING:
    from .certs import TlsMaterial

log = logging.getLogger("samsa.testing")

# Properties every embedded broker gets unless given: tests want no rebalance delay, one
# replica for the internal topics and few of their partitions (each partition is files and work).
DEFAULTS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.min.isr": "1",
    "log.level": "WARNING",
}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class SamsaBroker(KafkaHelpers):
    """One Samsa broker on a free port with its data in a temporary folder.

    ``properties`` are broker properties with Kafka's names (``num.partitions``,
    ``auto.create.topics.enable``, ...). ``tls=True`` adds an SSL listener with generated
    certificates (``kafka.tls``: the CA file and client certificates); ``sasl_users`` adds a
    SASL_PLAINTEXT listener (PLAIN and SCRAM-SHA-256/512) with those users. ``brokers=3``
    starts a ZooKeeper-coordinated cluster of child processes (see :mod:`broker.testing.cluster`).
    ``schema_registry=True`` serves the built-in Schema Registry (Confluent's REST API) on a free
    port: ``kafka.schema_registry_url`` is what ``SchemaRegistryClient({"url": ...})`` takes.
    """

    def __init__(self, properties: Mapping[str, object] | None = None, *, brokers: int = 1,
                 tls: bool = False, sasl_users: Mapping[str, str] | None = None,
                 data_dir: str | os.PathLike[str] | None = None, host: str = "127.0.0.1",
                 record_requests: bool = True, schema_registry: bool = False) -> None:
        self.properties = {**DEFAULTS, **{k: _prop(v) for k, v in (properties or {}).items()}}
        self.brokers = brokers
        self.host = host
        self.tls_enabled = tls
        self.sasl_users = dict(sasl_users or {})
        self.schema_registry = schema_registry
        self.faults = FaultPlan(record=record_requests)
        self._given_dir = Path(data_dir) if data_dir is not None else None
        self.data_dir: Path | None = None
        self.ports: dict[str, int] = {}
        self.tls: TlsMaterial | None = None  # with tls=True
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._broker: Broker | None = None
        self._stop: asyncio.Event | None = None
        self._paused: threading.Event | None = None
        self._cluster: EmbeddedCluster | None = None
        self._admin = None
        self.startup_seconds = 0.0

    # --- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> SamsaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return (self._thread is not None and self._thread.is_alive()) or self._cluster is not None

    @property
    def bootstrap_servers(self) -> str:
        """host:port of the PLAINTEXT listener (of every broker, comma separated, for a cluster)."""
        if self._cluster is not None:
            return self._cluster.bootstrap_servers
        return f"{self.host}:{self.ports['PLAINTEXT']}"

    @property
    def schema_registry_url(self) -> str:
        """http://host:port of the Schema Registry (``schema_registry=True``)."""
        if "SCHEMA_REGISTRY" not in self.ports:
            raise RuntimeError("this broker serves no Schema Registry: start it with SamsaBroker(schema_registry=True)")
        return f"http://{self.host}:{self.ports['SCHEMA_REGISTRY']}"

    def bootstrap(self, listener: str = "PLAINTEXT") -> str:
        """host:port of a listener: PLAINTEXT, SSL, SASL_PLAINTEXT."""
        return f"{self.host}:{self.ports[listener]}"

    def start(self) -> SamsaBroker:
        if self.running:
            return self
        if self.data_dir is None:
            self.data_dir = self._given_dir or Path(tempfile.mkdtemp(prefix="samsa-"))
        if self.brokers != 1 and self.schema_registry:
            raise ValueError("schema_registry=True serves the registry of one embedded broker; for brokers=3 pass "
                             "'schema.registry.listeners' in properties and read it from each broker")
        if self.brokers != 1:
            self._cluster = EmbeddedCluster(self.brokers, self.data_dir, self.properties, self.host)
            try:
                self._cluster.start()
            except BaseException:
                self._cluster = None
                self._cleanup()
                raise
            return self
        if not self.ports:
            self.ports["PLAINTEXT"] = free_port(self.host)
            if self.tls_enabled:
                self.ports["SSL"] = free_port(self.host)
            if self.sasl_users:
                self.ports["SASL_PLAINTEXT"] = free_port(self.host)
            if self.schema_registry:
                self.ports["SCHEMA_REGISTRY"] = free_port(self.host)
        t0 = time.perf_counter()
        try:
            self._start_thread()
        except BaseException:
            self._cleanup()
            raise
        self.startup_seconds = time.perf_counter() - t0
        for user, password in self.sasl_users.items():  # SCRAM credentials live in the broker: add them
            self.admin.add_scram_user(user, password)
        return self

    def _config(self) -> BrokerConfig:
        assert self.data_dir is not None
        listeners = [f"PLAINTEXT://{self.host}:{self.ports['PLAINTEXT']}"]
        props: dict[str, str] = {"log.dirs": str(self.data_dir / "logs")}
        if self.tls_enabled:
            # cryptography's x509 and key generation: ~40 ms of import a PLAINTEXT broker does not pay
            from .certs import broker_tls_properties  # noqa: PLC0415

            self.tls = self.tls or broker_tls_properties(self.data_dir / "tls", self.host)
            listeners.append(f"SSL://{self.host}:{self.ports['SSL']}")
            props.update(self.tls.broker_properties)
        if self.sasl_users:
            listeners.append(f"SASL_PLAINTEXT://{self.host}:{self.ports['SASL_PLAINTEXT']}")
            props["sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
            jaas = " ".join(f'user_{u}="{p}"' for u, p in self.sasl_users.items())
            props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = \
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {jaas};"
        props["listeners"] = ",".join(listeners)
        if self.schema_registry:
            props["schema.registry.listeners"] = self.schema_registry_url
        return BrokerConfig.load(None, {**props, **self.properties})

    def _start_thread(self) -> None:
        config = self._config()
        # console.listener in the properties: the console runs beside it, as under `samsa`
        sidecars = [ConsoleSidecar(config)] if str(config.get("console.listener") or "").strip() else []
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._paused = None

        def run() -> None:
            loop = _new_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self._stop = asyncio.Event()
                broker = Broker(config, request_hook=self.faults, sidecars=sidecars)
                self._broker = broker
                loop.run_until_complete(broker.start())
            except BaseException as e:
                ready.set_exception(e)
                _close_loop(loop)
                return
            ready.set_result(None)
            try:
                loop.run_until_complete(self._stop.wait())
            finally:
                _close_loop(loop)

        self._thread = threading.Thread(target=run, name=f"samsa-broker-{self.ports['PLAINTEXT']}", daemon=True)
        self._thread.start()
        try:
            ready.result(timeout=60)
        except BaseException:
            self._thread.join(10)
            self._thread = None
            raise

    def _call(self, fn: Callable[[], Awaitable[None] | None], timeout: float = 60) -> None:
        """Run ``fn`` (a coroutine factory or a plain function) on the broker's loop."""
        loop = self._loop
        assert loop is not None, "the broker is not running"

        async def run() -> None:
            out = fn()
            if out is not None:
                await out

        asyncio.run_coroutine_threadsafe(run(), loop).result(timeout)

    def _shutdown_thread(self, clean: bool) -> None:
        if self._thread is None:
            return
        self.resume()
        broker, loop = self._broker, self._loop
        assert broker is not None
        if clean:
            try:
                self._call(broker.stop)
            except Exception:
                log.exception("error stopping the embedded broker")
        else:
            try:
                self._call(lambda: _crash(broker))
            except Exception:
                log.exception("error killing the embedded broker")
        assert loop is not None and self._stop is not None
        loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        self._thread = self._loop = self._broker = self._stop = None

    def stop(self) -> None:
        """Stop cleanly and remove the data folder (unless it was given)."""
        self._close_admin()
        if self._cluster is not None:
            self._cluster.stop()
            self._cluster = None
        self._shutdown_thread(clean=True)
        self._cleanup()

    def _cleanup(self) -> None:
        if self.data_dir is not None and self._given_dir is None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        self.data_dir = None
        self.ports = {}

    def _require_single(self, what: str, broker: int | None) -> None:
        if broker not in (None, 0):
            raise ValueError(f"{what}(broker={broker}): this is a single broker (brokers=1), broker 0")
        if self._thread is None:
            raise RuntimeError(f"{what}: the broker is not running")

    def _member(self, what: str, broker: int | None) -> tuple[EmbeddedCluster, int]:
        assert self._cluster is not None
        if broker is None:
            raise ValueError(f"{what}: which broker? pass broker=<id> (this cluster has brokers "
                             f"{sorted(self._cluster.brokers)}; leader(topic, partition) names a partition's leader)")
        return self._cluster, broker

    def restart(self, broker: int | None = None) -> SamsaBroker:
        """Stop cleanly (if running) and start again on the same port with the same data.
        ``brokers=N``: restart broker ``broker`` (SIGTERM unless it is dead, then a new process)."""
        if self._cluster is not None:
            cluster, bid = self._member("restart", broker)
            self._close_admin()
            cluster.restart(bid)
            return self
        if self.data_dir is None:  # never started (or stopped, its folder removed): a plain start
            return self.start()
        self._close_admin()
        self._shutdown_thread(clean=True)
        self._start_thread()
        return self

    def kill(self, broker: int | None = None) -> None:
        """Stop as SIGKILL would: no flush, no snapshots or checkpoints, no clean-shutdown marker.
        ``restart()`` brings it back with the same data (after log recovery). ``brokers=N``: a
        real SIGKILL to broker ``broker``'s process."""
        if self._cluster is not None:
            cluster, bid = self._member("kill", broker)
            cluster.kill(bid)
            return
        self._require_single("kill", broker)
        self._close_admin()
        self._shutdown_thread(clean=False)

    def pause(self, broker: int | None = None) -> None:
        """Freeze the broker (as SIGSTOP would): its loop stops where it is until ``resume()``.
        ``brokers=N``: a real SIGSTOP to broker ``broker``'s process."""
        if self._cluster is not None:
            cluster, bid = self._member("pause", broker)
            cluster.pause(bid)
            return
        self._require_single("pause", broker)
        if self._paused is not None:
            return
        paused = threading.Event()
        frozen = threading.Event()
        self._paused = paused

        def freeze() -> None:
            frozen.set()
            paused.wait()

        assert self._loop is not None
        self._loop.call_soon_threadsafe(freeze)
        frozen.wait(30)

    def resume(self, broker: int | None = None) -> None:
        """Let a paused broker go on (``brokers=N``: SIGCONT to broker ``broker``)."""
        if self._cluster is not None:
            cluster, bid = self._member("resume", broker)
            cluster.resume(bid)
            return
        if self._paused is not None:
            self._paused.set()
            self._paused = None

    # --- faults ------------------------------------------------------------------------------
    # ``broker``: with brokers=N, the broker whose requests the rule matches (None: every broker;
    # the rule's ``times`` then counts on each). ``match`` (a Python callable) cannot cross into
    # a broker process: with brokers=N use api and topic.
    def _add(self, fault: Fault, api: str | int | None, topic: str | None, times: int | None,
             match: Callable[[HookedRequest], bool] | None, broker: int | None) -> Rule | ClusterRule:
        if self._cluster is not None:
            if match is not None:
                raise ValueError("match= runs in the test process; with brokers=N select requests by api and topic")
            if times is not None and times < 1:
                raise ValueError("times must be >= 1 (or None: until removed)")
            return self._cluster.inject(fault, None if api is None else api_key(api), topic, times, broker)
        if broker not in (None, 0):
            raise ValueError(f"broker={broker}: this is a single broker (brokers=1), broker 0")
        return self.faults.add(fault, api, topic, times, match)

    def inject(self, api: str | int | None = None, error: str | int = "UNKNOWN_SERVER_ERROR", *,
               times: int | None = 1, topic: str | None = None, delay_ms: float = 0,
               match: Callable[[HookedRequest], bool] | None = None, broker: int | None = None) -> Rule | ClusterRule:
        """Answer matching requests with ``error`` (wherever the response has an error code:
        every topic and partition of the request, and the request-level code); the broker does
        not act on them. ``times=None`` until ``rule.remove()`` or :meth:`clear_faults`."""
        return self._add(Fault(error=error_code(error), delay_ms=delay_ms), api, topic, times, match, broker)

    def delay(self, api: str | int | None = None, ms: float = 100, *, times: int | None = 1,
              topic: str | None = None, match: Callable[[HookedRequest], bool] | None = None,
              broker: int | None = None) -> Rule | ClusterRule:
        """Serve matching requests ``ms`` late (the connection serves nothing else meanwhile)."""
        return self._add(Fault(delay_ms=ms), api, topic, times, match, broker)

    def drop_response(self, api: str | int | None = None, *, times: int | None = 1, topic: str | None = None,
                      process: bool = True, match: Callable[[HookedRequest], bool] | None = None,
                      broker: int | None = None) -> Rule | ClusterRule:
        """Send no response. ``process=True``: the request takes effect (records are appended,
        offsets committed) and only its answer is lost, as when a response is lost in the network."""
        return self._add(Fault(drop_response=True, process=process), api, topic, times, match, broker)

    def close_connection(self, api: str | int | None = None, *, times: int | None = 1, topic: str | None = None,
                         process: bool = False, match: Callable[[HookedRequest], bool] | None = None,
                         broker: int | None = None) -> Rule | ClusterRule:
        """Close the client's connection when a matching request arrives (``process=True``: after
        the broker has acted on it, before answering)."""
        return self._add(Fault(close_connection=True, process=process), api, topic, times, match, broker)

    def clear_faults(self) -> None:
        if self._cluster is not None:
            self._cluster.clear_faults()
        self.faults.clear()

    def requests(self, api: str | int | None = None, topic: str | None = None,
                 broker: int | None = None) -> list[RecordedRequest]:
        """Requests received (oldest first), optionally of one API and naming one topic
        (``brokers=N``: of every broker, or of broker ``broker``; each says its ``broker_id``)."""
        if self._cluster is not None:
            return self._cluster.requests(None if api is None else api_key(api), topic, broker)
        return self.faults.requests(api, topic)

    def clear_requests(self) -> None:
        if self._cluster is not None:
            self._cluster.clear_requests()
        self.faults.clear_requests()

    # --- helpers over the Kafka protocol -----------------------------------------------------
    def leader(self, topic: str, partition: int = 0) -> int:
        """The broker id leading a partition now (-1: none), from Metadata."""
        return self.admin.leader(topic, partition)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        where = self.bootstrap_servers if self.running else "-"
        return f"<SamsaBroker {where} {state} data_dir={self.data_dir}>"


def _prop(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    try:
        tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()
        asyncio.set_event_loop(None)


def _crash(broker: Broker) -> None:
    """What SIGKILL leaves: sockets gone, files closed by the kernel without a flush or marker."""
    for a in broker.acceptors:
        a.close()
    for conn in list(broker.connections):
        if conn.transport is not None:
            conn.transport.abort()
    for log_ in _logs(broker):
        for seg in list(log_.segments):
            try:
                seg.close()  # os.close of the descriptors only: no flush, index or snapshot
            except OSError:
                pass
    zk = broker.metadata_support.zookeeper  # (in-process brokers are single brokers: None)
    if zk is not None:
        zk.close()


def _logs(broker: Broker) -> Iterator[Log]:
    yield from list(broker.replica_manager.log_manager.logs.values())
