"""A replica fetcher's side of incremental fetch sessions (KIP-227): Kafka's ``FetchSessionHandler``.

Theory of operation: a follower fetches every partition it follows from one leader in one Fetch,
and most of them are idle at any moment (``__consumer_offsets`` alone is 50 partitions, each of
them on three brokers). Without a session, every Fetch names every partition and every response
answers every one of them, so each replication round costs both brokers work in proportion to
all the partitions they share rather than to the ones that moved. With a session:

* the first Fetch is *full* (``session_epoch`` 0): every partition, and the leader answers with a
  session id (``broker/replica/fetch_session.py`` keeps the session on its side);
* each later Fetch is *incremental* (that id, the next epoch): it names only the partitions whose
  fetch state changed since the last request -- a new fetch offset (our log end offset moved),
  log start offset, leader epoch or size limit, or a partition newly followed -- and lists as
  *forgotten* those no longer fetched from this leader (no longer followed, or set aside to
  truncate or back off). The leader answers only partitions with records, a changed high
  watermark or log start offset, or an error.

Any failure -- no response, a broken or mismatched one, or the leader's
FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH -- makes the next Fetch full again
(closing the old session on the leader), as Kafka does: after a lost request the two sides can no
longer be sure they agree on the fetch offsets. A leader that answers a full Fetch with session
id 0 (its cache is full, or ``max.incremental.fetch.session.cache.slots`` is 0) keeps getting full
fetches.

Invariant: ``sent`` is what the leader's session holds for each partition once the request in
flight is answered; the epoch moves only when a response arrives.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from protocol.errors import ErrorCode

from ...replica.fetch_session import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from ...replica.partition import TopicPartition

log = logging.getLogger("samsa.replication")

# What a fetch names for one partition: (fetch offset, log start offset, leader epoch, max bytes)
FetchState = tuple[int, int, int, int]

_SESSION_GONE = (int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND), int(ErrorCode.INVALID_FETCH_SESSION_EPOCH))


@dataclass(slots=True)
class FetchPlan:
    """One Fetch: its session id and epoch, the partitions to name and those to forget."""

    session_id: int
    epoch: int
    send: list[tuple[TopicPartition, FetchState]]
    forgotten: list[TopicPartition]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler:
    """The session a replica fetcher keeps with one leader (see the module doc)."""

    def __init__(self, name: str) -> None:
        self.name = name  # for the log: "broker=1 leader=2"
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.sent: dict[TopicPartition, FetchState] = {}
        self.in_flight: FetchPlan | None = None

    def build(self, ready: list[tuple[TopicPartition, FetchState]]) -> FetchPlan:
        """The next Fetch for the ``ready`` partitions (all this fetcher fetches now)."""
        if self.epoch == INITIAL_EPOCH:
            plan = FetchPlan(self.session_id, self.epoch, ready, [])
            self.sent = dict(ready)
        else:
            sent = self.sent
            send = []
            for tp, state in ready:
                if sent.get(tp) != state:
                    send.append((tp, state))
                    sent[tp] = state
            forgotten = []
            if len(ready) != len(sent):  # a partition fetched before (so still in sent) is not fetched now
                now = {tp for tp, _state in ready}
                forgotten = [tp for tp in sent if tp not in now]
                for tp in forgotten:
                    del sent[tp]
            plan = FetchPlan(self.session_id, self.epoch, send, forgotten)
        self.in_flight = plan
        return plan

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """The leader answered the request in flight. False if the session is gone (the answer
        carries no partitions and the next Fetch is full)."""
        plan, self.in_flight = self.in_flight, None
        if error_code in _SESSION_GONE:
            log.info("[ReplicaFetcher %s] Fetch session %d: %s; the next fetch is a full one", self.name,
                     self.session_id, ErrorCode(error_code).name)
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            self.sent.clear()
            return False
        if plan is not None and plan.full:
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id != INVALID_SESSION_ID else INITIAL_EPOCH
            if session_id != INVALID_SESSION_ID:
                log.debug("[ReplicaFetcher %s] Fetch session %d opened with %d partitions", self.name,
                          session_id, len(self.sent))
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def reset(self) -> None:
        """The request in flight failed or the connection broke: the next Fetch is full, and
        names the old session so that the leader closes it."""
        self.in_flight = None
        self.epoch = INITIAL_EPOCH
        self.sent.clear()
