"""Where the Spark tests find Spark's Kafka connector jars (see conftest.py for the rules)."""

from __future__ import annotations

import glob
import os
from pathlib import Path

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


requires_connector = pytest.mark.skipif(not CONNECTOR_JARS, reason=CONNECTOR_SKIP_REASON or "connector jars present")
