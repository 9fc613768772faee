"""The model as a choice of the design space (`--models`): a run over two fake models draws both,
learns which is better, runs its baselines on the reference model, keeps both on its score-cost
front, shows and exports each design's model; a run on one model is what it always was."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
from test_cli import agentdesign, assert_one_line_error

from agentdesign.archive import Archive
from agentdesign.components import AgentDesignError, AgentSpec, Message
from agentdesign.components.export._export import load_exported_agent
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import get_benchmark
from agentdesign.search import RunConfig, create_search, run_search
from agentdesign.search.space import SearchSpace, crossover, mutate, pairwise_design
from agentdesign.search.strategies import DesignReader
from agentdesign.search.valuemodel import Domain, design_features

SMALL, LARGE = "openai/fake-small", "openai/fake-large"
# Single-call designs only: 3 reasonings x 2 memories, on each model.
CHOICES = {
    "workflow": ["single"],
    "planning": ["none"],
    "tool": ["none"],
    "reflection": ["none"],
    "memory": ["none", "few_shot"],
}
# The large model's replies are long: it costs more tokens per item than the small one.
_PADDING = " ".join(["step"] * 300)


@cache
def _gold() -> tuple[tuple[str, str], ...]:
    return tuple((t.question, t.answer) for t in get_benchmark("gsm8k").tasks())


def by_model(model: str, messages: Sequence[Message], temperature: float, seed: int | None) -> str:
    """The large model answers every GSM8K question right, at length; the small one briefly and
    wrong."""
    if "large" not in model:
        return "Answer: 1"
    last = messages[-1]["content"]
    gold = next((answer for question, answer in _gold() if question in last), "0")
    return f"{_PADDING}\nAnswer: {gold}"


def _run(archive: Archive, name: str, **settings: Any) -> FakeChatModel:
    llm = FakeChatModel(by_model)
    defaults: dict[str, Any] = {
        "benchmark": "gsm8k",  # `by_model`'s large model knows its answers
        "strategy": "random",
        "max_agents": 12,
        "n_search": 3,
        "n_holdout": 3,
        "choices": CHOICES,
    }
    run_search(archive, RunConfig.of(name, **{**defaults, **settings}), llm=llm)
    return llm


def _specs(archive: Archive, run_name: str, split: str = "search") -> list[AgentSpec]:
    rows = archive.leaderboard(run_name=run_name, split=split, limit=1000)
    return [AgentSpec.from_dict(row.spec) for row in rows]


def test_a_run_over_two_models_draws_both_and_its_baselines_run_on_the_reference(
    tmp_path: Path,
) -> None:
    with Archive(str(tmp_path / "a.db")) as archive:
        llm = _run(archive, "two", models=[SMALL, LARGE], reference_model=LARGE)
        run = archive.get_run("two")
        searched = _specs(archive, "two")
        assert {spec.model for spec in searched} == {SMALL, LARGE}
        assert {call.model for call in llm.calls} == {SMALL, LARGE}
        winner = AgentSpec.from_dict(archive.get_agent(str(run.winner_hash)).spec)
        assert winner.model == LARGE  # the better model won
        roles = archive.run_roles("two")
        baselines = [
            AgentSpec.from_dict(archive.get_agent(e.agent_hash).spec)
            for e in archive.run_evaluations("two", split="holdout")
            if roles.get(e.id) == "baseline"
        ]
        assert baselines and {spec.model for spec in baselines} == {LARGE}
        assert run.model == LARGE and run.config["models"] == [SMALL, LARGE]
        assert RunConfig.from_dict(run.config).reference_model == LARGE


def test_a_value_guided_search_learns_the_better_model(tmp_path: Path) -> None:
    """mcts covers both models in its cold start (8 designs), then proposes the better one."""
    choices = {**CHOICES, "workflow": ["single", "self_consistency"]}
    choices["tool"] = ["none", "calculator"]
    with Archive(str(tmp_path / "a.db")) as archive:
        models = [SMALL, LARGE]
        _run(archive, "learn", models=models, strategy="mcts", max_agents=16, choices=choices)
        order = [
            AgentSpec.from_dict(archive.get_agent(e.agent_hash).spec).model
            for e in archive.run_evaluations("learn", role="candidate")
        ]
    assert len(order) == 16 and {SMALL, LARGE} <= set(order[:8])
    assert order[8:] == [LARGE] * 8


def test_the_reference_model_is_named_the_largest_embedded_or_the_first_listed() -> None:
    embedded = [f"embedded/{name}" for name in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")]
    embedded.append("embedded/smollm2-135m")
    assert RunConfig.of("e", models=embedded).model == "embedded/qwen2.5-coder-1.5b"
    assert RunConfig.of("e", models=embedded[::2]).model == "embedded/qwen2.5-coder-0.5b"
    assert RunConfig.of("h", models=[SMALL, LARGE]).model == SMALL
    assert RunConfig.of("h", models=[SMALL, LARGE], reference_model=LARGE).model == LARGE
    assert RunConfig.of("h", models=[SMALL, LARGE], model=LARGE).model == LARGE
    mixed = RunConfig.of("m", models=[SMALL, "embedded/qwen2.5-coder-0.5b"])
    assert mixed.model == SMALL and mixed.search_space().model_choices == (SMALL, mixed.models[1])
    with pytest.raises(AgentDesignError, match="at least one model"):
        RunConfig.of("none", models=[])
    with pytest.raises(AgentDesignError, match="is not one of the models"):
        RunConfig.of("other", models=[SMALL, LARGE], model="openai/other")


def test_a_file_baseline_runs_on_the_reference_model() -> None:
    spec = AgentSpec.create(model="openai/elsewhere").to_dict()
    config = RunConfig.of(
        "b", models=[SMALL, LARGE], baselines=[{"label": "mine", "spec": spec}]
    )
    assert [b["spec"]["model"] for b in config.baselines] == [SMALL]


def test_the_score_cost_front_spans_the_models_and_show_and_report_name_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from agentdesign.search.cli import _app
    from agentdesign.search.report import write_report

    db = tmp_path / "a.db"
    with Archive(str(db)) as archive:
        _run(archive, "front", models=[SMALL, LARGE], objective="score-cost", strategy="nsga2")
        front = [AgentSpec.from_dict(row.spec) for row in archive.pareto(run_name="front")]
        assert {spec.model for spec in front} == {SMALL, LARGE}
        write_report(archive, "front", tmp_path / "front.html")
    html = (tmp_path / "front.html").read_text()
    assert "<th>model</th>" in html and f"<td>{LARGE}</td>" in html and f"<td>{SMALL}</td>" in html
    monkeypatch.setattr(_app, "console", _app.Console(width=200))
    shown = CliRunner().invoke(_app.app, ["show", "front", "--storage", str(db)])
    assert shown.exit_code == 0, shown.output
    designs = shown.output.split("the designs: cost and components")[1]
    assert re.search(r"\bmodel\b", designs.splitlines()[1])
    assert SMALL in designs and LARGE in designs


def test_a_run_on_one_model_shows_no_model_column(tmp_path: Path) -> None:
    from agentdesign.search.report import write_report

    with Archive(str(tmp_path / "a.db")) as archive:
        _run(archive, "one", model=LARGE, max_agents=2)
        write_report(archive, "one", tmp_path / "one.html")
    assert "<th>model</th>" not in (tmp_path / "one.html").read_text()


def test_the_value_model_tells_the_searched_models_apart() -> None:
    small, large = AgentSpec.create(model=SMALL), AgentSpec.create(model=LARGE)
    one = design_features([small, large])
    two = design_features([small, large], models=(SMALL, LARGE))
    assert two.shape[1] > one.shape[1] and np.array_equal(two[:, : one.shape[1]], one)
    assert not np.array_equal(two[0, one.shape[1] :], two[1, one.shape[1] :])
    assert np.array_equal(design_features([small], models=(SMALL,)), design_features([small]))
    domain = Domain(description="d", model=LARGE, models=(SMALL, LARGE))
    assert domain.holds([small, large], ["d", "d"]).ravel().tolist() == [1.0, 1.0]
    other = AgentSpec.create(model="openai/other")
    assert domain.holds([other], ["d"]).ravel().tolist() == [0.0]


def test_the_space_draws_mutates_crosses_and_covers_the_models() -> None:
    space = SearchSpace(model=LARGE, models=(SMALL, LARGE), choices=CHOICES)
    rng = np.random.default_rng(0)
    assert {space.sample(rng).model for _ in range(20)} == {SMALL, LARGE}
    assert {d.model for d in pairwise_design(space, rng)} == {SMALL, LARGE}
    start = space.sample(rng, model=SMALL)
    assert start.model == SMALL and space.contains(start)
    assert any(mutate(start, space, rng).model == LARGE for _ in range(40))
    other = AgentSpec(model=LARGE, components=start.components)
    assert {crossover(start, other, rng).model for _ in range(20)} == {SMALL, LARGE}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    drawn = [space.suggest(study.ask()) for _ in range(20)]
    assert {spec.model for spec in drawn} == {SMALL, LARGE}
    study.enqueue_trial(space.trial_params(drawn[0]))
    assert space.suggest(study.ask()) == drawn[0]
    assert not space.contains(AgentSpec.create(model="openai/other"))


def test_the_meta_agent_may_name_a_searched_model() -> None:
    space = SearchSpace(model=SMALL, models=(SMALL, LARGE), choices=CHOICES)
    reader = DesignReader(space=space, max_designs=3, max_prompt_chars=2000)
    read = reader.read(
        f'[{{"reasoning": "direct", "model": "{LARGE}"}}, {{"model": "openai/other"}}]',
        parent=None,
        failed=(),
        seen=(),
    )
    assert read[0].spec is not None and read[0].spec.model == LARGE
    assert read[1].status == "invalid" and "not in the run's space" in str(read[1].reason)


def test_an_exported_design_calls_the_model_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from agentdesign.search.cli import _app

    db = tmp_path / "a.db"
    with Archive(str(db)) as archive:
        _run(archive, "ex", models=[LARGE, SMALL], max_agents=8)
        chosen = next(s for s in _specs(archive, "ex") if s.model == SMALL)
    out, agent = str(tmp_path / "out"), chosen.spec_hash[:10]
    exported = CliRunner().invoke(
        _app.app, ["export", "ex", "--agent", agent, "--out", out, "--storage", str(db)]
    )
    assert exported.exit_code == 0, exported.output
    folder = tmp_path / "out" / f"agent_{chosen.spec_hash[:10]}"
    module = load_exported_agent(folder, name="exported_on_small")
    assert module.SPEC.model == SMALL
    fake = FakeChatModel(by_model)
    monkeypatch.setattr(module.runtime, "LiteLLMChatModel", lambda **_: fake)
    module.build_agent().run("What is 2 + 2?")
    assert fake.calls and {call.model for call in fake.calls} == {SMALL}


def test_one_model_draws_what_it_always_drew(tmp_path: Path) -> None:
    """A run given its one model as a list of one draws the designs of the run given it plainly,
    and neither space asks optuna for a model."""
    with Archive(str(tmp_path / "a.db")) as archive:
        for strategy in ("tpe", "mcts"):
            _run(archive, f"plain-{strategy}", model=LARGE, strategy=strategy, seed=4)
            _run(archive, f"listed-{strategy}", models=[LARGE], strategy=strategy, seed=4)
            plain = [s.spec_hash for s in _specs(archive, f"plain-{strategy}")]
            listed = [s.spec_hash for s in _specs(archive, f"listed-{strategy}")]
            assert plain == listed and len(plain) == 12
    space = SearchSpace(model=LARGE, choices=CHOICES)
    trial = optuna.create_study().ask()
    space.suggest(trial)
    assert "model" not in trial.params
    assert "model" not in space.trial_params(AgentSpec.create(model=LARGE))
    one, same = SearchSpace(model=LARGE), SearchSpace(model=LARGE, models=(LARGE,))
    for seed in range(5):
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        assert pairwise_design(one, a) == pairwise_design(same, b)
        spec = one.sample(a)
        assert spec == same.sample(b) and mutate(spec, one, a) == mutate(spec, same, b)


def test_create_search_takes_models_and_a_model_function_answers_for_each(tmp_path: Path) -> None:
    small, large = "python/small", "python/large"
    with create_search(
        model=FakeChatModel(by_model),
        models=[small, large],
        reference_model=large,
        storage=str(tmp_path / "api.db"),
        name="api",
        space={"choices": CHOICES},
    ) as search:
        models = {search.ask().spec.model for _ in range(8)}
        assert models == {small, large} and search.run.model == large
    with pytest.raises(AgentDesignError, match="python/NAME"):
        create_search(
            model=FakeChatModel(by_model), models=[SMALL], storage=str(tmp_path / "api.db")
        )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--models", "embedded/nope,embedded/qwen2.5-coder-0.5b"], "unknown embedded model"),
        (["--models", ""], "models must be model strings"),
        (["--models", f"{SMALL},{LARGE}", "--reference-model", "openai/c"], "not one of"),
        (["--reference-model", SMALL], "needs the models to search"),
        (["--models", f"{SMALL},{SMALL}"], "more than once"),
    ],
)
def test_bad_models_are_one_line_and_write_nothing(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    result = agentdesign("run", "--name", "bad", *args, "--storage", "bad.db", cwd=tmp_path)
    assert_one_line_error(result, needle)
    if (tmp_path / "bad.db").exists():
        with Archive(str(tmp_path / "bad.db")) as archive:
            assert archive.list_runs() == []


def test_the_run_header_names_the_models_and_the_reference_and_progress_each_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from agentdesign.search.cli import _app
    from agentdesign.search.config import _resolve

    monkeypatch.setattr(_resolve, "default_chat_model", lambda **_: FakeChatModel(by_model))
    monkeypatch.setattr(_app, "console", _app.Console(width=300))
    result = CliRunner().invoke(
        _app.app,
        [
            "run",
            "--name",
            "h",
            "--models",
            f"{SMALL}, {LARGE}",
            "--max-agents",
            "2",
            "--n-search",
            "2",
            "--n-holdout",
            "0",
            "--storage",
            str(tmp_path / "h.db"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert (
        f"models searched: {SMALL}, {LARGE}; the baselines run on {SMALL} (the first listed)"
        in result.output
    )
    assert re.search(r"design 1/2 \w{10} on openai/fake-(small|large): ", result.output)
