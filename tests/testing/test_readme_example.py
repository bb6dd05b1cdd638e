"""The README's worked example (an application's retry logic under an injected
NOT_LEADER_OR_FOLLOWER) runs as written, through the pytest plugin, in a pytester session."""

from __future__ import annotations

import re

import pytest

from .test_plugin import ROOT, _run

pytest_plugins = ["pytester"]


def _block(name: str) -> str:
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"```python\n# " + re.escape(name) + r"\n(.*?)```", readme, re.S)
    assert m, f"README.md has no ```python block starting '# {name}'"
    return m.group(1)


def test_readme_worked_example_passes(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(orders=_block("orders.py"), test_orders=_block("test_orders.py"))
    result = _run(pytester, monkeypatch)
    result.assert_outcomes(passed=2)
