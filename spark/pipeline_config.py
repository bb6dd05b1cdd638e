"""The access-log pipeline's settings and the checks made before Spark starts: where Spark's Kafka
connector comes from (local jars, a cached or reachable Maven package) and which interpreter runs
Spark's Python workers. Free of pyspark, so ``samsa --help`` and the demo's producer work without
it; :mod:`spark.pipeline` documents the pipeline itself.
"""

from __future__ import annotations

import glob
import os
import socket
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from urllib.parse import urlparse

FALLBACK_SOURCE = "samsa-kafka"
SOURCES = ("kafka", FALLBACK_SOURCE)
JARS_ENV = "SAMSA_SPARK_KAFKA_JARS"
TOP_PATHS = 5

EVENT_SCHEMA = (
    "timestamp string, host string, remote_addr string, method string, path string, "
    "status int, bytes long, latency double, user_agent string"
)


@dataclass
class PipelineConfig:
    bootstrap: str = "127.0.0.1:9092"
    topics: str = "access-log"
    output_topic: str | None = "access-log-stats"
    output_dir: str | None = "./spark-output/access-log-stats"
    checkpoint: str = "./spark-output/checkpoints"
    source: str = "kafka"
    trigger: str = "5 seconds"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    window: str = "1 minute"
    watermark: str = "30 seconds"
    kafka_jars: str | None = None
    master: str | None = None
    shuffle_partitions: int = 2
    fail_on_data_loss: bool = True
    extra_conf: dict[str, str] = field(default_factory=dict)
    # Kafka client properties for both sources and sinks (security.protocol, sasl.*, ssl.*),
    # passed as Spark's `kafka.<property>` options: from --command-config, as Kafka's tools take them.
    kafka_options: dict[str, str] = field(default_factory=dict)

    def kafka_option_items(self) -> dict[str, str]:
        return {f"kafka.{k}": v for k, v in self.kafka_options.items() if k != "bootstrap.servers"}


def connector_jars(folder: str | None) -> list[str]:
    """All jars in `folder` (or $SAMSA_SPARK_KAFKA_JARS); empty if neither is set."""
    folder = folder or os.environ.get(JARS_ENV)
    if not folder:
        return []
    jars = sorted(glob.glob(os.path.join(folder, "*.jar")))
    if not any("spark-sql-kafka-0-10" in os.path.basename(j) for j in jars):
        raise ConnectorUnavailable(f"no spark-sql-kafka-0-10 jar in {folder}")
    return jars


PYTHON_CONF = "spark.pyspark.python"
PYTHON_ENV = "PYSPARK_PYTHON"


def pin_python_workers(conf: Mapping[str, str], environ: MutableMapping[str, str] | None = None) -> str:
    """Make Spark's Python workers run this interpreter unless the user chose one; return theirs.

    pyspark's SparkContext takes the workers' interpreter from ``$PYSPARK_PYTHON`` when it is
    created (spark-submit sets that variable from ``spark.pyspark.python``), so the variable
    is what counts, in this process, before the session exists. Precedence: an existing
    ``$PYSPARK_PYTHON`` (the user's, or spark-submit's from its conf), then
    ``spark.pyspark.python`` in ``conf`` (``--conf``), then ``sys.executable``.
    """
    env = os.environ if environ is None else environ
    chosen = env.get(PYTHON_ENV) or conf.get(PYTHON_CONF) or sys.executable
    env[PYTHON_ENV] = chosen
    return chosen


class ConnectorUnavailable(SystemExit):
    """Spark's Kafka connector cannot be had here; the message is one line saying what to do."""

    def __init__(self, why: str) -> None:
        super().__init__(
            f"Error: {why}. Offline, put the connector jars in a folder and pass --kafka-jars DIR "
            f"(or set {JARS_ENV}=DIR), or use the Python fallback source: --source {FALLBACK_SOURCE}")


MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"


def _cached_connector(package: str, conf: Mapping[str, str]) -> str | None:
    """A local Ivy or Maven copy of ``package`` (group:artifact:version), if any."""
    group, artifact, version = package.split(":")
    jar = f"{group}_{artifact}-{version}.jar"
    ivy_dirs = [conf["spark.jars.ivy"]] if conf.get("spark.jars.ivy") else []
    ivy_dirs += [os.path.expanduser(d) for d in ("~/.ivy2.5.2", "~/.ivy2")]
    candidates = [os.path.join(d, "jars", jar) for d in ivy_dirs]
    candidates.append(os.path.expanduser(os.path.join(
        "~/.m2/repository", *group.split("."), artifact, version, f"{artifact}-{version}.jar")))
    return next((c for c in candidates if os.path.exists(c)), None)


def check_connector_reachable(package: str, conf: Mapping[str, str], timeout: float = 3.0) -> None:
    """Raise :class:`ConnectorUnavailable` if Spark could neither find ``package`` in a local
    cache nor reach a repository to download it from (Maven Central, ``spark.jars.repositories``)."""
    if _cached_connector(package, conf):
        return
    repos = [r.strip() for r in conf.get("spark.jars.repositories", "").split(",") if r.strip()]
    repos.append(MAVEN_CENTRAL)
    for repo in repos:
        url = urlparse(repo)
        if url.scheme == "file":
            return  # a local repository: let Ivy look
        host = url.hostname
        if not host:
            continue
        try:
            with socket.create_connection((host, url.port or (443 if url.scheme == "https" else 80)), timeout):
                return
        except OSError:
            continue
    raise ConnectorUnavailable(
        f"Spark's Kafka connector ({package}) is not in the local Ivy/Maven cache and no repository "
        f"is reachable to download it from ({', '.join(repos)})")
