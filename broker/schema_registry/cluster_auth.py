"""HTTP Basic auth for the standalone registry, checked by the Kafka cluster itself.

``samsa schema-registry --bootstrap-server`` against a cluster whose listener uses SASL (its
``--command-config`` says ``security.protocol=SASL_*``) has no user list of its own: the users
are the cluster's. So a request's ``Authorization: Basic user:password`` is checked by opening a
Kafka connection to the cluster *as that user* (SaslHandshake + SaslAuthenticate with the
registry's configured mechanism, else another the listener enables: a PLAIN user and a SCRAM
user both work), and what the user may do is asked on that same connection with Metadata v10
and KIP-430's ``include_topic_authorized_operations`` / ``include_cluster_authorized_operations``:
the cluster's own authorizer decides, super users and ``allow.everyone.if.no.acl.found``
included, exactly as for the user's Kafka requests. The rules are the built-in registry's
(:mod:`.security`): a subject is its topic; reading needs DESCRIBE on it, writing WRITE, the
global config DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster. For a topic that does not exist
yet the cluster answers only whether the name may be described (KIP-430 gives no operations for
it), so registering a subject for a topic not yet created needs DESCRIBE on the name and
CREATE on the cluster - who may create the topic may name its schemas.

Why not Karapace's way (a users-and-permissions file of the registry's own): a second list of
users and grants drifts from the cluster's; this keeps one. Answers are cached per user,
password and topic for :data:`CACHE_TTL_S` seconds (a changed ACL or password is seen after at
most that long), so a client's requests cost no Kafka round trip each. A failed login is not
cached, and is a 401 with Confluent's body; a cluster that cannot be reached is a 500 (50001),
never a 401 that would blame the password.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
import time
from dataclasses import dataclass
from typing import TypeAlias

from kafka.net.sasl.scram import ScramClient
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from protocol.errors import ErrorCode

from ..security.acl import ALTER_CONFIGS, CREATE, DESCRIBE, DESCRIBE_CONFIGS, WRITE
from .errors import RegistryError
from .http import Request
from .security import basic_credentials, forbidden, subject_topic, unauthorized
from .store import ClientOptions

log = logging.getLogger("samsa.schema_registry")

CACHE_TTL_S = 30.0
METADATA_VERSION = 10  # the last version that carries the cluster's authorized operations (KIP-430, KIP-700)
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def standalone_security(bootstrap: str, options: ClientOptions) -> ClusterSecurity | None:
    """For ``samsa schema-registry``: cluster-checked Basic auth when its own Kafka connection
    (``client_options``) uses SASL, else None (no authentication, as against a PLAINTEXT cluster)."""
    if not options.get("security_protocol", "PLAINTEXT").startswith("SASL"):
        return None
    return ClusterSecurity(bootstrap, options.get("sasl_mechanism", "PLAIN"), options.get("ssl_context"))


class _LoginFailed(Exception):
    pass


@dataclass
class _Grants:
    cluster_ops: frozenset[int]  # the AclOperation codes allowed on the cluster
    topics: dict[str, tuple[int, frozenset[int] | None]]  # topic -> (error code, its operations if given)
    at: float


class ClusterSecurity:
    """What :class:`~.rest.RestApp` asks (``check``, ``readable``), answered by the cluster."""

    authenticate = True

    def __init__(self, bootstrap: str, mechanism: str, ssl_context: ssl.SSLContext | None) -> None:
        self.servers = [s.strip().rsplit(":", 1) for s in bootstrap.split(",") if s.strip()]
        self.mechanism = mechanism
        self.ssl_context = ssl_context
        self._cache: dict[tuple[str, bytes], _Grants] = {}

    async def check(self, req: Request, operation: str, subject: str | None) -> None:
        user, password = basic_credentials(req)
        req.principal = f"User:{user}"
        topic = subject_topic(subject) if subject is not None else None
        grants = await self._grants(user, password, [topic] if topic is not None else [])
        if subject is None:
            if operation in ("read", "delete", "write"):
                return  # schemas by id, listings (filtered), types: any authenticated user
            op, name = (DESCRIBE_CONFIGS, "DescribeConfigs") if operation == "read_config" else \
                (ALTER_CONFIGS, "AlterConfigs")
            if int(op) not in grants.cluster_ops:
                raise forbidden(name, None)
            return
        assert topic is not None
        write = operation not in ("read", "read_config")
        if not self._allowed(grants, topic, WRITE if write else DESCRIBE):
            raise forbidden("Write" if write else "Read", subject)

    async def readable(self, req: Request, subjects: list[str]) -> set[str]:
        user, password = basic_credentials(req)
        grants = await self._grants(user, password, sorted({subject_topic(s) for s in subjects}))
        return {s for s in subjects if self._allowed(grants, subject_topic(s), DESCRIBE)}

    @staticmethod
    def _allowed(grants: _Grants, topic: str, op: int) -> bool:
        error, ops = grants.topics.get(topic, (int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), None))
        if error == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            return False
        if ops is None:
            # the name may be described; no operations are given for a topic that does not exist
            return op == DESCRIBE or int(CREATE) in grants.cluster_ops
        return int(op) in ops or op == DESCRIBE and error == 0  # described: DESCRIBE was allowed (or implied)

    # --- asking the cluster -------------------------------------------------------------------

    async def _grants(self, user: str, password: str, topics: list[str]) -> _Grants:
        key = (user, hashlib.sha256(f"{user}\0{password}".encode()).digest())
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and now - cached.at < CACHE_TTL_S and all(t in cached.topics for t in topics):
            return cached
        try:
            cluster_ops, answers = await self._ask(user, password, topics)
        except _LoginFailed as e:
            log.info("Schema registry: failed authentication of user %r: %s", user, e)
            self._cache.pop(key, None)
            raise unauthorized() from None
        if cached is None or now - cached.at >= CACHE_TTL_S:
            cached = self._cache[key] = _Grants(cluster_ops, {}, now)
        cached.cluster_ops = cluster_ops
        cached.topics.update(answers)
        if len(self._cache) > 10000:  # many users: keep the newest
            for k in sorted(self._cache, key=lambda k: self._cache[k].at)[:5000]:
                del self._cache[k]
        return cached

    async def _ask(self, user: str, password: str,
                   topics: list[str]) -> tuple[frozenset[int], dict[str, tuple[int, frozenset[int] | None]]]:
        last: Exception | None = None
        for host, port in self.servers:
            try:
                return await asyncio.wait_for(self._ask_one(host, int(port), user, password, topics), 30.0)
            except _LoginFailed:
                raise
            except (OSError, TimeoutError, EOFError, ValueError) as e:
                last = e
        raise RegistryError(500, 50001, f"cannot reach the Kafka cluster to check credentials: {last}")

    async def _ask_one(self, host: str, port: int, user: str, password: str,
                       topics: list[str]) -> tuple[frozenset[int], dict[str, tuple[int, frozenset[int] | None]]]:
        tried: list[str] = []
        mechanisms = [self.mechanism]
        while mechanisms:
            mechanism = mechanisms.pop(0)
            tried.append(mechanism)
            conn = _Connection(await asyncio.open_connection(host, port, ssl=self.ssl_context))
            try:
                hs = await conn.send(SaslHandshakeRequest(mechanism=mechanism), 1, SaslHandshakeResponse)
                enabled = [m for m in hs.mechanisms if m in MECHANISMS and m not in tried and m not in mechanisms]
                if hs.error_code == 0 and await _login(conn, mechanism, user, password):
                    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                                          allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
                                          include_topic_authorized_operations=True)
                    md = await conn.send(req, METADATA_VERSION, MetadataResponse)
                    return frozenset(md.authorized_operations or ()), {
                        t.name: (t.error_code, None if t.authorized_operations is None
                                 else frozenset(t.authorized_operations)) for t in md.topics}
                mechanisms += enabled
            finally:
                conn.close()
        raise _LoginFailed(f"not authenticated with {', '.join(tried)}")


async def _login(conn: _Connection, mechanism: str, user: str, password: str) -> bool:
    if mechanism == "PLAIN":
        r = await conn.send(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), 2,
                            SaslAuthenticateResponse)
        return bool(r.error_code == 0)
    scram = ScramClient(user, password, mechanism)
    r = await conn.send(SaslAuthenticateRequest(auth_bytes=scram.first_message()), 2, SaslAuthenticateResponse)
    if r.error_code:
        return False
    scram.process_server_first_message(r.auth_bytes)
    r = await conn.send(SaslAuthenticateRequest(auth_bytes=scram.final_message()), 2, SaslAuthenticateResponse)
    if r.error_code:
        return False
    scram.process_server_final_message(r.auth_bytes)  # the server proves it knows the password too
    return True


KafkaRequest: TypeAlias = "MetadataRequest | SaslHandshakeRequest | SaslAuthenticateRequest"
KafkaResponse: TypeAlias = "MetadataResponse | SaslHandshakeResponse | SaslAuthenticateResponse"


class _Connection:
    """One Kafka connection: length-prefixed frames, kafka-python's message classes as the codec."""

    def __init__(self, streams: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self.reader, self.writer = streams
        self.correlation_id = 0

    async def send(self, request: KafkaRequest, version: int, response_cls: type[KafkaResponse]) -> KafkaResponse:
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="samsa-schema-registry-auth")
        self.writer.write(bytes(request.encode(version=version, header=True, framed=True)))
        await self.writer.drain()
        size = int.from_bytes(await self.reader.readexactly(4), "big")
        return response_cls.decode(await self.reader.readexactly(size), version=version, header=True)

    def close(self) -> None:
        self.writer.close()
