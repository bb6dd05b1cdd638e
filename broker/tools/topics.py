"""``samsa topics``: create, list, describe, alter (grow partitions) and delete topics.

Mirrors ``kafka-topics.sh``: one of ``--create/--list/--describe/--alter/--delete`` plus
``--topic`` (a regular expression except with ``--create``), ``--partitions``,
``--replication-factor``, ``--config k=v`` (repeatable), ``--replica-assignment``,
``--if-exists``/``--if-not-exists``. ``--describe`` filters as Kafka's do:
``--under-replicated-partitions`` (ISR smaller than the replicas), ``--unavailable-partitions``
(no leader, or a leader that is not a live broker), ``--under-min-isr-partitions`` (no
leader, or ISR below the topic's min.insync.replicas) and ``--at-min-isr-partitions`` (ISR
exactly at it: one more loss stops acks=all writes). Wire APIs used: Metadata, CreateTopics,
CreatePartitions, DeleteTopics, DescribeConfigs (for the ``Configs:`` column) and
IncrementalAlterConfigs (``--alter --config``, a convenience Kafka moved to kafka-configs).
"""

from __future__ import annotations

import argparse

from kafka.admin import ConfigResource, KafkaAdminClient

from ._common import (
    JSON,
    Subparsers,
    ToolError,
    add_bootstrap,
    add_output,
    admin_client,
    error_name,
    format_uuid,
    parse_properties,
    print_json,
    print_table,
    run,
    topic_matcher,
)

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("topics", help="Create, list, describe, alter and delete topics "
                              "(like kafka-topics.sh).",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    verbs = p.add_mutually_exclusive_group(required=True)
    for verb in ("create", "list", "describe", "alter", "delete"):
        verbs.add_argument(f"--{verb}", dest="verb", action="store_const", const=verb)
    p.add_argument("--topic", help="Topic name (a regular expression except with --create).")
    p.add_argument("--partitions", type=int, help="Partition count (create) or new, larger count (alter).")
    p.add_argument("--replication-factor", type=int, help="Replication factor for --create.")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="Topic config override (repeatable), e.g. --config cleanup.policy=compact.")
    p.add_argument("--replica-assignment", metavar="B0:B1,B0:B1",
                   help="Replicas per partition: partitions separated by ',', replicas by ':'.")
    p.add_argument("--if-exists", action="store_true", help="With --alter/--delete: no error if absent.")
    p.add_argument("--if-not-exists", action="store_true", help="With --create: no error if present.")
    p.add_argument("--exclude-internal", action="store_true", help="Leave out internal topics.")
    p.add_argument("--topics-with-overrides", action="store_true",
                   help="With --describe: only topics that have config overrides.")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="With --describe: only partitions whose ISR is smaller than the replica set.")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="With --describe: only partitions without a leader, or whose leader is not a live broker.")
    p.add_argument("--under-min-isr-partitions", action="store_true",
                   help="With --describe: only partitions whose ISR is smaller than min.insync.replicas.")
    p.add_argument("--at-min-isr-partitions", action="store_true",
                   help="With --describe: only partitions whose ISR size equals min.insync.replicas.")
    p.add_argument("--validate-only", action="store_true",
                   help="With --create/--alter: ask the broker to validate without changing anything.")
    add_output(p)
    p.set_defaults(func=run(main))


def main(args: argparse.Namespace) -> int | None:
    admin = admin_client(args)
    try:
        return {"create": _create, "list": _list, "describe": _describe, "alter": _alter,
                "delete": _delete}[args.verb](admin, args)
    finally:
        admin.close()


def _parse_assignment(spec: str) -> dict[int, list[int]]:
    try:
        return {i: [int(b) for b in part.split(":")] for i, part in enumerate(spec.split(","))}
    except ValueError as e:
        raise ToolError(f"Invalid --replica-assignment {spec!r}") from e


def _create(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    if not args.topic:
        raise ToolError("--create requires --topic")
    spec: dict[str, JSON] = {"configs": parse_properties(args.config)}
    if args.replica_assignment:
        if args.partitions is not None or args.replication_factor is not None:
            raise ToolError("--replica-assignment excludes --partitions and --replication-factor")
        spec["assignments"] = _parse_assignment(args.replica_assignment)
    else:
        spec["num_partitions"] = -1 if args.partitions is None else args.partitions
        spec["replication_factor"] = -1 if args.replication_factor is None else args.replication_factor
    result = admin.create_topics({args.topic: spec}, validate_only=args.validate_only, raise_errors=False)
    t = result["topics"][0]
    err = error_name(t["error_code"])
    if err == "TOPIC_ALREADY_EXISTS" and args.if_not_exists:
        err = None
    doc = {"topic": t["name"], "topic_id": format_uuid(t.get("topic_id")),
           "partitions": t.get("num_partitions"), "replication_factor": t.get("replication_factor"),
           "validate_only": args.validate_only, "error": err, "error_message": t.get("error_message")}
    if args.json:
        print_json(doc)
    elif err is None:
        verb = "would be created (validate only)" if args.validate_only else "created"
        if t["error_code"]:
            print(f"Topic {args.topic} already exists.")
        else:
            print(f"Created topic {args.topic}." if not args.validate_only else f"Topic {args.topic} {verb}.")
    if err is not None:
        raise ToolError(f"{err}: {t.get('error_message') or 'cannot create topic ' + args.topic}")
    return 0


def _names(admin: KafkaAdminClient, args: argparse.Namespace) -> list[str]:
    match = topic_matcher(args.topic)
    names = sorted(n for n in admin.list_topics() if match(n))
    if args.exclude_internal:
        names = [n for n in names if n not in INTERNAL_TOPICS]
    return names


def _list(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    names = _names(admin, args)
    if args.json:
        print_json(names)
    else:
        for n in names:
            print(n)
    return 0


def _topic_configs(admin: KafkaAdminClient, names: list[str]) -> dict[str, dict[str, str | None]]:
    """Non-default config values per topic (what kafka-topics prints under ``Configs:``)."""
    if not names:
        return {}

    try:
        res = admin.describe_configs([ConfigResource("topic", n) for n in names], config_filter="modified")
    except Exception:  # a broker without DescribeConfigs still gets a describe
        return {}
    return {name: {k: v.get("value") for k, v in cfg.items()} for name, cfg in res.get("topic", {}).items()}


def _min_isr(admin: KafkaAdminClient, names: list[str]) -> dict[str, int]:
    """Each topic's effective min.insync.replicas (its override or the broker default)."""
    if not names:
        return {}

    res = admin.describe_configs([ConfigResource("topic", n, ["min.insync.replicas"]) for n in names])
    out = {}
    for name, cfg in res.get("topic", {}).items():
        value = (cfg.get("min.insync.replicas") or {}).get("value")
        if value is not None:
            out[name] = int(value)
    return out


def describe_topics_doc(admin: KafkaAdminClient, names: list[str]) -> list[dict[str, JSON]]:
    meta = admin.describe_topics(names) if names else []
    configs = _topic_configs(admin, names)
    out = []
    for t in sorted(meta, key=lambda t: t["name"]):
        parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
        out.append({
            "topic": t["name"],
            "topic_id": format_uuid(t.get("topic_id")),
            "is_internal": t.get("is_internal", False),
            "error": error_name(t.get("error_code", 0)),
            "partition_count": len(parts),
            "replication_factor": len(parts[0]["replica_nodes"]) if parts else 0,
            "configs": configs.get(t["name"], {}),
            "partitions": [{
                "partition": p["partition_index"],
                "leader": p["leader_id"],
                "leader_epoch": p.get("leader_epoch"),
                "replicas": p["replica_nodes"],
                "isr": p["isr_nodes"],
                "offline_replicas": p.get("offline_replicas") or [],
                "error": error_name(p.get("error_code", 0)),
            } for p in parts],
        })
    return out


def _live_brokers(admin: KafkaAdminClient) -> set[int]:
    """Broker ids in Metadata: the brokers the cluster considers alive."""
    brokers = admin.describe_cluster().get("brokers", [])  # DescribeCluster, or Metadata on old brokers
    return {b["broker_id"] for b in brokers}


def _describe(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    names = _names(admin, args)
    if args.topic and not names and not args.if_exists:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")
    doc = describe_topics_doc(admin, names)
    if args.topics_with_overrides:
        doc = [t for t in doc if t["configs"]]
    live = _live_brokers(admin) if args.unavailable_partitions else set()
    min_isr = _min_isr(admin, [t["topic"] for t in doc]) \
        if args.under_min_isr_partitions or args.at_min_isr_partitions else {}
    for t in doc:
        # Kafka's TopicCommand: under-replicated when the ISR is smaller than the replica set;
        # unavailable when there is no leader or the leader is not a live broker.
        if args.under_replicated_partitions:
            t["partitions"] = [p for p in t["partitions"] if len(p["isr"]) < len(p["replicas"])]
        if args.unavailable_partitions:
            t["partitions"] = [p for p in t["partitions"] if p["leader"] < 0 or p["leader"] not in live]
        if args.under_min_isr_partitions:  # Kafka: no leader, or fewer in sync than min.insync.replicas
            m = min_isr.get(t["topic"], 1)
            t["partitions"] = [p for p in t["partitions"] if p["leader"] < 0 or len(p["isr"]) < m]
        if args.at_min_isr_partitions:  # one more loss and acks=all writes fail
            m = min_isr.get(t["topic"], 1)
            t["partitions"] = [p for p in t["partitions"] if p["leader"] >= 0 and len(p["isr"]) == m]
    if args.json:
        print_json(doc)
        return 0
    partition_filter = (args.under_replicated_partitions or args.unavailable_partitions
                        or args.under_min_isr_partitions or args.at_min_isr_partitions)
    printed = 0
    for t in doc:
        if partition_filter and not t["partitions"]:
            continue
        if printed:
            print()
        printed += 1
        cfg = ",".join(f"{k}={v}" for k, v in sorted(t["configs"].items()))
        print(f"Topic: {t['topic']}\tTopicId: {t['topic_id'] or '-'}\tPartitionCount: {t['partition_count']}"
              f"\tReplicationFactor: {t['replication_factor']}\tConfigs: {cfg}")
        if args.topics_with_overrides:
            continue
        print_table(["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE", "ERROR"], [
            (p["partition"], p["leader"], p["leader_epoch"], ",".join(map(str, p["replicas"])),
             ",".join(map(str, p["isr"])), ",".join(map(str, p["offline_replicas"])) or None, p["error"])
            for p in t["partitions"]])
    return 0


def _alter(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    if not args.topic:
        raise ToolError("--alter requires --topic")
    if args.partitions is None and not args.config:
        raise ToolError("--alter needs --partitions N (or --config k=v)")
    names = _names(admin, args)
    if not names:
        if args.if_exists:
            return 0
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")
    results = []
    if args.partitions is not None:
        resp = admin.create_partitions({n: args.partitions for n in names},
                                       validate_only=args.validate_only, raise_errors=False)
        for r in resp.results:
            results.append({"topic": r.name, "partitions": args.partitions,
                            "error": error_name(r.error_code), "error_message": r.error_message})
    if args.config:
        cfg = parse_properties(args.config)
        res = admin.alter_configs([ConfigResource("topic", n, dict(cfg)) for n in names],
                                  validate_only=args.validate_only, raise_on_unknown=False)
        for n, outcome in res.get("topic", {}).items():
            results.append({"topic": n, "configs": cfg, "error": None if outcome == "OK" else outcome})
    failed = [r for r in results if r["error"]]
    if args.json:
        print_json(results)
    else:
        for r in results:
            what = f"partitions={r['partitions']}" if "partitions" in r else \
                ",".join(f"{k}={v}" for k, v in r["configs"].items())
            if r["error"]:
                print(f"Failed to alter topic {r['topic']} ({what}): {r['error']}"
                      f"{': ' + r['error_message'] if r.get('error_message') else ''}")
            else:
                print(f"Altered topic {r['topic']}: {what}{' (validate only)' if args.validate_only else ''}")
    return 1 if failed else 0


def _delete(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    if not args.topic:
        raise ToolError("--delete requires --topic")
    names = [n for n in _names(admin, args) if n not in INTERNAL_TOPICS or n == args.topic]
    if not names:
        if args.if_exists:
            return 0
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")
    res = admin.delete_topics(names, raise_errors=False)
    results = [{"topic": r.get("name"), "error": error_name(r["error_code"]),
                "error_message": r.get("error_message")} for r in res["topics"]]
    if args.json:
        print_json(results)
    else:
        for r in results:
            if r["error"]:
                print(f"Failed to delete topic {r['topic']}: {r['error']}")
            else:
                print(f"Deleted topic {r['topic']}.")
    return 1 if any(r["error"] for r in results) else 0
