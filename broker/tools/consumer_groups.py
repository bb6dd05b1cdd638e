"""``samsa consumer-groups``: list, describe, reset offsets of, and delete consumer groups.

Mirrors ``kafka-consumer-groups.sh``:

* ``--list [--state] [--type [classic|consumer]]``: ListGroups (with each group's state from
  v4, KIP-518, and its type from v5, KIP-848; a type filters the list).
* ``--describe --group G | --all-groups [--offsets | --members [--verbose] | --state]``:
  ConsumerGroupDescribe (KIP-848 consumer groups), ShareGroupDescribe and
  DescribeShareGroupOffsets (KIP-932 share groups: the current offset is the share-partition
  start offset) or, for a classic group, DescribeGroups --
  as Kafka's admin client, which falls back on GROUP_ID_NOT_FOUND -- + OffsetFetch +
  ListOffsets, giving per-partition CURRENT-OFFSET, LOG-END-OFFSET and LAG with the owning
  member, as Kafka prints it.
* ``--reset-offsets --group G (--topic T[:P,P] ... | --all-topics)`` with one scenario of
  ``--to-earliest/--to-latest/--to-current/--to-offset N/--shift-by N/--to-datetime
  DT/--by-duration PnDTnHnMnS`` and ``--dry-run`` (the default) or ``--execute``. Targets
  are clamped to ``[log start, log end]`` like Kafka does; executing needs an inactive group
  (Empty or Dead), since a live member would overwrite the commit at its next commit.
* ``--delete --group G``: DeleteGroups. ``--delete-offsets --group G --topic T[:P]``:
  OffsetDelete (KIP-496).
"""

from __future__ import annotations

import argparse
import re
import time
from collections import defaultdict
from datetime import datetime, timedelta

from kafka.admin import KafkaAdminClient, OffsetSpec, OffsetTimestamp
from kafka.errors import KafkaError
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kafka.structs import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

from protocol.kip848 import ConsumerGroupDescribeRequest
from protocol.kip932 import ShareGroupDescribeRequest

from ._common import (
    JSON,
    Subparsers,
    ToolError,
    add_bootstrap,
    add_output,
    admin_client,
    error_name,
    list_topic_partitions,
    print_json,
    print_table,
    run,
    send_request,
)
from .share_groups import share_group_offsets

RESET_SCENARIOS = ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by", "to_datetime",
                   "by_duration")


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("consumer-groups", help="List, describe, reset and delete consumer groups "
                              "(like kafka-consumer-groups.sh).",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    verbs = p.add_mutually_exclusive_group(required=True)
    for verb in ("list", "describe", "reset-offsets", "delete", "delete-offsets"):
        verbs.add_argument(f"--{verb}", dest="verb", action="store_const", const=verb)
    p.add_argument("--group", action="append", help="Group id (repeatable).")
    p.add_argument("--all-groups", action="store_true", help="Every group the broker knows.")
    p.add_argument("--type", nargs="?", const="", default=None, metavar="TYPE",
                   help="With --list: show each group's type (classic, consumer); "
                        "with a TYPE, list only groups of that type.")
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,P]",
                   help="With --reset-offsets/--delete-offsets: topic, optionally with partitions.")
    p.add_argument("--all-topics", action="store_true",
                   help="With --reset-offsets: every topic the group has offsets for.")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", dest="view", action="store_const", const="offsets",
                      help="With --describe: per-partition offsets and lag (default).")
    view.add_argument("--members", dest="view", action="store_const", const="members",
                      help="With --describe: the members.")
    view.add_argument("--state", dest="view", action="store_const", const="state",
                      help="With --describe: the group's state; with --list: show states.")
    scen = p.add_mutually_exclusive_group()
    scen.add_argument("--to-earliest", action="store_true")
    scen.add_argument("--to-latest", action="store_true")
    scen.add_argument("--to-current", action="store_true")
    scen.add_argument("--to-offset", type=int)
    scen.add_argument("--shift-by", type=int)
    scen.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss[+HH:MM]")
    scen.add_argument("--by-duration", metavar="PnDTnHnMnS")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="Show the new offsets only (default).")
    mode.add_argument("--execute", action="store_true", help="Commit the new offsets.")
    p.add_argument("--verbose", action="store_true", help="With --describe --members: show assignments.")
    add_output(p)
    p.set_defaults(func=run(main), view=None)


def main(args: argparse.Namespace) -> int | None:
    admin = admin_client(args)
    try:
        return {"list": _list, "describe": _describe, "reset-offsets": _reset, "delete": _delete,
                "delete-offsets": _delete_offsets}[args.verb](admin, args)
    finally:
        admin.close()


def _list_groups(admin: KafkaAdminClient, types: list[str] | None = None) -> list[dict[str, JSON]]:
    groups = admin.list_groups(types_filter=types) if types else admin.list_groups()
    return sorted(({"group": g["group_id"], "protocol_type": g.get("protocol_type"),
                    "state": g.get("group_state"), "type": g.get("group_type") or "classic"}
                   for g in groups), key=lambda g: g["group"])


def _group_ids(admin: KafkaAdminClient, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g["group"] for g in _list_groups(admin)]
    if not args.group:
        raise ToolError(f"--{args.verb} needs --group G (or --all-groups)")
    return list(dict.fromkeys(args.group))


def _list(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    groups = _list_groups(admin, [args.type] if args.type else None)
    if args.json:
        print_json(groups)
    elif args.view == "state" and args.type is not None:
        print_table(["GROUP", "TYPE", "STATE"], [(g["group"], g["type"], g["state"]) for g in groups])
    elif args.view == "state":
        print_table(["GROUP", "STATE"], [(g["group"], g["state"]) for g in groups])
    elif args.type is not None:
        print_table(["GROUP", "TYPE"], [(g["group"], g["type"]) for g in groups])
    else:
        for g in groups:
            print(g["group"])
    return 0


def _assignment(member: dict[str, JSON]) -> list[tuple[str, int]]:
    """The member's partitions, whether kafka-python decoded the assignment or not."""
    a = member.get("member_assignment")
    if not a:
        return []
    if isinstance(a, (bytes, bytearray)):
        try:
            a = ConsumerProtocolAssignment.decode(bytes(a)).to_dict()
        except Exception:
            return []
    elif not isinstance(a, dict):
        a = a.to_dict()
    out: list[tuple[str, int]] = []
    for tp in a.get("assigned_partitions") or []:
        if isinstance(tp, dict):
            topic, parts = tp["topic"], tp.get("partitions")
        else:
            topic, parts = tp
        out.extend((topic, p) for p in parts or [])
    return out


def describe_consumer_group_raw(admin: KafkaAdminClient, group: str, coordinator: int) -> dict[str, JSON] | None:
    """ConsumerGroupDescribe (KIP-848) in the shape :func:`describe_groups_raw` returns, or None
    when the group is not a consumer group (or the broker does not serve the API)."""
    try:
        resp = send_request(admin, ConsumerGroupDescribeRequest(
            group_ids=[group], include_authorized_operations=False), node_id=coordinator)
    except (KafkaError, ValueError, KeyError):
        return None
    g = resp.groups[0]
    if g.error_code:
        return None
    members = [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "member_epoch": m.member_epoch,
                "member_assignment": {"assigned_partitions": [
                    {"topic": tp.topic_name, "partitions": list(tp.partitions)}
                    for tp in m.assignment.topic_partitions]}} for m in g.members]
    return {"group_id": group, "group_state": g.group_state, "protocol_type": "consumer",
            "protocol_data": g.assignor_name, "group_type": "consumer",
            "group_epoch": g.group_epoch, "members": members, "error": None}


def describe_share_group_raw(admin: KafkaAdminClient, group: str, coordinator: int) -> dict[str, JSON] | None:
    """ShareGroupDescribe (KIP-932) in the shape :func:`describe_groups_raw` returns, or None when
    the group is not a share group (or the broker does not serve the API)."""
    try:
        resp = send_request(admin, ShareGroupDescribeRequest(
            group_ids=[group], include_authorized_operations=False), node_id=coordinator)
    except (KafkaError, ValueError, KeyError):
        return None
    g = resp.groups[0]
    if g.error_code:
        return None
    members = [{"member_id": m.member_id, "group_instance_id": None, "client_id": m.client_id,
                "client_host": m.client_host, "member_epoch": m.member_epoch,
                "member_assignment": {"assigned_partitions": [
                    {"topic": tp.topic_name, "partitions": list(tp.partitions)}
                    for tp in m.assignment.topic_partitions]}} for m in g.members]
    return {"group_id": group, "group_state": g.group_state, "protocol_type": "share",
            "protocol_data": g.assignor_name, "group_type": "share",
            "group_epoch": g.group_epoch, "members": members, "error": None}


def describe_groups_raw(admin: KafkaAdminClient, group: str) -> tuple[dict[str, JSON], int]:
    """The group at its coordinator, as a plain dict, and the coordinator id: a consumer group
    (KIP-848) through ConsumerGroupDescribe, else DescribeGroups.

    DescribeGroups is sent raw (without authorized operations) rather than through
    ``KafkaAdminClient.describe_groups``, which fails on ACL bits it does not know.
    """
    coordinator = admin._manager.run(admin._find_coordinator_id, group)
    consumer = describe_consumer_group_raw(admin, group, coordinator)
    if consumer is not None:
        return consumer, coordinator
    share = describe_share_group_raw(admin, group, coordinator)
    if share is not None:
        return share, coordinator
    resp = send_request(admin, DescribeGroupsRequest(groups=[group], include_authorized_operations=False),
                        node_id=coordinator)
    raw = resp.groups[0]
    g = raw.to_dict()
    g["group_type"] = "classic"
    # keep the members' metadata/assignment as the bytes on the wire (to_dict turns them into text)
    for m, rm in zip(g.get("members") or [], raw.members or [], strict=False):
        m["member_assignment"] = bytes(rm.member_assignment) if rm.member_assignment is not None else None
        m["member_metadata"] = bytes(rm.member_metadata) if rm.member_metadata is not None else None
    if g.get("error_code"):
        g["error"] = error_name(g["error_code"])
    else:
        g["error"] = None
    return g, coordinator


def describe_group(admin: KafkaAdminClient, group: str) -> dict[str, JSON]:
    desc, coordinator = describe_groups_raw(admin, group)
    members = []
    owner: dict[tuple[str, int], dict[str, JSON]] = {}
    for m in desc.get("members") or []:
        parts = sorted(_assignment(m))
        info = {"member_id": m["member_id"], "group_instance_id": m.get("group_instance_id"),
                "client_id": m.get("client_id"), "host": m.get("client_host"),
                "partitions": [{"topic": t, "partition": p} for t, p in parts]}
        members.append(info)
        for tp in parts:
            owner[tp] = info
    if desc.get("group_type") == "share":  # KIP-932: a share group's position is its start offset
        tps: dict[tuple[str, int], int | None] = {
            (r["topic"], r["partition"]): r["start_offset"] for r in share_group_offsets(admin, group)}
    else:
        committed = {} if desc.get("error") else admin.list_group_offsets({group: None}).get(group, {})
        tps = {(tp.topic, tp.partition): oam.offset for tp, oam in committed.items()}
    for tp in owner:
        tps.setdefault(tp, None)

    ends = admin.list_partition_offsets({TopicPartition(t, p): OffsetSpec.LATEST for t, p in tps}) if tps else {}
    offsets = []
    for (t, p), cur in sorted(tps.items()):
        end = ends.get(TopicPartition(t, p))
        end_off = end.offset if end is not None else None
        cur = cur if cur is not None and cur >= 0 else None
        m = owner.get((t, p))
        offsets.append({"topic": t, "partition": p, "current_offset": cur, "log_end_offset": end_off,
                        "lag": (end_off - cur) if cur is not None and end_off is not None else None,
                        "consumer_id": m["member_id"] if m else None, "host": m["host"] if m else None,
                        "client_id": m["client_id"] if m else None})
    return {"group": group, "type": desc.get("group_type"), "state": desc.get("group_state"),
            "protocol_type": desc.get("protocol_type"),
            "assignment_strategy": desc.get("protocol_data") or None, "coordinator": coordinator,
            "error": desc.get("error"), "members": members, "offsets": offsets}


def _describe(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    docs = [describe_group(admin, g) for g in _group_ids(admin, args)]
    if args.json:
        print_json(docs)
        return 0
    view = args.view or "offsets"
    for i, d in enumerate(docs):
        if i:
            print()
        if d["state"] == "Dead":
            print(f"Consumer group '{d['group']}' does not exist.")
            continue
        if view == "state":
            print_table(["GROUP", "TYPE", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                         "#MEMBERS"],
                        [(d["group"], d["type"], d["coordinator"], d["assignment_strategy"],
                          d["state"], len(d["members"]))])
        elif view == "members":
            rows = []
            for m in d["members"]:
                row = [d["group"], m["member_id"], m["group_instance_id"], m["host"], m["client_id"],
                       len(m["partitions"])]
                if args.verbose:
                    by_topic: dict[str, list[int]] = defaultdict(list)
                    for tp in m["partitions"]:
                        by_topic[tp["topic"]].append(tp["partition"])
                    row.append(",".join(f"{t}({','.join(map(str, ps))})" for t, ps in by_topic.items()) or "-")
                rows.append(row)
            headers = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
            print_table(headers + (["ASSIGNMENT"] if args.verbose else []), rows)
        else:
            if not d["members"] and d["state"] in ("Empty", None):
                print(f"Consumer group '{d['group']}' has no active members.\n")
            print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                         "CONSUMER-ID", "HOST", "CLIENT-ID"],
                        [(d["group"], o["topic"], o["partition"], o["current_offset"], o["log_end_offset"],
                          o["lag"], o["consumer_id"], o["host"], o["client_id"]) for o in d["offsets"]])
    return 0


def _parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    if ":" in spec:
        topic, parts = spec.rsplit(":", 1)
        try:
            return topic, [int(x) for x in parts.split(",") if x.strip()]
        except ValueError as e:
            raise ToolError(f"Invalid --topic {spec!r}: expected TOPIC or TOPIC:P,P") from e
    return spec, None


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_duration(spec: str) -> timedelta:
    """ISO-8601 ``PnDTnHnMnS`` as kafka-consumer-groups' --by-duration takes it."""
    m = _DURATION.match(spec.upper())
    if not m or spec.upper() in ("P", "PT"):
        raise ToolError(f"Invalid --by-duration {spec!r}: expected e.g. PT1H30M or P1DT2H")
    d, h, mi, s = m.groups()
    return timedelta(days=int(d or 0), hours=int(h or 0), minutes=int(mi or 0), seconds=float(s or 0))


def parse_datetime_ms(spec: str) -> int:
    """``YYYY-MM-DDTHH:mm:SS.sss`` (local time unless it carries Z or an offset) -> epoch ms."""
    try:
        dt = datetime.fromisoformat(spec.replace("Z", "+00:00"))
    except ValueError as e:
        raise ToolError(f"Invalid --to-datetime {spec!r}: expected YYYY-MM-DDTHH:mm:SS.sss") from e
    if dt.tzinfo is None:
        dt = dt.astimezone()  # local time, as Kafka's tool assumes
    return int(dt.timestamp() * 1000)


def _reset(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    scenario = next((s for s in RESET_SCENARIOS if getattr(args, s) not in (None, False)), None)
    if scenario is None:
        raise ToolError("--reset-offsets needs one of --to-earliest, --to-latest, --to-current, "
                        "--to-offset, --shift-by, --to-datetime, --by-duration")
    if not args.topic and not args.all_topics:
        raise ToolError("--reset-offsets needs --topic T[:P,P] or --all-topics")
    groups = _group_ids(admin, args)
    plans = []
    for group in groups:
        desc, _ = describe_groups_raw(admin, group)
        state = desc.get("group_state")
        if args.execute and state not in ("Empty", "Dead"):
            raise ToolError(f"Assignments can only be reset if the group '{group}' is inactive, "
                            f"but the current state is {state}.")
        committed = admin.list_group_offsets({group: None}).get(group, {})
        current = {(tp.topic, tp.partition): o.offset for tp, o in committed.items()}
        tps: list[tuple[str, int]] = []
        if args.all_topics:
            tps = sorted(current)
        else:
            for spec in args.topic:
                topic, parts = _parse_topic_spec(spec)
                if parts is None:
                    known = list_topic_partitions(admin, [topic])
                    parts = known.get(topic, [])
                tps.extend((topic, p) for p in parts)
        if not tps:
            raise ToolError(f"group '{group}': no partitions to reset")
        keys = [TopicPartition(t, p) for t, p in tps]
        earliest = admin.list_partition_offsets({k: OffsetSpec.EARLIEST for k in keys})
        latest = admin.list_partition_offsets({k: OffsetSpec.LATEST for k in keys})
        by_time: dict[TopicPartition, OffsetAndTimestamp] = {}
        if scenario in ("to_datetime", "by_duration"):
            ts = parse_datetime_ms(args.to_datetime) if scenario == "to_datetime" else \
                int((time.time() - parse_duration(args.by_duration).total_seconds()) * 1000)
            by_time = admin.list_partition_offsets({k: OffsetTimestamp(ts) for k in keys})
        new: dict[TopicPartition, int] = {}
        rows = []
        for k in keys:
            lo, hi = earliest[k].offset, latest[k].offset
            cur = current.get((k.topic, k.partition))
            cur = cur if cur is not None and cur >= 0 else None
            if scenario == "to_earliest":
                target = lo
            elif scenario == "to_latest":
                target = hi
            elif scenario == "to_current":
                target = cur if cur is not None else hi
            elif scenario == "to_offset":
                target = args.to_offset
            elif scenario == "shift_by":
                target = (cur if cur is not None else hi) + args.shift_by
            else:
                found = by_time.get(k)
                target = found.offset if found is not None and found.offset >= 0 else hi
            target = max(lo, min(hi, target))
            new[k] = target
            rows.append({"group": group, "topic": k.topic, "partition": k.partition,
                         "previous_offset": cur, "new_offset": target})
        errors: dict[tuple[str, int], str | None] = {}
        if args.execute:
            res = admin.alter_group_offsets(group, {k: OffsetAndMetadata(o, "", None) for k, o in new.items()})
            for k, err in res.items():
                errors[(k.topic, k.partition)] = None if err.errno == 0 else err.__name__
        for r in rows:
            r["error"] = errors.get((r["topic"], r["partition"]))
        plans.extend(rows)
    if args.json:
        print_json({"executed": bool(args.execute), "offsets": plans})
    else:
        print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"] + (["ERROR"] if args.execute else []),
                    [[r["group"], r["topic"], r["partition"], r["new_offset"]]
                     + ([r["error"]] if args.execute else []) for r in plans])
        if not args.execute:
            print("\n(dry run: nothing committed; add --execute to apply)")
    return 1 if any(r["error"] for r in plans) else 0


def _delete(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    groups = _group_ids(admin, args)
    res = admin.delete_groups(groups)
    results = [{"group": g, "error": None if r == "OK" else r} for g, r in res.items()]
    if args.json:
        print_json(results)
    else:
        for r in results:
            if r["error"]:
                print(f"Failed to delete group '{r['group']}': {r['error']}")
            else:
                print(f"Deletion of requested consumer groups ('{r['group']}') was successful.")
    return 1 if any(r["error"] for r in results) else 0


def _delete_offsets(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    if not args.group or len(args.group) != 1:
        raise ToolError("--delete-offsets needs exactly one --group")
    if not args.topic:
        raise ToolError("--delete-offsets needs --topic T[:P,P]")
    group = args.group[0]
    keys: list[TopicPartition] = []
    for spec in args.topic:
        topic, parts = _parse_topic_spec(spec)
        if parts is None:
            parts = list_topic_partitions(admin, [topic]).get(topic, [])
        keys.extend(TopicPartition(topic, p) for p in parts)
    res = admin.delete_group_offsets(group, keys)
    results = [{"group": group, "topic": k.topic, "partition": k.partition,
                "error": None if e.errno == 0 else error_name(e.errno)} for k, e in sorted(res.items())]
    if args.json:
        print_json(results)
    else:
        print_table(["TOPIC", "PARTITION", "STATUS"],
                    [(r["topic"], r["partition"], r["error"] or "Successful") for r in results])
    return 1 if any(r["error"] for r in results) else 0
