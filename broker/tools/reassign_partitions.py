"""``samsa reassign-partitions``: move partition replicas between brokers (like kafka-reassign-partitions.sh).

Actions, with Kafka's flags and JSON:

* ``--generate --topics-to-move-json-file F --broker-list 0,1,2``: with F =
  ``{"version": 1, "topics": [{"topic": "t"}]}``, print the current assignment of those
  topics and a proposed one spreading each over the listed brokers, keeping each topic's
  replication factor. The proposal uses Kafka's rack-unaware placement
  (``AdminUtils.assignReplicasToBrokers``: a random start broker, then each next partition's
  first replica on the next broker and followers shifted so no two partitions share the same
  follower pattern). Nothing is changed.
* ``--execute --reassignment-json-file F``: F = ``{"version": 1, "partitions": [{"topic": "t",
  "partition": 0, "replicas": [1, 2, 3], "log_dirs": ["any", "any", "any"]}]}``. The plan is
  checked (topics and partitions exist, replicas distinct, brokers known, no partition
  twice), the current assignment is printed for rollback, and one
  AlterPartitionReassignments (key 45, KIP-455) goes to the controller, which adds the new
  replicas, waits for them to join the ISR, moves leadership and drops the old ones.
  Refused while other reassignments run, unless ``--additional``.
* ``--verify --reassignment-json-file F``: per partition, "completed" when the replica set
  equals the plan and no reassignment runs, "still in progress" while ListPartitionReassignments
  (key 46) lists it, an error otherwise; exit status 1 when any partition failed.
* ``--list``: the reassignments in progress; ``--cancel --reassignment-json-file F``: cancel
  those of the plan (AlterPartitionReassignments with null replicas), reverting to the
  original replicas.

``log_dirs`` other than ``"any"`` move each replica to that directory of its broker (JBOD):
``--execute`` sends AlterReplicaLogDirs (key 34) to each broker once the replica-set changes
are started (retrying REPLICA_NOT_AVAILABLE while a new replica is still being created, as
Kafka's tool does), and ``--verify`` reads DescribeLogDirs: "completed" once the replica is
in its directory with no future copy left. A plan that only moves replicas between
directories needs no controller (keys 45/46 are not used). Replication throttles are not
supported. A broker without keys 45/46 (a single broker, or before cluster mode) gets a clear
error for replica-set changes, not a traceback.
``--json`` prints the command's result as JSON for scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

from kafka.admin import KafkaAdminClient
from kafka.errors import IncompatibleBrokerVersion, NoError, ReplicaNotAvailableError
from kafka.protocol.admin import AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest
from kafka.protocol.data_container import DataContainer

from ._common import (
    JSON,
    Subparsers,
    ToolError,
    add_bootstrap,
    add_output,
    admin_client,
    broker_ids,
    error_name,
    print_json,
    run,
    send_request,
)
from .leader_election import controller_id

Assignment = dict[tuple[str, int], list[int]]


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("reassign-partitions", help="Move partition replicas between brokers "
                              "(like kafka-reassign-partitions.sh).",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    verbs = p.add_mutually_exclusive_group(required=True)
    for verb in ("generate", "execute", "verify", "list", "cancel"):
        verbs.add_argument(f"--{verb}", dest="verb", action="store_const", const=verb)
    p.add_argument("--topics-to-move-json-file", type=Path, help='With --generate: {"topics": [{"topic": "t"}]}.')
    p.add_argument("--broker-list", help="With --generate: the brokers to spread over, e.g. 0,1,2.")
    p.add_argument("--reassignment-json-file", type=Path,
                   help="With --execute/--verify/--cancel: the plan (Kafka's reassignment JSON).")
    p.add_argument("--additional", action="store_true",
                   help="With --execute: allow it while other reassignments are in progress.")
    p.add_argument("--timeout", type=int, default=10000, help="Milliseconds the controller may take (default 10000).")
    add_output(p)
    p.set_defaults(func=run(main))


# -- JSON ---------------------------------------------------------------------------------------
def _read_json(path: Path | None, flag: str) -> JSON:
    if path is None:
        raise ToolError(f"this action needs {flag}")
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e}") from e
    except ValueError as e:
        raise ToolError(f"{path} is not valid JSON: {e}") from e


def parse_topics_to_move(doc: JSON) -> list[str]:
    topics = doc.get("topics") if isinstance(doc, dict) else None
    if not isinstance(topics, list) or not topics:
        raise ToolError('--topics-to-move-json-file must hold {"version": 1, "topics": [{"topic": "t"}, ...]}')
    out = []
    for t in topics:
        if not (isinstance(t, dict) and isinstance(t.get("topic"), str)):
            raise ToolError(f"each entry of topics needs a string topic, not {json.dumps(t)}")
        if t["topic"] not in out:
            out.append(t["topic"])
    return out


def parse_reassignment(doc: JSON) -> Assignment:
    """Kafka's reassignment JSON -> {(topic, partition): replicas}, checked for shape."""
    parts = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(parts, list) or not parts:
        raise ToolError('the reassignment JSON must hold {"version": 1, "partitions": [{"topic": "t", '
                        '"partition": 0, "replicas": [1, 2]}, ...]}')
    if doc.get("version", 1) != 1:
        raise ToolError(f"unsupported reassignment JSON version {doc.get('version')!r} (expected 1)")
    out: Assignment = {}
    for p in parts:
        ok = (isinstance(p, dict) and isinstance(p.get("topic"), str) and isinstance(p.get("partition"), int)
              and isinstance(p.get("replicas"), list) and all(type(r) is int for r in p["replicas"]))
        if not ok:
            raise ToolError(f"each partition needs topic, partition and a list of integer replicas: {json.dumps(p)}")
        key = (p["topic"], p["partition"])
        if key in out:
            raise ToolError(f"partition {key[0]}-{key[1]} appears more than once in the reassignment JSON")
        replicas = list(p["replicas"])
        if not replicas:
            raise ToolError(f"partition {key[0]}-{key[1]} has an empty replica list")
        if len(set(replicas)) != len(replicas):
            raise ToolError(f"partition {key[0]}-{key[1]} lists a replica twice: {replicas}")
        dirs = p.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or len(dirs) != len(replicas) or \
                    not all(isinstance(d, str) and d for d in dirs):
                raise ToolError(f"partition {key[0]}-{key[1]}: log_dirs must have one entry per replica "
                                '(an absolute path, or "any")')
        out[key] = replicas
    return out


def parse_log_dirs(doc: JSON) -> dict[tuple[str, int, int], str]:
    """The plan's log_dirs other than "any": {(topic, partition, broker): absolute path}."""
    out: dict[tuple[str, int, int], str] = {}
    for p in doc.get("partitions", []):
        for broker, d in zip(p["replicas"], p.get("log_dirs") or [], strict=False):
            if d != "any":
                out[(p["topic"], p["partition"], broker)] = d
    return out


def alter_log_dirs(admin: KafkaAdminClient, moves: dict[tuple[str, int, int], str], timeout_ms: int) -> dict[str, str]:
    """AlterReplicaLogDirs to each replica's broker; {"topic-partition-broker": error} for failures.

    REPLICA_NOT_AVAILABLE is retried until ``timeout_ms``: a replica being added by the
    reassignment may not exist yet (Kafka's tool does the same)."""
    pending = dict(moves)
    failed: dict[str, str] = {}
    deadline = time.monotonic() + timeout_ms / 1000
    while pending:
        result = admin.alter_replica_log_dirs(pending)
        retry = {}
        for tpr, err in result.items():
            key = (tpr[0], tpr[1], tpr[2])
            if err is NoError:
                continue
            if err is ReplicaNotAvailableError and time.monotonic() < deadline:
                retry[key] = pending[key]
            else:
                failed[f"{key[0]}-{key[1]}-{key[2]}"] = getattr(err, "__name__", str(err))
        pending = retry
        if pending:
            time.sleep(0.5)
    return failed


def log_dir_states(admin: KafkaAdminClient, moves: dict[tuple[str, int, int], str]) -> dict[tuple[str, int, int], str]:
    """Per planned replica move: "completed", "in_progress" (a future copy exists) or "missing"."""
    states = {k: "missing" for k in moves}
    brokers = sorted({b for _t, _p, b in moves})
    for resp in admin.describe_log_dirs(brokers=brokers):
        broker = resp["broker"]
        for r in resp["log_dirs"]:
            for t in r["topics"]:
                for p in t["partitions"]:
                    key = (t["name"], p["partition_index"], broker)
                    want = moves.get(key)
                    if want is None or os.path.abspath(r["log_dir"]) != os.path.abspath(want):
                        continue
                    if p["is_future_key"]:
                        states[key] = "in_progress"
                    elif states[key] != "in_progress":
                        states[key] = "completed"
    return states


def format_assignment(assignment: Assignment) -> dict[str, JSON]:
    return {"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}


# -- placement ----------------------------------------------------------------------------------
def assign_replicas(brokers: list[int], partitions: int, replication_factor: int,
                    start_index: int | None = None, shift: int | None = None) -> dict[int, list[int]]:
    """Kafka's rack-unaware ``assignReplicasToBrokers``: spread leaders round-robin, shift followers."""
    n = len(brokers)
    if replication_factor < 1 or replication_factor > n:
        raise ToolError(f"replication factor {replication_factor} is larger than the {n} broker(s) given")
    ordered = sorted(brokers)
    start = random.randrange(n) if start_index is None else start_index
    next_shift = random.randrange(n) if shift is None else shift
    out: dict[int, list[int]] = {}
    for pid in range(partitions):
        if pid > 0 and pid % n == 0:
            next_shift += 1
        first = (pid + start) % n
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            replicas.append(ordered[(first + 1 + (next_shift + j) % (n - 1)) % n])
        out[pid] = replicas
    return out


# -- cluster reads ------------------------------------------------------------------------------------
def current_assignment(admin: KafkaAdminClient, topics: list[str]) -> Assignment:
    out: Assignment = {}
    for t in admin.describe_topics(topics):
        if t.get("error_code"):
            raise ToolError(f"topic {t['name']}: {error_name(t['error_code'])}")
        for p in t["partitions"]:
            out[(t["name"], p["partition_index"])] = list(p["replica_nodes"])
    return out


def _unsupported(key: int, name: str) -> ToolError:
    return ToolError(f"the broker does not support {name} (API key {key}): partition reassignment needs a "
                     "cluster whose controller serves it (Samsa in cluster mode, or Kafka 2.4+)")


def list_reassignments(admin: KafkaAdminClient, timeout_ms: int, keys: list[tuple[str, int]] | None = None,
                       ) -> dict[tuple[str, int], dict[str, list[int]]]:
    """Ongoing reassignments from the controller: {(topic, p): {replicas, adding, removing}}."""
    topics = None
    if keys is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in keys:
            by_topic.setdefault(t, []).append(p)
        topics = [ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
    try:
        resp = send_request(admin, ListPartitionReassignmentsRequest(timeout_ms=timeout_ms, topics=topics), node_id=controller_id(admin))
    except IncompatibleBrokerVersion as e:
        raise _unsupported(46, "ListPartitionReassignments") from e
    if resp.error_code:
        raise ToolError(f"listing reassignments failed: {error_name(resp.error_code)}"
                        f"{': ' + resp.error_message if resp.error_message else ''}")
    return {(t.name, p.partition_index): {"replicas": list(p.replicas), "adding": list(p.adding_replicas),
                                          "removing": list(p.removing_replicas)}
            for t in resp.topics for p in t.partitions}


def alter_reassignments(admin: KafkaAdminClient, plan: dict[tuple[str, int], list[int] | None], timeout_ms: int,
                        ) -> dict[tuple[str, int], str | None]:
    """AlterPartitionReassignments to the controller; {(topic, p): error or None}. None replicas cancel."""
    by_topic: dict[str, list[DataContainer]] = {}  # ReassignableTopic.ReassignablePartition
    for (t, p), replicas in sorted(plan.items()):
        by_topic.setdefault(t, []).append(
            AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(partition_index=p, replicas=replicas))
    req = AlterPartitionReassignmentsRequest(timeout_ms=timeout_ms, allow_replication_factor_change=True,
              topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
    try:
        resp = send_request(admin, req, node_id=controller_id(admin))
    except IncompatibleBrokerVersion as e:
        raise _unsupported(45, "AlterPartitionReassignments") from e
    if resp.error_code:
        raise ToolError(f"reassignment refused: {error_name(resp.error_code)}"
                        f"{': ' + resp.error_message if resp.error_message else ''}")
    out: dict[tuple[str, int], str | None] = {}
    for t in resp.responses:
        for p in t.partitions:
            err = error_name(p.error_code)
            out[(t.name, p.partition_index)] = None if err is None else (
                f"{err}: {p.error_message}" if p.error_message else err)
    return out


# -- actions ----------------------------------------------------------------------------------------
def _generate(admin: KafkaAdminClient, args: argparse.Namespace) -> int:
    topics = parse_topics_to_move(_read_json(args.topics_to_move_json_file, "--topics-to-move-json-file"))
    if not args.broker_list:
        raise ToolError("--generate needs --broker-list")
    try:
        brokers = sorted({int(b) for b in args.broker_list.split(",") if b.strip()})
    except ValueError as e:
        raise ToolError(f"invalid --broker-list {args.broker_list!r}") from e
    unknown = sorted(set(brokers) - set(broker_ids(admin)))
    if unknown:
        raise ToolError(f"unknown broker id(s) in --broker-list: {unknown}")
    existing = set(admin.list_topics())
    missing = [t for t in topics if t not in existing]
    if missing:
        raise ToolError(f"topic(s) not found: {', '.join(missing)}")
    current = current_assignment(admin, topics)
    proposed: Assignment = {}
    for topic in topics:
        parts = sorted(p for (t, p) in current if t == topic)
        rf = len(current[(topic, parts[0])]) if parts else 1
        for p, replicas in assign_replicas(brokers, len(parts), rf).items():
            proposed[(topic, p)] = replicas
    if args.json:
        print_json({"current": format_assignment(current), "proposed": format_assignment(proposed)})
    else:
        print("Current partition replica assignment")
        print(json.dumps(format_assignment(current)))
        print()
        print("Proposed partition reassignment configuration")
        print(json.dumps(format_assignment(proposed)))
    return 0


def _check_plan(admin: KafkaAdminClient, plan: Assignment) -> Assignment:
    """Topics/partitions exist, brokers are known; returns the current assignment of the plan's partitions."""
    topics = sorted({t for t, _ in plan})
    existing = set(admin.list_topics())
    missing = [t for t in topics if t not in existing]
    if missing:
        raise ToolError(f"topic(s) not found: {', '.join(missing)}")
    current = current_assignment(admin, topics)
    absent = [f"{t}-{p}" for t, p in sorted(plan) if (t, p) not in current]
    if absent:
        raise ToolError(f"partition(s) not found: {', '.join(absent)}")
    known = set(broker_ids(admin))
    unknown = sorted({r for replicas in plan.values() for r in replicas} - known)
    if unknown:
        raise ToolError(f"the plan names broker(s) {unknown}, which are not in the cluster (brokers: {sorted(known)})")
    return {k: current[k] for k in plan}


def _execute(admin: KafkaAdminClient, args: argparse.Namespace) -> int:
    doc = _read_json(args.reassignment_json_file, "--reassignment-json-file")
    plan = parse_reassignment(doc)
    moves = parse_log_dirs(doc)
    current = _check_plan(admin, plan)
    # a plan whose replica sets are already in place only moves replicas between log dirs
    reassign = plan if not moves or any(current[k] != r for k, r in plan.items()) else {}
    if reassign and not args.additional:
        ongoing = list_reassignments(admin, args.timeout)
        if ongoing:
            names = ", ".join(f"{t}-{p}" for t, p in sorted(ongoing))
            raise ToolError(f"cannot execute: reassignments are in progress ({names}); wait for them, or use "
                            "--additional")
    errors = alter_reassignments(admin, dict(reassign), args.timeout) if reassign else {}
    failed: dict[tuple[str, int | str], str] = {k: e for k, e in errors.items() if e}  # or (move, "log_dir")
    started = sorted(k for k in plan if not errors.get(k))
    if moves:
        dir_failed = alter_log_dirs(admin, moves, args.timeout)
        failed.update({(k, "log_dir"): e for k, e in dir_failed.items()})
        started = [k for k in started if not any(f.startswith(f"{k[0]}-{k[1]}-") for f in dir_failed)]
    if args.json:
        print_json({"current": format_assignment(current), "started": [f"{t}-{p}" for t, p in started],
                    "failed": {f"{t}-{p}": e for (t, p), e in sorted(failed.items())}})
    else:
        print("Current partition replica assignment")
        print()
        print(json.dumps(format_assignment(current)))
        print()
        print("Save this to use as the --reassignment-json-file option during rollback")
        if started:
            print("Successfully started partition reassignment(s) for " + ",".join(f"{t}-{p}" for t, p in started))
    if failed:
        raise ToolError("error reassigning partition(s):\n" + "\n".join(
            f"{t}-{p}: {e}" if p != "log_dir" else f"replica {t}: {e}" for (t, p), e in sorted(failed.items())))
    return 0


def _verify(admin: KafkaAdminClient, args: argparse.Namespace) -> int:
    doc = _read_json(args.reassignment_json_file, "--reassignment-json-file")
    plan = parse_reassignment(doc)
    moves = parse_log_dirs(doc)
    current = _check_plan(admin, plan)
    ongoing: dict[tuple[str, int], dict[str, list[int]]] | None
    try:
        ongoing = list_reassignments(admin, args.timeout, sorted(plan))
    except ToolError:
        ongoing = None  # no key 46: a partition already as planned is still known to be complete
    results = []
    for key, target in sorted(plan.items()):
        t, p = key
        if ongoing is not None and key in ongoing:
            state, msg = "in_progress", f"Reassignment of partition {t}-{p} is still in progress."
        elif current[key] == target:
            state, msg = "completed", f"Reassignment of partition {t}-{p} is completed."
        elif ongoing is None:
            raise _unsupported(46, "ListPartitionReassignments")
        else:
            state, msg = "failed", (f"There is no active reassignment of partition {t}-{p}, but replica set is "
                                    f"{current[key]} rather than {target}.")
        results.append({"topic": t, "partition": p, "state": state, "replicas": current[key], "target": target,
                        "message": msg})
    dir_results = []
    for (t, p, b), state in sorted(log_dir_states(admin, moves).items()) if moves else []:
        replica = f"{t}-{p}-{b}"
        msg = {"completed": f"Reassignment of replica {replica} completed successfully.",
               "in_progress": f"Reassignment of replica {replica} is still in progress.",
               "missing": f"Replica {replica} is not in log dir {moves[(t, p, b)]} and is not moving there."}[state]
        dir_results.append({"topic": t, "partition": p, "broker": b, "log_dir": moves[(t, p, b)],
                            "state": "failed" if state == "missing" else state, "message": msg})
    if args.json:
        print_json(results + dir_results)
    else:
        print("Status of partition reassignment:")
        for r in results:
            print(r["message"])
        if dir_results:
            print()
            print("Reassignment of replicas between log dirs:")
            for r in dir_results:
                print(r["message"])
    return 1 if any(r["state"] == "failed" for r in results + dir_results) else 0


def _list(admin: KafkaAdminClient, args: argparse.Namespace) -> int:
    ongoing = list_reassignments(admin, args.timeout)
    rows: list[dict[str, JSON]] = [{"topic": t, "partition": p, **v} for (t, p), v in sorted(ongoing.items())]
    if args.json:
        print_json(rows)
    elif not rows:
        print("No partition reassignments found.")
    else:
        print("Current partition reassignments:")
        for r in rows:
            print(f"{r['topic']}-{r['partition']}: replicas: {','.join(map(str, r['replicas']))}. "
                  f"adding: {','.join(map(str, r['adding']))}. removing: {','.join(map(str, r['removing']))}.")
    return 0


def _cancel(admin: KafkaAdminClient, args: argparse.Namespace) -> int:
    plan = parse_reassignment(_read_json(args.reassignment_json_file, "--reassignment-json-file"))
    _check_plan(admin, plan)
    errors = alter_reassignments(admin, dict.fromkeys(plan), args.timeout)
    cancelled = sorted(k for k in plan if not errors.get(k))
    failed = {k: e for k, e in errors.items() if e and not e.startswith("NO_REASSIGNMENT_IN_PROGRESS")}
    if args.json:
        print_json({"cancelled": [f"{t}-{p}" for t, p in cancelled],
                    "failed": {f"{t}-{p}": e for (t, p), e in sorted(failed.items())}})
    else:
        if cancelled:
            print("Successfully cancelled partition reassignment(s) for " + ",".join(f"{t}-{p}" for t, p in cancelled))
        for (t, p), e in sorted(errors.items()):
            if e and e.startswith("NO_REASSIGNMENT_IN_PROGRESS"):
                print(f"No reassignment in progress for {t}-{p}.")
    if failed:
        raise ToolError("error cancelling reassignment(s):\n" + "\n".join(
            f"{t}-{p}: {e}" for (t, p), e in sorted(failed.items())))
    return 0


def main(args: argparse.Namespace) -> int | None:
    actions = {"generate": _generate, "execute": _execute, "verify": _verify, "list": _list, "cancel": _cancel}
    admin = admin_client(args)
    try:
        return actions[args.verb](admin, args)
    finally:
        admin.close()
