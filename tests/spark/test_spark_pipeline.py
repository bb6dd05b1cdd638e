"""The whole access-log pipeline on the `samsa-kafka` fallback source, against a live broker,
with a SIGKILL and restart from the checkpoint in the middle (see spark_pipeline_scenario.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_pipeline_scenario import run_scenario

pytestmark = [pytest.mark.spark]


def test_pipeline_fallback_exactly_once_across_crash(spark: Any, kbroker: Any, tmp_path: Path) -> None:
    summary = run_scenario(spark, kbroker.bootstrap, tmp_path, "samsa-kafka")
    print(summary)


def test_pipeline_over_sasl_ssl(spark: Any, broker_factory: Any, tmp_path: Path) -> None:
    """Issue 10: the pipeline reads and writes over SASL_SSL (SCRAM-SHA-256, the test's CA) with the
    client properties Kafka's tools take (--command-config); it is given only that listener."""
    from tests.support.security import make_pki, scram_user, start_secure_broker

    pki = make_pki(tmp_path / "pki")
    sb = start_secure_broker(lambda **kw: broker_factory({"num.partitions": 2, "auto.create.topics.enable": "true"},
                                                        **kw), pki)
    scram_user(sb.addr(sb.plaintext), "spark", "spark-secret", "SCRAM-SHA-256")
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                     '    username="spark" password="spark-secret";\n'
                     f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca}\n")
    summary = run_scenario(spark, sb.addr(sb.plaintext), tmp_path, "samsa-kafka",
                           pipeline_bootstrap=sb.addr(sb.sasl_ssl), pipeline_args=("--command-config", str(props)))
    print(summary)


def test_windowed_stats_batch_semantics(spark: Any) -> None:
    """The aggregation itself on a static DataFrame: counts, status classes, top-path order."""
    from spark_expected import closed_windows, compare

    from spark.generate import EventGenerator, encode
    from spark.streaming import parse_events, windowed_stats

    gen = EventGenerator(seed=3, start_ms=1_763_000_040_000, events_per_second=10, jitter_ms=500)
    events = [gen.next_event() for _ in range(1500)]
    raw = spark.createDataFrame([(encode(e)[1],) for e in events], "value binary")
    rows = windowed_stats(parse_events(raw), "1 minute", "0 seconds").collect()
    actual = {int(r.window_start.timestamp()): {**r.asDict(), "top_paths": [(p.path, p["count"]) for p in r.top_paths]}
              for r in rows}
    # A batch query emits every window, so compare against all of them (delay = -inf).
    expected = closed_windows(events, 60, -10**6)
    assert not compare(actual, expected)
