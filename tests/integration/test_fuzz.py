"""Malformed frames against a running broker (hypothesis-driven).

Each example opens its own connection, sends something broken, and checks
the broker's answer against what Apache Kafka does:

* a size prefix that is negative, zero, or above ``socket.request.max.bytes``
  (104857600): the connection is closed, without waiting for the body;
* a complete frame whose header or body is cut short, an unknown API key, or a
  known API at a version the broker does not serve (other than ApiVersions):
  the request cannot be parsed, so the connection is closed
  (``RequestContext.parseRequest`` raises InvalidRequestException);
* ApiVersions at a version above the broker's maximum: answered as a v0
  response with ``error_code`` UNSUPPORTED_VERSION (35) and the broker's
  version list (KIP-511), and the connection stays usable;
* a well-formed Produce request whose batch has a bad CRC: CORRUPT_MESSAGE (2)
  for that partition, nothing appended;
* a batch whose ``batchLength`` lies, or whose record count or a record's
  length lies under a recomputed (valid) CRC: CORRUPT_MESSAGE (2) or
  INVALID_RECORD (87), nothing appended;
* a Produce request whose ``records`` byte-length runs past the frame: closed;
* random bytes, half-closed by us: whatever comes back is whole frames, then
  the broker closes;
* a request for an API and version the broker serves, its body mutated (bytes
  flipped, inserted, deleted, appended): any answer is a whole frame carrying
  our correlation id (a close, or a handler that legitimately waits, is fine).
  CreateTopics and CreatePartitions are left out: a mutated partition count
  could ask for a billion partitions on the shared test machine.

After every example a separate healthy client must still produce and fetch,
the broker process must still be alive, and (Samsa) the data dir must pass
``log.check.check_log``.  Example counts are bounded so the file stays well
under two minutes on two cores; ``SAMSA_FUZZ_SCALE=N`` multiplies them.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import crc32c
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.support.brokers import BrokerProcess, SamsaBroker, make_broker
from tests.support.fixtures import report_broker_log
from tests.support.logcheck import assert_log_ok
from tests.support.net import api_versions_v0, recv_exact
from tests.support.rawclient import RawClient, build_batch, produce_request

MAX_REQUEST_BYTES = 104_857_600  # Kafka's socket.request.max.bytes default
CORRUPT_MESSAGE = 2
UNSUPPORTED_VERSION = 35
INVALID_RECORD = 87
API_VERSIONS = 18
PRODUCE = 0
GUARD_S = 15.0  # how long we wait for an answer or a close before calling the broker hung
SCALE = int(os.environ.get("SAMSA_FUZZ_SCALE", "1"))
FUZZ_TOPIC = "fuzz"
HEALTH_TOPIC = "health"


def fuzz_settings(examples: int):
    return settings(
        max_examples=examples * SCALE,
        deadline=None,  # timing on a shared 2-core machine is noise
        derandomize=SCALE == 1,  # CI runs the same examples every time
        database=None,  # no .hypothesis/ directory in the work tree
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


# -- the broker under test ---------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = make_broker(tmp_path_factory.mktemp("fuzz"), name="fuzz")
    b.start()
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        futures = admin.create_topics(
            [NewTopic(t, num_partitions=1, replication_factor=1) for t in (FUZZ_TOPIC, HEALTH_TOPIC)]
        )
        for f in futures.values():
            f.result(timeout=30)
        del admin
        with RawClient(b.host, b.port) as c:  # one record, so high-watermark fetches answer at once
            assert c.produce(FUZZ_TOPIC, 0, build_batch([(b"first", b"record", [])])) == (0, 0)
        yield b
    finally:
        b.kill()


@pytest.fixture(autouse=True)
def _report_log(request: pytest.FixtureRequest, fuzz_broker: BrokerProcess) -> None:
    report_broker_log(request.node, fuzz_broker)


@pytest.fixture(scope="module")
def served(fuzz_broker: BrokerProcess) -> dict[int, tuple[int, int]]:
    """The broker's own ApiVersions table: {api_key: (min, max)}."""
    return api_versions_v0(fuzz_broker.host, fuzz_broker.port)


_health_seq = itertools.count()


def assert_healthy(broker: BrokerProcess) -> None:
    """A fresh client can produce and read back; the process lives; the log checks out."""
    assert broker.is_running(), f"broker died (exit {broker.proc.returncode if broker.proc else None})"
    n = next(_health_seq)
    value = f"health-{n}".encode()
    with RawClient(broker.host, broker.port, client_id="healthy") as c:
        err, base = c.produce(HEALTH_TOPIC, 0, build_batch([(b"h", value, [("n", str(n).encode())])]))
        assert err == 0, f"healthy produce failed with error {err}"
        err, hw, records = c.fetch(HEALTH_TOPIC, 0, base)
        assert err == 0, f"healthy fetch failed with error {err}"
        assert records and records[0].offset == base and records[0].value == value, records[:3]
    if isinstance(broker, SamsaBroker):
        assert_log_ok(broker.data_dir)


def fuzz_high_watermark(broker: BrokerProcess) -> int:
    with RawClient(broker.host, broker.port, client_id="hw") as c:
        err, hw, _ = c.fetch(FUZZ_TOPIC, 0, 0, max_bytes=1)
        assert err == 0
        return hw


# -- one connection, one malformed input ------------------------------------


@dataclass
class Observed:
    frames: list[bytes]
    closed: bool


def observe(
    broker: BrokerProcess,
    data: bytes,
    *,
    half_close: bool = False,
    want_frames: int = 1,
    wait: float = GUARD_S,
) -> Observed:
    """Send data on a new connection; collect up to want_frames response frames or a close.

    With half_close we shut our write side after sending, so a broker waiting
    for the rest of a frame sees EOF; without it, a close can only be the
    broker's own decision.
    """
    frames: list[bytes] = []
    with socket.create_connection((broker.host, broker.port), timeout=GUARD_S) as sock:
        sock.settimeout(wait)
        try:
            sock.sendall(data)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:  # EPIPE, ECONNRESET, ENOTCONN: the broker already closed on us
            return Observed(frames, closed=True)
        while len(frames) < want_frames:
            try:
                (size,) = struct.unpack(">i", recv_exact(sock, 4))
            except (ConnectionError, OSError) as e:
                if isinstance(e, TimeoutError | socket.timeout):
                    return Observed(frames, closed=False)
                return Observed(frames, closed=True)
            assert 4 <= size <= MAX_REQUEST_BYTES, f"broker sent a frame of size {size}"
            try:
                frames.append(recv_exact(sock, size))
            except (ConnectionError, OSError) as e:
                raise AssertionError(f"broker sent a partial frame of {size} bytes: {e}") from e
        return Observed(frames, closed=False)


def assert_closed(broker: BrokerProcess, data: bytes, what: str) -> None:
    got = observe(broker, data, want_frames=1)
    assert got.closed, (
        f"{what}: expected the broker to close the connection, got {len(got.frames)} frame(s): "
        + (got.frames[0][:64].hex() if got.frames else "nothing within the guard time")
    )


def request_frame(
    api_key: int,
    version: int,
    body: bytes,
    corr: int = 4242,
    client_id: bytes = b"fuzz",
    flexible_header: bool = False,
) -> bytes:
    header = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
    if flexible_header:
        header += b"\x00"  # empty tagged fields
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def produce_frame(batch: bytes, corr: int = 77, version: int = 7) -> bytes:
    req = produce_request(FUZZ_TOPIC, 0, batch)
    req.with_header(correlation_id=corr, client_id="fuzz")
    return bytes(req.encode(version=version, header=True, framed=True))


def produce_error(frame_payload: bytes) -> int:
    from kafka.protocol.producer import ProduceResponse

    resp = ProduceResponse.decode(frame_payload, version=7, header=True)
    (t,) = resp.responses
    (p,) = t.partition_responses
    return p.error_code


def assert_produce_rejected(broker: BrokerProcess, batch: bytes, allowed: set[int], what: str) -> None:
    before = fuzz_high_watermark(broker)
    got = observe(broker, produce_frame(batch), want_frames=1)
    assert got.frames, f"{what}: no Produce response (closed={got.closed})"
    (corr,) = struct.unpack_from(">i", got.frames[0])
    assert corr == 77
    err = produce_error(got.frames[0])
    assert err in allowed, f"{what}: error_code {err}, expected one of {sorted(allowed)}"
    assert fuzz_high_watermark(broker) == before, f"{what}: rejected batch was appended"


# -- strategies --------------------------------------------------------------

record_lists = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=16)),
        st.one_of(st.none(), st.binary(max_size=64)),
        st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=8)), max_size=2),
    ),
    min_size=1,
    max_size=5,
)
codecs = st.sampled_from([0, 1, 2, 3, 4])  # none, gzip, snappy, lz4, zstd


def batch_of(records, codec: int) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (k, v, h) in enumerate(records):
        b.append(i, timestamp=None, key=k, value=v, headers=h)
    return bytes(b.build())


def with_crc(batch: bytearray) -> bytes:
    """Recompute the CRC-32C over attributes..end (offset 21 on), as a lying-but-consistent client would."""
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


# -- the tests ---------------------------------------------------------------


@fuzz_settings(80)
@given(data=st.binary(max_size=300))
def test_random_bytes(fuzz_broker: BrokerProcess, data: bytes) -> None:
    got = observe(fuzz_broker, data, half_close=True, want_frames=1000)
    assert got.closed, "broker kept a half-closed connection open"
    assert_healthy(fuzz_broker)


@fuzz_settings(60)
@given(body=st.binary(min_size=0, max_size=200))
def test_random_body_in_a_complete_frame(fuzz_broker: BrokerProcess, body: bytes) -> None:
    got = observe(fuzz_broker, struct.pack(">i", len(body)) + body, want_frames=1)
    assert got.closed or got.frames, "broker neither answered nor closed a complete frame"
    assert_healthy(fuzz_broker)


@fuzz_settings(60)
@given(
    size=st.one_of(
        st.integers(min_value=-(2**31), max_value=-1),
        st.just(0),
        st.just(MAX_REQUEST_BYTES + 1),
        st.integers(min_value=MAX_REQUEST_BYTES + 1, max_value=2**31 - 1),
    ),
    trailer=st.binary(max_size=32),
)
def test_bad_size_prefix(fuzz_broker: BrokerProcess, size: int, trailer: bytes) -> None:
    assert_closed(fuzz_broker, struct.pack(">i", size) + trailer, f"size prefix {size}")
    assert_healthy(fuzz_broker)


def _templates() -> dict[str, bytes]:
    """Complete, valid requests (frame without size prefix) to cut short."""
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

    out = {}
    for v in (0, 3):
        r = ApiVersionsRequest(client_software_name="samsa-fuzz", client_software_version="1.0")
        r.with_header(correlation_id=9, client_id="fuzz")
        out[f"ApiVersions v{v}"] = bytes(r.encode(version=v, header=True, framed=False))
    for v in (1, 9):
        r = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=FUZZ_TOPIC)], allow_auto_topic_creation=False
        )
        r.with_header(correlation_id=9, client_id="fuzz")
        out[f"Metadata v{v}"] = bytes(r.encode(version=v, header=True, framed=False))
    out["Produce v7"] = produce_frame(build_batch([(b"k", b"v", [])]), corr=9)[4:]
    return out


TEMPLATES = _templates()


@fuzz_settings(80)
@given(name=st.sampled_from(sorted(TEMPLATES)), cut=st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
def test_truncated_request(fuzz_broker: BrokerProcess, name: str, cut: float) -> None:
    full = TEMPLATES[name]
    payload = full[: int(cut * len(full))]  # a strict prefix: never the whole request
    got = observe(fuzz_broker, struct.pack(">i", len(payload)) + payload, want_frames=1)
    if got.frames and name.startswith("ApiVersions") and len(payload) >= 8:
        # Tolerated: an ApiVersions error answer instead of a close (the error must not be NONE).
        corr, err = struct.unpack_from(">ih", got.frames[0])
        assert corr == 9 and err != 0, (
            f"{name} cut to {len(payload)}/{len(full)} bytes answered with error {err}"
        )
    else:
        assert got.closed, (
            f"{name} cut to {len(payload)}/{len(full)} bytes: expected a close, got {got.frames[:1]!r}"
        )
    assert_healthy(fuzz_broker)


@fuzz_settings(60)
@given(data=st.data())
def test_unknown_api_key(fuzz_broker: BrokerProcess, served: dict[int, tuple[int, int]], data) -> None:
    top = max(served)
    gaps = sorted(set(range(top + 20)) - set(served))  # unassigned keys near the real ones
    key = data.draw(
        st.one_of(st.sampled_from(gaps), st.integers(-(2**15), -1), st.integers(top + 1, 2**15 - 1)),
        "api_key",
    )
    version = data.draw(st.integers(min_value=0, max_value=20), "version")
    body = data.draw(st.binary(max_size=40), "body")
    assert_closed(fuzz_broker, request_frame(key, version, body), f"api key {key} v{version}")
    assert_healthy(fuzz_broker)


@fuzz_settings(60)
@given(data=st.data())
def test_unsupported_version(fuzz_broker: BrokerProcess, served: dict[int, tuple[int, int]], data) -> None:
    key = data.draw(st.sampled_from(sorted(k for k in served if k != API_VERSIONS)), "api_key")
    lo, hi = served[key]
    below = [st.integers(min_value=-(2**15), max_value=lo - 1)] if lo > -(2**15) else []
    version = data.draw(st.one_of(st.integers(min_value=hi + 1, max_value=2**15 - 1), *below), "version")
    body = data.draw(st.binary(max_size=40), "body")
    assert_closed(fuzz_broker, request_frame(key, version, body), f"api key {key} at unsupported v{version}")
    assert_healthy(fuzz_broker)


@fuzz_settings(48)
@given(data=st.data())
def test_api_versions_unsupported_version(
    fuzz_broker: BrokerProcess, served: dict[int, tuple[int, int]], data
) -> None:
    hi = served[API_VERSIONS][1]
    version = data.draw(st.integers(min_value=hi + 1, max_value=2**15 - 1), "version")
    flexible = data.draw(st.booleans(), "flexible_header")
    body = data.draw(st.binary(max_size=30), "body")
    frame = request_frame(API_VERSIONS, version, body, corr=31337, flexible_header=flexible)
    follow_up = request_frame(API_VERSIONS, 0, b"", corr=31338)
    got = observe(fuzz_broker, frame + follow_up, want_frames=2)
    assert len(got.frames) == 2, (
        f"ApiVersions v{version}: got {len(got.frames)} frame(s), closed={got.closed}"
    )
    corr, err, count = struct.unpack_from(">ihi", got.frames[0])
    assert corr == 31337
    assert err == UNSUPPORTED_VERSION, f"ApiVersions v{version}: error_code {err}"
    keys = {struct.unpack_from(">h", got.frames[0], 10 + 6 * i)[0] for i in range(count)}
    assert API_VERSIONS in keys, (
        "the UNSUPPORTED_VERSION answer must still list the broker's versions (KIP-511)"
    )
    corr2, err2 = struct.unpack_from(">ih", got.frames[1])
    assert (corr2, err2) == (31338, 0), "connection unusable after the unsupported-version answer"
    assert_healthy(fuzz_broker)


@fuzz_settings(60)
@given(records=record_lists, codec=codecs, data=st.data())
def test_produce_bad_crc(fuzz_broker: BrokerProcess, records, codec: int, data) -> None:
    batch = bytearray(batch_of(records, codec))
    # The CRC field itself (17..20) or any CRC-covered byte except attributes (21..22), whose
    # compression/transactional bits Kafka interprets before it checks the CRC.
    pos = data.draw(st.one_of(st.integers(17, 20), st.integers(23, len(batch) - 1)), "position")
    flip = data.draw(st.integers(1, 255), "xor")
    batch[pos] ^= flip
    assert_produce_rejected(fuzz_broker, bytes(batch), {CORRUPT_MESSAGE}, f"byte {pos} ^= {flip:#x}")
    assert_healthy(fuzz_broker)


@fuzz_settings(60)
@given(records=record_lists, codec=codecs, data=st.data())
def test_produce_lying_batch_length(fuzz_broker: BrokerProcess, records, codec: int, data) -> None:
    batch = bytearray(batch_of(records, codec))
    actual = len(batch) - 12
    lie = data.draw(
        st.one_of(
            st.integers(-(2**31), -1),
            st.integers(0, actual - 1),
            st.integers(actual + 1, actual + 100),
            st.integers(actual + 1, 2**31 - 1),
        ),
        "batch_length",
    )
    struct.pack_into(">i", batch, 8, lie)
    assert_produce_rejected(
        fuzz_broker, bytes(batch), {CORRUPT_MESSAGE, INVALID_RECORD}, f"batchLength {lie} (really {actual})"
    )
    assert_healthy(fuzz_broker)


@fuzz_settings(48)
@given(records=record_lists, data=st.data())
def test_produce_lying_record_count(fuzz_broker: BrokerProcess, records, data) -> None:
    batch = bytearray(batch_of(records, 0))
    actual = len(records)
    lie = data.draw(
        st.one_of(st.integers(-(2**31), -1), st.integers(0, 1000)).filter(lambda n: n != actual), "count"
    )
    struct.pack_into(">i", batch, 57, lie)
    assert_produce_rejected(
        fuzz_broker,
        with_crc(batch),
        {CORRUPT_MESSAGE, INVALID_RECORD},
        f"record count {lie} (really {actual})",
    )
    assert_healthy(fuzz_broker)


short_records: st.SearchStrategy[list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]] = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=8)), st.one_of(st.none(), st.binary(max_size=16)), st.just([])
    ),
    min_size=1,
    max_size=5,
)


@fuzz_settings(48)
@given(records=short_records, data=st.data())
def test_produce_lying_record_length(fuzz_broker: BrokerProcess, records, data) -> None:
    batch = bytearray(batch_of(records, 0))
    # The first record's length is a zigzag varint at offset 61; our records are short enough
    # that it is one byte, so any other one-byte zigzag value (0..63) keeps the layout.
    assert batch[61] < 0x80
    actual = batch[61] >> 1
    lie = data.draw(st.integers(0, 63).filter(lambda n: n != actual), "length")
    batch[61] = lie << 1
    assert_produce_rejected(
        fuzz_broker,
        with_crc(batch),
        {CORRUPT_MESSAGE, INVALID_RECORD},
        f"record length {lie} (really {actual})",
    )
    assert_healthy(fuzz_broker)


@pytest.mark.parametrize("prefix", [b"\x81\x80\x01", b"\xff\xff\xff\xff\x0f"], ids=["-8193", "-2^31"])
def test_produce_negative_multibyte_record_length(fuzz_broker: BrokerProcess, prefix: bytes) -> None:
    """A record length that is a negative varint of more than two bytes, under a valid CRC: it
    once sent the records walk backwards forever (the broker's event loop hung)."""
    batch = bytearray(batch_of([(b"k", b"v" * 40, [])], 0))
    batch[61:61 + len(prefix)] = prefix  # the first record's length prefix, the layout kept
    assert_produce_rejected(fuzz_broker, with_crc(batch), {CORRUPT_MESSAGE, INVALID_RECORD},
                            f"record length prefix {prefix.hex()}")
    assert_healthy(fuzz_broker)


@fuzz_settings(48)
@given(records=record_lists, extra=st.integers(1, 2**31 - 1), data=st.data())
def test_produce_records_field_overruns_frame(fuzz_broker: BrokerProcess, records, extra: int, data) -> None:
    batch = batch_of(records, 0)
    frame = bytearray(produce_frame(batch))
    # In Produce v7 the records bytes are the frame's last field, preceded by their int32 length.
    pos = len(frame) - len(batch) - 4
    assert struct.unpack_from(">i", frame, pos)[0] == len(batch)
    lie = min(len(batch) + extra, 2**31 - 1)
    struct.pack_into(">i", frame, pos, lie)
    assert_closed(fuzz_broker, bytes(frame), f"records length {lie} with {len(batch)} bytes in the frame")
    assert_healthy(fuzz_broker)


def _request_classes() -> dict[int, Any]:
    """kafka-python's request class per API key (its JSON-schema generated messages)."""
    from kafka.protocol import admin, consumer, metadata, producer
    from kafka.protocol.api_message import ApiMessage

    out: dict[int, Any] = {}
    for mod in (producer, consumer, metadata, admin):
        for name in dir(mod):
            obj = getattr(mod, name)
            if isinstance(obj, type) and issubclass(obj, ApiMessage) and obj is not ApiMessage:
                cls: Any = obj
                if cls.type == "request":
                    out[cls.API_KEY] = cls
    return out


REQUEST_CLASSES = _request_classes()
NOT_MUTATED = {19, 37}  # CreateTopics, CreatePartitions: see the module docstring
MUTATION_CORR = 5150

mutations = st.lists(
    st.one_of(
        st.tuples(st.just("flip"), st.floats(0, 1, exclude_max=True), st.integers(1, 255)),
        st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("delete"), st.floats(0, 1, exclude_max=True), st.integers(1, 8)),
        st.tuples(st.just("append"), st.just(1.0), st.binary(min_size=1, max_size=16)),
    ),
    min_size=1,
    max_size=4,
)


def mutate(body: bytes, ops: list[tuple[str, float, Any]]) -> bytes:
    b = bytearray(body)
    for op, where, arg in ops:
        pos = int(where * len(b))
        if op == "flip" and b:
            b[min(pos, len(b) - 1)] ^= arg
        elif op == "insert":
            b[pos:pos] = arg
        elif op == "delete":
            del b[pos : pos + arg]
        elif op == "append":
            b += arg
    return bytes(b)


@fuzz_settings(120)
@given(data=st.data())
def test_mutated_request_for_served_api(
    fuzz_broker: BrokerProcess, served: dict[int, tuple[int, int]], data: st.DataObject
) -> None:
    keys = sorted(k for k in served if k in REQUEST_CLASSES and k not in NOT_MUTATED)
    key = data.draw(st.sampled_from(keys), "api_key")
    cls = REQUEST_CLASSES[key]
    lo, hi = served[key][0], min(served[key][1], cls.max_version)
    assume(lo <= hi)
    version = data.draw(st.integers(lo, hi), "version")
    req = cls()
    req.with_header(correlation_id=MUTATION_CORR, client_id="fuzz")
    payload = bytes(req.encode(version=version, header=True, framed=False))
    header_len = 2 + 2 + 4 + 2 + len(b"fuzz") + (1 if cls.flexible_version_q(version) else 0)
    body = mutate(payload[header_len:], data.draw(mutations, "mutations"))
    frame = payload[:header_len] + body
    got = observe(fuzz_broker, struct.pack(">i", len(frame)) + frame, want_frames=1, wait=2.0)
    if got.frames:
        (corr,) = struct.unpack_from(">i", got.frames[0])
        assert corr == MUTATION_CORR, f"api {key} v{version}: answer carries correlation id {corr}"
    assert_healthy(fuzz_broker)


# -- connection-level behaviour (not hypothesis-driven) -----------------------


def test_stalled_connections_do_not_block_others(fuzz_broker: BrokerProcess) -> None:
    """Fifty connections each stuck half-way through a frame; a healthy client is still served."""
    stuck = []
    try:
        for i in range(50):
            s = socket.create_connection((fuzz_broker.host, fuzz_broker.port), timeout=GUARD_S)
            s.sendall(struct.pack(">i", 100 + i) + b"\x00\x12\x00")  # promises 100+ bytes, sends 3
            stuck.append(s)
        assert_healthy(fuzz_broker)
    finally:
        for s in stuck:
            s.close()
    assert_healthy(fuzz_broker)


def test_pipelined_responses_come_back_in_request_order(fuzz_broker: BrokerProcess) -> None:
    """Kafka answers a connection's requests strictly in order, however long each takes.

    A slow Fetch (nothing to read, so it waits max_wait_ms) and an acks=all
    Produce are pipelined with instant ApiVersions requests in one write; the
    correlation ids must come back in the order sent.
    """
    from kafka.protocol.consumer import FetchRequest
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

    with RawClient(fuzz_broker.host, fuzz_broker.port) as c:
        hw = fuzz_high_watermark(fuzz_broker)
        frames: list[bytes] = []
        order: list[int] = []

        def add(req: Any, version: int, corr: int) -> None:
            req.with_header(correlation_id=corr, client_id="pipeline")
            frames.append(bytes(req.encode(version=version, header=True, framed=True)))
            order.append(corr)

        T = FetchRequest.FetchTopic
        slow_fetch = FetchRequest(
            replica_id=-1,
            max_wait_ms=800,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                T(
                    topic=FUZZ_TOPIC,
                    partitions=[
                        T.FetchPartition(
                            partition=0,
                            current_leader_epoch=-1,
                            fetch_offset=hw,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 20,
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        for round_ in range(3):
            base = 1000 * (round_ + 1)
            add(slow_fetch, c.version_for(1), base + 1)
            add(ApiVersionsRequest(), 0, base + 2)
            add(produce_request(HEALTH_TOPIC, 0, build_batch([(b"p", b"pipelined", [])])), 7, base + 3)
            add(MetadataRequest(topics=None, allow_auto_topic_creation=False), 1, base + 4)
            add(ApiVersionsRequest(), 0, base + 5)
        c.send_frame(b"".join(frames))
        got = [struct.unpack_from(">i", c.recv_frame())[0] for _ in order]
    assert got == order
    assert_healthy(fuzz_broker)
