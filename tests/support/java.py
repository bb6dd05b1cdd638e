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


# A minimal SLF4J 1.7 binding (kafka-clients 3.9.1 logs through slf4j-api 1.7, and the jars carry no
# binding, so the client's own log is otherwise discarded): every event at or above the level in the
# system property ``samsa.log.level`` (default WARN), and every event of a logger whose name contains
# ``samsa.log.debug`` (e.g. "telemetry"), is printed to stdout as ``LOG <LEVEL> <local time> <logger>: <message>``.
_LOG_BINDER = r"""
package org.slf4j.impl;
import org.slf4j.ILoggerFactory;
import org.slf4j.spi.LoggerFactoryBinder;
public class StaticLoggerBinder implements LoggerFactoryBinder {
    public static String REQUESTED_API_VERSION = "1.6.99";
    private static final StaticLoggerBinder SINGLETON = new StaticLoggerBinder();
    public static StaticLoggerBinder getSingleton() { return SINGLETON; }
    private final ILoggerFactory factory = SamsaLogger::new;
    public ILoggerFactory getLoggerFactory() { return factory; }
    public String getLoggerFactoryClassStr() { return SamsaLogger.class.getName(); }
}
"""
_LOG_LOGGER = r"""
package org.slf4j.impl;
import java.util.List;
import org.slf4j.helpers.FormattingTuple;
import org.slf4j.helpers.MarkerIgnoringBase;
import org.slf4j.helpers.MessageFormatter;
public class SamsaLogger extends MarkerIgnoringBase {
    private static final List<String> LEVELS = List.of("TRACE", "DEBUG", "INFO", "WARN", "ERROR");
    private static final int MIN = LEVELS.indexOf(System.getProperty("samsa.log.level", "WARN"));
    private static final String DEBUG_NAME = System.getProperty("samsa.log.debug", "\u0000");
    private final boolean debugged;
    public SamsaLogger(String name) { this.name = name; this.debugged = name.contains(DEBUG_NAME); }
    private boolean on(String level) { int i = LEVELS.indexOf(level); return i >= MIN || (debugged && i >= 1); }
    private void emit(String level, String msg, Throwable e) {
        if (!on(level)) return;
        synchronized (System.out) {
            System.out.println("LOG " + level + " " + java.time.LocalTime.now() + " " + name + ": " + msg
                               + (e == null ? "" : " (" + e + ")"));
            System.out.flush();
        }
    }
    private void fmt(String level, FormattingTuple t) { if (on(level)) emit(level, t.getMessage(), t.getThrowable()); }
    METHODS
}
""".replace("METHODS", "\n    ".join(
    f'public boolean is{lv.capitalize()}Enabled() {{ return on("{lv.upper()}"); }}\n    '
    f'public void {lv}(String m) {{ emit("{lv.upper()}", m, null); }}\n    '
    f'public void {lv}(String m, Throwable e) {{ emit("{lv.upper()}", m, e); }}\n    '
    f'public void {lv}(String f, Object a) {{ fmt("{lv.upper()}", MessageFormatter.format(f, a)); }}\n    '
    f'public void {lv}(String f, Object a, Object b) {{ fmt("{lv.upper()}", MessageFormatter.format(f, a, b)); }}\n    '
    f'public void {lv}(String f, Object... a) {{ fmt("{lv.upper()}", MessageFormatter.arrayFormat(f, a)); }}'
    for lv in ("trace", "debug", "info", "warn", "error")))


def compile_log_binding(out_dir: Path) -> None:
    """Compile the SLF4J binding above into ``out_dir`` (put it first on the classpath)."""
    cp = jars.classpath()
    srcs = []
    for name, source in (("StaticLoggerBinder", _LOG_BINDER), ("SamsaLogger", _LOG_LOGGER)):
        src = out_dir / f"{name}.java"
        src.write_text(source)
        srcs.append(str(src))
    proc = subprocess.run(["javac", "-cp", cp, "-d", str(out_dir), *srcs], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}\n{proc.stderr}"


def run_java(classpath: str, class_name: str, *args: str, timeout: float = 240,
             jvm_props: dict[str, str] | None = None) -> list[str]:
    """Run the program; return its stdout lines (fails the test on a non-zero exit)."""
    props = [f"-D{k}={v}" for k, v in (jvm_props or {}).items()]
    proc = subprocess.run(["java", *JVM_FLAGS, *props, "-cp", classpath, class_name, *args], capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{class_name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return proc.stdout.splitlines()
