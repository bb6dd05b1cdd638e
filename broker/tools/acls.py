"""``samsa acls``: add, remove and list ACLs (like kafka-acls.sh), over CreateAcls/DeleteAcls/DescribeAcls.

Resources: ``--topic T``, ``--group G``, ``--transactional-id X``, ``--cluster`` (each
repeatable; ``*`` is the wildcard) with ``--resource-pattern-type`` LITERAL (default for
--add/--remove), PREFIXED, or for --list/--remove also ANY (default for --list) and MATCH.
Entries: ``--allow-principal``/``--deny-principal`` (``User:alice``; ``User:*`` for everyone),
``--allow-host``/``--deny-host`` (default ``*``), ``--operation`` (repeatable; default All).
Shortcuts as kafka-acls.sh: ``--producer`` (WRITE, DESCRIBE, CREATE on the topics; WRITE and
DESCRIBE on ``--transactional-id``; IDEMPOTENT_WRITE on the cluster with ``--idempotent``) and
``--consumer`` (READ, DESCRIBE on the topics, READ on ``--group``).

``--list`` prints each resource with its ACLs in kafka-acls.sh's format; ``--principal``
narrows it to one principal. ``--remove`` without entries removes every ACL of the
resources (kafka-acls.sh asks for confirmation; this tool needs ``--force`` for that).
"""

from __future__ import annotations

import argparse
import re

import kafka.admin as ka

from ._common import Subparsers, ToolError, add_bootstrap, add_output, admin_client, print_json, run

OPERATIONS = ["All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "DescribeConfigs",
              "AlterConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens"]
PATTERN_TYPES = ["LITERAL", "PREFIXED", "ANY", "MATCH"]


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("acls", help="Add, remove and list ACLs (like kafka-acls.sh).",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    verbs = p.add_mutually_exclusive_group(required=True)
    verbs.add_argument("--add", dest="verb", action="store_const", const="add")
    verbs.add_argument("--remove", dest="verb", action="store_const", const="remove")
    verbs.add_argument("--list", dest="verb", action="store_const", const="list")
    p.add_argument("--topic", action="append", default=[], help="Topic resource (repeatable; '*' = all).")
    p.add_argument("--group", action="append", default=[], help="Consumer group resource (repeatable).")
    p.add_argument("--transactional-id", action="append", default=[], help="Transactional id resource.")
    p.add_argument("--cluster", action="store_true", help="The cluster resource.")
    p.add_argument("--resource-pattern-type", type=str.upper, choices=PATTERN_TYPES,
                   help="LITERAL or PREFIXED (default LITERAL); --list/--remove also ANY and MATCH.")
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--allow-host", action="append", default=[], help="Hosts for the allow entries (default *).")
    p.add_argument("--deny-host", action="append", default=[], help="Hosts for the deny entries (default *).")
    p.add_argument("--operation", action="append", default=[], type=_operation_name,
                   help=f"One of {', '.join(OPERATIONS)} (repeatable; default All).")
    p.add_argument("--producer", action="store_true", help="Shortcut: the ACLs a producer needs.")
    p.add_argument("--consumer", action="store_true", help="Shortcut: the ACLs a consumer needs.")
    p.add_argument("--idempotent", action="store_true", help="With --producer: IDEMPOTENT_WRITE on the cluster.")
    p.add_argument("--principal", help="With --list: only this principal's ACLs.")
    p.add_argument("--force", action="store_true", help="With --remove: no confirmation needed.")
    add_output(p)
    p.set_defaults(func=run(main))


def _operation_name(value: str) -> str:
    for op in OPERATIONS:
        if value.replace("_", "").lower() == op.lower():
            return op
    raise argparse.ArgumentTypeError(f"invalid operation {value!r}; choose from {', '.join(OPERATIONS)}")


def _op(name: str) -> ka.ACLOperation:
    return ka.ACLOperation[re.sub(r"(?<!^)([A-Z])", r"_\1", name).upper()]


def _resources(args: argparse.Namespace, default_pattern: str,
               ) -> list[tuple[ka.ResourceType, str, ka.ACLResourcePatternType]]:
    pattern = ka.ACLResourcePatternType[args.resource_pattern_type or default_pattern]
    out = [(ka.ResourceType.TOPIC, t) for t in args.topic]
    out += [(ka.ResourceType.GROUP, g) for g in args.group]
    out += [(ka.ResourceType.TRANSACTIONAL_ID, x) for x in args.transactional_id]
    if args.cluster or (args.producer and args.idempotent):
        out.append((ka.ResourceType.CLUSTER, "kafka-cluster"))
    return [(rtype, name, pattern) for rtype, name in out]


def _bindings(args: argparse.Namespace) -> list[ka.ACL]:
    """The ACLs --add/--remove name: resources x principals x hosts x operations."""
    entries = [(p, h, ka.ACLPermissionType.ALLOW) for p in args.allow_principal for h in (args.allow_host or ["*"])]
    entries += [(p, h, ka.ACLPermissionType.DENY) for p in args.deny_principal for h in (args.deny_host or ["*"])]
    for principal, _h, _perm in entries:
        if ":" not in principal:
            raise ToolError(f"Invalid principal {principal!r}: expected Type:name, e.g. User:alice")
    out = []
    for rtype, name, pattern in _resources(args, "LITERAL"):
        if args.producer or args.consumer:
            ops = _shortcut_ops(args, rtype)
        else:
            ops = [_op(o) for o in (args.operation or ["All"])]
        rp = ka.ResourcePattern(rtype, name, pattern)
        out += [ka.ACL(p, h, op, perm, rp) for p, h, perm in entries for op in ops]
    return out


def _shortcut_ops(args: argparse.Namespace, rtype: ka.ResourceType) -> list[ka.ACLOperation]:
    op = ka.ACLOperation
    ops: list[ka.ACLOperation] = []
    if args.producer:
        ops += {ka.ResourceType.TOPIC: [op.WRITE, op.DESCRIBE, op.CREATE],
                ka.ResourceType.TRANSACTIONAL_ID: [op.WRITE, op.DESCRIBE],
                ka.ResourceType.CLUSTER: [op.IDEMPOTENT_WRITE]}.get(rtype, [])
    if args.consumer:
        ops += {ka.ResourceType.TOPIC: [op.READ, op.DESCRIBE], ka.ResourceType.GROUP: [op.READ]}.get(rtype, [])
    return list(dict.fromkeys(ops))


def _pattern_str(rp: ka.ResourcePattern) -> str:
    return f"ResourcePattern(resourceType={rp.resource_type.name}, name={rp.resource_name}, " \
           f"patternType={rp.pattern_type.name})"


def _entry_str(a: ka.ACL) -> str:
    return f"(principal={a.principal}, host={a.host}, operation={a.operation.name}, " \
           f"permissionType={a.permission_type.name})"


def _describe(admin: ka.KafkaAdminClient, rtype: ka.ResourceType, name: str | None, pattern: ka.ACLResourcePatternType,
              principal: str | None = None) -> list[ka.ACL]:
    flt = ka.ACLFilter(principal, None, ka.ACLOperation.ANY, ka.ACLPermissionType.ANY,
                       ka.ResourcePatternFilter(rtype, name, pattern))
    acls, _err = admin.describe_acls(flt)
    return list(acls)


def _print_grouped(acls: list[ka.ACL], args: argparse.Namespace) -> None:
    if args.json:
        print_json([{"resource_type": a.resource_pattern.resource_type.name, "name": a.resource_pattern.resource_name,
                     "pattern_type": a.resource_pattern.pattern_type.name, "principal": a.principal, "host": a.host,
                     "operation": a.operation.name, "permission_type": a.permission_type.name} for a in acls])
        return
    grouped: dict[str, list[ka.ACL]] = {}
    for a in acls:
        grouped.setdefault(_pattern_str(a.resource_pattern), []).append(a)
    for pattern, entries in grouped.items():
        print(f"Current ACLs for resource `{pattern}`: ")
        for a in entries:
            print(f" \t{_entry_str(a)} ")
        print()


def main(args: argparse.Namespace) -> int | None:
    if args.verb == "add" and args.resource_pattern_type in ("ANY", "MATCH"):
        raise ToolError("--add needs --resource-pattern-type LITERAL or PREFIXED")
    admin = admin_client(args)
    try:
        if args.verb == "list":
            resources = _resources(args, "ANY")
            if not resources:
                acls = _describe(admin, ka.ResourceType.ANY, None, ka.ACLResourcePatternType[
                    args.resource_pattern_type or "ANY"], args.principal)
            else:
                acls = [a for rtype, name, pattern in resources
                        for a in _describe(admin, rtype, name, pattern, args.principal)]
            _print_grouped(acls, args)
            return 0
        if not _resources(args, "LITERAL"):
            raise ToolError("name a resource: --topic, --group, --transactional-id or --cluster")
        if args.verb == "add":
            bindings = _bindings(args)
            if not bindings:
                raise ToolError("--add needs --allow-principal or --deny-principal")
            res = admin.create_acls(bindings)
            for a in bindings:
                print(f"Adding ACLs for resource `{_pattern_str(a.resource_pattern)}`: \n \t{_entry_str(a)} \n")
            if res["failed"]:
                for a, err in res["failed"]:
                    print(f"Error: {_entry_str(a)}: {err}")
                return 1
        else:
            bindings = _bindings(args)
            if bindings:
                filters = [ka.ACLFilter(a.principal, a.host, a.operation, a.permission_type,
                                        ka.ResourcePatternFilter(a.resource_pattern.resource_type,
                                                                 a.resource_pattern.resource_name,
                                                                 a.resource_pattern.pattern_type))
                           for a in bindings]
            else:
                if not args.force:
                    raise ToolError("removing every ACL of the resources needs --force")
                filters = [ka.ACLFilter(None, None, ka.ACLOperation.ANY, ka.ACLPermissionType.ANY,
                                        ka.ResourcePatternFilter(rtype, name, pattern))
                           for rtype, name, pattern in _resources(args, "LITERAL")]
            for _flt, matched, err in admin.delete_acls(filters):
                if err is not None and getattr(err, "errno", None):
                    raise ToolError(f"DeleteAcls failed: {getattr(err, '__name__', err)}")
                for a in matched:
                    print(f"Removing ACLs for resource `{_pattern_str(a.resource_pattern)}`: \n \t{_entry_str(a)} \n")
        acls = [a for rtype, name, pattern in _resources(args, "LITERAL")
                for a in _describe(admin, rtype, name, pattern)]
        _print_grouped(acls, args)
        return 0
    finally:
        admin.close()
