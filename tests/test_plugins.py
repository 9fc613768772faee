"""Third-party plugins: the demo package in tests/plugin_demo adds a workflow, a benchmark and a
strategy through entry points alone, and they list, search and export like the built-ins."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from forked_python import run_forked

from agentdesign.archive import Archive
from agentdesign.components import (
    REGISTRY,
    AgentSpec,
    Message,
    NamedRegistry,
    build_agent,
    write_export,
)
from agentdesign.components._plugins import PluginGroup
from agentdesign.components.export._export import load_exported_agent
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import BENCHMARKS, available_benchmarks, get_benchmark
from agentdesign.search import (
    STRATEGIES,
    Budget,
    OptunaStrategy,
    RunConfig,
    SearchSpace,
    make_strategy,
    run_search,
)
from agentdesign.search.checks import check_benchmark, check_component, check_strategy

PLUGIN = Path(__file__).resolve().parent / "plugin_demo"
CLI = [sys.executable, "-c", "from agentdesign.search.cli import main; main()"]


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The demo plugin installed (its dist-info on sys.path), with fresh plugin discovery and the
    registries restored afterwards, so other tests never see it."""
    monkeypatch.syspath_prepend(str(PLUGIN))
    registries: list[NamedRegistry[object]] = [*REGISTRY._by_slot.values(), BENCHMARKS, STRATEGIES]  # type: ignore[list-item]
    for registry in registries:
        monkeypatch.setattr(registry, "_objects", dict(registry._objects))
    monkeypatch.setattr(REGISTRY, "plugins", PluginGroup("agentdesign.components"))
    monkeypatch.setattr(BENCHMARKS, "plugins", PluginGroup("agentdesign.benchmarks"))
    monkeypatch.setattr(STRATEGIES, "plugins", PluginGroup("agentdesign.strategies"))
    monkeypatch.setattr("agentdesign.evaluators._benchmark._INSTANCES", {})  # of an earlier import
    yield
    for name in [m for m in sys.modules if m.split(".")[0] == "plugin_demo"]:
        del sys.modules[name]


def adder(model: str, messages: Sequence[Message], temperature: float, seed: int | None) -> str:
    """Answers the demo benchmark's sums."""
    words = messages[-1]["content"].replace("?", " ").split()
    numbers = [int(w) for w in words if w.isdigit()]
    return f"Answer: {sum(numbers[:2])}"


@pytest.mark.usefixtures("plugin")
def test_the_plugin_appears_in_every_registry() -> None:
    assert "demo_twice" in REGISTRY.names("workflow")
    assert available_benchmarks()["demo_sums"].startswith("Sums of two small numbers")
    assert STRATEGIES["demo_shuffle"].description.startswith("Seeded random designs")
    assert get_benchmark("demo_sums").score(get_benchmark("demo_sums").tasks()[0], "1").value == 1


@pytest.mark.usefixtures("plugin")
def test_the_plugin_runs_in_a_search_on_the_fake_model(tmp_path: Path) -> None:
    config = RunConfig.of(
        name="plugged",
        benchmark="demo_sums",
        model="fake/model",
        strategy="demo_shuffle",
        budget=Budget(max_agents=3),
        n_search=4,
        n_holdout=2,
        race=False,
        choices={"workflow": ("demo_twice",)},
    )
    with Archive(str(tmp_path / "search.db")) as archive:
        summary = run_search(archive, config, llm=FakeChatModel(adder))
        board = archive.leaderboard(run_name="plugged")
    assert summary.agents_done == 3
    assert all(row.mean == 1.0 for row in board)
    assert {AgentSpec.from_dict(row.spec)["workflow"].name for row in board} == {"demo_twice"}


@pytest.mark.usefixtures("plugin")
def test_the_plugin_workflow_exports_with_its_module_inlined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = AgentSpec.create(model="fake/model", workflow={"name": "demo_twice"})
    folder = write_export(spec, train_examples=(), out=tmp_path).folder
    header = "It carries plugin_demo.workflow (copied from the plugin distribution plugin-demo)"
    assert header in " ".join((folder / "agent.py").read_text().split())
    runtime = (folder / "agentdesign_runtime.py").read_text()
    assert "import plugin_demo" not in runtime and "from plugin_demo" not in runtime
    module = load_exported_agent(folder, name="exported_plugin_agent")
    monkeypatch.setitem(sys.modules, "exported_plugin_agent", module)
    assert type(module.SPEC["workflow"]).__module__ == "agentdesign_runtime"  # its own copy
    engine_llm, exported_llm = FakeChatModel(adder), FakeChatModel(adder)
    question = "What is 2 + 3?"
    mine = build_agent(spec, llm=engine_llm).run(question)
    theirs = module.runtime.Agent(module.SPEC, llm=exported_llm, train_examples=()).run(question)
    assert (theirs.answer, theirs.output) == (mine.answer, mine.output) == ("5", mine.output)
    assert exported_llm.calls == engine_llm.calls and len(engine_llm.calls) == 2


def test_the_cli_lists_an_installed_plugin(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(PLUGIN), os.environ.get("PYTHONPATH", "")]),
    }

    def listing(command: str) -> list[str]:
        # a process of its own, forked from one that imported the CLI with the plugin installed
        result = run_forked(CLI[2], command, "--json", cwd=tmp_path, env=env, timeout=120)
        assert result.returncode == 0, result.stderr
        assert not result.stderr  # no plugin was skipped
        return [entry["name"] for entry in json.loads(result.stdout)]

    assert "demo_twice" in listing("components")
    assert "demo_sums" in listing("benchmarks")
    assert "demo_shuffle" in listing("strategies")


def test_a_plugin_that_fails_to_load_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken-0.1.dist-info"
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (broken / "entry_points.txt").write_text("[demo.group]\nnope = no_such_module:Thing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = NamedRegistry[object](kind="thing", group="demo.group")
    assert list(registry) == []
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert "skipped plugin 'nope' (no_such_module:Thing, entry point group demo.group)" in lines[0]
    assert "ModuleNotFoundError" in lines[0]


def test_names_are_never_taken_twice_and_presets_register_by_name() -> None:
    registry = NamedRegistry[object](kind="thing")
    registry.register("a", int)
    with pytest.raises(
        ValueError, match=r"a thing named 'a' is already registered \(by builtins.int\)"
    ):
        registry.register("a", str)
    with pytest.raises(ValueError, match=r"unknown thing 'b' \(available: a\)"):
        registry.lookup("b")
    tpe = make_strategy("tpe", space=SearchSpace(model="fake/model"), seed=3)  # a preset by name
    assert isinstance(tpe, OptunaStrategy) and tpe.seed == 3


@pytest.mark.usefixtures("plugin")
def test_the_plugin_passes_the_conformance_kit() -> None:
    check_component(REGISTRY.get("workflow", "demo_twice"))
    check_benchmark(get_benchmark("demo_sums"))
    check_strategy("demo_shuffle")
