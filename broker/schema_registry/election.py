"""One primary per cluster, elected through a Kafka consumer group; writes forwarded to it.

Theory of operation (Confluent's and Karapace's scheme, on aiokafka's group membership): every
registry joins the consumer group ``schema-registry`` subscribed to ``_schemas`` with a custom
assignor whose member metadata carries the node's URL and whether it may be primary
(``schema.registry.leader.eligibility``). The group leader's assignor assigns no partitions
(the group elects, it does not consume) and writes the chosen primary - the eligible member
with the smallest URL, so the choice is stable while membership is - into every member's
assignment user data. A member that crashes leaves the group after its session timeout, the
group rebalances, and another node becomes primary.

A node that becomes primary writes a NOOP record to ``_schemas`` and waits to read it back
before it takes a write: every record the previous primary wrote is then in its state, so the
next id is above every id ever given out. A node that is not primary forwards each write
request, unchanged, to the primary's URL (:func:`forward`); reads are always served locally.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Iterable, Mapping
from urllib.parse import urlparse

import h11
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

from .errors import RegistryError, forwarding_error
from .http import Request
from .state import noop_key
from .store import ClientOptions, KafkaStore, stop_client

log = logging.getLogger("samsa.schema_registry")

GROUP = "schema-registry"
FORWARD_TIMEOUT_S = 30.0


class PrimaryElection:
    def __init__(self, url: str, eligible: bool, bootstrap: str, store: KafkaStore,
                 client_options: ClientOptions | None = None, forward_ssl: ssl.SSLContext | None = None) -> None:
        self.forward_ssl = forward_ssl  # ssl.SSLContext trusting the other registries' certificates
        self.url = url.rstrip("/")
        self.eligible = eligible
        self.bootstrap = bootstrap
        self.store = store
        self.options: ClientOptions = client_options or {}
        self.primary_url: str | None = None
        self.generation = 0
        self._primary_ready = asyncio.Event()  # this node is primary and caught up
        self._known = asyncio.Event()  # some primary is known
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._catch_up: asyncio.Task[None] | None = None

    # --- the assignor ---------------------------------------------------------------------

    def _assignor(self) -> type[AbstractPartitionAssignor]:
        election = self

        class SchemaRegistryAssignor(AbstractPartitionAssignor):
            name = "samsa-schema-registry"
            version = 0

            @classmethod
            def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
                info = {"url": election.url, "eligible": election.eligible}
                return ConsumerProtocolMemberMetadata(cls.version, list(topics), json.dumps(info).encode())

            @classmethod
            def assign(cls, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
                       ) -> dict[str, ConsumerProtocolMemberAssignment]:
                urls = []
                for meta in members.values():
                    try:
                        info = json.loads(meta.user_data or b"{}")
                    except ValueError:
                        continue
                    if info.get("eligible") and isinstance(info.get("url"), str):
                        urls.append(info["url"])
                primary = min(urls) if urls else None
                data = json.dumps({"primary": primary}).encode()
                return {m: ConsumerProtocolMemberAssignment(cls.version, [], data) for m in members}

            @classmethod
            def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
                try:
                    primary = json.loads(assignment.user_data or b"{}").get("primary")
                except ValueError:
                    primary = None
                election._elected(primary)

        return SchemaRegistryAssignor

    def _elected(self, primary: str | None) -> None:
        self.generation += 1
        was = self.primary_url
        self.primary_url = primary
        if primary is None:
            self._known.clear()
            log.warning("Schema registry: no eligible primary in group %s; writes are refused", GROUP)
        else:
            self._known.set()
        if primary == self.url:
            if was != self.url:
                log.info("Schema registry: this node (%s) is now the primary", self.url)
                self._primary_ready.clear()
                self._catch_up = asyncio.get_running_loop().create_task(self._become_primary(self.generation))
        else:
            self._primary_ready.clear()
            if primary != was:
                log.info("Schema registry: the primary is %s", primary)

    def _rebalancing(self) -> None:
        self.generation += 1
        if self.primary_url is not None:
            log.info("Schema registry: group %s is rebalancing; writes wait for the election", GROUP)
        self.primary_url = None
        self._known.clear()
        self._primary_ready.clear()

    async def _become_primary(self, generation: int) -> None:
        while generation == self.generation:
            try:
                await self.store.wait_ready()
                await self.store.write(noop_key(), None)  # read back: every earlier write is applied
                if generation == self.generation:
                    self._primary_ready.set()
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("Schema registry: catching up as primary failed, retrying: %s", e)
                await asyncio.sleep(1.0)

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        election = self

        class Rebalance(ConsumerRebalanceListener):
            # A rebalance is starting: until the group names a primary again this node takes no
            # write, so a node that dropped out of the group never writes beside a new primary.
            def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
                election._rebalancing()

            def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
                pass

        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=GROUP, enable_auto_commit=False,
            partition_assignment_strategy=(self._assignor(),), session_timeout_ms=10000,
            heartbeat_interval_ms=1000, client_id=f"samsa-schema-registry-election-{self.url}", **self.options)
        self._consumer.subscribe([self.store.topic], listener=Rebalance())
        await self._consumer.start()
        self._task = asyncio.get_running_loop().create_task(self._poll(self._consumer))

    async def _poll(self, consumer: AIOKafkaConsumer) -> None:
        # Nothing is assigned; polling keeps the membership alive (max.poll.interval.ms).
        while True:
            try:
                await consumer.getmany(timeout_ms=1000)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("Schema registry: group %s: %s", GROUP, e)
                await asyncio.sleep(1.0)

    async def stop(self) -> None:
        for t in (self._task, self._catch_up):
            if t is not None:
                t.cancel()
        if self._consumer is not None:
            await stop_client(self._consumer)  # leaves the group: the others elect at once

    # --- used by the REST layer -------------------------------------------------------------

    def is_primary(self) -> bool:
        return self.primary_url == self.url

    async def wait_primary(self, timeout: float) -> str:
        try:
            await asyncio.wait_for(self._known.wait(), timeout)
        except TimeoutError:
            raise forwarding_error("no primary has been elected yet") from None
        assert self.primary_url is not None
        return self.primary_url

    async def wait_ready_as_primary(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._primary_ready.wait(), timeout)
        except TimeoutError:
            raise RegistryError(500, 50002, "the primary is still catching up with _schemas") from None

    async def forward(self, req: Request) -> tuple[int, bytes]:
        primary = await self.wait_primary(FORWARD_TIMEOUT_S)
        return await forward(primary, req, self.forward_ssl)


async def forward(base_url: str, req: Request, ssl_context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    """Send ``req`` (an http.Request) to ``base_url`` unchanged; (status, body) of the answer.
    An https URL is verified with ``ssl_context`` (default: the system's trust store)."""
    u = urlparse(base_url)
    host, port = u.hostname or "127.0.0.1", u.port or (443 if u.scheme == "https" else 80)
    target = req.path + (("?" + req.query_string) if req.query_string else "")
    headers = [("Host", f"{host}:{port}"), ("Content-Length", str(len(req.body))), ("Connection", "close")]
    for name in ("content-type", "accept", "authorization", "x-samsa-forwarded"):
        if name in req.headers:
            headers.append((name, req.headers[name]))
    conn = h11.Connection(h11.CLIENT)
    try:
        ssl_ctx = None
        if u.scheme == "https":
            ssl_ctx = ssl_context or ssl.create_default_context()
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=ssl_ctx), FORWARD_TIMEOUT_S)
    except (OSError, TimeoutError) as e:
        raise forwarding_error(f"cannot connect to {base_url}: {e}") from None
    try:
        out = conn.send(h11.Request(method=req.method, target=target, headers=headers)) or b""
        out += conn.send(h11.Data(data=req.body)) or b"" if req.body else b""
        out += conn.send(h11.EndOfMessage()) or b""
        writer.write(out)
        await writer.drain()
        status, body = 0, bytearray()

        async def read() -> None:
            nonlocal status
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.Data):
                    body.extend(event.data)
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    return

        await asyncio.wait_for(read(), FORWARD_TIMEOUT_S)
        return status, bytes(body)
    except (OSError, TimeoutError, h11.ProtocolError) as e:
        raise forwarding_error(f"{base_url}: {e}") from None
    finally:
        writer.close()
