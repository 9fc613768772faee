"""The search loop on the fake model: budgets, the archive, the study, and resume after a crash."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import optuna
import pytest

from agentdesign.archive import Archive
from agentdesign.components import SLOTS, AgentDesignError, AgentSpec, Message
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import TaskOutcome, get_benchmark, make_split
from agentdesign.search import (
    SPACE_PRESETS,
    Budget,
    Reporter,
    RunConfig,
    SearchSpace,
    resume_search,
    run_search,
    space_from_option,
    unsuited_components,
)
from agentdesign.search.study import study_name

GOLD = {t.question: t.answer for t in get_benchmark("gsm8k").tasks()}


class Killed(BaseException):
    """Stands in for SIGKILL: escapes every `except Exception` on its way out."""


def design_sensitive(
    model: str, messages: Sequence[Message], temperature: float, seed: int | None
) -> str:
    """Right only when asked to think step by step, so the search has a signal to find."""
    question = messages[-1]["content"].split("\n\n")[0]  # without a plan the design added
    gold = GOLD.get(question, "0")
    if "step by step" in messages[0]["content"]:
        return f"Let me think.\nAnswer: {gold}"
    return "Answer: -1"


def config(name: str, **overrides: object) -> RunConfig:
    values: dict[str, object] = {
        "name": name,
        "benchmark": "gsm8k",  # the fake models answer from its gold answers
        "model": "fake/model",
        "budget": Budget(max_agents=4),
        "n_search": 5,
        "n_holdout": 3,
        "strategy": "random",
        "race": False,  # every design on every search item: these tests count them
    }
    values.update(overrides)
    return RunConfig.of(**values)  # type: ignore[arg-type]


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    with Archive(str(tmp_path / "search.db")) as opened:
        yield opened  # type: ignore[misc]


def test_a_run_evaluates_its_budget_and_confirms_the_winner_on_holdout(archive: Archive) -> None:
    summary = run_search(archive, config("r1"), llm=FakeChatModel(design_sensitive))
    assert summary.agents_done == 4
    board = archive.leaderboard(run_name="r1")
    assert len(board) == 4
    assert [row.mean for row in board] == sorted((row.mean for row in board), reverse=True)
    assert all(row.n_tasks == 5 for row in board)
    # the winner, chosen on the search split, then the baselines, on the 3 unseen holdout items
    assert summary.holdout[0].agent_hash == board[0].agent_hash == archive.get_run("r1").winner_hash
    roles = archive.run_roles("r1")
    assert [roles[e.id] for e in summary.holdout[1:]] == ["baseline"] * (len(summary.holdout) - 1)
    assert all(e.n_done == 3 and e.split == "holdout" for e in summary.holdout)
    first = archive.task_results(board[0].evaluation_id)
    trace = next(iter(first.values())).details["trace"]
    assert trace and trace[0]["kind"] == "llm" and trace[0]["prompt_tokens"] > 0
    run = archive.get_run("r1")
    assert not set(run.search_task_ids) & set(run.holdout_task_ids)
    study = optuna.load_study(study_name=study_name("r1"), storage=archive.url)
    complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(complete) >= 4


def test_tpe_finds_the_designs_that_work(archive: Archive) -> None:
    summary = run_search(
        archive,
        config("tpe", strategy="tpe", budget=Budget(max_agents=8)),
        llm=FakeChatModel(design_sensitive),
    )
    assert summary.agents_done == 8
    best = archive.leaderboard(run_name="tpe", limit=1)[0]
    assert best.mean == 1.0 and best.spec["components"]["reasoning"]["name"] == "cot"


def test_a_token_budget_stops_the_run(archive: Archive) -> None:
    summary = run_search(
        archive,
        config("tok", budget=Budget(max_agents=None, max_tokens=300)),
        llm=FakeChatModel(design_sensitive),
    )
    assert summary.tokens >= 300
    assert "tokens" in summary.stop_reason


def test_bad_budgets_and_names_are_refused_before_anything_is_written(archive: Archive) -> None:
    with pytest.raises(AgentDesignError, match="max_agents must be positive"):
        Budget(max_agents=0)
    with pytest.raises(AgentDesignError, match="at least one"):
        Budget(max_agents=None)
    with pytest.raises(AgentDesignError, match="unknown strategy"):
        run_search(archive, config("x", strategy="nope"), llm=FakeChatModel(design_sensitive))
    with pytest.raises(AgentDesignError, match="unknown benchmark"):
        run_search(archive, config("y", benchmark="nope"), llm=FakeChatModel(design_sensitive))
    assert archive.list_runs() == []


def test_a_task_past_the_runs_task_timeout_scores_zero_as_a_timeout(archive: Archive) -> None:
    with pytest.raises(AgentDesignError, match="task timeout must be positive"):
        config("t0", task_timeout_s=0)
    tasks = get_benchmark("gsm8k").tasks()
    search_ids = make_split([t.id for t in tasks], seed=0, n_search=5, n_holdout=3).search_ids
    slow_id = search_ids[2]
    slow_question = next(t.question for t in tasks if t.id == slow_id)
    release = threading.Event()

    def slow_on_one(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
        if slow_question in messages[-1]["content"]:
            release.wait(10)  # the abandoned call returns once the test is done
        return design_sensitive(model, messages, t, s)

    run_config = config("t1", budget=Budget(max_agents=1), task_timeout_s=2.0, confirm_top=0)
    try:
        run_search(archive, run_config, llm=FakeChatModel(slow_on_one))
    finally:
        release.set()
    (row,) = archive.leaderboard(run_name="t1")
    results = archive.task_results(row.evaluation_id)
    assert (results[slow_id].score, results[slow_id].error_kind) == (0.0, "timeout")
    assert len(results) == 5
    assert all(r.error_kind != "timeout" for i, r in results.items() if i != slow_id)


def test_resume_after_a_crash_never_runs_a_finished_task_twice(archive: Archive) -> None:
    def crashing_after(limit: int) -> FakeChatModel:
        def respond(
            model: str, messages: Sequence[Message], temperature: float, seed: int | None
        ) -> str:
            if len(fake.calls) > limit:
                raise Killed
            return design_sensitive(model, messages, temperature, seed)

        fake = FakeChatModel(respond)
        return fake

    with pytest.raises(Killed):
        run_search(archive, config("crash", budget=Budget(max_agents=5)), llm=crashing_after(100))
    before = _committed(archive)
    assert before, "nothing was committed before the crash"

    redone: list[tuple[str, str]] = []

    class Recorder(Reporter):
        agent = ""

        def agent_started(self, spec: AgentSpec, n_tasks: int, n_done: int, split: str) -> None:
            self.agent = spec.spec_hash

        def task_finished(self, outcome: TaskOutcome) -> None:
            redone.append((self.agent, outcome.task_id))

        def agent_finished(self, spec: AgentSpec, evaluation: object, split: str) -> None:
            pass

    summary = resume_search(
        archive, "crash", llm=FakeChatModel(design_sensitive), reporter=Recorder()
    )
    assert summary.agents_done == 5
    after = _committed(archive)
    assert all(after[key] == value for key, value in before.items())  # intact
    assert not set(redone) & set(before)  # and never run again
    assert len(redone) == len(set(redone))
    study = optuna.load_study(study_name=study_name("crash"), storage=archive.url)
    assert not study.get_trials(states=(optuna.trial.TrialState.RUNNING,))


def test_a_space_with_one_design_stops_instead_of_looping(archive: Archive) -> None:
    default = AgentSpec.create(model="fake/model")
    one = {slot: [default[slot].name] for slot in SLOTS}
    summary = run_search(
        archive,
        config(
            "one",
            choices=one,
            limits={"reasoning__max_tokens": (512, 512)},
            budget=Budget(max_agents=3),
        ),
        llm=FakeChatModel(design_sensitive),
    )
    assert summary.agents_done == 1
    assert "already evaluated (the space holds 1 combination of components)" in (
        summary.stop_reason
    )


def test_a_second_run_reuses_evaluations_instead_of_paying_again(archive: Archive) -> None:
    first = FakeChatModel(design_sensitive)
    run_search(archive, config("a", budget=Budget(max_agents=3)), llm=first)
    second = FakeChatModel(design_sensitive)
    run_search(archive, config("b", budget=Budget(max_agents=3)), llm=second)
    # same seed, same sampler: the same designs, already scored on the same tasks
    assert len(second.calls) < len(first.calls)


def _committed(archive: Archive) -> dict[tuple[str, str], tuple[object, ...]]:
    """Every task result in the archive, keyed by (agent hash, task id)."""
    path = archive.url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT e.agent_hash, r.task_id, r.output, r.score FROM ad_task_result r "
            "JOIN ad_evaluation e ON e.id = r.evaluation_id"
        ).fetchall()
    return {(r[0], r[1]): (r[2], r[3]) for r in rows}


@pytest.mark.parametrize("preset", sorted(SPACE_PRESETS))
def test_every_preset_can_propose_every_component(preset: str) -> None:
    """Same-named parameters of different components must be compatible optuna distributions."""
    space = SearchSpace(model="fake/model", **space_from_option(preset))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(300):
        trial = study.ask()
        spec = space.suggest(trial)
        study.tell(trial, 0.0)
        seen |= {(slot, spec[slot].name) for slot in SLOTS}
        again = optuna.trial.FixedTrial(space.trial_params(spec))
        assert space.suggest(again) == spec  # the trial optuna records
    assert seen >= {(slot, name) for slot in SLOTS for name in space.components(slot)}


def test_the_space_makes_each_agent_once_with_none_where_it_cannot_use_a_part() -> None:
    """A program of thought never calls the tool or reflection, and without a reviewer an
    experience memory learns nothing: those slots hold "none", though the choices omit it."""
    space = SearchSpace(
        model="fake/model",
        choices={
            "workflow": ["program_of_thought", "single"],
            "memory": ["experience"],
            "tool": ["calculator"],
            "reflection": ["self_critique"],
        },
    )
    rng = np.random.default_rng(0)
    drawn = [space.sample(rng, components={"workflow": "program_of_thought"}) for _ in range(5)]
    for spec in drawn:
        assert [spec[s].name for s in ("memory", "tool", "reflection")] == ["none"] * 3
        assert space.contains(spec) and spec.canonical() == spec
        assert space.suggest(optuna.trial.FixedTrial(space.trial_params(spec))) == spec
    moved = space.complete(drawn[0].set_params(workflow="single"), rng)  # as a mutation may
    assert [moved[s].name for s in ("memory", "tool", "reflection")] == [
        "experience",
        "calculator",
        "self_critique",
    ]
    assert space.contains(moved) and moved.canonical() == moved
    kept = space.sample(rng, components={"workflow": "single"})
    assert kept["memory"].name == "experience"  # self_critique reviews: it learns
    assert not space.contains(kept.set_params(tool="none"))  # single would call a tool


def test_a_trial_for_a_design_whose_memory_no_reviewer_feeds_makes_that_design() -> None:
    """Without a reviewer an experience memory is "none": the trial holds that "none" under the
    memory asked without a reviewer, and `suggest` makes the same design from it."""
    space = SearchSpace(
        model="fake/model",
        choices={
            "workflow": ["single"],
            "memory": ["few_shot", "experience"],
            "reflection": ["none"],
        },
    )
    spec = space.sample(np.random.default_rng(0), components={"memory": "experience"})
    assert spec["memory"].name == "none" and space.contains(spec)
    params = space.trial_params(spec)
    assert params["memory_without_reviewer"] == "none" and "memory" not in params
    assert space.suggest(optuna.trial.FixedTrial(params)) == spec
    few_shot_only = SearchSpace(model="fake/model", choices={"memory": ["few_shot"]})
    with pytest.raises(ValueError, match="not a design of this space"):
        few_shot_only.trial_params(spec)  # a design always uses few_shot: "none" is not offered


def test_the_sampler_is_not_asked_for_a_memory_no_reviewer_would_feed() -> None:
    """An experience memory learns only from a reviewer: without one, the sampler chooses among
    the memories that learn without one ("none" standing for experience), so "none" is not drawn
    twice as often, and the trial holds no experience memory the design would not use. With a
    reviewer in any used slot (here the workflow or the reflection), memory is asked as usual."""
    choices = {
        "workflow": ["single", "self_refine"],
        "memory": ["none", "few_shot", "experience"],
        "reflection": ["none", "self_critique"],
    }
    space = SearchSpace(model="fake/model", choices=choices)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    unreviewed: list[str] = []
    for _ in range(200):
        trial = study.ask()
        spec = space.suggest(trial)
        study.tell(trial, 0.0)
        reviewed = spec["workflow"].name == "self_refine" or spec["reflection"].name != "none"
        if reviewed:
            assert trial.params["memory"] in choices["memory"]
            assert "memory_without_reviewer" not in trial.params
        else:
            assert "memory" not in trial.params
            assert trial.params["memory_without_reviewer"] in ("few_shot", "none")
            unreviewed.append(spec["memory"].name)
        assert space.trial_params(spec).items() <= trial.params.items()
        assert space.suggest(optuna.trial.FixedTrial(space.trial_params(spec))) == spec
    assert set(unreviewed) == {"none", "few_shot"}
    rng = np.random.default_rng(0)
    unreviewed_only = {"workflow": "single", "reflection": "none"}
    drawn = [space.sample(rng, components=unreviewed_only)["memory"].name for _ in range(300)]
    assert 120 <= drawn.count("few_shot") <= 180  # about half, as `suggest` asks: not 1 in 3
    nothing_learns = SearchSpace(
        model="fake/model",
        choices={"workflow": ["single"], "memory": ["experience"], "reflection": ["none"]},
    )
    trial = optuna.create_study().ask()
    assert nothing_learns.suggest(trial)["memory"].name == "none"
    assert not {"memory", "memory_without_reviewer"} & set(trial.params)


def test_a_trial_holds_no_parameter_for_a_slot_its_workflow_never_calls() -> None:
    """The sampler is not asked for a program of thought's tool or reflection, nor ReAct's
    reflection, so it learns nothing from them; as drawn (`canonical=False`), it is asked."""
    choices = {
        "workflow": ["program_of_thought", "react", "single"],
        "memory": ["none", "few_shot"],  # none needs a reviewer: memory is always asked
        "tool": ["calculator"],
        "reflection": ["self_critique", "none"],
    }
    space = SearchSpace(model="fake/model", choices=choices)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    unused = {"program_of_thought": {"tool", "reflection"}, "react": {"reflection"}}
    seen = set()
    for _ in range(40):
        trial = study.ask()
        spec = space.suggest(trial)
        study.tell(trial, 0.0)
        workflow = spec["workflow"].name
        seen.add(workflow)
        asked = {slot for slot in SLOTS if slot in trial.params}
        assert asked == set(SLOTS) - unused.get(workflow, set())
        assert all(spec[slot].name == "none" for slot in unused.get(workflow, ()))
        assert space.trial_params(spec).keys() <= trial.params.keys()
        assert space.suggest(optuna.trial.FixedTrial(space.trial_params(spec))) == spec
    assert seen == set(choices["workflow"])
    as_drawn = SearchSpace(model="fake/model", choices=choices, canonical=False)
    trial = optuna.create_study().ask({})
    as_drawn.suggest(trial)
    assert set(SLOTS) <= trial.params.keys()


def test_a_narrowed_preset_leaves_out_what_the_benchmark_cannot_use() -> None:
    """Function calling has no use for a program's printed answer; arithmetic does."""
    unsuited = unsuited_components(get_benchmark("bfcl-multiple"))
    assert unsuited == {"program_of_thought", "few_shot", "retrieval"}  # BFCL has no examples
    bfcl = space_from_option("quick", unsuited=unsuited)["choices"]
    assert bfcl["workflow"] == ("single",) and bfcl["memory"] == ("none",)
    gsm8k = space_from_option("quick", unsuited=unsuited_components(get_benchmark("gsm8k")))
    assert "program_of_thought" in gsm8k["choices"]["workflow"]
    assert "few_shot" in gsm8k["choices"]["memory"]
    assert space_from_option("full", unsuited=unsuited) == {}


def test_a_limit_outside_a_components_range_clamps_to_the_nearest_value() -> None:
    space = SearchSpace(model="fake/model", limits={"reasoning__max_tokens": (16, 64)})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    caps = {}
    for _ in range(30):
        spec = space.suggest(study.ask())
        caps.setdefault(spec["reasoning"].name, set()).add(
            spec["reasoning"].get_params()["max_tokens"]
        )
    assert caps["cot"] == {128}  # cot allows 128..1024: the nearest value to the 16..64 limit
    assert max(caps["direct"]) <= 64
