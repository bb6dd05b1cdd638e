"""What security needs of the broker's ZooKeeper client, as Protocols.

The ACL store, the quota store and the SCRAM credential store keep their state in ZooKeeper in a
cluster, through ``broker/cluster/zk/client.py``'s client (Kafka's KafkaZkClient). That client
lives in the cluster layer; these Protocols name the few calls security makes, so security needs
no import from there and a reader sees exactly what it relies on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class EntityConfigs(Protocol):
    """``/config/<entity type>/<name>`` znodes (users, clients, ips) and their change notices."""

    def children(self, path: str) -> list[str]: ...

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]: ...

    def set_entity_config(self, entity_type: str, name: str, config: dict[str, str], *,
                          notify: bool = False) -> None: ...


class AclNodes(Protocol):
    """``/kafka-acl/...`` znodes and the ``/kafka-acl-changes`` notices."""

    def get_acl_nodes(self) -> dict[str, bytes]: ...

    def set_acl_node(self, path: str, data: bytes | None) -> None: ...

    def notify_acl_change(self, what: str) -> None: ...

    def watch_children(self, path: str, callback: Callable[[list[str]], object]) -> None: ...


class SecurityZk(EntityConfigs, AclNodes, Protocol):
    """The whole of what security calls on the ZooKeeper client."""


# (entity type, name) of a changed ``/config/...`` entity; the topic registry calls each listener
EntityChangeListener = Callable[[str, str], object]
