"""``samsa leader-election``: run a preferred or unclean leader election (like kafka-leader-election.sh).

``--election-type PREFERRED|UNCLEAN`` (case-insensitive) and exactly one way to name the
partitions: ``--topic T --partition P``, ``--all-topic-partitions``, or
``--path-to-json-file F`` with Kafka's format ``{"partitions": [{"topic": "t", "partition": 0}]}``.
One ElectLeaders request (key 43, KIP-460) goes to the controller.

A PREFERRED election moves leadership back to the first replica in the assignment when it is
alive and in the ISR; an UNCLEAN one elects any live replica for a partition with no leader,
accepting the loss of what only the dead replicas had. As in Kafka, partitions whose leader
is already the right one answer ELECTION_NOT_NEEDED and are reported as "Valid replica
already elected"; with ``--all-topic-partitions`` the controller leaves them out. Any other
error is printed per partition and the command exits 1. ``--json`` prints one object per
partition: ``{"topic", "partition", "result": "elected"|"not_needed"|"failed", "error", "message"}``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kafka.admin import KafkaAdminClient
from kafka.errors import IncompatibleBrokerVersion
from kafka.protocol.admin import ElectLeadersRequest

from ._common import (
    JSON,
    Subparsers,
    ToolError,
    add_bootstrap,
    add_output,
    admin_client,
    error_name,
    print_json,
    run,
    send_request,
)

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
ELECTION_NOT_NEEDED = 84


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("leader-election", help="Elect preferred or unclean leaders "
                              "(like kafka-leader-election.sh).",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    p.add_argument("--election-type", required=True, type=str.upper, choices=sorted(ELECTION_TYPES),
                   help="PREFERRED or UNCLEAN.")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="The topic of --partition.")
    which.add_argument("--all-topic-partitions", action="store_true", help="Every partition of every topic.")
    which.add_argument("--path-to-json-file", type=Path,
                       help='JSON file: {"partitions": [{"topic": "t", "partition": 0}, ...]}.')
    p.add_argument("--partition", type=int, help="The partition of --topic.")
    add_output(p)
    p.set_defaults(func=run(main))


def parse_partitions_json(text: str, source: str = "the JSON file") -> list[tuple[str, int]]:
    """Kafka's ``{"partitions": [{"topic": ..., "partition": ...}]}``; duplicates are an error, as in Kafka."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ToolError(f"{source} is not valid JSON: {e}") from e
    items = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise ToolError(f'{source} must hold {{"partitions": [{{"topic": "t", "partition": 0}}, ...]}}')
    out: list[tuple[str, int]] = []
    for item in items:
        if not (isinstance(item, dict) and isinstance(item.get("topic"), str)
                and isinstance(item.get("partition"), int) and not isinstance(item.get("partition"), bool)):
            raise ToolError(f"{source}: each partition needs a string topic and an integer partition, "
                            f"not {json.dumps(item)}")
        out.append((item["topic"], item["partition"]))
    dups = sorted({f"{t}-{p}" for t, p in out if out.count((t, p)) > 1})
    if dups:
        raise ToolError(f"{source} contains duplicate partitions: {', '.join(dups)}")
    if not out:
        raise ToolError(f"{source} lists no partitions")
    return out


def _targets(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    if args.all_topic_partitions:
        if args.partition is not None:
            raise ToolError("--partition goes with --topic, not --all-topic-partitions")
        return None
    if args.path_to_json_file is not None:
        if args.partition is not None:
            raise ToolError("--partition goes with --topic, not --path-to-json-file")
        try:
            text = args.path_to_json_file.read_text()
        except OSError as e:
            raise ToolError(f"cannot read {args.path_to_json_file}: {e}") from e
        return parse_partitions_json(text, str(args.path_to_json_file))
    if args.partition is None:
        raise ToolError("--topic needs --partition")
    return [(args.topic, args.partition)]


NOT_CONTROLLER = 41


def controller_id(admin: KafkaAdminClient) -> int | None:
    """The controller's broker id from Metadata (None when the cluster names none)."""
    cid = admin.describe_cluster().get("controller_id")
    return cid if isinstance(cid, int) and cid >= 0 else None


def elect_leaders(admin: KafkaAdminClient, election_type: int, targets: list[tuple[str, int]] | None,
                  timeout_ms: int) -> list[dict[str, JSON]]:
    """Send ElectLeaders to the controller; one result dict per partition in the answer."""
    if targets is None:
        topic_partitions = None
    else:
        by_topic: dict[str, list[int]] = {}
        for t, p in targets:
            by_topic.setdefault(t, []).append(p)
        topic_partitions = [ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()]
    req = ElectLeadersRequest(election_type=election_type, topic_partitions=topic_partitions, timeout_ms=timeout_ms)

    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            resp = send_request(admin, req, node_id=controller_id(admin))
        except IncompatibleBrokerVersion as e:
            raise ToolError("the broker does not support ElectLeaders (API key 43)") from e
        # the controller moved (or was being elected) since Metadata named it: ask again, as
        # Kafka's AdminClient does
        if getattr(resp, "error_code", 0) == NOT_CONTROLLER and time.monotonic() < deadline:
            time.sleep(0.5)
            continue
        break
    if getattr(resp, "error_code", 0):
        raise ToolError(f"leader election failed: {error_name(resp.error_code)}")
    if election_type and resp.version == 0:
        raise ToolError("the broker only speaks ElectLeaders v0, which cannot run an UNCLEAN election")
    out = []
    for r in resp.replica_election_results:
        for p in r.partition_result:
            result = ("elected" if p.error_code == 0 else
                      "not_needed" if p.error_code == ELECTION_NOT_NEEDED else "failed")
            out.append({"topic": r.topic, "partition": p.partition_id, "result": result,
                        "error": error_name(p.error_code), "message": p.error_message})
    return sorted(out, key=lambda d: (d["topic"], d["partition"]))


def main(args: argparse.Namespace) -> int | None:
    targets = _targets(args)
    admin = admin_client(args)
    try:
        results = elect_leaders(admin, ELECTION_TYPES[args.election_type], targets, args.request_timeout_ms)
    finally:
        admin.close()
    failed = [r for r in results if r["result"] == "failed"]
    if args.json:
        print_json(results)
    else:
        kind = args.election_type

        def names(rs: list[dict[str, JSON]]) -> str:
            return ", ".join(f"{r['topic']}-{r['partition']}" for r in rs)

        elected = [r for r in results if r["result"] == "elected"]
        not_needed = [r for r in results if r["result"] == "not_needed"]
        if elected:
            print(f"Successfully completed leader election ({kind}) for partitions {names(elected)}")
        if not_needed:
            print(f"Valid replica already elected for partitions {names(not_needed)}")
        if not results:
            print(f"No partitions needed a leader election ({kind}).")
        for r in failed:
            print(f"Error completing leader election ({kind}) for partition: {r['topic']}-{r['partition']}: "
                  f"{r['error']}: {r['message'] or ''}".rstrip(": "))
    if failed:
        raise ToolError(f"{len(failed)} replica(s) could not be elected")
    return 0
