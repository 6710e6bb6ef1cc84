"""The layout keeps its shape: data flows one way between the packages of `evaluations/`
(the import-linter contracts in pyproject.toml, explained in docs/ARCHITECTURE.md), and no
module imports another that imports it back, not even inside a function."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.database_free


def _cycles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child) & modules))))
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


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = grimp.build_graph("evaluations", include_external_packages=False)
    modules = {m for m in graph.modules if ".migrations" not in m}
    assert "evaluations.runs.services" in modules  # the graph really holds the project
    assert _cycles(graph, modules) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.a")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert _cycles(graph, {"pkg.a", "pkg.b", "pkg.c"}) == [["pkg.a", "pkg.b"]]


def test_the_import_contracts_hold() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"  # import-linter's command, beside python
    result = subprocess.run([str(lint_imports), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


# The remote client is one file on purpose (a CI job fetches and runs it alone).
LONG_ON_PURPOSE = {"evaluations/client.py"}
MAX_MODULE_LINES = 900


def test_no_module_of_the_app_is_longer_than_900_lines() -> None:
    long = {str(path.relative_to(REPO)): n for path in (REPO / "evaluations").rglob("*.py")
            if ".migrations" not in str(path) and "/migrations/" not in str(path)
            and (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long.keys() <= LONG_ON_PURPOSE, long
    assert "evaluations/client.py" in {str(p.relative_to(REPO)) for p in (REPO / "evaluations").glob("*.py")}


@pytest.mark.parametrize("face", ["evaluations/models/__init__.py", "evaluations/interop/__init__.py",
                                  "evaluations/api/serializers/__init__.py"])
def test_a_package_face_only_hands_names_on(face: str) -> None:
    import ast

    tree = ast.parse((REPO / face).read_text())
    kinds = {type(node).__name__ for node in tree.body}
    # its docstring, its imports and __all__: no function, class or other statement
    assert kinds <= {"Expr", "ImportFrom", "Import", "Assign"}, kinds
    assigned = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
                if isinstance(t, ast.Name)}
    assert assigned == {"__all__"}
    exported = next(node for node in tree.body if isinstance(node, ast.Assign)).value
    assert isinstance(exported, ast.List) and len(exported.elts) > 5
