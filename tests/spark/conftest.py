"""Fixtures for the Spark tests: one local SparkSession per test session, brokers, jars.

The SparkSession is shared (a JVM start costs ~10 s on two cores). It always has the
`samsa-kafka` fallback source registered; when Spark's Kafka connector jars are found it is
started with them too, so the real-connector tests run in the same session:

* ``$SAMSA_SPARK_KAFKA_JARS`` — a folder with ``spark-sql-kafka-0-10_2.13-<pyspark>.jar``,
  ``spark-token-provider-kafka-0-10_2.13-<pyspark>.jar``, ``commons-pool2-*.jar`` and
  (optionally) ``kafka-clients-*.jar``;
* else ``~/.cache/samsa/spark-jars`` with the same files.

kafka-clients, if missing from that folder, comes from the compat tests' jar cache
(tests/support/jars.py).

Brokers come from the shared ``broker_factory`` fixture (tests/support/fixtures.py): Samsa by
default, the reference broker Tansu with ``SAMSA_TEST_BROKER=tansu``.
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    import pyspark
except ImportError:  # the Java connector-calls test needs no pyspark; the Spark tests skip
    pyspark = None

DEFAULT_JAR_DIR = Path.home() / ".cache" / "samsa" / "spark-jars"


def connector_jar_dir() -> Path | None:
    env = os.environ.get("SAMSA_SPARK_KAFKA_JARS")
    d = Path(env) if env else DEFAULT_JAR_DIR
    return d if d.is_dir() else None


def connector_jars() -> tuple[list[str], str]:
    """(jars, reason): the connector's jars for this pyspark, or [] and why not."""
    if pyspark is None:
        return [], "pyspark is not installed (pip install 'samsa-broker[spark]')"
    version = pyspark.__version__.split("+")[0]
    d = connector_jar_dir()
    if d is None:
        return [], (f"Spark's Kafka connector jars not found: set SAMSA_SPARK_KAFKA_JARS to a folder with "
                    f"spark-sql-kafka-0-10_2.13-{version}.jar, spark-token-provider-kafka-0-10_2.13-{version}.jar, "
                    f"commons-pool2-*.jar (or put them in {DEFAULT_JAR_DIR})")
    needed = [f"spark-sql-kafka-0-10_2.13-{version}.jar", f"spark-token-provider-kafka-0-10_2.13-{version}.jar"]
    missing = [n for n in needed if not (d / n).is_file()]
    pools = glob.glob(str(d / "commons-pool2-*.jar"))
    if missing or not pools:
        return [], f"connector jars incomplete in {d} for pyspark {version}: missing {missing or ['commons-pool2-*.jar']}"
    jars = [str(d / n) for n in needed] + pools
    clients = glob.glob(str(d / "kafka-clients*.jar"))
    if not clients:
        try:
            from tests.support import jars as support_jars

            clients = [str(support_jars.fetch_jars()["kafka-clients.jar"])]
        except Exception as e:  # noqa: BLE001 - any failure means: no jar, skip with the reason
            return [], f"kafka-clients jar not in {d} and could not be fetched: {e}"
    return jars + clients[:1], ""


CONNECTOR_JARS, CONNECTOR_SKIP_REASON = connector_jars()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if pyspark is None:
        pytest.skip("pyspark is not installed (pip install 'samsa-broker[spark]')")
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: Spark needs a JDK 17 (apt-get install openjdk-17-jdk-headless)")
    from pyspark.sql import SparkSession

    from spark.datasource import register

    builder = (SparkSession.builder.master("local[2]").appName("samsa-spark-tests")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
               .config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local"))))
    if CONNECTOR_JARS:
        builder = builder.config("spark.jars", ",".join(CONNECTOR_JARS))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        for q in session.streams.active:
            q.stop()
        session.stop()


@pytest.fixture
def kbroker(broker_factory: Any) -> Any:
    """A broker for Spark tests: auto-created topics get 2 partitions."""
    return broker_factory({"num.partitions": 2, "auto.create.topics.enable": "true"})


requires_connector = pytest.mark.skipif(not CONNECTOR_JARS, reason=CONNECTOR_SKIP_REASON or "connector jars present")
