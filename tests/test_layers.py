"""The floor plan holds: each package imports only from its own layer or the layers below it
(components <- evaluators <- archive <- the search's folders <- the search's face <- cli <-
benchmarking <- the top-level face), and reaches into another package only through its face."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import agentdesign
from agentdesign.search import create_search

SRC = Path(__file__).resolve().parents[1] / "src"
# Lowest first; a module may import from its own layer and those before it. Each is also a package
# whose private modules only its own modules import (the folders inside components and evaluators
# are parts of their layer, not layers).
LAYERS = (
    "agentdesign.components",
    "agentdesign.evaluators",
    "agentdesign.archive",
    "agentdesign.search.space",
    "agentdesign.search.valuemodel",
    "agentdesign.search.racing",
    "agentdesign.search.verdict",
    "agentdesign.search.strategies",
    "agentdesign.search.config",
    "agentdesign.search.tracking",
    "agentdesign.search.study",
    "agentdesign.search.report",
    "agentdesign.search",
    "agentdesign.search.cli",
    "agentdesign.benchmarking",
    "agentdesign",
)


def _package(module: str) -> str:
    """The layer a module belongs to: the longest layer name it starts with."""
    return max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted((SRC / "agentdesign").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        name = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        found.append((name, path))
    return found


def _imports(path: Path) -> list[str]:
    """Every agentdesign module the file imports, at any depth (lazy imports count too)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return [n for n in names if n == "agentdesign" or n.startswith("agentdesign.")]


@pytest.mark.parametrize(("module", "path"), _modules(), ids=lambda v: str(v))
def test_a_module_imports_only_its_layer_and_those_below(module: str, path: Path) -> None:
    mine = LAYERS.index(_package(module))
    above = [n for n in _imports(path) if LAYERS.index(_package(n)) > mine]
    assert not above, f"{module} imports from a higher layer: {above}"


@pytest.mark.parametrize(("module", "path"), _modules(), ids=lambda v: str(v))
def test_another_package_is_reached_through_its_public_names(module: str, path: Path) -> None:
    private = [
        n
        for n in _imports(path)
        if _package(n) != _package(module) and any(part.startswith("_") for part in n.split("."))
    ]
    assert not private, f"{module} imports private modules of another package: {private}"


def test_no_modules_import_each_other_in_a_circle() -> None:
    """The imports between modules run one way, type-only imports included: a circle (a module
    that, through others, imports itself) is a tangle even where it loads."""
    modules = dict(_modules())
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:  # `from package import module` imports the module
                    named = f"{node.module}.{alias.name}"
                    imported.add(named if named in modules else node.module)
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
        graph[module] = {n for n in imported if n in modules and n != module}

    def circle_from(start: str) -> list[str] | None:
        path, seen = [start], {start}
        todo = [iter(sorted(graph[start]))]
        while todo:
            step = next(todo[-1], None)
            if step is None:
                todo.pop()
                path.pop()
            elif step == start:
                return [*path, start]
            elif step not in seen:
                seen.add(step)
                path.append(step)
                todo.append(iter(sorted(graph[step])))
        return None

    circles = [c for c in map(circle_from, sorted(graph)) if c is not None]
    assert not circles, " -> ".join(circles[0])


def test_a_public_name_means_one_thing_across_the_faces() -> None:
    """A name in two faces' `__all__` is one object, so that a user reading `Observation` (what a
    tool returned) or `Trial` (a run's trial, as a strategy sees it) never meets another thing."""
    owners: dict[str, dict[int, list[str]]] = {}
    for module, path in _modules():
        if path.name != "__init__.py":
            continue
        face = importlib.import_module(module)
        for name in getattr(face, "__all__", ()):
            owners.setdefault(name, {}).setdefault(id(getattr(face, name)), []).append(module)
    clashes = {name: list(by.values()) for name, by in owners.items() if len(by) > 1}
    assert not clashes, clashes


def test_the_top_level_face_loads_each_name_on_first_use() -> None:
    # A fresh interpreter: `import agentdesign` alone loads no layer, and every face name resolves.
    program = (
        "import sys, agentdesign; "
        "loaded = [m for m in sys.modules if m.startswith('agentdesign.')]; "
        "assert not loaded, loaded; "
        "print(sorted(n for n in agentdesign.__all__ if getattr(agentdesign, n) is None))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert agentdesign.create_search is create_search
