"""``samsa configs --entity-type users|clients|ips``: client quotas, as kafka-configs.sh manages them.

Entities are given as kafka-configs.sh does, one ``--entity-type`` followed by its
``--entity-name NAME`` or ``--entity-default``, up to two of them for a user + client id
pair::

    samsa configs --alter --entity-type users --entity-name alice --add-config producer_byte_rate=1048576
    samsa configs --alter --entity-type users --entity-name alice --entity-type clients --entity-default \\
        --add-config consumer_byte_rate=2097152,request_percentage=200
    samsa configs --describe --entity-type users          # every user entity
    samsa configs --alter --entity-type ips --entity-name 1.2.3.4 --add-config connection_creation_rate=5
    samsa configs --alter --entity-type ips --entity-default --add-config connection_creation_rate=100

An ``ips`` entity stands alone (KIP-612: only ``connection_creation_rate``, new connections
per second from that address, enforced when they are accepted).

``--alter`` sends one AlterClientQuotas (``--add-config`` sets, ``--delete-config`` removes);
``--describe`` one DescribeClientQuotas (a type without a name matches every entity of that
type) and prints kafka-configs.sh's lines: ``Quota configs for user-principal 'alice' are
producer_byte_rate=1048576.0``.
"""

from __future__ import annotations

import argparse

from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest
from kafka.protocol.admin import DescribeClientQuotasRequest as Req

from ._common import ToolError, admin_client, error_name, parse_add_config, print_json, send_request

ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
LABELS = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


class EntityChain(argparse.Action):
    """Records --entity-type/--entity-name/--entity-default in command-line order (as the plain
    attributes too, for the topic/broker code path)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        value = True if self.nargs == 0 else values
        setattr(namespace, self.dest, value)
        chain = list(getattr(namespace, "entity_chain", None) or [])
        chain.append((self.dest, value))
        namespace.entity_chain = chain


def is_quota_entity(args: argparse.Namespace) -> bool:
    """Is this a client-quota command? ``--entity-type users`` alone is shared with SCRAM
    credentials (broker/tools/user_scram.py): a describe, or an alter of ``SCRAM-*`` keys, goes there."""
    chain = getattr(args, "entity_chain", None) or []
    types = [v for k, v in chain if k == "entity_type"]
    if not any(t in ENTITY_TYPES for t in types):
        return False
    if "clients" in types or "ips" in types or any(k == "entity_default" for k, _v in chain):
        return True
    if args.verb == "describe":
        return False
    keys = [k.split("=", 1)[0].strip() for k in (args.add_config or "").split(",")] + \
        [k.strip() for k in (args.delete_config or "").split(",")]
    return not any(k.startswith("SCRAM-") for k in keys if k)


def print_user_quotas(admin: KafkaAdminClient, name: str | None) -> None:
    """The quota lines kafka-configs.sh prints for ``--describe --entity-type users`` (before the
    SCRAM credential lines)."""
    ns = argparse.Namespace(json=False)
    _describe(admin, ns, [("user", name, MATCH_ANY if name is None else MATCH_EXACT)])


def _entities(args: argparse.Namespace) -> list[tuple[str, str | None, int]]:
    """[(entity type, name, match type)] from the chain."""
    out: list[tuple[str, str | None, int]] = []
    for key, value in args.entity_chain:
        if key == "entity_type":
            if value not in ENTITY_TYPES:
                raise ToolError(f"--entity-type {value} cannot be combined with users/clients/ips")
            out.append((ENTITY_TYPES[value], None, MATCH_ANY))
        elif not out:
            raise ToolError(f"--{key.replace('_', '-')} must follow an --entity-type")
        elif key == "entity_name":
            out[-1] = (out[-1][0], value, MATCH_EXACT)
        else:
            out[-1] = (out[-1][0], None, MATCH_DEFAULT)
    if len({e[0] for e in out}) != len(out):
        raise ToolError("each entity type may be given once")
    return out


def main(args: argparse.Namespace) -> int | None:
    entities = _entities(args)
    admin = admin_client(args)
    try:
        if args.verb == "describe":
            return _describe(admin, args, entities)
        if any(m == MATCH_ANY for _t, _n, m in entities):
            raise ToolError("--alter needs --entity-name or --entity-default after each --entity-type")
        adds = parse_add_config(args.add_config) if args.add_config else {}
        deletes = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
        if not adds and not deletes:
            raise ToolError("--alter needs --add-config and/or --delete-config")
        ops = []
        for k, v in adds.items():
            try:
                ops.append((k, float(v), False))
            except ValueError as e:
                raise ToolError(f"Quota {k} must be a number, not {v!r}") from e
        ops += [(k, 0.0, True) for k in deletes]
        E = AlterClientQuotasRequest.EntryData
        req = AlterClientQuotasRequest(entries=[E(entity=[E.EntityData(entity_type=t, entity_name=n) for t, n, _m in entities],
                             ops=[E.OpData(key=k, value=v, remove=r) for k, v, r in ops])],
                  validate_only=bool(args.validate_only))
        resp = send_request(admin, req)
        for result in resp.entries:
            if result.error_code:
                raise ToolError(f"{error_name(result.error_code)}: {result.error_message or ''}".rstrip(": "))
        what = _label([(t, n) for t, n, _m in entities])
        if args.json:
            print_json({"entity": what, "set": adds, "deleted": deletes, "validate_only": bool(args.validate_only)})
        else:
            print(f"Completed updating config for {what}.")
        return 0
    finally:
        admin.close()


def _label(entity: list[tuple[str, str | None]]) -> str:
    return ", ".join(f"the default {LABELS[t]}" if n is None else f"{LABELS[t]} '{n}'" for t, n in entity)


def _describe(admin: KafkaAdminClient, args: argparse.Namespace, entities: list[tuple[str, str | None, int]]) -> int:
    req = Req(components=[Req.ComponentData(entity_type=t, match_type=m, match=n) for t, n, m in entities],
              strict=True)  # kafka-configs.sh: only entities of exactly these types
    resp = send_request(admin, req)
    if resp.error_code:
        raise ToolError(f"{error_name(resp.error_code)}: {resp.error_message or ''}".rstrip(": "))
    rows = []
    for entry in resp.entries or []:
        entity = sorted(((e.entity_type, e.entity_name) for e in entry.entity), key=lambda x: x[0] != "user")
        rows.append((entity, {v.key: v.value for v in entry.values}))
    if args.json:
        print_json([{"entity": {t: n for t, n in ent}, "quotas": q} for ent, q in rows])
        return 0
    for ent, q in rows:
        print(f"Quota configs for {_label(ent)} are " + ", ".join(f"{k}={v}" for k, v in sorted(q.items())))
    return 0
