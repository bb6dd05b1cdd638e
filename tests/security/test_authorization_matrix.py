"""The authorization matrix: every API the broker registers, with and without the ACLs it needs.

Convention 14: each handler declares (``@api(..., authz=...)``) the operation, resource and
error code of every check it makes. This test enumerates the registry, so an API added later
is covered (or fails ``test_every_api_declares_its_authorization``) without editing here.

For each API a request is built from kafka-python's schema class at the broker's lowest and
highest version, every name field set to ``secured`` (the topic, group and transactional id
that exist) and a few fields set so that the request is meaningful (acks=-1, a consumer's
replica id, a real record batch). Then, against a real broker subprocess:

1. as ``User:ANONYMOUS`` with no ACL at all (``allow.everyone.if.no.acl.found=false``), each
   API answers one of the error codes it declares, the filtering APIs (Metadata listing,
   ListGroups, ListTransactions) show nothing, and no connection is dropped;
2. restarted with ``super.users=User:ANONYMOUS``: nothing was written or changed by the
   denied requests (log end offset, topics, committed offsets, ACLs, quotas);
3. as super user, the same requests answer no authorization error anywhere.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker.apis import REGISTRY, load_all
from protocol.api_keys import ApiKey
from protocol.messages import REQUEST_CLASSES, RESPONSE_CLASSES
from tests.support.rawclient import RawClient, build_batch

AUTHZ_CODES = {29, 30, 31, 53}  # TOPIC/GROUP/CLUSTER/TRANSACTIONAL_ID_AUTHORIZATION_FAILED
NAME = "secured"
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
# APIs that filter what they show rather than fail: checked for leaks instead.
FILTERING = {ApiKey.LIST_GROUPS, ApiKey.LIST_TRANSACTIONS}
# Controller-to-broker APIs: a single broker answers them CLUSTER_AUTHORIZATION_FAILED whatever
# the ACLs (the sender is no broker of a cluster); for them phase 3 relies on the authorizer log.
INTER_BROKER = {ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN}
# Versions without an error field answer a denial with nothing (Kafka does the same).
SILENT = {(ApiKey.DESCRIBE_LOG_DIRS, v): (lambda r: r.results == []) for v in range(3)}


def test_every_api_declares_its_authorization() -> None:
    load_all()
    undeclared = sorted(s.name for s in REGISTRY.values() if s.authz is None)
    assert not undeclared, f"APIs without an authz= declaration (convention 14): {undeclared}"


def _fill(cls: Any, version: int, overrides: dict[str, Any], ctx: dict[str, Any]) -> Any:
    """An instance of the schema class with every field of ``version`` given a plausible value."""
    values: dict[str, Any] = {}
    for field in cls._struct._fields:
        if not field.for_version_q(version):
            continue
        name = field.name
        if name in overrides:
            values[name] = overrides[name]
        elif field.is_struct_array():
            values[name] = [_fill(getattr(cls, field.type_str), version, overrides, ctx)]
        elif field.is_struct():
            values[name] = _fill(getattr(cls, field.type_str), version, overrides, ctx)
        elif field.is_array():
            values[name] = [_simple(field.array_of.type_str, name, ctx)]
        else:
            values[name] = _simple(field.type_str, name, ctx)
    return cls(version=version, **values) if hasattr(cls, "API_KEY") else cls(**values)


def _simple(type_str: str, name: str, ctx: dict[str, Any]) -> Any:
    if type_str == "string":
        return NAME
    if type_str == "bool":
        return False
    if type_str in ("bytes", "records"):
        return ctx["batch"] if name == "records" else b""
    if type_str == "uuid":
        return ctx["topic_id"]
    if type_str == "float64":
        return 1.0
    if "timeout" in name or name.endswith("_ms"):
        return 5000
    if name in ("replica_id", "producer_id", "producer_epoch", "current_leader_epoch", "leader_epoch",
                "committed_leader_epoch", "generation_id", "generation_id_or_member_epoch"):
        return -1
    if name == "resource_type" or name == "resource_type_filter":
        return 2
    if name in ("pattern_type_filter", "resource_pattern_type", "pattern_type", "operation", "permission_type"):
        return 3
    if name in ("max_bytes", "partition_max_bytes", "count"):
        return 1 << 20 if "bytes" in name else 2
    return 0


# Per-API overrides on top of the generic filling, and extra variants of a request.
OVERRIDES: dict[int, dict[str, Any]] = {
    ApiKey.PRODUCE: {"acks": -1, "transactional_id": None},
    ApiKey.FETCH: {"max_wait_ms": 0, "min_bytes": 0, "isolation_level": 0},
    ApiKey.INIT_PRODUCER_ID: {"transaction_timeout_ms": 60000},
    ApiKey.METADATA: {"allow_auto_topic_creation": False},
}
VARIANTS: list[tuple[int, dict[str, Any], str]] = [
    (ApiKey.INIT_PRODUCER_ID, {"transactional_id": None}, "idempotent producer"),
    (ApiKey.FIND_COORDINATOR, {"key_type": 1}, "transaction coordinator"),
    (ApiKey.FETCH, {"replica_id": 0}, "follower fetch"),
    (ApiKey.PRODUCE, {"acks": -1, "transactional_id": NAME}, "transactional produce"),
    (ApiKey.METADATA, {"allow_auto_topic_creation": True, "name": "new-topic"}, "auto-creation"),
]


def _requests(ctx: dict[str, Any], versions: dict[int, tuple[int, int]]) -> list[tuple[int, int, Any, str]]:
    out = []
    for key, spec in sorted(REGISTRY.items()):
        cls = REQUEST_CLASSES[key]
        for v in sorted({spec.min_version, spec.max_version}):
            out.append((key, v, _fill(cls, v, OVERRIDES.get(key, {}), ctx), ""))
    for key, extra, label in VARIANTS:
        spec = REGISTRY[key]
        v = spec.max_version
        if key == ApiKey.FETCH:
            v = min(v, 14)  # replica_id is a top-level field before v15
        out.append((key, v, _fill(REQUEST_CLASSES[key], v, {**OVERRIDES.get(key, {}), **extra}, ctx), label))
    return out


def _error_codes(obj: Any, out: set[int] | None = None) -> set[int]:
    out = set() if out is None else out
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k.endswith("error_code") and isinstance(v, int):
                out.add(v)
            else:
                _error_codes(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _error_codes(v, out)
    return out


def _send(client: RawClient, key: int, version: int, request: Any) -> Any:
    return client.roundtrip(request, version, RESPONSE_CLASSES[key])


def _state(bootstrap: str) -> dict[str, Any]:
    """What the denied requests must not have changed, read as super user."""
    from kafka.admin import KafkaAdminClient

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=NAME, enable_auto_commit=False)
    try:
        tp = TopicPartition(NAME, 0)
        end = c.end_offsets([tp])[tp]
        committed = c.committed(tp)
        topics = sorted(c.topics())
    finally:
        c.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        from kafka.admin import (
            ACLFilter,
            ACLOperation,
            ACLPermissionType,
            ACLResourcePatternType,
            ResourcePatternFilter,
            ResourceType,
        )

        acls, _err = admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                   ResourcePatternFilter(ResourceType.ANY, None,
                                                                         ACLResourcePatternType.ANY)))
        partitions = len(admin.describe_topics([NAME])[0]["partitions"])
    finally:
        admin.close()
    return {"end": end, "committed": committed, "topics": topics, "acls": len(acls), "partitions": partitions}


def test_authorization_matrix(broker_factory: Any) -> None:
    load_all()
    b = broker_factory({**AUTHORIZER, "super.users": "User:ANONYMOUS", "num.partitions": 1,
                        "auto.create.topics.enable": "true"})
    # Set-up as super user: a topic with a record, a group with a committed offset.
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    p.send(NAME, b"before").get(timeout=30)
    p.close()
    c = KafkaConsumer(NAME, bootstrap_servers=b.bootstrap, group_id=NAME, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=10000)
    assert next(iter(c)).value == b"before"
    c.commit()
    c.close()
    before = _state(b.bootstrap)
    assert before["end"] == 1 and before["committed"] == 1

    with RawClient(b.host, b.port) as rc:
        from kafka.protocol.metadata import MetadataRequest, MetadataResponse

        md = rc.roundtrip(MetadataRequest(version=12, topics=[MetadataRequest.MetadataRequestTopic(
            topic_id=uuid.UUID(int=0), name=NAME)], allow_auto_topic_creation=False,
            include_topic_authorized_operations=False), 12, MetadataResponse)
        topic_id = md.topics[0].topic_id
    ctx = {"topic_id": topic_id, "batch": build_batch([(None, b"denied", [])])}

    # 1. No ACLs, not a super user: every API is refused with a code it declares.
    b.overrides.pop("super.users")
    b.restart()
    failures = []
    with RawClient(b.host, b.port) as rc:
        for key, version, request, label in _requests(ctx, rc.versions):
            spec = REGISTRY[key]
            what = f"{spec.name} v{version}{' (' + label + ')' if label else ''}"
            try:
                resp = _send(rc, key, version, request)
            except Exception as e:  # a dropped connection or undecodable answer
                failures.append(f"{what}: {type(e).__name__}: {e}")
                rc.close()
                rc.__init__(b.host, b.port)  # type: ignore[misc]
                continue
            codes = _error_codes(resp.to_dict())
            declared = {int(r.error) for r in spec.authz or ()}
            if (key, version) in SILENT:
                if not SILENT[(key, version)](resp):
                    failures.append(f"{what}: expected an empty answer, got {resp}")
                continue
            if not declared or key in FILTERING:
                if codes & AUTHZ_CODES:
                    failures.append(f"{what}: authorization error {codes & AUTHZ_CODES} from an API that "
                                    "declares none / filters instead")
                continue
            if not codes & declared:
                failures.append(f"{what}: expected one of {sorted(declared)}, got codes {sorted(codes)}")
        # Nothing leaks through the listing APIs.
        md = rc.roundtrip(MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False), 12, MetadataResponse)
        assert [t.name for t in md.topics] == [], "Metadata listed topics the principal may not DESCRIBE"
        from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse

        lg = rc.roundtrip(ListGroupsRequest(version=4, states_filter=[]), 4, ListGroupsResponse)
        assert lg.error_code == 0 and lg.groups == [], f"ListGroups leaked {lg.groups}"
    assert not failures, "authorization matrix failures:\n" + "\n".join(failures)
    log = b.log_text()
    for key in INTER_BROKER & set(REGISTRY):  # their 31 must come from the authorizer, as logged
        assert f"operation = CLUSTER_ACTION from host = 127.0.0.1 on resource = CLUSTER:LITERAL:kafka-cluster " \
               f"for request = {REGISTRY[key].name}" in log, REGISTRY[key].name

    # 2. Nothing the denied requests asked for happened.
    b.overrides["super.users"] = "User:ANONYMOUS"
    b.restart()
    after = _state(b.bootstrap)
    assert after == before, f"denied requests changed the broker's state: {before} -> {after}"

    # 3. As super user no request meets an authorization error.
    denials_before = b.log_text().count(" is Denied operation = ")
    failures = []
    with RawClient(b.host, b.port) as rc:
        for key, version, request, label in _requests(ctx, rc.versions):
            what = f"{REGISTRY[key].name} v{version}{' (' + label + ')' if label else ''}"
            try:
                resp = _send(rc, key, version, request)
            except Exception as e:
                failures.append(f"{what}: {type(e).__name__}: {e}")
                rc.close()
                rc.__init__(b.host, b.port)  # type: ignore[misc]
                continue
            codes = _error_codes(resp.to_dict())
            if codes & AUTHZ_CODES and key not in INTER_BROKER:
                failures.append(f"{what}: authorization error {sorted(codes & AUTHZ_CODES)} for a super user")
    assert not failures, "super user failures:\n" + "\n".join(failures)
    assert b.log_text().count(" is Denied operation = ") == denials_before, "a super user was denied"
    assert "Traceback" not in b.log_text(), b.log_tail()


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
