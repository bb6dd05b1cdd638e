"""``samsa demo`` as a new user runs it: a virtualenv's console script, nothing activated.

The venv sees the site-packages of the interpreter running the tests (pyspark, pyarrow,
kafka-python: no download) and has this checkout installed in it (editable, no dependencies, no
build isolation: setuptools and wheel come from the test extra). ``--system-site-packages`` would
not do: from inside a virtualenv it shows the *base* interpreter's packages, not the virtualenv's
(issue 30: "invalid command 'bdist_wheel'", or kafka-python missing), so a ``.pth`` file adds
this interpreter's own site directories instead, inside a virtualenv or outside one. Its
``samsa`` is run by its path, with a PATH whose first ``python3`` is a bare venv that lacks
pyspark, pyarrow and this package: Spark must start its Python workers with the demo's own
interpreter, not that one (issue 13: ``ModuleNotFoundError: No module named 'spark'``). The
demo must then stop at ``--duration`` (counted from the start), say so, and leave nothing of
its own in the temporary directory. Offline, ``--source kafka`` must end in one clear line.
"""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
DURATION = 60


def _run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=180, **kw)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the package's venv, a bare venv whose python3 has none of it)."""
    pytest.importorskip("pyspark")
    base = tmp_path_factory.mktemp("venvs")
    pkg, bare = base / "pkg", base / "bare"
    _run([sys.executable, "-m", "venv", "--without-pip", str(pkg)])
    _see_this_interpreters_packages(pkg)
    # pip comes from this interpreter's site-packages; it installs into the venv it runs in.
    _run([str(pkg / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
          "--disable-pip-version-check", "-e", str(ROOT)])
    _run([sys.executable, "-m", "venv", "--without-pip", str(bare)])
    where = _run([str(pkg / "bin" / "python"), "-c", "import spark; print(spark.__file__)"]).stdout.strip()
    assert Path(where).resolve().is_relative_to(ROOT), f"the venv imports spark from {where}, not {ROOT}"
    for mod in ("pyspark", "pyarrow", "spark"):
        probe = subprocess.run([str(bare / "bin" / "python3"), "-c", f"import {mod}"], capture_output=True,
                               cwd=base, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        assert probe.returncode != 0, f"the bare python3 can import {mod}"
    return pkg, bare


def _see_this_interpreters_packages(venv: Path) -> None:
    """Make ``venv`` see the site directories this interpreter sees, after its own (a ``.pth``
    file's ``import`` line runs ``site.addsitedir``, which also runs their ``.pth`` files)."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    dirs = [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]
    purelib = _run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    (Path(purelib.stdout.strip()) / "_samsa_test_outer_site.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({d!r})" for d in dirs) + "\n")


def _demo_env(bare: Path, tmpdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bare / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["TMPDIR"] = str(tmpdir)
    return env


def test_demo_from_a_venv_console_script_with_a_foreign_python3_first_on_path(
        venvs: tuple[Path, Path], tmp_path: Path) -> None:
    pkg, bare = venvs
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(pkg / "bin" / "samsa"), "demo", "--source", "samsa-kafka", "--duration", str(DURATION), "--console", "",
         "--rate", "100", "--window", "4 seconds", "--watermark", "1 second", "--trigger", "1 second"],
        cwd=tmp_path, env=_demo_env(bare, tmpdir), capture_output=True, text=True, timeout=360)
    elapsed = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    for bad in ("ModuleNotFoundError", "PYTHON_DATA_SOURCE_ERROR", "failed to connect back", "Traceback"):
        assert bad not in out, out[-6000:]
    # The table shows only once the queries have started, i.e. once a Python worker that Spark
    # launched has loaded the samsa-kafka data source (this package) and planned the stream: with
    # the PATH's python3 that fails with ModuleNotFoundError (how the run above failed before).
    assert re.search(r"Samsa demo .* source samsa-kafka, events produced: [\d,]+, read by Spark: [\d,]+",
                     proc.stdout), out[-3000:]
    # It stops at --duration, counted from the start (unless Spark alone took longer to come up).
    up = float(re.search(r"Spark is up after (\d+) s", proc.stderr).group(1))  # type: ignore[union-attr]
    stopped = float(re.search(r"stopped after (\d+) s \(--duration", proc.stderr).group(1))  # type: ignore[union-attr]
    assert stopped <= max(DURATION, up + 30) + 3, proc.stderr[-2000:]
    assert elapsed < stopped + 60, f"shutting down took {elapsed - stopped:.0f} s"
    # Nothing of the demo's is left in the temporary directory.
    assert not [p.name for p in tmpdir.iterdir() if p.name.startswith(("samsa-demo-", "samsa-data-"))]


def test_offline_kafka_source_is_one_clear_line(venvs: tuple[Path, Path], tmp_path: Path) -> None:
    pkg, bare = venvs
    env = _demo_env(bare, tmp_path)
    env.pop("SAMSA_SPARK_KAFKA_JARS", None)
    env["HOME"] = str(tmp_path)  # no Ivy/Maven cache, no ~/.cache/samsa/spark-jars
    # A repository that cannot be reached stands in for Maven Central on an offline machine.
    proc = subprocess.run(
        [str(pkg / "bin" / "samsa"), "demo", "pipeline", "--source", "kafka", "--duration", "5",
         "--conf", "spark.jars.repositories=http://127.0.0.1:9/"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    if "no repository is reachable" not in proc.stderr:
        pytest.skip("Maven Central is reachable from this machine: not an offline run")
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "--kafka-jars DIR" in lines[0] and "SAMSA_SPARK_KAFKA_JARS" in lines[0] \
        and "--source samsa-kafka" in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_worker_interpreter_precedence() -> None:
    """$PYSPARK_PYTHON (the user's, or spark-submit's from spark.pyspark.python) wins, then
    ``--conf spark.pyspark.python``, then this interpreter; the choice lands in the environment
    pyspark's SparkContext reads."""
    from spark.pipeline import pin_python_workers

    env: dict[str, str] = {}
    assert pin_python_workers({}, env) == sys.executable and env["PYSPARK_PYTHON"] == sys.executable
    env = {}
    assert pin_python_workers({"spark.pyspark.python": "/opt/py/bin/python"}, env) == "/opt/py/bin/python"
    assert env["PYSPARK_PYTHON"] == "/opt/py/bin/python"
    env = {"PYSPARK_PYTHON": "/usr/bin/python3.12"}
    assert pin_python_workers({"spark.pyspark.python": "/opt/py/bin/python"}, env) == "/usr/bin/python3.12"
    assert env["PYSPARK_PYTHON"] == "/usr/bin/python3.12"
