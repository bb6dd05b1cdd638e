"""The ACL authorizer: Kafka's ``AclAuthorizer`` / ``StandardAuthorizer`` semantics.

Enabled by ``authorizer.class.name`` (either Kafka class name is accepted); without it
``Broker.authorizer`` is ``None`` and every check is a single attribute test.

Theory of operation
-------------------
``authorize(principal, host, operation, resource)`` decides in this order:

1. a principal listed in ``super.users`` (``User:admin;User:ops``) is allowed everything;
2. the ACLs that apply to the resource are gathered: LITERAL patterns with its exact name,
   the LITERAL wildcard ``*`` of its type, and every PREFIXED pattern that is a prefix of the
   name (looked up by each prefix of the name, so the cost is the name's length, not the
   number of ACLs);
3. none at all -> ``allow.everyone.if.no.acl.found`` (default false);
4. a DENY entry matching principal (or ``User:*``), host (or ``*``) and operation (or ALL)
   denies, whatever ALLOWs exist (DENY wins);
5. otherwise an ALLOW entry matching principal, host and an operation that implies the one
   asked for (READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies
   DESCRIBE_CONFIGS, ALL implies everything) allows; else deny.

Changes (CreateAcls/DeleteAcls) go to the :class:`~broker.security.acl_store.AclStore` first,
then into the in-memory map, so they are in force for the next request; a change the store
could not write (ZooKeeper slow or unreachable: REQUEST_TIMED_OUT) changes nothing in memory.
Denials are logged on ``samsa.authorizer`` (Kafka's ``kafka.authorizer.logger``) at INFO,
allows at DEBUG. The authorizer is owned by the event loop; ZooKeeper is read and written off it
(:mod:`.zk_access`), and one :class:`~.zk_access.ZkSequencer` keeps the changes and the reloads
after another broker's change in order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from protocol.errors import InvalidConfigError

from ..config.properties import BrokerConfig
from .acl import (
    IMPLIED_BY,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from .acl_store import AclStore, FileAclStore, ZkAclStore
from .zk_access import AclNodes, ZkSequencer

log = logging.getLogger("samsa.authorizer")

AUTHORIZER_CLASS_NAMES = frozenset({
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
})


def parse_super_users(spec: str) -> frozenset[str]:
    users = [u.strip() for u in spec.split(";") if u.strip()]
    for u in users:
        if ":" not in u:
            raise InvalidConfigError(message=f"Invalid super.users entry {u!r}: expected User:name")
    return frozenset(users)


class AclAuthorizer:
    """Decides access from the ACLs in ``store``; see the module docstring for the rules."""

    def __init__(self, store: AclStore, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False):
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_everyone = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # PREFIXED patterns by type then prefix, for the prefix-walk lookup.
        self._prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        self._max_prefix = 0
        self.sequencer = ZkSequencer("ACLs")

    def load(self) -> None:
        """At start-up, before any client is served."""
        self._set(self.store.load())

    def _set(self, acls: dict[ResourcePattern, set[AccessControlEntry]]) -> None:
        self._acls = {p: frozenset(e) for p, e in acls.items() if e}
        self._reindex()

    def reload_soon(self, store: ZkAclStore) -> None:
        """Another broker changed the ACLs: read them off the loop, apply them here, in turn."""
        async def reload() -> None:
            self._set(await store.read())
        self.sequencer.reload_soon(reload)

    def _reindex(self) -> None:
        self._prefixed = {}
        for p, e in self._acls.items():
            if p.pattern_type == PatternType.PREFIXED:
                self._prefixed.setdefault(p.resource_type, {})[p.name] = e
        self._max_prefix = max((len(n) for d in self._prefixed.values() for n in d), default=0)

    # --- decisions ------------------------------------------------------------------------

    def _matching(self, resource_type: ResourceType, name: str) -> list[frozenset[AccessControlEntry]]:
        out = []
        lit = self._acls.get(ResourcePattern(resource_type, name, PatternType.LITERAL))
        if lit:
            out.append(lit)
        if name != WILDCARD_RESOURCE:
            wild = self._acls.get(ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL))
            if wild:
                out.append(wild)
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for i in range(1, min(len(name), self._max_prefix) + 1):
                e = prefixed.get(name[:i])
                if e:
                    out.append(e)
        return out

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str, api: str = "", log_denied: bool = True) -> bool:
        allowed = self._decide(principal, host, operation, resource_type, name)
        if not allowed and log_denied:
            log.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s "
                     "for request = %s", principal, operation.name, host, resource_type.name, name, api)
        elif allowed and log.isEnabledFor(logging.DEBUG):
            log.debug("Principal = %s is Allowed operation = %s from host = %s on resource = %s:LITERAL:%s "
                      "for request = %s", principal, operation.name, host, resource_type.name, name, api)
        return allowed

    def _decide(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                name: str) -> bool:
        if principal in self.super_users:
            return True
        acl_sets = self._matching(resource_type, name)
        if not acl_sets:
            return self.allow_everyone
        implied = IMPLIED_BY.get(operation, frozenset((operation,)))
        allowed = False
        for entries in acl_sets:
            for e in entries:
                if e.principal != principal and e.principal != WILDCARD_PRINCIPAL:
                    continue
                if e.host != host and e.host != WILDCARD_HOST:
                    continue
                if e.permission_type == AclPermissionType.DENY:
                    if e.operation == operation or e.operation == AclOperation.ALL:
                        return False
                elif e.operation == AclOperation.ALL or e.operation in implied:
                    allowed = True
        return allowed

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May the principal ``operation`` on *some* resource of this type (KIP-679)?

        True for a super user, or when an ALLOW for the principal and operation exists on a
        pattern of the type that no DENY on the same pattern or on the wildcard cancels.
        """
        if principal in self.super_users:
            return True
        if self.allow_everyone and not any(p.resource_type == resource_type for p in self._acls):
            return True

        def hit(e: AccessControlEntry, perm: AclPermissionType) -> bool:
            return e.permission_type == perm and e.principal in (principal, WILDCARD_PRINCIPAL) and \
                e.host in (host, WILDCARD_HOST) and e.operation in (operation, AclOperation.ALL)

        wild = self._acls.get(ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL), frozenset())
        if any(hit(e, AclPermissionType.DENY) for e in wild):
            return False
        for p, entries in self._acls.items():
            if p.resource_type != resource_type:
                continue
            if any(hit(e, AclPermissionType.ALLOW) for e in entries) and \
                    not any(hit(e, AclPermissionType.DENY) for e in entries):
                return True
        return False

    # --- administration -------------------------------------------------------------------

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        return sorted(AclBinding(p, e) for p, entries in self._acls.items() if flt.matches_pattern(p)
                      for e in entries if flt.matches_entry(e))

    async def create_acls(self, bindings: list[AclBinding]) -> None:
        """Store and enforce ``bindings``; KafkaError (nothing changed) when the store failed."""
        async with self.sequencer.lock:  # computed from, and applied over, the previous change
            changed: dict[ResourcePattern, set[AccessControlEntry]] = {}
            for b in bindings:
                changed.setdefault(b.pattern, set(self._acls.get(b.pattern, ()))).add(b.entry)
            await self._apply(changed)

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """The bindings each filter deleted (a binding matched by two filters counts for both);
        KafkaError (nothing deleted) when the store failed."""
        async with self.sequencer.lock:
            results = [self.acls(f) for f in filters]
            changed: dict[ResourcePattern, set[AccessControlEntry]] = {}
            for deleted in results:
                for b in deleted:
                    changed.setdefault(b.pattern, set(self._acls.get(b.pattern, ()))).discard(b.entry)
            await self._apply(changed)
            return results

    async def _apply(self, changed: dict[ResourcePattern, set[AccessControlEntry]]) -> None:
        if not changed:
            return
        await self.store.write(changed)  # durable first, then in force
        for p, entries in changed.items():
            if entries:
                self._acls[p] = frozenset(entries)
            else:
                self._acls.pop(p, None)
        self._reindex()


def configure_authorizer(config: BrokerConfig, zk: AclNodes | None = None) -> AclAuthorizer | None:
    """The authorizer ``authorizer.class.name`` asks for (None when empty), loaded from its store:
    ZooKeeper in a cluster (``zk``, the broker's KafkaZkClient), else a file beside the logs."""
    name = str(config.get("authorizer.class.name") or "").strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASS_NAMES:
        raise InvalidConfigError(message=f"Unsupported authorizer.class.name {name!r}; Samsa implements "
                                 f"{', '.join(sorted(AUTHORIZER_CLASS_NAMES))}")
    store: AclStore = FileAclStore(config.log_dirs[0] / FileAclStore.FILE) if zk is None else ZkAclStore(zk)
    authorizer = AclAuthorizer(store, parse_super_users(str(config.get("super.users") or "")),
                               bool(config.get("allow.everyone.if.no.acl.found")))
    authorizer.load()
    if isinstance(store, ZkAclStore):
        zk_store = store
        zk_store.watch(lambda: authorizer.reload_soon(zk_store))  # changes made through another broker
    log_file = str(config.get("authorizer.log.file") or "")
    if log_file:  # Kafka's kafka-authorizer.log: the decisions in their own file, not the server log
        handler = logging.FileHandler(log_file)
        handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(message)s (%(name)s)"))
        log.addHandler(handler)
        log.propagate = False
    log.info("ACL authorizer %s enabled: %d resource patterns, super.users=%s, "
             "allow.everyone.if.no.acl.found=%s", name, len(authorizer._acls),
             ",".join(sorted(authorizer.super_users)) or "-", authorizer.allow_everyone)
    return authorizer
