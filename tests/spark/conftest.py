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

import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from spark_jars import CONNECTOR_JARS, pyspark


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


