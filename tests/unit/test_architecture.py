"""The shape of the package, held by tests: no import circles (function-local imports
included: grimp reads every import statement), and Docker only through the engine. The
layers themselves are import-linter contracts in pyproject.toml, run by `./dev test`."""

from __future__ import annotations

import subprocess
import sys

import grimp
import pytest

from ..conftest import ROOT


@pytest.fixture(scope="module")
def graph():
    # Annotations-only imports (TYPE_CHECKING) are not imports at run time: sbom.py names
    # inventory's type while inventory makes SBOMs with it.
    return grimp.build_graph(
        "imagekit",
        include_external_packages=True,
        exclude_type_checking_imports=True,
        cache_dir=None,
    )


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    modules = sorted(m for m in graph.modules if m.startswith("imagekit"))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c.startswith("imagekit")), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
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
                    found.append(sorted(component))
    return found


def test_no_import_circles(graph):
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_one():
    graph = grimp.build_graph("imagekit", exclude_type_checking_imports=True, cache_dir=None)
    graph.add_import(importer="imagekit.grammar", imported="imagekit.engine.client")
    assert any({"imagekit.grammar", "imagekit.engine.client"} <= set(c) for c in _cycles(graph))


def test_only_the_engine_imports_docker(graph):
    # External packages are one node each in this graph ("docker" stands for docker.*).
    importers = {
        m for m in graph.find_modules_that_directly_import("docker") if m.startswith("imagekit")
    }
    assert importers == {"imagekit.engine.client"}


def test_the_layer_contracts_hold():
    lint = ROOT / ".venv" / "bin" / "lint-imports"
    command = [str(lint)] if lint.exists() else [sys.executable, "-m", "importlinter.cli"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:]
