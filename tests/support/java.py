"""Compile and run a small Java program against kafka-clients (the jars of tests/support/jars.py).

Compat tests that drive the Java client keep the program's source next to their assertions
and only need three things: skip without a JDK, ``javac`` once per session, and ``java``
with a small heap (the JVM shares two cores with the broker). The program prints one line
per result; the test asserts on them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from . import jars

# Small heap, serial GC, C1 only: the JVM shares 2 cores with the broker.
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def compile_java(source: str, class_name: str, out_dir: Path) -> str:
    """Compile ``source`` (public class ``class_name``) into ``out_dir``; return the classpath."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("javac/java not on PATH: install a JDK (Debian: apt-get install openjdk-17-jdk-headless)")
    cp = jars.classpath()
    src = out_dir / f"{class_name}.java"
    src.write_text(source)
    proc = subprocess.run(["javac", "-cp", cp, "-d", str(out_dir), str(src)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}\n{proc.stderr}"
    return os.pathsep.join([str(out_dir), cp])


def run_java(classpath: str, class_name: str, *args: str, timeout: float = 240) -> list[str]:
    """Run the program; return its stdout lines (fails the test on a non-zero exit)."""
    proc = subprocess.run(["java", *JVM_FLAGS, "-cp", classpath, class_name, *args], capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{class_name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return proc.stdout.splitlines()
