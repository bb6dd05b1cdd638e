"""``samsa share-groups``: list, describe, reset the start offsets of, and delete share groups
(KIP-932). Mirrors ``kafka-share-groups.sh``:

* ``--list [--state]``: ListGroups restricted to type ``share``;
* ``--describe --group G | --all-groups [--offsets | --members [--verbose] | --state]``:
  DescribeShareGroupOffsets (each share-partition's start offset, and the lag: records from it to
  the partition's end) or ShareGroupDescribe (members, state, epochs);
* ``--reset-offsets --group G --topic T[:P,P] (--to-earliest | --to-latest | --to-offset N)
  [--dry-run | --execute]``: AlterShareGroupOffsets on an empty group;
* ``--delete-offsets --group G --topic T``: DeleteShareGroupOffsets;
* ``--delete --group G``: DeleteGroups.
"""

from __future__ import annotations

import argparse

from kafka.admin import KafkaAdminClient, OffsetSpec
from kafka.protocol.data_container import DataContainer
from kafka.structs import TopicPartition

from protocol.kip932 import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareGroupDescribeRequest,
)

from ._common import (
    JSON,
    Subparsers,
    ToolError,
    add_bootstrap,
    add_output,
    admin_client,
    error_name,
    print_json,
    print_table,
    run,
    send_request,
)


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("share-groups", help="List, describe, reset and delete share groups "
                              "(like kafka-share-groups.sh).",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    verbs = p.add_mutually_exclusive_group(required=True)
    for verb in ("list", "describe", "reset-offsets", "delete", "delete-offsets"):
        verbs.add_argument(f"--{verb}", dest="verb", action="store_const", const=verb)
    p.add_argument("--group", action="append", help="Group id (repeatable).")
    p.add_argument("--all-groups", action="store_true", help="Every share group the broker knows.")
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,P]",
                   help="With --reset-offsets / --delete-offsets: topic, optionally with partitions.")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", dest="view", action="store_const", const="offsets",
                      help="With --describe: start offsets and lag (default).")
    view.add_argument("--members", dest="view", action="store_const", const="members",
                      help="With --describe: the members.")
    view.add_argument("--state", dest="view", action="store_const", const="state",
                      help="With --describe: the group's state; with --list: show states.")
    scen = p.add_mutually_exclusive_group()
    scen.add_argument("--to-earliest", action="store_true")
    scen.add_argument("--to-latest", action="store_true")
    scen.add_argument("--to-offset", type=int)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="Show the new offsets only (default).")
    mode.add_argument("--execute", action="store_true", help="Write the new start offsets.")
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


def _share_groups(admin: KafkaAdminClient) -> list[dict[str, JSON]]:
    return sorted(({"group": g["group_id"], "state": g.get("group_state")}
                   for g in admin.list_groups(types_filter=["share"])), key=lambda g: g["group"])


def _group_ids(admin: KafkaAdminClient, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g["group"] for g in _share_groups(admin)]
    if not args.group:
        raise ToolError(f"--{args.verb} needs --group G (or --all-groups)")
    return list(dict.fromkeys(args.group))


def _coordinator(admin: KafkaAdminClient, group: str) -> int:
    return int(admin._manager.run(admin._find_coordinator_id, group))


def _list(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    groups = _share_groups(admin)
    if args.json:
        print_json(groups)
    elif args.view == "state":
        print_table(["GROUP", "STATE"], [(g["group"], g["state"]) for g in groups])
    else:
        for g in groups:
            print(g["group"])
    return 0


def describe_share_group(admin: KafkaAdminClient, group: str) -> dict[str, JSON]:
    """ShareGroupDescribe as a plain dict (``error`` names the error, if any)."""
    resp = send_request(admin, ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                        node_id=_coordinator(admin, group))
    g = resp.groups[0]
    return {"group": group, "error": error_name(g.error_code), "state": g.group_state,
            "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
            "assignor": g.assignor_name,
            "members": [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                         "member_epoch": m.member_epoch,
                         "assignment": [(tp.topic_name, p) for tp in m.assignment.topic_partitions
                                        for p in tp.partitions]} for m in g.members]}


def share_group_offsets(admin: KafkaAdminClient, group: str) -> list[dict[str, JSON]]:
    """Each share-partition's start offset (DescribeShareGroupOffsets) and lag to the log end."""
    resp = send_request(admin, DescribeShareGroupOffsetsRequest(groups=[DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]),
                        node_id=_coordinator(admin, group))
    g = resp.groups[0]
    if g.error_code:
        raise ToolError(f"Share group {group}: {error_name(g.error_code)}")
    rows = [{"group": group, "topic": t.topic_name, "partition": p.partition_index,
             "start_offset": p.start_offset if p.start_offset >= 0 else None,
             "error": error_name(p.error_code)} for t in g.topics for p in t.partitions]
    tps = [TopicPartition(r["topic"], r["partition"]) for r in rows if r["start_offset"] is not None]
    ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps}) if tps else {}
    for r in rows:
        end = ends.get(TopicPartition(r["topic"], r["partition"]))
        offset = getattr(end, "offset", None)
        r["lag"] = None if offset is None or r["start_offset"] is None else max(offset - r["start_offset"], 0)
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


def _describe(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    out: list[dict[str, JSON]] = []
    for group in _group_ids(admin, args):
        d = describe_share_group(admin, group)
        if d["error"]:
            raise ToolError(f"Share group {group}: {d['error']}")
        if args.view == "members":
            out += [{"group": group, **m} for m in d["members"]]
        elif args.view == "state":
            out.append({k: d[k] for k in ("group", "state", "group_epoch", "assignment_epoch", "assignor")}
                       | {"members": len(d["members"])})
        else:
            out += share_group_offsets(admin, group)
    if args.json:
        print_json(out)
    elif args.view == "members":
        headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "EPOCH"] + (["ASSIGNMENT"] if args.verbose else [])
        print_table(headers, [[m["group"], m["member_id"], m["host"], m["client_id"], m["member_epoch"]]
                              + ([",".join(f"{t}:{p}" for t, p in m["assignment"])] if args.verbose else [])
                              for m in out])
    elif args.view == "state":
        print_table(["GROUP", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "ASSIGNOR", "#MEMBERS"],
                    [(s["group"], s["state"], s["group_epoch"], s["assignment_epoch"], s["assignor"],
                      s["members"]) for s in out])
    else:
        print_table(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                    [(r["group"], r["topic"], r["partition"], r["start_offset"], r["lag"]) for r in out])
    return 0


def _topics(args: argparse.Namespace) -> list[tuple[str, list[int] | None]]:
    if not args.topic:
        raise ToolError(f"--{args.verb} needs --topic")
    out = []
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        out.append((name, [int(p) for p in parts.split(",")] if parts else None))
    return out


def _reset(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    if not (args.to_earliest or args.to_latest or args.to_offset is not None):
        raise ToolError("--reset-offsets needs --to-earliest, --to-latest or --to-offset N")
    rows = []
    for group in _group_ids(admin, args):
        tps = []
        for name, parts in _topics(args):
            if parts is None:
                meta = admin.describe_topics([name])[0]
                parts = sorted(p.get("partition_index", p.get("partition")) for p in meta.get("partitions") or [])
            tps += [TopicPartition(name, p) for p in parts]
        if args.to_offset is not None:
            target = {tp: args.to_offset for tp in tps}
        else:
            spec = OffsetSpec.EARLIEST if args.to_earliest else OffsetSpec.LATEST
            found = admin.list_partition_offsets({tp: spec for tp in tps})
            target = {tp: found[tp].offset for tp in tps}
        errors: dict[tuple[str, int], str | None] = {}
        if args.execute:
            by_topic: dict[str, list[DataContainer]] = {}  # ...RequestTopic.AlterShareGroupOffsetsRequestPartition
            for tp, off in target.items():
                by_topic.setdefault(tp.topic, []).append(
                    AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic.AlterShareGroupOffsetsRequestPartition(
                        partition_index=tp.partition, start_offset=off))
            resp = send_request(admin, AlterShareGroupOffsetsRequest(group_id=group, topics=[
                AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps) for t, ps in by_topic.items()]),
                node_id=_coordinator(admin, group))
            if resp.error_code:
                raise ToolError(f"Share group {group}: {error_name(resp.error_code)}"
                                + (f" ({resp.error_message})" if resp.error_message else ""))
            errors = {(t.topic_name, p.partition_index): error_name(p.error_code)
                      for t in resp.responses for p in t.partitions}
        rows += [{"group": group, "topic": tp.topic, "partition": tp.partition, "new_start_offset": off,
                  "error": errors.get((tp.topic, tp.partition))} for tp, off in sorted(target.items())]
    if args.json:
        print_json(rows)
    else:
        print_table(["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"] + (["ERROR"] if args.execute else []),
                    [[r["group"], r["topic"], r["partition"], r["new_start_offset"]]
                     + ([r["error"]] if args.execute else []) for r in rows])
    return 1 if any(r["error"] for r in rows) else 0


def _delete_offsets(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    rows = []
    for group in _group_ids(admin, args):
        resp = send_request(admin, DeleteShareGroupOffsetsRequest(group_id=group, topics=[
            DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name=name) for name, _ in _topics(args)]),
            node_id=_coordinator(admin, group))
        if resp.error_code:
            raise ToolError(f"Share group {group}: {error_name(resp.error_code)}")
        rows += [{"group": group, "topic": t.topic_name, "error": error_name(t.error_code)}
                 for t in resp.responses]
    if args.json:
        print_json(rows)
    else:
        print_table(["GROUP", "TOPIC", "STATUS"], [(r["group"], r["topic"], r["error"] or "Successful")
                                                   for r in rows])
    return 1 if any(r["error"] for r in rows) else 0


def _delete(admin: KafkaAdminClient, args: argparse.Namespace) -> int | None:
    groups = _group_ids(admin, args)
    res = admin.delete_groups(groups)
    results = [{"group": g, "error": None if r == "OK" else r} for g, r in res.items()]
    if args.json:
        print_json(results)
    else:
        for r in results:
            print(f"Deletion of share group '{r['group']}' "
                  + ("succeeded." if not r["error"] else f"failed: {r['error']}"))
    return 1 if any(r["error"] for r in results) else 0
