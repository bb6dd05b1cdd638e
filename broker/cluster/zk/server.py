"""A local Apache ZooKeeper server process: for ``samsa cluster up``, the tests and benchmarks.

Samsa's cluster mode is coordinated by a real ZooKeeper, as Kafka's ZooKeeper mode was. This
module does not implement ZooKeeper; it finds Apache ZooKeeper's jars, writes a standalone
``zoo.cfg`` into a data folder and runs ``java ... QuorumPeerMain zoo.cfg`` bound to 127.0.0.1.

Theory of operation:

* **Finding the jars.** ``ZOOKEEPER_HOME`` (an Apache release: ``$ZOOKEEPER_HOME/lib/*.jar``
  plus ``zookeeper-*.jar`` at its top) wins; otherwise the Debian package's place
  (``/usr/share/java/zookeeper.jar``, from ``apt-get install zookeeper``). Debian's jar names
  its dependencies (netty, jute, slf4j-api, metrics, commons-*) in its manifest's
  ``Class-Path``; we still list the ones the server needs explicitly so a missing one is
  reported by name, and add ``slf4j-simple`` as the logging binding so the server logs to
  stderr (our log file) without a log4j configuration. Missing jars raise
  :class:`ZooKeeperNotFound`, whose message says in one line how to install them.
* **Configuration.** Standalone mode, ``clientPortAddress=127.0.0.1``, the AdminServer (an
  embedded Jetty on port 8080) disabled, the four-letter words ``ruok``, ``srvr``, ``stat``,
  ``mntr`` allowed. ``minSessionTimeout``/``maxSessionTimeout`` are set explicitly so a
  broker's ``zookeeper.session.timeout.ms`` is honoured instead of being clamped to
  2-20 ticks.
* **Readiness.** ``srvr`` answers ``Zookeeper version: ...`` only once the server serves
  requests (``ruok`` says ``imok`` earlier, while it may still be loading), so that is what
  :meth:`ZooKeeperServer.wait_serving` polls, with a deadline, failing fast (with the log
  tail) when the JVM exits.
* **Lifecycle.** ``stop()`` is SIGTERM and a wait (ZooKeeper's shutdown hook closes the
  sessions); ``kill()`` is SIGKILL, what a crashed machine looks like; ``pause()``/``resume()``
  are SIGSTOP/SIGCONT for "ZooKeeper unreachable for a while"; ``restart()`` reuses the port
  and the data folder, so znodes survive like a real restart.

Invariants: the server listens on loopback only; one ``ZooKeeperServer`` owns at most one
process at a time; nothing here imports kazoo or broker code, so tools and tests can use it
without a broker.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

INSTALL_HINT = ("Apache ZooKeeper not found: install it with `apt-get install zookeeper` "
                "(Debian/Ubuntu, needs a JDK) or set ZOOKEEPER_HOME to an Apache ZooKeeper release")

DEBIAN_JAVA_DIR = Path("/usr/share/java")

# The jars the standalone server needs, as the Debian package names them (each is a symlink to the
# versioned file). zookeeper.jar's manifest pulls the same ones; naming them lets us say which is missing.
DEBIAN_SERVER_JARS = (
    "zookeeper.jar", "zookeeper-jute.jar",
    "netty-buffer.jar", "netty-codec.jar", "netty-common.jar", "netty-handler.jar", "netty-resolver.jar",
    "netty-transport.jar", "netty-transport-native-unix-common.jar", "netty-transport-native-epoll.jar",
    "slf4j-api.jar", "metrics-core.jar", "commons-cli.jar", "commons-io.jar", "snappy-java.jar",
)
# The slf4j binding: log to stderr, level set by -Dorg.slf4j.simpleLogger.defaultLogLevel.
DEBIAN_LOG_BINDING = "slf4j-simple.jar"

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
DEFAULT_JVM_OPTS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                    "-Djava.net.preferIPv4Stack=true")


class ZooKeeperNotFound(RuntimeError):
    """ZooKeeper's jars (or java) are not installed; ``str()`` is a one-line how-to."""


class ZooKeeperStartError(RuntimeError):
    """The ZooKeeper process exited or did not serve in time; carries its log tail."""


def find_java() -> str:
    """``$JAVA_HOME/bin/java`` or the ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if not java:
        raise ZooKeeperNotFound("java not found: install a JDK (`apt-get install openjdk-17-jdk-headless`) "
                                "and ZooKeeper (`apt-get install zookeeper`)")
    return java


def find_classpath(zookeeper_home: str | os.PathLike[str] | None = None,
                   java_dir: Path = DEBIAN_JAVA_DIR) -> list[str]:
    """The server's classpath: ``ZOOKEEPER_HOME``'s jars, else the Debian package's.

    Raises :class:`ZooKeeperNotFound` (message: how to install) when they are missing.
    """
    home = zookeeper_home if zookeeper_home is not None else os.environ.get("ZOOKEEPER_HOME")
    if home:
        root = Path(home)
        jars = sorted(str(p) for p in root.glob("zookeeper-*.jar")) + sorted(
            str(p) for p in (root / "lib").glob("*.jar"))
        if not any("zookeeper" in Path(j).name for j in jars):
            raise ZooKeeperNotFound(f"ZOOKEEPER_HOME={home} holds no zookeeper jar; " + INSTALL_HINT)
        conf = root / "conf"
        return ([str(conf)] if conf.is_dir() else []) + jars
    missing = [j for j in DEBIAN_SERVER_JARS if not (java_dir / j).exists()]
    if missing:
        if "zookeeper.jar" in missing:
            raise ZooKeeperNotFound(INSTALL_HINT)
        raise ZooKeeperNotFound(f"ZooKeeper's dependency jars {', '.join(missing)} are missing from "
                                f"{java_dir}: reinstall with `apt-get install --reinstall zookeeper`")
    jars = [str(java_dir / j) for j in DEBIAN_SERVER_JARS]
    if (java_dir / DEBIAN_LOG_BINDING).exists():
        jars.append(str(java_dir / DEBIAN_LOG_BINDING))
    return jars


def zookeeper_available() -> str | None:
    """None when a server can be started here, else the reason (one line) why not."""
    try:
        find_java()
        find_classpath()
    except ZooKeeperNotFound as e:
        return str(e)
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """An unused TCP port on host (bind port 0; the usual small race applies)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``srvr``, ``mntr`` ...) and return the answer."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def is_serving(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when the server at host:port answers ``srvr`` with its version (it serves requests)."""
    try:
        return four_letter_word(host, port, "srvr", timeout).startswith("Zookeeper version")
    except OSError:
        return False


class ZooKeeperServer:
    """One standalone ZooKeeper process on 127.0.0.1:port with its data in ``data_dir``.

    ``data_dir`` holds ``zoo.cfg``, ZooKeeper's ``version-2`` snapshots and transaction logs
    and (unless ``log_path`` says otherwise) ``zookeeper.log``. The port is fixed at
    construction (a free one when not given), so a restart comes back where clients expect it.
    """

    def __init__(self, data_dir: str | os.PathLike[str], port: int | None = None, *,
                 host: str = "127.0.0.1", tick_time_ms: int = 2000,
                 min_session_timeout_ms: int | None = None, max_session_timeout_ms: int = 60000,
                 log_path: str | os.PathLike[str] | None = None, log_level: str = "info",
                 extra_config: Mapping[str, object] | None = None,
                 zookeeper_home: str | None = None) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = (min_session_timeout_ms if min_session_timeout_ms is not None
                                       else 2 * tick_time_ms)
        self.max_session_timeout_ms = max_session_timeout_ms
        self.log_path = Path(log_path) if log_path is not None else self.data_dir / "zookeeper.log"
        self.log_level = log_level
        self.extra_config = dict(extra_config or {})
        self.zookeeper_home = zookeeper_home
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    # -- addressing -----------------------------------------------------------------------
    @property
    def connect_string(self) -> str:
        """``host:port``, what ``zookeeper.connect`` takes (append ``/chroot`` as needed)."""
        return f"{self.host}:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "zoo.cfg"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"<ZooKeeperServer {self.connect_string} {state} data_dir={self.data_dir}>"

    # -- configuration ----------------------------------------------------------------------
    def config(self) -> dict[str, object]:
        cfg: dict[str, object] = {
            "tickTime": self.tick_time_ms,
            "dataDir": str(self.data_dir),
            "clientPort": self.port,
            "clientPortAddress": self.host,
            "minSessionTimeout": self.min_session_timeout_ms,
            "maxSessionTimeout": self.max_session_timeout_ms,
            "maxClientCnxns": 0,
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat,mntr",
            "autopurge.snapRetainCount": 3,
            "autopurge.purgeInterval": 1,
        }
        cfg.update(self.extra_config)
        return cfg

    def write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = ["# Written by samsa (broker/cluster/zk/server.py): a standalone ZooKeeper on loopback."]
        lines += [f"{k}={v}" for k, v in self.config().items()]
        self.config_path.write_text("\n".join(lines) + "\n")
        return self.config_path

    def command(self) -> list[str]:
        classpath = os.pathsep.join(find_classpath(self.zookeeper_home))
        return [
            find_java(), *DEFAULT_JVM_OPTS,
            f"-Dorg.slf4j.simpleLogger.defaultLogLevel={self.log_level}",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp", classpath, MAIN_CLASS, str(self.config_path),
        ]

    # -- lifecycle -----------------------------------------------------------------------------
    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def is_serving(self) -> bool:
        return self.is_running() and is_serving(self.host, self.port)

    def start(self, timeout: float = 60.0) -> ZooKeeperServer:
        """Write zoo.cfg, start the JVM and block until it serves (raises ZooKeeperStartError)."""
        if self.is_running():
            raise RuntimeError(f"{self!r} is already running")
        cmd = self.command()  # raises ZooKeeperNotFound before anything is written
        self.write_config()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=str(self.data_dir), start_new_session=True)
        self.wait_serving(timeout)
        return self

    def wait_serving(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise ZooKeeperStartError(f"ZooKeeper exited with code {self.proc.returncode} before serving on "
                                          f"{self.connect_string}\n{self.log_tail()}")
            if is_serving(self.host, self.port, timeout=1.0):
                return
            if time.monotonic() >= deadline:
                self.kill()
                raise ZooKeeperStartError(f"ZooKeeper not serving on {self.connect_string} after {timeout}s\n"
                                          + self.log_tail())
            time.sleep(0.1)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait for a clean exit; SIGKILL after ``timeout`` seconds."""
        return self._signal_and_wait(signal.SIGTERM, timeout)

    def kill(self) -> int | None:
        """SIGKILL: the machine died. Sessions expire on the restarted server after their timeout."""
        return self._signal_and_wait(signal.SIGKILL, 10.0)

    def restart(self, timeout: float = 60.0) -> ZooKeeperServer:
        """Start again on the same port with the same data (after stop() or kill())."""
        if self.is_running():
            self.stop()
        return self.start(timeout)

    def pause(self) -> None:
        """SIGSTOP: the server stops answering but keeps its sockets (a hung or partitioned ZooKeeper)."""
        if self.is_running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after pause()."""
        if self.is_running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)

    def _signal_and_wait(self, sig: int, timeout: float) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                if sig != signal.SIGKILL:
                    proc.send_signal(signal.SIGCONT)  # a paused JVM cannot handle SIGTERM
                proc.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== exited with {proc.returncode} after {signal.Signals(sig).name}\n".encode())
        return proc.returncode

    # -- logs ----------------------------------------------------------------------------------------
    def log_tail(self, max_chars: int = 8000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            text = ""
        if len(text) > max_chars:
            text = "...[log truncated]...\n" + text[-max_chars:]
        return f"----- zookeeper log {self.log_path} -----\n{text}"

    def __enter__(self) -> ZooKeeperServer:
        if not self.is_running():
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
