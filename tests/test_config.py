"""A run's configuration has one owner: one table of defaults for the command line, the Python
API and a stored run; its nested settings read back from every flat form an archive stored; and
a process resolves it once, whichever way into the run it takes."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from agentdesign.archive import Archive
from agentdesign.components import AgentDesignError, Message
from agentdesign.components.testing import FakeChatModel
from agentdesign.search import Budget, RunConfig, create_search, load_search
from agentdesign.search.cli import RunOptions, _app
from agentdesign.search.config import (
    DEFAULTS,
    SETTINGS,
    MetaSettings,
    RaceSettings,
    SpaceSettings,
    SplitSettings,
    _resolve,
)
from agentdesign.search.study import _loop

# The keys a run stores, in the order every archive has stored them.
STORED_KEYS = [
    "name",
    "benchmark",
    "model",
    "strategy",
    "objective",
    "race",
    "race_alpha",
    "race_first_stage",
    "race_rule",
    "budget",
    "n_search",
    "n_holdout",
    "split_seed",
    "allow_split_overlap",
    "seed",
    "concurrency",
    "task_timeout_s",
    "refine_every",
    "meta_every",
    "meta_model",
    "meta_view",
    "meta_code",
    "confirm_top",
    "api_base",
    "llm_timeout_s",
    "choices",
    "limits",
    "baselines",
    "grid",
    "retry_budget_s",
    "rpm",
    "tpm",
    "models",
    "reference_model",
]


class Captured(Exception):
    """Raised in place of the engine, holding the config it was given."""

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config.name)
        self.config = config


def capture(config: RunConfig, *args: Any, **kwargs: Any) -> Any:
    raise Captured(config)


# -- one table of defaults ------------------------------------------------------------------------


def test_the_command_line_and_the_python_api_start_the_same_run_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agentdesign run` and `create_search` with nothing but a name make the same config: one
    table of defaults (the command line's: BFCL on the embedded 0.5B model, 4 agents, 4 search
    and 40 holdout items, quick)."""
    monkeypatch.setattr(_app, "run_search", lambda archive, config, **_: capture(config))
    result = CliRunner().invoke(
        _app.app, ["run", "--name", "x", "--storage", str(tmp_path / "cli.db")]
    )
    assert isinstance(result.exception, Captured), result.output
    from_cli = result.exception.config

    from agentdesign.search import _api

    monkeypatch.setattr(_api, "Engine", lambda archive, config, **_: capture(config))
    with pytest.raises(Captured) as from_api:
        create_search(name="x", storage=tmp_path / "api.db")
    assert from_api.value.config == from_cli
    assert (from_cli.benchmark, from_cli.model) == ("bfcl", "embedded/qwen2.5-coder-0.5b")
    assert (from_cli.budget, from_cli.split.n_search, from_cli.split.n_holdout) == (
        Budget(max_agents=4),
        4,
        40,
    )
    assert from_cli.space == SpaceSettings(preset="quick")
    # what a RunConfig takes unless told, but the space: it searches the whole space
    assert RunConfig.of("x", space="quick") == from_cli == RunOptions().config("x")
    assert RunConfig(name="x") == RunConfig.of("x")


def _run_options() -> dict[str, inspect.Parameter]:
    """The parameters typer reads the `run` command's options from (not its context, which typer
    passes itself)."""
    parameters = inspect.signature(_app.run).parameters
    return {name: p for name, p in parameters.items() if p.annotation is not typer.Context}


def test_every_option_of_a_run_is_a_setting_of_the_table_with_its_default() -> None:
    """The command line's run options are made from the table: each its setting's default."""
    options = _run_options()
    table = {s.name: s for s in SETTINGS if s.help is not None}
    # the run's name, its archive, the sandbox's switch and --estimate (which runs nothing) are
    # no settings a run stores
    assert set(table) == set(options) - {"name", "storage", "unsafe_sandbox", "estimate"}
    for name, setting in table.items():
        assert options[name].default == setting.option_default, name
    signature = inspect.signature(create_search).parameters
    for name in ("benchmark", "model", "strategy", "n_search", "n_holdout", "seed"):
        assert signature[name].default == DEFAULTS[name] == options[name].default, name


# -- nested settings, flat as stored ---------------------------------------------------------------


def test_a_config_nests_its_settings_and_stores_them_flat_as_always() -> None:
    config = RunConfig.of(
        "n",
        n_search=7,
        split_seed=3,
        race=False,
        race_alpha=0.2,
        meta_every=2,
        meta_view=3,
        strategy="mcts",
        choices={"workflow": ["single"]},
        limits={"reasoning__max_tokens": [256, 256]},
        max_agents=5,
    )
    assert config.split == SplitSettings(n_search=7, n_holdout=40, seed=3)
    assert config.race == RaceSettings(enabled=False, alpha=0.2) and config.racing() is None
    assert config.meta == MetaSettings(every=2, view=3)
    assert config.space.choices == {"workflow": ("single",)}
    assert config.budget == Budget(max_agents=5)
    stored = config.to_dict()
    assert list(stored) == STORED_KEYS
    assert stored["choices"] == {"workflow": ["single"]}
    assert stored["limits"] == {"reasoning__max_tokens": [256, 256]}
    assert RunConfig.from_dict(json.loads(json.dumps(stored))) == config


def test_every_config_an_older_archive_stored_reads_back() -> None:
    """A config stored before the grid, racing, its rules, the meta agent, the split seed and
    the timeouts were settings reads back as it ran then."""
    oldest = {
        "name": "old",
        "benchmark": "gsm8k",
        "model": "fake/model",
        "strategy": "tpe",
        "budget": {"max_agents": 8, "max_tokens": None, "max_minutes": None},
        "n_search": 10,
        "n_holdout": 10,
        "seed": 3,
        "prune": True,
        "choices": {"workflow": ["single", "self_consistency"]},
        "limits": {"workflow__n_samples": [2, 4]},
    }
    config = RunConfig.from_dict(oldest)
    assert config.space == SpaceSettings(
        choices={"workflow": ("single", "self_consistency")},
        limits={"workflow__n_samples": (2, 4)},
        grid=False,
    )
    assert config.race == RaceSettings(enabled=True, rule="paired")
    assert (config.split.n_search, config.split.n_holdout) == (10, 10)
    assert config.budget == Budget(max_agents=8)
    assert config.meta == MetaSettings() and config.confirm_top == 1
    assert RunConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"confirm_top": -1}, "confirm_top must not be negative, got -1"),
        ({"colour": "red"}, "no run setting colour"),
        ({"budget": Budget(), "max_agents": 2}, "give a budget or max_agents"),
        ({"space": "quick", "choices": {"workflow": ["single"]}}, "a space preset or its"),
    ],
)
def test_a_bad_setting_is_refused_by_the_config(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(AgentDesignError, match=message):
        RunConfig.of("bad", **settings)


# -- resolved once a process ----------------------------------------------------------------------


def answers_3(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
    return "Answer: 3"


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How often a process resolves a config, and makes a strategy, as counted from now."""
    counted = {"resolve": 0, "make_strategy": 0}

    def counting(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return function(*args, **kwargs)

        return call

    monkeypatch.setattr(_loop, "resolve", counting("resolve", _loop.resolve))
    strategies = counting("make_strategy", _resolve.make_strategy)
    monkeypatch.setattr(_resolve, "make_strategy", strategies)
    monkeypatch.setattr(_resolve, "default_chat_model", lambda **_: FakeChatModel(answers_3))
    monkeypatch.setattr(_app, "console", _app.Console(width=300))
    yield counted


def _cli(args: list[str], calls: dict[str, int]) -> None:
    calls.update(resolve=0, make_strategy=0)
    result = CliRunner().invoke(_app.app, args)
    assert result.exit_code == 0, result.output


def test_each_command_resolves_its_run_once(tmp_path: Path, calls: dict[str, int]) -> None:
    """`run`, `resume`, `worker` and `finalize` each resolve the run's config once, and make
    its strategy once (no second one made to check it)."""
    db = str(tmp_path / "once.db")
    space = tmp_path / "single.json"
    space.write_text(json.dumps({"choices": {"workflow": ["single"], "tool": ["none"]}}))
    small = ["--n-search", "3", "--n-holdout", "2", "--space", str(space)]
    model = ["--model", "openai/fake-model", "--storage", db]
    commands = [
        ["run", "--name", "a", "--max-agents", "1", *small, *model],
        ["worker", "--run", "b", "--max-agents", "1", "--split-seed", "1", *small, *model],
        ["worker", "--run", "b", "--storage", db],  # joins the stored run
        ["finalize", "a", "--storage", db],
        ["resume", "a", "--storage", db],
    ]
    for command in commands:
        _cli(command, calls)
        assert calls == {"resolve": 1, "make_strategy": 1}, command
    with Archive(db) as archive:
        assert [r.status for r in archive.list_runs()] == ["finished", "finished"]


def test_the_python_api_resolves_its_run_once(tmp_path: Path, calls: dict[str, int]) -> None:
    items = [{"question": f"What is {n} + 0?", "answer": str(n)} for n in range(1, 7)]
    given = {"benchmark": items, "scorer": lambda output, answer: 1.0}
    model = {"model": FakeChatModel(answers_3), "model_name": "fake"}
    storage = tmp_path / "api.db"
    with create_search(
        **given, **model, name="p", storage=storage, n_search=2, n_holdout=2, strategy="random"
    ):
        assert calls == {"resolve": 1, "make_strategy": 1}
    calls.update(resolve=0, make_strategy=0)
    with load_search("p", **given, **model, storage=storage):
        assert calls == {"resolve": 1, "make_strategy": 1}
