"""The import structure, checked: the layers contract in pyproject.toml and the absence of import cycles.

`lint-imports` (import-linter) reads the contracts from ``[tool.importlinter]``: protocol at the bottom,
log on it, the services, the request layer, the composition root, tools on top; tools, the console and
Spark reach the broker only over the Kafka protocol.  A backwards import fails here with the chain that
makes it.  The cycle check works on modules (grimp's graph, the one import-linter builds), counting
function-local and TYPE_CHECKING imports too, since a cycle hidden in a function is still a cycle.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("protocol", "log", "txn", "groupcoord", "broker", "spark")

# Cycles that remain today, each as the sorted modules of one strongly connected component.  A change
# that breaks one removes it here; a change that makes a new one fails.
KNOWN_CYCLES: set[tuple[str, ...]] = set()


def _lint_imports() -> str | None:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    return exe if Path(exe).exists() else None


@pytest.mark.skipif(_lint_imports() is None, reason="import-linter is not installed (pip install -e '.[test]')")
def test_import_contracts() -> None:
    proc = subprocess.run([str(_lint_imports()), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout, proc.stdout


def _cycles() -> set[tuple[str, ...]]:
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (pip install -e '.[test]')")
    sys.path.insert(0, str(ROOT))
    try:
        graph = grimp.build_graph(*PACKAGES, include_external_packages=False, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))
    # Tarjan's strongly connected components, iteratively (the graph has a few hundred modules).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[tuple[str, ...]] = set()
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(tuple(sorted(component)))
    return found


def test_no_new_import_cycles() -> None:
    cycles = _cycles()
    new = cycles - KNOWN_CYCLES
    assert not new, f"new import cycles (break them; a shared name moves down a layer): {sorted(new)}"
    gone = KNOWN_CYCLES - cycles
    assert not gone, f"these cycles are gone: remove them from KNOWN_CYCLES: {sorted(gone)}"
