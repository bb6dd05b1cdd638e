"""``samsa cluster up|down|status``: a ZooKeeper and N Samsa brokers on this machine, for development.

``samsa cluster up --brokers 3`` starts Apache ZooKeeper (``broker/cluster/zk/server.py``: the Debian
package's jars or ``ZOOKEEPER_HOME``) on ``--zookeeper-port`` (2181) and brokers 0..N-1 on
``--base-port`` (9092), 9093, ... as background processes, each with ``broker.id``,
``zookeeper.connect=127.0.0.1:2181/samsa``, its own ``log.dirs`` and log file in ``--dir``
(``./samsa-cluster``), then prints the bootstrap string. ``--override k=v`` (repeatable) goes
to every broker, after the defaults below; ``--cpus 1`` runs every broker on CPU 1 (the broker
property ``cpu.affinity``, broker/cpu_affinity.py: on a small machine the client then keeps
the other CPUs, and the brokers hand replication to each other on one). ``samsa cluster down``
stops the brokers one at a time with SIGTERM (each does a controlled shutdown, moving its
leaderships away first), then ZooKeeper; ``samsa cluster status`` says what runs.

Layout of ``--dir``::

    cluster.json          the state file: pids, ports, chroot, bootstrap (written as things start)
    zookeeper/            zoo.cfg and ZooKeeper's data;  zookeeper.log
    broker-<id>/          the broker's log.dirs;          broker-<id>.log

A second ``up`` on the same folder reuses the recorded ports and data (a restart). While part
of the cluster runs, ``up`` starts only what is stopped (ZooKeeper first, then the missing
brokers, with their recorded properties): after ``kill -9`` of a broker, ``up`` brings it back. ``down`` only signals a recorded pid whose
command line still names this folder, so a recycled pid is never hit.

Readiness: ``up`` returns when every broker answers ApiVersions and Metadata from each lists
all N brokers (the cluster has formed), or fails after ``--timeout`` with the logs' location
and stops what it started; ``--no-wait`` skips the Metadata check.
Unlike the other tools this one manages processes; it still reads the brokers only through
the Kafka protocol.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from kazoo.client import KazooClient

import broker
from broker import cpu_affinity
from broker.cluster.zk.server import ZooKeeperNotFound, ZooKeeperServer, ZooKeeperStartError, is_serving
from broker.console import parse_listener

from ._common import JSON, Subparsers, ToolError, print_json, print_table, run

STATE_FILE = "cluster.json"
DEFAULT_CHROOT = "/samsa"
DEFAULT_CONSOLE = "http://127.0.0.1:9090"
DEFAULT_METRICS_PORT = 9404  # the JMX exporter's customary port


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("cluster", help="Start/stop a local ZooKeeper and N brokers for development.",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="verb", required=True, metavar="up|down|status")
    up = verbs.add_parser("up", help="Start ZooKeeper and the brokers, print the bootstrap string.")
    _add_dir(up)
    up.add_argument("--brokers", type=int, default=None, help="Number of brokers (default 3, or as before).")
    up.add_argument("--zookeeper-port", type=int, default=None, help="ZooKeeper's client port (default 2181).")
    up.add_argument("--base-port", type=int, default=None,
                    help="Broker i listens on base-port + i (default 9092).")
    up.add_argument("--chroot", default=None, help=f"ZooKeeper chroot for the cluster (default {DEFAULT_CHROOT}).")
    up.add_argument("--console", default=None, metavar="URL",
                    help=f"Broker 0 serves the web console for the whole cluster here (default {DEFAULT_CONSOLE} "
                         "when that port is free; '' for none).")
    up.add_argument("--metrics-port", type=int, default=DEFAULT_METRICS_PORT, metavar="PORT",
                    help=f"Broker i serves Prometheus metrics on http://127.0.0.1:PORT+i/metrics "
                         f"(default {DEFAULT_METRICS_PORT}; 0 for none; a busy port only loses that endpoint).")
    up.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="A broker property for every broker (repeatable).")
    up.add_argument("--cpus", default=None, metavar="LIST",
                    help="Run every broker on these CPUs (taskset's list syntax, e.g. 1 or 2-3; the broker "
                         "property cpu.affinity). Default: any CPU. On a small machine shared with clients, "
                         "brokers on CPUs of their own answer acks=all sooner (see bench/RESULTS.md).")
    up.add_argument("--timeout", type=float, default=60.0,
                    help="Seconds to wait for the processes and for the cluster to form (default 60).")
    up.add_argument("--no-wait", action="store_true",
                    help="Return once every broker answers, without waiting for Metadata to list them all.")
    up.add_argument("--json", action="store_true", help="Print the state as JSON.")
    up.set_defaults(func=run(_up))
    down = verbs.add_parser("down", help="Stop the brokers (SIGTERM, one by one), then ZooKeeper.")
    _add_dir(down)
    down.add_argument("--timeout", type=float, default=60.0,
                      help="Seconds to wait for each process before SIGKILL (default 60).")
    down.add_argument("--delete-data", action="store_true", help="Also delete the folder afterwards.")
    down.set_defaults(func=run(_down))
    status = verbs.add_parser("status", help="Show what runs: pids, ports, brokers in Metadata.")
    _add_dir(status)
    status.add_argument("--json", action="store_true", help="Print machine-readable JSON.")
    status.set_defaults(func=run(_status))
    for sp in (up, down, status):
        sp.add_argument("--debug", action="store_true", help="Print tracebacks.")


def _add_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", type=Path, default=Path("samsa-cluster"),
                   help="Folder for data, logs and the state file (default ./samsa-cluster).")


# -- processes -------------------------------------------------------------------------------------
def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int | None, marker: str) -> bool:
    """The pid runs (not a zombie) and its command line names marker (our folder): it is ours."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        return False
    return marker in _cmdline(pid)


def _terminate(pid: int | None, marker: str, timeout: float) -> str:
    """SIGTERM (after SIGCONT), wait up to timeout, then SIGKILL. Returns what happened."""
    if not _alive(pid, marker):
        return "not running"
    assert pid is not None
    for sig in (signal.SIGCONT, signal.SIGTERM):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return "stopped"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid, marker):
            return "stopped"
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return "stopped"
    return f"killed (no exit {timeout:g}s after SIGTERM)"


def _port_free(port: int) -> bool:
    """Nothing listens on 127.0.0.1:port (SO_REUSEADDR, as the servers use: TIME_WAIT leftovers are fine)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# -- Kafka protocol probes (hand-written: Metadata v1 with no topics and ApiVersions v0) ------------------
def _request(port: int, api_key: int, version: int, body: bytes, timeout: float = 2.0) -> bytes:
    client_id = b"samsa-cluster"
    header = struct.pack(">hhih", api_key, version, 7, len(client_id)) + client_id
    frame = header + body
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv(s, 4))[0]
        payload = _recv(s, size)
    if struct.unpack_from(">i", payload)[0] != 7:
        raise ConnectionError("correlation id mismatch")
    return payload[4:]


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def _api_versions_ok(port: int) -> bool:
    try:
        return struct.unpack_from(">h", _request(port, 18, 0, b""))[0] == 0
    except (OSError, ConnectionError, struct.error):
        return False


def _metadata_brokers(port: int) -> tuple[list[int], int] | None:
    """(broker ids, controller id) from Metadata v1 with an empty topic list, or None."""
    try:
        body = _request(port, 3, 1, struct.pack(">i", 0))
        (n,) = struct.unpack_from(">i", body, 0)
        pos, ids = 4, []
        for _ in range(n):
            node_id, hlen = struct.unpack_from(">ih", body, pos)
            pos += 6 + hlen + 4
            (rlen,) = struct.unpack_from(">h", body, pos)
            pos += 2 + max(rlen, 0)
            ids.append(node_id)
        (controller,) = struct.unpack_from(">i", body, pos)
        return sorted(ids), controller
    except (OSError, ConnectionError, struct.error):
        return None


# -- state ----------------------------------------------------------------------------------------
def _load_state(folder: Path) -> dict[str, JSON] | None:
    try:
        return dict(json.loads((folder / STATE_FILE).read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ToolError(f"cannot read {folder / STATE_FILE}: {e}") from e


def _save_state(folder: Path, state: dict[str, JSON]) -> None:
    tmp = folder / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(folder / STATE_FILE)


def _marker(state: dict[str, JSON]) -> str:
    """What every process of this cluster has in its command line: the folder, as a path prefix."""
    return str(state["dir"]).rstrip("/") + "/"


def _running(state: dict[str, JSON]) -> list[str]:
    marker = _marker(state)
    out = [f"broker {b['id']} (pid {b['pid']})" for b in state.get("brokers", []) if _alive(b.get("pid"), marker)]
    zk = state.get("zookeeper") or {}
    if _alive(zk.get("pid"), marker):
        out.append(f"zookeeper (pid {zk['pid']})")
    return out


# -- up -------------------------------------------------------------------------------------------
def _up(args: argparse.Namespace) -> int | None:
    folder = args.dir.resolve()
    old = _load_state(folder) or {}
    if old and _running(old):
        return _complete(args, folder, old)
    n = args.brokers if args.brokers is not None else len(old.get("brokers", [])) or 3
    if n < 1:
        raise ToolError("--brokers must be at least 1")
    zk_port = args.zookeeper_port or (old.get("zookeeper") or {}).get("port") or 2181
    base = args.base_port or (old.get("brokers") or [{}])[0].get("port") or 9092
    chroot = args.chroot or old.get("chroot") or DEFAULT_CHROOT
    if not chroot.startswith("/") or chroot == "/":
        raise ToolError(f"--chroot must be a path like /samsa, not {chroot!r}")
    ports = [base + i for i in range(n)]
    console_port = None
    if args.console is None:  # the default console is a convenience: a busy port only loses it
        args.console = DEFAULT_CONSOLE if _port_free(9090) else ""
        if not args.console:
            print("port 9090 is in use: no web console (choose a URL with --console)", file=sys.stderr)
    if args.console:
        try:
            console_port = parse_listener(args.console)[1]
        except ValueError as e:
            raise ToolError(str(e)) from e
    busy = [p for p in [zk_port, *ports, *([console_port] if console_port else [])] if not _port_free(p)]
    if busy:
        raise ToolError(f"port(s) {', '.join(map(str, busy))} already in use on 127.0.0.1; "
                        "choose others with --zookeeper-port / --base-port / --console")
    overrides = {}
    for item in args.override:
        if "=" not in item:
            raise ToolError(f"invalid --override {item!r}: expected key=value")
        k, v = item.split("=", 1)
        overrides[k.strip()] = v.strip()
    if getattr(args, "cpus", None):
        try:
            cpus = cpu_affinity.parse_cpu_list(args.cpus)
        except ValueError as e:
            raise ToolError(f"--cpus: {e}") from e
        available = os.sched_getaffinity(0)
        if not cpus & available:
            raise ToolError(f"--cpus {args.cpus}: none of these CPUs is available here "
                            f"({cpu_affinity.format_cpus(available)})")
        overrides.setdefault("cpu.affinity", args.cpus)

    folder.mkdir(parents=True, exist_ok=True)
    state: dict[str, JSON] = {"dir": str(folder), "chroot": chroot, "started_at": time.time(),
                             "zookeeper": None, "brokers": [], "bootstrap": ",".join(f"127.0.0.1:{p}" for p in ports)}
    zk = ZooKeeperServer(folder / "zookeeper", zk_port, log_path=folder / "zookeeper.log")
    try:
        zk.start(timeout=args.timeout)
    except (ZooKeeperNotFound, ZooKeeperStartError) as e:
        raise ToolError(str(e)) from e
    state["zookeeper"] = {"pid": zk.pid, "port": zk_port, "connect": zk.connect_string,
                          "log": str(zk.log_path), "data_dir": str(zk.data_dir)}
    _save_state(folder, state)
    try:
        _create_chroot(zk.connect_string, chroot)
        procs = {}
        for i, port in enumerate(ports):
            props = _broker_properties(i, n, port, folder, f"{zk.connect_string}{chroot}", overrides)
            if i == 0 and args.console and "console.listener" not in overrides:
                props["console.listener"] = args.console  # one console shows the whole cluster
            if getattr(args, "metrics_port", 0) and "metrics.listener" not in overrides:
                props["metrics.listener"] = f"http://127.0.0.1:{args.metrics_port + i}"
                if "console.listener" in props and "console.metrics.urls" not in overrides:
                    # the console's bytes in/out: every broker's counters, not only its own
                    props["console.metrics.urls"] = ",".join(
                        f"http://127.0.0.1:{args.metrics_port + j}/metrics" for j in range(n))
            proc = _start_broker(folder, i, props)
            procs[i] = proc
            state["brokers"].append({"id": i, "pid": proc.pid, "port": port, "log": str(folder / f"broker-{i}.log"),
                                     "log_dirs": props["log.dirs"], "properties": props})
            _save_state(folder, state)
        _wait_ready(state, procs, args.timeout, formed=not args.no_wait)
    except ToolError:
        print(f"Stopping what started; logs are in {folder}.", file=sys.stderr)
        _stop_all(state, timeout=10.0)
        raise
    if args.json:
        print_json(state)
    else:
        print(f"ZooKeeper on {zk.connect_string} (chroot {chroot}), {n} broker(s); data and logs in {folder}")
        if args.console and "console.listener" not in overrides:
            print(f"Web console (read-only): {args.console.rstrip('/')}/")
        if getattr(args, "metrics_port", 0) and "metrics.listener" not in overrides:
            print(f"Prometheus metrics: http://127.0.0.1:{args.metrics_port}/metrics "
                  f"(broker i on port {args.metrics_port}+i)")
        print(f"Stop with: samsa cluster down --dir {args.dir}")
        print(state["bootstrap"])
    return 0


def _complete(args: argparse.Namespace, folder: Path, state: dict[str, JSON]) -> int:
    """Part of a recorded cluster runs: start what does not (ZooKeeper first) with the recorded settings."""
    running = ", ".join(_running(state))
    changed = [f"--{f.replace('_', '-')}" for f in ("brokers", "zookeeper_port", "base_port", "chroot")
               if getattr(args, f) is not None] + (["--override"] if args.override else [])
    if changed:
        raise ToolError(f"a cluster already runs from {folder} ({running}): `up` would only restart its stopped "
                        f"processes with their recorded settings, so {', '.join(changed)} cannot apply; "
                        f"stop it first with `samsa cluster down --dir {args.dir}`")
    marker = _marker(state)
    zk_state = state["zookeeper"]
    missing = [b for b in state["brokers"] if not _alive(b.get("pid"), marker)]
    zk_down = not _alive(zk_state.get("pid"), marker)
    if not missing and not zk_down:
        raise ToolError(f"a cluster already runs from {folder}: {running}; "
                        f"stop it with `samsa cluster down --dir {args.dir}`")
    restarted = []
    if zk_down:
        zk = ZooKeeperServer(folder / "zookeeper", int(zk_state["port"]), log_path=folder / "zookeeper.log")
        try:
            zk.start(timeout=args.timeout)
        except (ZooKeeperNotFound, ZooKeeperStartError) as e:
            raise ToolError(str(e)) from e
        zk_state["pid"] = zk.pid
        restarted.append("zookeeper")
        _save_state(folder, state)
    procs = {}
    for b in missing:
        props = b.get("properties")
        if not props:
            raise ToolError(f"{folder / STATE_FILE} does not record broker {b['id']}'s properties; "
                            f"`samsa cluster down --dir {args.dir}` and up again")
        procs[int(b["id"])] = _start_broker(folder, int(b["id"]), props)
        b["pid"] = procs[int(b["id"])].pid
        restarted.append(f"broker {b['id']}")
        _save_state(folder, state)
    _wait_ready(state, procs, args.timeout, formed=not args.no_wait)
    if args.json:
        print_json(state)
    else:
        print(f"Restarted {', '.join(restarted)} from {folder}")
        print(state["bootstrap"])
    return 0


def _create_chroot(connect: str, chroot: str) -> None:
    client = KazooClient(hosts=connect, timeout=10.0)
    try:
        client.start(timeout=15)
        client.ensure_path(chroot)
    except Exception as e:
        raise ToolError(f"cannot create chroot {chroot} in ZooKeeper at {connect}: {e}") from e
    finally:
        client.stop()
        client.close()


def _broker_properties(i: int, n: int, port: int, folder: Path, zk_connect: str,
                       overrides: dict[str, str]) -> dict[str, str]:
    props = {
        "broker.id": str(i),
        "zookeeper.connect": zk_connect,
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(folder / f"broker-{i}"),
        # Kafka's defaults need 3 brokers for the internal topics; a smaller dev cluster gets what it has.
        "offsets.topic.replication.factor": str(min(3, n)),
        "transaction.state.log.replication.factor": str(min(3, n)),
        "transaction.state.log.min.isr": str(min(2, n)),
    }
    props.update(overrides)
    return props


def _start_broker(folder: Path, i: int, props: dict[str, str]) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "broker"]
    for k, v in props.items():
        cmd += ["--override", f"{k}={v}"]
    env = dict(os.environ)
    root = str(Path(broker.__file__).resolve().parents[1])  # the same code as this command
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    with open(folder / f"broker-{i}.log", "ab") as log:
        log.write(f"\n===== samsa cluster up: {' '.join(cmd)}\n".encode())
        log.flush()
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=str(folder), env=env, start_new_session=True)


def _wait_ready(state: dict[str, JSON], procs: dict[int, subprocess.Popen[bytes]], timeout: float,
                formed: bool = True) -> None:
    """Every broker answers ApiVersions, then (with formed) each one's Metadata lists them all.

    procs are the brokers this command started (their exit is noticed at once); the others must
    keep running.
    """
    deadline = time.monotonic() + timeout
    by_id = {int(b["id"]): b for b in state["brokers"]}
    pending = sorted(by_id)
    while pending:
        for i in list(pending):
            b = by_id[i]
            proc = procs.get(i)
            if proc is not None and proc.poll() is not None:
                raise ToolError(f"broker {i} exited with code {proc.returncode}; see "
                                f"{b['log']}:\n{_tail(Path(b['log']))}")
            if proc is None and not _alive(b.get("pid"), _marker(state)):
                raise ToolError(f"broker {i} (pid {b.get('pid')}) is no longer running; see {b['log']}")
            if _api_versions_ok(b["port"]):
                pending.remove(i)
        if pending and time.monotonic() > deadline:
            raise ToolError(f"broker(s) {pending} not answering after {timeout:g}s; see the logs in {state['dir']}")
        if pending:
            time.sleep(0.2)
    if not formed:
        return
    want = sorted(by_id)
    seen: dict[int, list[int] | None] = {}
    while True:
        for b in state["brokers"]:
            md = _metadata_brokers(b["port"])
            seen[b["id"]] = md[0] if md else None
        if all(ids == want for ids in seen.values()):
            return
        if time.monotonic() > deadline:
            listed = ", ".join(f"broker {k} lists {v}" for k, v in seen.items())
            raise ToolError(f"the brokers run but have not formed one cluster after {timeout:g}s ({listed}); "
                            f"see the logs in {state['dir']}")
        time.sleep(0.25)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# -- down / status ------------------------------------------------------------------------------------
def _stop_all(state: dict[str, JSON], timeout: float) -> list[tuple[str, str]]:
    marker = _marker(state)
    done = []
    for b in sorted(state.get("brokers", []), key=lambda b: -int(b["id"])):
        done.append((f"broker {b['id']}", _terminate(b.get("pid"), marker, timeout)))
    zk = state.get("zookeeper") or {}
    done.append(("zookeeper", _terminate(zk.get("pid"), marker, timeout)))
    return done


def _down(args: argparse.Namespace) -> int | None:
    folder = args.dir.resolve()
    state = _load_state(folder)
    if state is None:
        raise ToolError(f"no cluster state in {folder} ({STATE_FILE} missing)")
    for what, outcome in _stop_all(state, args.timeout):
        print(f"{what}: {outcome}")
    if args.delete_data:
        shutil.rmtree(folder)
        print(f"Deleted {folder}")
    return 0


def _status(args: argparse.Namespace) -> int | None:
    folder = args.dir.resolve()
    state = _load_state(folder)
    if state is None:
        raise ToolError(f"no cluster state in {folder} ({STATE_FILE} missing)")
    marker = _marker(state)
    rows: list[dict[str, JSON]] = []
    zk = state.get("zookeeper") or {}
    if zk:
        alive = _alive(zk.get("pid"), marker)
        rows.append({"process": "zookeeper", "pid": zk.get("pid"), "port": zk.get("port"), "running": alive,
                     "serving": alive and is_serving("127.0.0.1", int(zk["port"])), "brokers": None,
                     "controller": None})
    for b in state.get("brokers", []):
        alive = _alive(b.get("pid"), marker)
        md = _metadata_brokers(b["port"]) if alive else None
        rows.append({"process": f"broker {b['id']}", "pid": b.get("pid"), "port": b["port"], "running": alive,
                     "serving": md is not None, "brokers": md[0] if md else None,
                     "controller": md[1] if md else None})
    if args.json:
        print_json({"dir": state["dir"], "bootstrap": state.get("bootstrap"), "chroot": state.get("chroot"),
                    "processes": rows})
    else:
        print_table(["PROCESS", "PID", "PORT", "RUNNING", "SERVING", "BROKERS", "CONTROLLER"], [
            (r["process"], r["pid"], r["port"], "yes" if r["running"] else "no", "yes" if r["serving"] else "no",
             ",".join(map(str, r["brokers"])) if r["brokers"] is not None else None, r["controller"])
            for r in rows])
        print(f"bootstrap: {state.get('bootstrap')}")
    return 0 if all(r["running"] for r in rows) else 3
