"""The controller's requests to brokers (Kafka's ``ControllerChannelManager``).

One queue and one sender task per live broker: LeaderAndIsr, UpdateMetadata and StopReplica are
delivered to each broker in the order the controller decided them, retried until they are
answered or the broker leaves the cluster. Every request carries the controller's epoch, so a
broker can refuse a deposed controller's requests (STALE_CONTROLLER_EPOCH).
"""

from __future__ import annotations

import asyncio
import logging

from kafka.protocol.api_message import ApiMessage

from protocol.errors import ErrorCode

from ..interbroker import BrokerClient
from ..zk_data import BrokerInfo

log = logging.getLogger("samsa.controller")


class ControllerChannelManager:
    def __init__(self, controller_id: int, listener: str | None, timeout: float) -> None:
        self.controller_id = controller_id
        self.listener = listener
        self.timeout = timeout
        self.queues: dict[int, asyncio.Queue[tuple[ApiMessage, int, asyncio.Future[ApiMessage] | None]]] = {}
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.clients: dict[int, BrokerClient] = {}

    def add_broker(self, info: BrokerInfo) -> None:
        if info.id in self.queues:
            ep = info.endpoint(self.listener)
            c = self.clients[info.id]
            if (c.host, c.port) == (ep.host, ep.port):
                return
            self.remove_broker(info.id)
        ep = info.endpoint(self.listener)
        self.clients[info.id] = BrokerClient(ep.host, ep.port, f"samsa-controller-{self.controller_id}")
        q: asyncio.Queue[tuple[ApiMessage, int, asyncio.Future[ApiMessage] | None]] = asyncio.Queue()
        self.queues[info.id] = q
        self.tasks[info.id] = asyncio.get_running_loop().create_task(self._sender(info.id, q),
                                                                     name=f"controller-channel-{info.id}")

    def remove_broker(self, broker_id: int) -> None:
        t = self.tasks.pop(broker_id, None)
        if t is not None:
            t.cancel()
        self.queues.pop(broker_id, None)
        c = self.clients.pop(broker_id, None)
        if c is not None:
            c.close()

    def shutdown(self) -> None:
        for b in list(self.tasks):
            self.remove_broker(b)

    def send(self, broker_id: int, request: ApiMessage, version: int, *,
             wait: bool = False) -> asyncio.Future[ApiMessage] | None:
        q = self.queues.get(broker_id)
        if q is None:
            return None
        fut: asyncio.Future[ApiMessage] | None = asyncio.get_running_loop().create_future() if wait else None
        q.put_nowait((request, version, fut))
        return fut

    async def _sender(self, broker_id: int,
                      q: asyncio.Queue[tuple[ApiMessage, int, asyncio.Future[ApiMessage] | None]]) -> None:
        client = self.clients[broker_id]
        while True:
            request, version, fut = await q.get()
            attempt = 0
            while True:
                try:
                    resp = await client.send(request, version, timeout=self.timeout)
                    code = getattr(resp, "error_code", 0)
                    if code:
                        log.warning("Broker %d answered %s with %s", broker_id, type(request).__name__,
                                    ErrorCode(code).name)
                    if fut is not None and not fut.done():
                        fut.set_result(resp)
                    break
                except ConnectionError as e:
                    attempt += 1
                    if attempt == 1 or attempt % 20 == 0:
                        log.warning("Controller cannot reach broker %d (%s); retrying %s", broker_id, e,
                                    type(request).__name__)
                    await asyncio.sleep(min(0.1 * attempt, 1.0))
