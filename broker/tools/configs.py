"""``samsa configs``: describe and alter topic, broker and group configs (like kafka-configs.sh).

Entities: ``--entity-type topics|brokers|groups`` with ``--entity-name NAME`` or
``--entity-default`` (the cluster-wide dynamic broker default, resource name ""); the
shortcuts ``--topic T``, ``--broker ID`` and ``--broker-defaults`` do the same. Groups'
configs (Kafka 4.x GROUP resource: ``consumer.session.timeout.ms``,
``share.auto.offset.reset``, ...) are described per group, or for every group
ListConfigResources names without ``--entity-name``.

``--describe`` shows what kafka-configs shows: the overrides (dynamic configs) of each
entity, or every config with ``--all``, with its source, read-only/sensitive flags and,
with ``--synonyms``, the chain of synonyms a value was resolved through (KIP-226).

``--alter --add-config k1=v1,k2=[a,b] --delete-config k3,k4`` sends one
IncrementalAlterConfigs request (KIP-339: SET for added keys, DELETE to return a key to
its default), falling back to the legacy AlterConfigs (which replaces the whole set, so we
first read the current overrides) when the broker lacks it. The broker validates:
an invalid value comes back as INVALID_CONFIG with the broker's message.
"""

from __future__ import annotations

import argparse

from kafka.admin import KafkaAdminClient
from kafka.errors import IncompatibleBrokerVersion
from kafka.protocol.admin import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
)

from . import client_quotas, user_scram
from ._common import (
    JSON,
    Subparsers,
    ToolError,
    add_bootstrap,
    add_output,
    admin_client,
    broker_ids,
    error_name,
    parse_add_config,
    print_json,
    print_table,
    run,
    send_request,
)

RESOURCE_TYPES = {"topics": 2, "brokers": 4, "broker-loggers": 8, "groups": 32}
SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "DYNAMIC_CLIENT_METRICS_CONFIG",
                8: "DYNAMIC_GROUP_CONFIG"}
TYPE_NAMES = {0: "UNKNOWN", 1: "BOOLEAN", 2: "STRING", 3: "INT", 4: "SHORT", 5: "LONG", 6: "DOUBLE",
              7: "LIST", 8: "CLASS", 9: "PASSWORD"}
DYNAMIC_SOURCES = {1, 2, 3, 6, 7, 8}
OP_SET, OP_DELETE = 0, 1


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("configs", help="Describe and alter topic and broker configs "
                              "(like kafka-configs.sh).",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    verbs = p.add_mutually_exclusive_group(required=True)
    verbs.add_argument("--describe", dest="verb", action="store_const", const="describe")
    verbs.add_argument("--alter", dest="verb", action="store_const", const="alter")
    p.add_argument("--entity-type", choices=sorted([*RESOURCE_TYPES, *client_quotas.ENTITY_TYPES]),
                   action=client_quotas.EntityChain,
                   help="topics, brokers, groups, users (quotas, SCRAM credentials), clients or ips (quotas).")
    p.add_argument("--entity-name", action=client_quotas.EntityChain, help="Topic name, broker id, group id, user or client id.")
    p.add_argument("--entity-default", action=client_quotas.EntityChain, nargs=0, default=False,
                   help="The cluster-wide dynamic default (brokers), or the default user / client id.")
    p.add_argument("--topic", help="Shortcut for --entity-type topics --entity-name TOPIC.")
    p.add_argument("--broker", help="Shortcut for --entity-type brokers --entity-name ID.")
    p.add_argument("--broker-defaults", action="store_true",
                   help="Shortcut for --entity-type brokers --entity-default.")
    p.add_argument("--all", action="store_true", help="With --describe: every config, not just overrides.")
    p.add_argument("--synonyms", action="store_true", help="With --describe: show each config's synonyms.")
    p.add_argument("--documentation", action="store_true",
                   help="With --describe: show each config's documentation (DescribeConfigs v3+).")
    p.add_argument("--add-config", metavar="K=V,K2=[A,B]",
                   help="Configs to set: comma separated; bracket values that contain commas.")
    p.add_argument("--delete-config", metavar="K,K2", help="Configs to remove (back to their default).")
    p.add_argument("--validate-only", action="store_true",
                   help="With --alter: have the broker validate without applying.")
    add_output(p)
    p.set_defaults(func=run(main))


def _entity(args: argparse.Namespace) -> tuple[str, str | None]:
    """(entity type, name or None for all); the default entity is name ""."""
    if args.topic is not None:
        return "topics", args.topic
    if args.broker is not None:
        return "brokers", args.broker
    if args.broker_defaults:
        return "brokers", ""
    if not args.entity_type:
        raise ToolError("give --entity-type (topics|brokers) or --topic/--broker/--broker-defaults")
    if args.entity_default:
        if args.entity_type != "brokers":
            raise ToolError("--entity-default is only supported for --entity-type brokers")
        return args.entity_type, ""
    return args.entity_type, args.entity_name


def main(args: argparse.Namespace) -> int | None:
    if client_quotas.is_quota_entity(args):
        return client_quotas.main(args)
    etype, name = _entity(args)
    admin = admin_client(args)
    try:
        if etype == "users":
            if args.verb == "describe" and not args.json:
                client_quotas.print_user_quotas(admin, name)
            return _users(admin, args, name)
        if args.verb == "describe":
            return _describe(admin, args, etype, name)
        return _alter(admin, args, etype, name)
    finally:
        admin.close()


def _users(admin: KafkaAdminClient, args: argparse.Namespace, name: str | None) -> int:
    if args.verb == "describe":
        return user_scram.describe(admin, args, name)
    if not name:
        raise ToolError("--alter --entity-type users needs --entity-name")
    adds = parse_add_config(args.add_config) if args.add_config else {}
    deletes = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if not adds and not deletes:
        raise ToolError("--alter needs --add-config and/or --delete-config")
    return user_scram.alter(admin, args, name, adds, deletes)


def describe_configs(admin: KafkaAdminClient, rtype: int, names: list[str], keys: list[str] | None = None,
                     ) -> list[dict[str, JSON]]:
    """One DescribeConfigs per resource (brokers must be asked directly); plain dicts back."""
    out = []
    for name in names:
        req = DescribeConfigsRequest(resources=[(rtype, name, keys)], include_synonyms=True,
                                     include_documentation=True)
        node = int(name) if rtype == 4 and name != "" else None
        resp = send_request(admin, req, node_id=node)
        for r in resp.results:
            entries = []
            for c in r.configs:
                d = c.to_dict()
                source = d.get("config_source")
                if source is None:  # v0: is_default/read_only only
                    source = 5 if d.get("is_default") else (4 if d.get("read_only") and rtype == 4 else 1)
                entries.append({
                    "name": d["name"], "value": d.get("value"), "source": SOURCE_NAMES.get(source, str(source)),
                    "read_only": bool(d.get("read_only")), "sensitive": bool(d.get("is_sensitive")),
                    "type": TYPE_NAMES.get(d.get("config_type", 0), "UNKNOWN"),
                    "documentation": d.get("documentation"),
                    "synonyms": [{"name": s["name"], "value": s.get("value"),
                                  "source": SOURCE_NAMES.get(s["source"], str(s["source"]))}
                                 for s in d.get("synonyms") or []],
                    "_dynamic": source in DYNAMIC_SOURCES,
                })
            out.append({"entity_type": {2: "topics", 4: "brokers", 32: "groups"}.get(r.resource_type, str(r.resource_type)),
                        "entity_name": r.resource_name, "error": error_name(r.error_code),
                        "error_message": r.error_message, "configs": entries})
    return out


def _describe(admin: KafkaAdminClient, args: argparse.Namespace, etype: str, name: str | None) -> int | None:
    rtype = RESOURCE_TYPES[etype]
    if name is None and etype == "groups":  # as kafka-configs.sh: Admin.listConfigResources(GROUP)
        resp = send_request(admin, ListConfigResourcesRequest(resource_types=[rtype]))
        if resp.error_code:
            raise ToolError(f"ListConfigResources failed: {error_name(resp.error_code)}")
        names = sorted(c.resource_name for c in resp.config_resources if c.resource_type == rtype)
    elif name is None:
        names = sorted(admin.list_topics()) if etype == "topics" else [str(b) for b in broker_ids(admin)]
    else:
        names = [name]
    results = describe_configs(admin, rtype, names)
    for r in results:
        if not args.all:
            r["configs"] = [c for c in r["configs"] if c["_dynamic"]]
        for c in r["configs"]:
            del c["_dynamic"]
            if not args.documentation:
                c.pop("documentation", None)
    if args.json:
        print_json(results)
    else:
        for i, r in enumerate(results):
            if i:
                print()
            label = "default broker" if r["entity_type"] == "brokers" and r["entity_name"] == "" else \
                f"{r['entity_type'][:-1]} {r['entity_name']}"
            if r["error"]:
                print(f"Error describing {label}: {r['error']}: {r['error_message'] or ''}")
                continue
            print(f"{'All' if args.all else 'Dynamic'} configs for {label} are:")
            headers = ["NAME", "VALUE", "SOURCE", "TYPE", "READ-ONLY", "SENSITIVE"]
            rows = []
            for c in sorted(r["configs"], key=lambda c: c["name"]):
                value = "(sensitive)" if c["sensitive"] and c["value"] is None else c["value"]
                row = [c["name"], value, c["source"], c["type"], str(c["read_only"]).lower(),
                       str(c["sensitive"]).lower()]
                if args.synonyms:
                    row.append(", ".join(f"{s['source']}:{s['name']}={s['value']}" for s in c["synonyms"]))
                if args.documentation:
                    row.append(c.get("documentation") or "")
                rows.append(row)
            if args.synonyms:
                headers.append("SYNONYMS")
            if args.documentation:
                headers.append("DOCUMENTATION")
            print_table(headers, rows)
    return 1 if any(r["error"] for r in results) else 0


def _alter(admin: KafkaAdminClient, args: argparse.Namespace, etype: str, name: str | None) -> int | None:
    if name is None:
        raise ToolError("--alter needs --entity-name (or --entity-default)")
    adds = parse_add_config(args.add_config) if args.add_config else {}
    deletes = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if not adds and not deletes:
        raise ToolError("--alter needs --add-config and/or --delete-config")
    clash = set(adds) & set(deletes)
    if clash:
        raise ToolError(f"config(s) both added and deleted: {', '.join(sorted(clash))}")
    rtype = RESOURCE_TYPES[etype]
    node = int(name) if rtype == 4 and name != "" else None
    entries = [(k, OP_SET, v) for k, v in adds.items()] + [(k, OP_DELETE, None) for k in deletes]
    try:
        req = IncrementalAlterConfigsRequest(resources=[(rtype, name, entries)],
                                             validate_only=args.validate_only)
        resp = send_request(admin, req, node_id=node)
    except IncompatibleBrokerVersion:
        current = describe_configs(admin, rtype, [name])[0]["configs"]
        merged = {c["name"]: c["value"] for c in current
                  if c["source"] in ("DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG",
                                     "DYNAMIC_DEFAULT_BROKER_CONFIG", "DYNAMIC_GROUP_CONFIG")}
        merged.update(adds)
        for k in deletes:
            merged.pop(k, None)
        req = AlterConfigsRequest(resources=[(rtype, name, list(merged.items()))],
                                  validate_only=args.validate_only)
        resp = send_request(admin, req, node_id=node)
    results = [{"entity_type": etype, "entity_name": r.resource_name, "set": adds, "deleted": deletes,
                "validate_only": args.validate_only, "error": error_name(r.error_code),
                "error_message": r.error_message} for r in resp.responses]
    if args.json:
        print_json(results)
    else:
        for r in results:
            label = "default broker" if etype == "brokers" and name == "" else f"{etype[:-1]} '{name}'"
            if r["error"]:
                print(f"Error while executing config command: {r['error']}: {r['error_message'] or ''}")
            elif args.validate_only:
                print(f"Validated config change for {label}.")
            else:
                print(f"Completed updating config for {label}.")
    return 1 if any(r["error"] for r in results) else 0
