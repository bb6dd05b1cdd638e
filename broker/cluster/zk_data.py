"""Every znode path Samsa uses and the JSON stored in it, as Kafka's ``ZkData.scala`` defines them.

An operator who knows Kafka's ZooKeeper mode can read Samsa's state with ``zkCli.sh``:

=====================================================  ==============================================
``/cluster/id``                                        ``{"version":"1","id":"<cluster id>"}``
``/brokers/ids/<id>`` (ephemeral)                      endpoints, host, port, rack, timestamp
``/brokers/topics/<topic>``                            replica assignment and topic id (version 3)
``/brokers/topics/<topic>/partitions/<p>/state``       leader, leader_epoch, isr, controller_epoch
``/controller`` (ephemeral), ``/controller_epoch``     the active controller and its epoch
``/config/topics/<topic>``, ``/config/brokers/<id>``, ``/config/groups/<group>``   config overrides; ``/config/changes`` notifies
``/config/users/<u>``, ``/config/clients/<c>``         client quotas (and SCRAM credentials)
``/config/ips/<ip>``                                   IP connection-creation-rate quotas (KIP-612)
``/admin/delete_topics/<topic>``                       topics queued for deletion
``/admin/reassign_partitions``                         the ongoing reassignment
``/isr_change_notification/isr_change_<seq>``          partitions whose ISR a leader changed
``/latest_producer_id_block``                          the last producer-id block handed out
``/kafka-acl/<Type>/<name>``                            LITERAL ACLs of a resource (broker/security)
``/kafka-acl-extended/prefixed/<Type>/<name>``          PREFIXED ACLs of a resource
``/kafka-acl-changes/acl_changes_<seq>``                "any ACL changed": brokers reload theirs
=====================================================  ==============================================

Invariant: no other module spells a znode path; they all come from here. No I/O and no imports
from the broker: it sits at the bottom of ``broker/`` so that the security stores (ACLs, quotas,
SCRAM credentials) may name their znodes without depending on the ZooKeeper client.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_USERS = "/config/users"
CONFIG_CLIENTS = "/config/clients"
CONFIG_GROUPS = "/config/groups"  # dynamic group configs (KIP-848/932), broker/group_configs.py
CONFIG_IPS = "/config/ips"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
FEATURE = "/feature"  # finalized feature levels (KIP-584), written by the controller
# ACLs (Kafka's ZkAclStore / ExtendedAclZNode); the JSON is broker.security.acl_store's encode_acls.
KAFKA_ACL = "/kafka-acl"
KAFKA_ACL_PREFIXED = "/kafka-acl-extended/prefixed"
KAFKA_ACL_CHANGES = "/kafka-acl-changes"
ACL_CHANGE_PREFIX = "acl_changes_"

# The persistent paths Kafka creates on start-up (KafkaZkClient.createTopLevelPaths).
PERSISTENT_PATHS = (BROKER_IDS, BROKER_TOPICS, BROKER_SEQID, CONFIG_CHANGES, CONFIG_TOPICS, CONFIG_BROKERS,
                    CONFIG_USERS, CONFIG_CLIENTS, CONFIG_IPS, DELETE_TOPICS, ISR_CHANGE_NOTIFICATION, "/cluster")


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def broker_config_path(entity: str) -> str:
    return f"{CONFIG_BROKERS}/{entity}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _loads(data: bytes | None) -> Any:
    return json.loads(data.decode()) if data else None


# --- /feature --------------------------------------------------------------------------------------
# Kafka's FeatureZNode (v2): {"version":2,"status":1,"features":{name:{"min_version_level":1,
# "max_version_level":L}}}; status 1 is "enabled". A feature at level 0 is absent.

def encode_features(levels: dict[str, int]) -> bytes:
    return _dumps({"version": 2, "status": 1, "features": {
        n: {"min_version_level": 1, "max_version_level": v} for n, v in sorted(levels.items()) if v > 0}})


def decode_features(data: bytes | None) -> dict[str, int]:
    obj = _loads(data) or {}
    return {str(n): int(f["max_version_level"]) for n, f in (obj.get("features") or {}).items()
            if int(f["max_version_level"]) > 0}


# --- /cluster/id ---------------------------------------------------------------------------------
def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_loads(data)["id"])


# --- /brokers/ids/<id> ---------------------------------------------------------------------------
@dataclass(frozen=True)
class BrokerEndpoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True)
class BrokerInfo:
    """A registered broker: what ``/brokers/ids/<id>`` holds, plus its epoch (the znode's czxid)."""

    id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    epoch: int = -1

    def endpoint(self, listener: str | None = None) -> BrokerEndpoint:
        if listener:
            for e in self.endpoints:
                if e.listener == listener:
                    return e
        return self.endpoints[0]


def encode_broker_info(info: BrokerInfo) -> bytes:
    first = info.endpoints[0]
    return _dumps({
        "features": {},
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in info.endpoints},
        "endpoints": [f"{e.listener}://{e.host}:{e.port}" for e in info.endpoints],
        "jmx_port": -1, "port": first.port, "host": first.host, "version": 5,
        "timestamp": str(int(time.time() * 1000)), "rack": info.rack,
    })


def decode_broker_info(broker_id: int, data: bytes, epoch: int = -1) -> BrokerInfo:
    d = _loads(data)
    protocols = d.get("listener_security_protocol_map") or {}
    endpoints = []
    for ep in d.get("endpoints", []):
        listener, rest = ep.split("://", 1)
        host, port = rest.rsplit(":", 1)
        endpoints.append(BrokerEndpoint(listener, host.strip("[]"), int(port), protocols.get(listener, listener)))
    if not endpoints:
        endpoints.append(BrokerEndpoint("PLAINTEXT", d["host"], int(d["port"])))
    return BrokerInfo(broker_id, tuple(endpoints), d.get("rack"), epoch)


# --- /brokers/topics/<topic> ---------------------------------------------------------------------
@dataclass
class TopicAssignment:
    """Replica assignment of a topic: partition -> replica ids (the first is the preferred leader)."""

    topic_id: str | None  # Kafka's base64 form
    partitions: dict[int, list[int]]
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)


def encode_topic_assignment(a: TopicAssignment) -> bytes:
    def m(d: dict[int, list[int]]) -> dict[str, list[int]]:
        return {str(p): list(r) for p, r in sorted(d.items())}
    out: dict[str, Any] = {"version": 3, "partitions": m(a.partitions), "adding_replicas": m(a.adding),
                           "removing_replicas": m(a.removing)}
    if a.topic_id:
        out["topic_id"] = a.topic_id
    return _dumps(out)


def decode_topic_assignment(data: bytes) -> TopicAssignment:
    d = _loads(data)

    def m(x: dict[str, list[int]] | None) -> dict[int, list[int]]:
        return {int(p): [int(r) for r in rs] for p, rs in (x or {}).items()}
    return TopicAssignment(d.get("topic_id"), m(d.get("partitions")), m(d.get("adding_replicas")),
                           m(d.get("removing_replicas")))


# --- /brokers/topics/<topic>/partitions/<p>/state ------------------------------------------------
@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leadership as the controller (or the leader, for its ISR) wrote it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = 0  # the znode version this state was read at / written as

    def new_leader(self, leader: int, isr: list[int] | tuple[int, ...], controller_epoch: int) -> LeaderAndIsr:
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), controller_epoch, self.zk_version)


NO_LEADER = -1


def encode_partition_state(s: LeaderAndIsr) -> bytes:
    return _dumps({"controller_epoch": s.controller_epoch, "leader": s.leader, "version": 1,
                   "leader_epoch": s.leader_epoch, "isr": list(s.isr)})


def decode_partition_state(data: bytes, zk_version: int) -> LeaderAndIsr:
    d = _loads(data)
    return LeaderAndIsr(int(d["leader"]), int(d["leader_epoch"]), tuple(int(r) for r in d["isr"]),
                        int(d["controller_epoch"]), zk_version)


# --- /controller, /controller_epoch ---------------------------------------------------------------
def encode_controller(broker_id: int) -> bytes:
    return _dumps({"version": 2, "brokerid": broker_id, "timestamp": str(int(time.time() * 1000)),
                   "kraftControllerEpoch": -1})


def decode_controller(data: bytes) -> int:
    return int(_loads(data)["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


# --- /config/... ------------------------------------------------------------------------------------
def encode_config(config: dict[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(sorted(config.items()))})


def decode_config(data: bytes | None) -> dict[str, str]:
    d = _loads(data)
    return {str(k): str(v) for k, v in (d or {}).get("config", {}).items()}


def encode_config_change(entity_path: str) -> bytes:
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    return str(_loads(data)["entity_path"])


# --- /isr_change_notification, /admin/reassign_partitions ------------------------------------------
def encode_isr_change(partitions: list[tuple[str, int]]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_isr_change(data: bytes) -> list[tuple[str, int]]:
    return [(str(x["topic"]), int(x["partition"])) for x in _loads(data)["partitions"]]


def encode_reassignment(moves: dict[tuple[str, int], list[int]]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                                 for (t, p), r in sorted(moves.items())]})


def decode_reassignment(data: bytes) -> dict[tuple[str, int], list[int]]:
    return {(str(x["topic"]), int(x["partition"])): [int(r) for r in x["replicas"]]
            for x in _loads(data)["partitions"]}


# --- /latest_producer_id_block ----------------------------------------------------------------------
def encode_producer_id_block(broker_id: int, start: int, end: int) -> bytes:
    return _dumps({"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)})


def decode_producer_id_block(data: bytes) -> tuple[int, int, int]:
    d = _loads(data)
    return int(d["broker"]), int(d["block_start"]), int(d["block_end"])
