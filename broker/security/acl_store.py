"""Where ACLs are kept: a small storage interface with Kafka's ZooKeeper layout.

Kafka (ZooKeeper mode) stores the ACLs of one resource pattern in one znode:
``/kafka-acl/<ResourceType>/<name>`` for LITERAL patterns and
``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` for PREFIXED ones, each holding
``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",
"host":"*"}]}``. :func:`znode_path` and :func:`encode_acls`/:func:`decode_acls` are that
layout, so a ZooKeeper-backed store only has to read and write those nodes (and watch
``/kafka-acl-changes``) behind the same :class:`AclStore` interface.

:class:`FileAclStore` serves the single broker: one JSON file mapping znode path -> znode
JSON, replaced atomically (write + fsync + rename) on every change, so a crash leaves the
old or the new set, never half of one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypedDict

from ..cluster import zk_data as zd  # every znode path and its JSON live there, as Kafka's ZkData
from .acl import (
    OPERATION_NAMES,
    PERMISSION_NAMES,
    RESOURCE_TYPE_NAMES,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from .zk_access import AclNodes, zk_request

LITERAL_ROOT = zd.KAFKA_ACL
PREFIXED_ROOT = zd.KAFKA_ACL_PREFIXED
_TYPES_BY_NAME = {v: k for k, v in RESOURCE_TYPE_NAMES.items()}
_OPS_BY_NAME = {v: k for k, v in OPERATION_NAMES.items()}
_PERMS_BY_NAME = {v: k for k, v in PERMISSION_NAMES.items()}


def znode_path(p: ResourcePattern) -> str:
    root = PREFIXED_ROOT if p.pattern_type == PatternType.PREFIXED else LITERAL_ROOT
    return f"{root}/{RESOURCE_TYPE_NAMES[p.resource_type]}/{p.name}"


def pattern_from_path(path: str) -> ResourcePattern:
    if path.startswith(PREFIXED_ROOT + "/"):
        rest, pt = path[len(PREFIXED_ROOT) + 1:], PatternType.PREFIXED
    elif path.startswith(LITERAL_ROOT + "/"):
        rest, pt = path[len(LITERAL_ROOT) + 1:], PatternType.LITERAL
    else:
        raise ValueError(f"not an ACL znode: {path}")
    type_name, _, name = rest.partition("/")
    return ResourcePattern(_TYPES_BY_NAME[type_name], name, pt)


class AclJson(TypedDict):
    """One ACL of a resource's znode, in Kafka's JSON."""

    principal: str
    permissionType: str
    operation: str
    host: str


class AclsJson(TypedDict):
    """A resource's znode (``/kafka-acl/<type>/<name>``), in Kafka's JSON."""

    version: int
    acls: list[AclJson]


def encode_acls(entries: set[AccessControlEntry]) -> AclsJson:
    return {"version": 1, "acls": [
        {"principal": e.principal, "permissionType": PERMISSION_NAMES[e.permission_type],
         "operation": OPERATION_NAMES[e.operation], "host": e.host} for e in sorted(entries)]}


def decode_acls(doc: AclsJson) -> set[AccessControlEntry]:
    return {AccessControlEntry(a["principal"], a["host"], AclOperation(_OPS_BY_NAME[a["operation"]]),
                               AclPermissionType(_PERMS_BY_NAME[a["permissionType"]]))
            for a in doc.get("acls", [])}


class AclStore(Protocol):
    """Persistence for the authorizer; it keeps its own in-memory view and calls these."""

    def load(self) -> dict[ResourcePattern, set[AccessControlEntry]]:
        """Every stored pattern with its entries."""
        ...

    async def write(self, changed: dict[ResourcePattern, set[AccessControlEntry]]) -> None:
        """Replace the entries of each pattern in ``changed`` (an empty set deletes the pattern);
        raises KafkaError (REQUEST_TIMED_OUT, ...) when the store could not be written."""
        ...


class FileAclStore:
    """One JSON file: ``{"<znode path>": <znode JSON>, ...}``."""

    FILE = "samsa-acls.json"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._nodes: dict[str, AclsJson] = {}

    def load(self) -> dict[ResourcePattern, set[AccessControlEntry]]:
        if not self.path.exists():
            self._nodes = {}
            return {}
        self._nodes = json.loads(self.path.read_text() or "{}")
        out: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for path, doc in self._nodes.items():
            out[pattern_from_path(path)] = decode_acls(doc)
        return out

    async def write(self, changed: dict[ResourcePattern, set[AccessControlEntry]]) -> None:
        for pattern, entries in changed.items():
            key = znode_path(pattern)
            if entries:
                self._nodes[key] = encode_acls(entries)
            else:
                self._nodes.pop(key, None)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(self._nodes, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


class ZkAclStore:
    """ACLs in ZooKeeper, shared by every broker of the cluster (Kafka's ZkAclStore).

    A change writes the resource's znode, then a sequential ``/kafka-acl-changes/acl_changes_``
    node; every broker watches that path and reloads its ACLs, so a change made through any
    broker is in force on all of them. (Kafka purges notifications older than 15 minutes; here
    they stay until an operator removes them.)
    """

    def __init__(self, zk: AclNodes) -> None:
        self.zk = zk

    def load(self) -> dict[ResourcePattern, set[AccessControlEntry]]:
        """Every ACL znode (blocking: at start-up, or on a ZooKeeper request thread)."""
        out: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for path, data in self.zk.get_acl_nodes().items():
            entries = decode_acls(json.loads(data or b"{}"))
            if entries:
                out[pattern_from_path(path)] = entries
        return out

    async def write(self, changed: dict[ResourcePattern, set[AccessControlEntry]]) -> None:
        """The znodes and the change notice, written on a ZooKeeper request thread."""
        await zk_request(self.zk, self._write, changed)

    def _write(self, changed: dict[ResourcePattern, set[AccessControlEntry]]) -> None:  # a ZooKeeper thread
        for pattern, entries in changed.items():
            data = json.dumps(encode_acls(entries), separators=(",", ":")).encode() if entries else None
            self.zk.set_acl_node(znode_path(pattern), data)
        self.zk.notify_acl_change(",".join(str(p) for p in changed))

    async def read(self) -> dict[ResourcePattern, set[AccessControlEntry]]:
        """:meth:`load`, on a ZooKeeper request thread."""
        return await zk_request(self.zk, self.load)

    def watch(self, on_change: Callable[[], object]) -> None:
        """Call ``on_change()`` in the event loop whenever any broker changed the ACLs."""
        seen: set[str] = set()
        first = [True]

        def children(names: list[str]) -> None:
            new = set(names) - seen
            seen.update(names)
            if first[0]:
                first[0] = False
                return
            if new:
                on_change()
        self.zk.watch_children(zd.KAFKA_ACL_CHANGES, children)


__all__ = ["AclStore", "FileAclStore", "ResourceType", "decode_acls", "encode_acls", "znode_path"]
