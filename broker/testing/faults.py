"""FaultPlan: the request hook behind ``SamsaBroker.inject/delay/drop_response/close_connection``.

A list of rules, tried in the order they were added; the first that matches a request and has
firings left decides its :class:`broker.hooks.Fault`. Every request is also recorded (API,
version, a copy of its frame, the connection's address and principal) so that a test can
assert on what its client sent: :meth:`FaultPlan.requests`.

Rules are added from the test's thread and fired on the broker's event loop, so the few
shared structures are guarded by one lock (held for microseconds, never across an await).
"""

from __future__ import annotations

import base64
import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kafka.protocol.api_message import ApiMessage

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import decode_body, parse_header

from ..hooks import Fault, HookedRequest, api_name


def api_key(api: str | int) -> int:
    """"Produce", "OffsetCommit", "OFFSET_COMMIT", "offset_commit" or 8 -> the API key."""
    if isinstance(api, int):
        return int(ApiKey(api))
    norm = api.replace("_", "").replace("-", "").lower()
    for key in ApiKey:
        if key.name.replace("_", "").lower() == norm:
            return int(key)
    raise ValueError(f"unknown Kafka API {api!r} (use Kafka's names: Produce, Fetch, OffsetCommit, ...)")


def error_code(error: str | int) -> int:
    """"NOT_LEADER_OR_FOLLOWER", "not_leader_or_follower" or 6 -> 6."""
    if isinstance(error, int):
        return int(ErrorCode(error))
    try:
        return int(ErrorCode[error.upper()])
    except KeyError:
        raise ValueError(f"unknown Kafka error {error!r} (use Kafka's names, e.g. NOT_LEADER_OR_FOLLOWER)") from None


@dataclass(frozen=True)
class RecordedRequest:
    """One request the broker received. ``request`` decodes the copied frame on first use."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: tuple[str, int]
    principal: str
    listener: str
    topics: frozenset[str]
    at: float  # time.monotonic() when it arrived
    frame: bytes = field(repr=False)
    broker_id: int | None = None  # SamsaBroker(brokers=N): the broker that received it

    @property
    def api(self) -> str:
        return api_name(self.api_key)

    @property
    def request(self) -> ApiMessage:
        return decode_body(parse_header(self.frame), self.frame)


@dataclass(eq=False)
class Rule:
    """One injected fault: which requests it matches, what it does, and how often it fired."""

    fault: Fault
    api: int | None = None
    topic: str | None = None
    times: int | None = None  # None: until removed
    match: Callable[[HookedRequest], bool] | None = None
    fired: int = 0
    plan: FaultPlan | None = field(default=None, repr=False)

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times

    def remove(self) -> None:
        if self.plan is not None:
            self.plan.remove(self)

    def wait_fired(self, n: int | None = None, timeout: float = 30.0) -> int:
        """Wait until the rule has fired ``n`` times (default: all its ``times``); return the count."""
        want = n if n is not None else self.times
        if want is None:
            raise ValueError("wait_fired needs n for a rule without times")
        deadline = time.monotonic() + timeout
        while self.fired < want:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self} fired {self.fired} of {want} times in {timeout} s")
            time.sleep(0.005)
        return self.fired


class FaultPlan:
    """A :class:`broker.hooks.RequestHook`: injected faults and recorded requests."""

    def __init__(self, record: bool = True, max_recorded: int = 100_000, max_recorded_bytes: int = 64 << 20) -> None:
        self.record = record
        self._rules: list[Rule] = []
        # the newest requests, bounded in count and in frame bytes (a long session of large
        # Produce requests keeps its last 64 MiB, not all of them)
        self._recorded: deque[RecordedRequest] = deque()
        self._recorded_bytes = 0
        self.max_recorded = max_recorded
        self.max_recorded_bytes = max_recorded_bytes
        self._lock = threading.Lock()

    # --- the hook ------------------------------------------------------------------------
    def on_request(self, call: HookedRequest) -> Fault | None:
        rules = self._rules
        topics: set[str] | None = None
        if self.record:
            topics = call.topics()
            ctx = call.ctx
            rec = RecordedRequest(call.api_key, call.api_version, ctx.header.correlation_id, ctx.header.client_id,
                                  (ctx.client_host, ctx.client_port), ctx.principal, ctx.listener_name,
                                  frozenset(topics), time.monotonic(), bytes(call.frame))
            with self._lock:
                self._recorded.append(rec)
                self._recorded_bytes += len(rec.frame)
                while self._recorded and (len(self._recorded) > self.max_recorded
                                          or self._recorded_bytes > self.max_recorded_bytes):
                    self._recorded_bytes -= len(self._recorded.popleft().frame)
        if not rules:
            return None
        key = call.api_key
        with self._lock:
            for rule in rules:
                if rule.exhausted or (rule.api is not None and rule.api != key):
                    continue
                if rule.topic is not None:
                    if topics is None:
                        topics = call.topics()
                    if rule.topic not in topics:
                        continue
                if rule.match is not None and not rule.match(call):
                    continue
                rule.fired += 1
                if rule.exhausted:
                    self._rules = [r for r in self._rules if r is not rule]
                return rule.fault
        return None

    # --- rules ---------------------------------------------------------------------------
    def add(self, fault: Fault, api: str | int | None = None, topic: str | None = None,
            times: int | None = None, match: Callable[[HookedRequest], bool] | None = None) -> Rule:
        if times is not None and times < 1:
            raise ValueError("times must be >= 1 (or None: until removed)")
        rule = Rule(fault, None if api is None else api_key(api), topic, times, match, plan=self)
        with self._lock:
            self._rules = [*self._rules, rule]  # copy on write: on_request reads without the lock
        return rule

    def remove(self, rule: Rule) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if r is not rule]

    def clear(self) -> None:
        with self._lock:
            self._rules = []

    @property
    def rules(self) -> list[Rule]:
        return list(self._rules)

    # --- recorded requests ---------------------------------------------------------------
    def requests(self, api: str | int | None = None, topic: str | None = None) -> list[RecordedRequest]:
        key = None if api is None else api_key(api)
        with self._lock:
            recorded = list(self._recorded)
        return [r for r in recorded
                if (key is None or r.api_key == key) and (topic is None or topic in r.topics)]

    def clear_requests(self) -> None:
        with self._lock:
            self._recorded.clear()
            self._recorded_bytes = 0



def recorded_to_json(r: RecordedRequest) -> dict[str, object]:
    """A RecordedRequest as JSON (the control channel of ``brokers=N``; the frame in base64)."""
    out: dict[str, object] = {f.name: getattr(r, f.name) for f in dataclasses.fields(r)}
    out["frame"] = base64.b64encode(r.frame).decode()
    out["topics"] = sorted(r.topics)
    return out


def recorded_from_json(d: Mapping[str, object], broker_id: int) -> RecordedRequest:
    """``recorded_to_json``'s object back, marked with the broker that received it."""
    peer, topics, client_id = d["peer"], d["topics"], d["client_id"]
    if not isinstance(peer, list) or not isinstance(topics, list):
        raise ValueError(f"not a recorded request: {d!r}")
    return RecordedRequest(int(str(d["api_key"])), int(str(d["api_version"])), int(str(d["correlation_id"])),
                           client_id if isinstance(client_id, str) else None, (str(peer[0]), int(peer[1])),
                           str(d["principal"]), str(d["listener"]), frozenset(map(str, topics)),
                           float(str(d["at"])), base64.b64decode(str(d["frame"])), broker_id)
