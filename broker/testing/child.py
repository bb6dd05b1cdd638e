"""One broker of ``SamsaBroker(brokers=N)``: a child process with a fault hook and a control channel.

    python -m broker.testing.child CONTROL_PORT PARENT_PID key=value ...

The broker runs with a :class:`broker.testing.faults.FaultPlan` as its request hook, as the
in-process broker does. The parent cannot hand that object across a process boundary, so the
child serves a small control channel on 127.0.0.1:CONTROL_PORT, on the broker's own event loop
(where the hook runs, so a rule added there is live for the next request, with no locking
beyond the plan's): one JSON object per line in, one per line out. Why this and not a pipe,
multiprocessing or an environment variable: a TCP port survives the parent reconnecting after
a broker restart, needs no pickling of code (a rule is data: API, topic, times, the
:class:`broker.hooks.Fault`), and a paused (SIGSTOP) child simply does not answer, which the
parent turns into a clear error after its timeout. Operations (``op``):

* ``status`` -> ``{"started": bool, "brokers": [ids the controller told this broker of]}``
* ``add`` (``fault``, ``api``, ``topic``, ``times``) -> ``{"rule": id}``; ``fired`` (``rule``)
  -> ``{"fired": n}``; ``remove`` (``rule``); ``clear``
* ``requests`` (``api``, ``topic``) -> ``{"requests": [RecordedRequest fields, frame in base64]}``;
  ``clear_requests``

Errors come back as ``{"error": "..."}``. The child exits when its parent does (it checks the
parent pid each second), so a test process that dies leaves no broker behind; SIGTERM is the
broker's own controlled shutdown.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Mapping

from ..config.properties import BrokerConfig
from ..hooks import Fault
from ..server import Broker
from .faults import FaultPlan, Rule, recorded_to_json

log = logging.getLogger("samsa.testing")

JSON = dict[str, object]


class Control:
    """The child's side of the control channel: turns one request object into one answer."""

    def __init__(self, broker: Broker, plan: FaultPlan) -> None:
        self.broker = broker
        self.plan = plan
        self.rules: dict[int, Rule] = {}
        self.next_id = 1

    def handle(self, msg: Mapping[str, object]) -> JSON:
        op = msg.get("op")
        if op == "status":
            support = self.broker.metadata_support  # known brokers: once the controller told us
            return {"started": self.broker.started.is_set(),
                    "brokers": sorted(b.id for b in support.live_brokers()) if support.controller_id() >= 0 else []}
        if op == "add":
            fault = msg.get("fault")
            if not isinstance(fault, dict):
                raise ValueError("add needs a fault object")
            rule = self.plan.add(Fault(**fault), _opt_int(msg.get("api")), _opt_str(msg.get("topic")),
                                 _opt_int(msg.get("times")))
            rid, self.next_id = self.next_id, self.next_id + 1
            self.rules[rid] = rule
            return {"rule": rid}
        if op == "fired":
            return {"fired": self._rule(msg).fired}
        if op == "remove":
            self.plan.remove(self._rule(msg))
            return {}
        if op == "clear":
            self.plan.clear()
            return {}
        if op == "requests":
            return {"requests": [recorded_to_json(r) for r in
                                 self.plan.requests(_opt_int(msg.get("api")), _opt_str(msg.get("topic")))]}
        if op == "clear_requests":
            self.plan.clear_requests()
            return {}
        raise ValueError(f"unknown control operation {op!r}")

    def _rule(self, msg: Mapping[str, object]) -> Rule:
        rid = msg.get("rule")
        if not isinstance(rid, int) or rid not in self.rules:
            raise ValueError(f"no rule {rid!r}")
        return self.rules[rid]

    async def serve_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    msg = json.loads(line)
                    if not isinstance(msg, dict):
                        raise ValueError("a control request is a JSON object")
                    out = self.handle(msg)
                except (ValueError, TypeError) as e:
                    out = {"error": str(e)}
                writer.write(json.dumps(out).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def _opt_int(v: object) -> int | None:
    return v if isinstance(v, int) else None


def _opt_str(v: object) -> str | None:
    return v if isinstance(v, str) else None


async def _exit_with_parent(parent: int, broker: Broker) -> None:
    while True:
        await asyncio.sleep(1.0)
        if os.getppid() != parent:
            log.warning("The test process %d is gone: broker %d shuts down", parent, broker.broker_id)
            os.kill(os.getpid(), signal.SIGTERM)  # the broker's own controlled shutdown (serve_forever)
            return


async def serve(config: BrokerConfig, control_port: int, parent: int) -> None:
    plan = FaultPlan()
    broker = Broker(config, request_hook=plan)
    control = Control(broker, plan)
    server = await asyncio.start_server(control.serve_client, "127.0.0.1", control_port)
    watchdog = asyncio.get_running_loop().create_task(_exit_with_parent(parent, broker))
    try:
        await broker.serve_forever()
    finally:
        watchdog.cancel()
        server.close()


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    control_port, parent = int(argv[0]), int(argv[1])
    props = dict(a.split("=", 1) for a in argv[2:])
    config = BrokerConfig.load(None, props)
    logging.basicConfig(level=str(config["log.level"]).upper(),
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    asyncio.run(serve(config, control_port, parent))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
