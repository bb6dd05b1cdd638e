"""kafka-python's internals that Samsa relies on are still there (convention 18).

protocol.kafka_python_internals is the one module that reaches into kafka-python's private parts
(the compiled decoder with its end position; the schema tree and code generator behind
ProduceRequest's zero-copy records; the bookkeeping slots of decoded objects; a schema field's
``mapKey`` flag). When a kafka-python release changes them, these tests fail and name what
changed, instead of Produce silently copying records again or a malformed request slipping
through. The pin they were checked against is beside the dependency in pyproject.toml.
"""

from __future__ import annotations

import re
from pathlib import Path

from protocol import kafka_python_internals as internals
from protocol.api_keys import ApiKey
from protocol.messages import REQUEST_CLASSES, MalformedRequest, decode_body, parse_header

ROOT = Path(__file__).resolve().parents[2]


def test_the_internals_relied_on_are_unchanged() -> None:
    problems = internals.check_internals(REQUEST_CLASSES[ApiKey.PRODUCE])
    assert not problems, (
        "kafka-python changed internals that protocol/kafka_python_internals.py relies on "
        f"(checked against {internals.CHECKED_VERSIONS}):\n  - " + "\n  - ".join(problems))


def test_produce_records_decode_as_views_and_overruns_are_refused() -> None:
    """The two behaviours the internals buy, end to end through protocol.messages."""
    Produce = REQUEST_CLASSES[ApiKey.PRODUCE]
    Topic = Produce.TopicProduceData
    records = b"\x00" * 70
    req = Produce(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        Topic(name="t", partition_data=[Topic.PartitionProduceData(index=0, records=records)])])
    req.with_header(correlation_id=7, client_id="c")
    frame = bytes(req.encode(version=9, header=True, framed=True))[4:]
    decoded = decode_body(parse_header(frame), frame)
    got = decoded.topic_data[0].partition_data[0].records
    assert isinstance(got, memoryview), (
        f"ProduceRequest records decoded as {type(got).__name__}, not a view of the frame: "
        "kafka-python's records codec changed (see protocol/kafka_python_internals.py)")
    assert bytes(got) == records
    cut = frame[:-10]  # the records' length prefix now runs past the frame
    try:
        decode_body(parse_header(cut), cut)
    except MalformedRequest:
        pass
    else:
        raise AssertionError("a body whose fields overrun the frame decoded: the compiled "
                             "decoder no longer reports its end position")


# Names of kafka-python's internals: its schema/codegen package and underscore attributes of its
# message classes and schema fields.
_PRIVATE = re.compile(r"kafka\.protocol\.schemas|\._struct\b|compiled_decode_from|emit_decode_from"
                      r"|\._type_str\b|\._fields\b|\.array_of\._|\._json\b|\._version\b")


def test_no_other_module_reaches_into_kafka_python_internals() -> None:
    """Every source package but the tests, which may poke at internals to check them."""
    offenders = []
    for package in ("protocol", "log", "groupcoord", "txn", "broker", "spark", "bench"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "protocol" / "kafka_python_internals.py":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if _PRIVATE.search(line.split("#", 1)[0]):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, ("kafka-python internals used outside protocol/kafka_python_internals.py:\n"
                           + "\n".join(offenders))
