"""Run the log engineer's offline checker (``log.check.check_log``) on a broker's data dir.

``check_log(dir)`` verifies what a SIGKILL must never leave behind once the
broker has recovered: contiguous offsets, valid offset/time indexes, good
CRCs.  This wrapper accepts either convention for reporting (raising, or
returning a collection of problems / a report with ``ok`` and ``problems``)
and turns any problem into a test failure naming the directory.
"""

from __future__ import annotations

from pathlib import Path


def assert_log_ok(data_dir: Path, *, allow_torn_tail: bool = False) -> None:
    """allow_torn_tail=True right after a SIGKILL, before recovery has truncated the tail."""
    try:
        from log.check import check_log
    except ImportError as e:  # the checker is part of the contract, not optional
        raise AssertionError(f"log.check.check_log is not importable: {e}") from e
    result = check_log(Path(data_dir), allow_torn_tail=allow_torn_tail)
    if result is None or result is True:
        return
    ok = getattr(result, "ok", None)
    if ok is not None:
        assert ok, f"check_log({data_dir}) found problems: {getattr(result, 'problems', result)!r}"
        return
    if isinstance(result, (list, tuple, set, dict)):
        assert not result, f"check_log({data_dir}) found problems: {list(result)[:50]!r}"
        return
    raise AssertionError(f"check_log({data_dir}) returned {result!r}")
