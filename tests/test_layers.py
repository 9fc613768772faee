"""The floor plan holds: each package imports only from its own layer or the layers below it
(components <- evaluators <- archive <- search <- search.cli), and reaches into another package
only through its public names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Lowest first; a module may import from its own layer and those before it.
LAYERS = (
    "agentdesign.components",
    "agentdesign.evaluators",
    "agentdesign.archive",
    "agentdesign.search",
    "agentdesign.search.cli",
)


def _package(module: str) -> str:
    """The layer a module belongs to: the longest layer name it starts with."""
    return max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)


def _modules() -> list[tuple[str, Path]]:
    found = []
    for folder in ("components", "evaluators", "archive", "search"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(("agentdesign", *parts)).removesuffix(".__init__")
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
    return [n for n in names if n.startswith("agentdesign.")]


@pytest.mark.parametrize(("module", "path"), _modules(), ids=lambda v: str(v))
def test_a_module_imports_only_its_layer_and_those_below(module: str, path: Path) -> None:
    mine = LAYERS.index(_package(module))
    above = [n for n in _imports(path) if LAYERS.index(_package(n)) > mine]
    assert not above, f"{module} imports from a higher layer: {above}"


def _top(module: str) -> str:
    """The package a module is part of (search.cli is part of search: it may use its internals)."""
    return ".".join(module.split(".")[:2])


@pytest.mark.parametrize(("module", "path"), _modules(), ids=lambda v: str(v))
def test_another_package_is_reached_through_its_public_names(module: str, path: Path) -> None:
    private = [
        n
        for n in _imports(path)
        if _top(n) != _top(module) and any(part.startswith("_") for part in n.split("."))
    ]
    assert not private, f"{module} imports private modules of another package: {private}"
