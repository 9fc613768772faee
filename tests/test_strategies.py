"""Strategies, the value model, the covering design, pruning, two objectives and replay.

The replay table here is SYNTHETIC (tests/synthetic_table.py): made-up scores with structure.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
from synthetic_table import make_synthetic_table

from agentdesign.archive import Archive
from agentdesign.benchmarking import (
    ReplayTable,
    held_out_accuracy,
    replay_search,
    shuffled_replay,
    split_half_reliability,
)
from agentdesign.components import SLOTS, AgentDesignError, AgentSpec, Message
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import get_benchmark
from agentdesign.search import (
    SPACE_PRESETS,
    STRATEGIES,
    Budget,
    EvolutionStrategy,
    GuidedStrategy,
    History,
    Labelled,
    MctsStrategy,
    OptunaStrategy,
    RunConfig,
    SearchSpace,
    Strategy,
    Trial,
    ValueModel,
    assess_value_model,
    design_features,
    history_from_study,
    make_strategy,
    pairwise_design,
    rank_correlation,
    register_strategy,
    resume_search,
    run_search,
)
from agentdesign.search.study import study_name

GOLD = {t.question: t.answer for t in get_benchmark("gsm8k").tasks()}
QUICK = SPACE_PRESETS["quick"]


class Killed(BaseException):
    """Stands in for SIGKILL."""


def cot_is_right(
    model: str, messages: Sequence[Message], temperature: float, seed: int | None
) -> str:
    question = messages[-1]["content"].split("\n\n")[0]
    if "step by step" in messages[0]["content"]:
        return f"Answer: {GOLD.get(question, '0')}"
    return "Answer: -1"


def config(name: str, strategy: str, **overrides: object) -> RunConfig:
    values: dict[str, object] = {
        "name": name,
        "benchmark": "gsm8k",  # the fake model answers from its gold answers
        "model": "fake/model",
        "strategy": strategy,
        "budget": Budget(max_agents=5),
        "n_search": 6,
        "n_holdout": 2,
        "choices": QUICK["choices"],
        "limits": QUICK["limits"],
    }
    values.update(overrides)
    return RunConfig.of(**values)  # type: ignore[arg-type]


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    with Archive(str(tmp_path / "s.db")) as opened:
        yield opened  # type: ignore[misc]


@pytest.fixture(scope="module")
def table() -> ReplayTable:
    return make_synthetic_table()


def _trials(archive: Archive, run: str) -> list[optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name=study_name(run), storage=archive.url)
    return study.get_trials(deepcopy=False)


@pytest.mark.parametrize("strategy", ["mcts", "evolution", "nsga2"])
def test_each_strategy_runs_live_proposes_valid_specs_and_never_repeats(
    archive: Archive, strategy: str
) -> None:
    cfg = config(strategy, strategy)
    summary = run_search(archive, cfg, llm=FakeChatModel(cot_is_right))
    assert summary.agents_done == 5
    hashes = [t.user_attrs["spec"] for t in _trials(archive, strategy)]
    assert len(hashes) == len(set(hashes))  # no design evaluated twice
    space = cfg.search_space()
    for row in archive.leaderboard(run_name=strategy):
        agent = archive.get_agent(row.agent_hash)
        assert space.contains(AgentSpec.from_dict(agent.spec))
        if strategy != "nsga2":
            assert agent.operator is not None  # where each guided design came from


def test_guided_strategies_record_parents_and_operators(archive: Archive) -> None:
    run_search(
        archive,
        config("evo", "evolution", budget=Budget(max_agents=9)),
        llm=FakeChatModel(cot_is_right),
    )
    operators = {
        archive.get_agent(row.agent_hash).operator: archive.get_agent(row.agent_hash).parent_hash
        for row in archive.leaderboard(run_name="evo", limit=50)
    }
    assert "initial" in operators
    bred = [op for op in operators if op not in ("initial", "sample")]
    assert bred, operators
    assert all(operators[op] is not None for op in bred)
    crossed = [
        archive.get_agent(row.agent_hash)
        for row in archive.leaderboard(run_name="evo", limit=50)
        if "crossover" in (archive.get_agent(row.agent_hash).operator or "")
    ]
    assert crossed and all(a.co_parent_hash is not None for a in crossed)  # both parents known


def test_the_built_in_strategies_extend_only_through_public_methods() -> None:
    """What a built-in strategy overrides is what a plugin may override: public, documented
    methods, never a private hook."""

    def subclasses(cls: type) -> list[type]:
        return [cls, *(c for sub in cls.__subclasses__() for c in subclasses(sub))]

    built_in = [
        c for c in subclasses(Strategy) if c.__module__.startswith("agentdesign.search.strategies")
    ]
    assert {OptunaStrategy, GuidedStrategy, MctsStrategy, EvolutionStrategy} <= set(built_in)
    for cls in built_in:
        for name, value in vars(cls).items():
            inherited = any(name in vars(base) for base in cls.__mro__[1:])
            if callable(value) and inherited and not name.startswith("__"):
                assert not name.startswith("_"), f"{cls.__name__} overrides {name}"
                assert inspect.getdoc(getattr(Strategy, name, value)), f"{name} is undocumented"


def test_a_trials_tokens_per_item_reach_the_value_models_rows() -> None:
    spec = SearchSpace(model="fake/model").sample(np.random.default_rng(0))
    trial = Trial(spec=spec, state="complete", score=0.5, tokens_per_item=120.0, n_items=6)
    (row,) = History(description="d", trials=(trial,)).labelled()
    assert (row.score, row.tokens_per_item, row.weight) == (0.5, 120.0, 1.0)


def test_the_guided_base_is_abstract_and_evolution_declares_its_crossover() -> None:
    space = SearchSpace(model="m")
    with pytest.raises(TypeError, match="declares no `operators`"):
        GuidedStrategy(space=space)
    with pytest.raises(AgentDesignError, match="abstract base"):
        register_strategy("guided-base", GuidedStrategy)
    assert "guided-base" not in STRATEGIES
    assert EvolutionStrategy.operators == (("crossover", 1.0),)
    assert make_strategy("evolution", space=space, seed=0).operators == (("crossover", 1.0),)


@pytest.mark.parametrize("strategy", ["mcts", "evolution"])
def test_a_guided_run_resumes_from_the_study_after_a_crash(archive: Archive, strategy: str) -> None:
    calls = 0

    def crashing(model: str, messages: Sequence[Message], t: float, seed: int | None) -> str:
        nonlocal calls
        calls += 1
        if calls > 25:
            raise Killed
        return cot_is_right(model, messages, t, seed)

    with pytest.raises(Killed):
        run_search(
            archive, config("c", strategy, budget=Budget(max_agents=7)), llm=FakeChatModel(crashing)
        )
    summary = resume_search(archive, "c", llm=FakeChatModel(cot_is_right))
    assert summary.agents_done == 7
    # The trial in flight at the crash is failed and retried with the same design: count the rest.
    specs = [
        t.user_attrs["spec"]
        for t in _trials(archive, "c")
        if "spec" in t.user_attrs and t.state != optuna.trial.TrialState.FAIL
    ]
    assert len(specs) == len(set(specs))
    assert not [t for t in _trials(archive, "c") if t.state == optuna.trial.TrialState.RUNNING]


def test_nsga2_runs_with_two_objectives_and_the_archive_keeps_the_front(archive: Archive) -> None:
    run_search(
        archive,
        config("mo", "nsga2", objective="score-cost", budget=Budget(max_agents=6)),
        llm=FakeChatModel(cot_is_right),
    )
    study = optuna.load_study(study_name=study_name("mo"), storage=archive.url)
    assert len(study.directions) == 2
    complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert all(len(t.values) == 2 for t in complete)
    front = archive.pareto(run_name="mo")
    board = archive.leaderboard(run_name="mo", limit=50)
    assert front and max(row.mean for row in front) == board[0].mean

    def tokens(row: object) -> float:
        return (row.prompt_tokens + row.completion_tokens) / row.n_tasks  # type: ignore[attr-defined]

    for row in board:  # nothing on the leaderboard dominates a front member
        for member in front:
            assert not (row.mean >= member.mean and tokens(row) < tokens(member))
            assert not (row.mean > member.mean and tokens(row) <= tokens(member))


def test_an_unknown_objective_is_refused_before_anything_is_written(archive: Archive) -> None:
    with pytest.raises(AgentDesignError, match="unknown objective"):
        run_search(archive, config("x", "mcts", objective="speed"), llm=FakeChatModel(cot_is_right))
    assert archive.list_runs() == []


def test_racing_stops_a_clearly_worse_agent_at_a_stage_as_pruned(archive: Archive) -> None:
    # cot answers every item right; direct gets every one wrong: once a cot agent is the best,
    # a direct agent is clearly worse at the first stage (4 items lost in a row).
    cfg = config(
        "prune",
        "random",
        n_search=12,
        budget=Budget(max_agents=4),
        choices={
            **QUICK["choices"],
            "workflow": ["single"],
            "reasoning": ["direct", "cot"],
            "memory": ["none"],
            "tool": ["none"],
        },
    )
    run_search(archive, cfg, llm=FakeChatModel(cot_is_right))
    trials = _trials(archive, "prune")
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned, "no trial was pruned"
    for trial in pruned:
        assert '"direct"' in trial.user_attrs["spec"]
    board = archive.leaderboard(run_name="prune", limit=50)
    assert board and all(row.status == "complete" for row in board)
    pruned_hash = AgentSpec.from_json(pruned[0].user_attrs["spec"]).spec_hash
    assert pruned_hash not in {row.agent_hash for row in board}
    # the run's evaluation of that agent (get_or_create finds the existing one)
    stopped = archive.get_or_create_evaluation(
        agent_hash=pruned_hash,
        benchmark="gsm8k",
        task_ids=archive.get_run("prune").search_task_ids,
        split="search",
    )
    assert stopped.status == "pruned" and stopped.n_done == 4 < stopped.n_planned
    # the value model still learns from it: its mean on its 4 items, at 4/12 of a full weight
    study = optuna.load_study(study_name=study_name("prune"), storage=archive.url)
    rows = history_from_study(study, description="d").labelled()
    partial = next(r for r in rows if r.spec.spec_hash == pruned_hash)
    assert partial.score == 0.0 and partial.weight == pytest.approx(4 / 12)
    assert all(r.weight == 1.0 for r in rows if r.spec.spec_hash in {b.agent_hash for b in board})


def held_pairs(space: SearchSpace) -> set[tuple[str, str, str, str]]:
    """Every (slot, component, slot, component) that some design of `space` holds in its
    canonical form, found by building every combination of components."""
    held = set()
    for names in itertools.product(*(space.components(slot) for slot in SLOTS)):
        spec = AgentSpec.create(model=space.model, **dict(zip(SLOTS, names, strict=True)))
        canonical = spec.canonical()
        held |= {
            (a, canonical[a].name, b, canonical[b].name)
            for a, b in itertools.combinations(SLOTS, 2)
        }
    return held


def test_the_covering_design_has_every_pair_of_components() -> None:
    """Every pair that some design holds in its canonical form: a program of thought never
    calls a tool, so no design pairs it with the calculator."""
    space = SearchSpace(model="fake/model")
    design = pairwise_design(space, np.random.default_rng(0))
    held = held_pairs(space)
    assert ("workflow", "program_of_thought", "tool", "calculator") not in held
    for a, x, b, y in held:
        assert any(s[a].name == x and s[b].name == y for s in design), (a, x, b, y)
    assert all(s.canonical() == s for s in design)
    # far fewer rows than all combinations; at least the largest pair of slots
    largest = max(len(space.components(s)) for s in SLOTS)
    assert largest * 4 <= len(design) < space.size_hint() // 10
    assert all(space.contains(s) for s in design)


def test_the_value_model_beats_a_constant_and_reports_its_accuracy(table: ReplayTable) -> None:
    rows = [
        Labelled(spec=d.spec, description=table.description, score=d.mean) for d in table.designs
    ]
    report = assess_value_model(rows, folds=5, seed=0)
    real = np.array([r.score for r in rows])
    constant_error = float(np.mean(np.abs(real - real.mean())))  # the best constant, even in-sample
    assert report.mean_abs_error < constant_error
    assert report.spearman > 0.3
    assert 0.0 <= report.coverage_95 <= 1.0 and report.n_agents == len(rows)
    held_out = held_out_accuracy(table, n_labelled=30, seed=0)
    assert held_out.spearman > 0.2 and held_out.n_agents == len(table.designs) - 30


def test_the_value_models_intervals_come_from_held_out_errors() -> None:
    """On scores that are pure noise, intervals scaled by the held-out errors cover about 95% of
    fresh scores of unseen designs: neither too narrow (a fit to its own labels) nor too wide."""
    space = SearchSpace(model="fake/model")
    rng = np.random.default_rng(0)
    specs = [space.sample(rng) for _ in range(260)]
    rows = [Labelled(spec=s, description="d", score=float(rng.normal(0.5, 0.1))) for s in specs]
    mean, std = ValueModel(seed=0).fit(rows[:60]).predict(specs[60:], description="d")
    fresh = rng.normal(0.5, 0.1, 200)
    coverage = float(np.mean(np.abs(fresh - mean) <= 1.96 * std))
    assert 0.9 <= coverage <= 0.99, coverage


@pytest.mark.parametrize("interactions", [True, False])
@pytest.mark.parametrize("n_labelled", [12, 30])
def test_the_value_models_intervals_hold_with_fewer_designs_than_features(
    n_labelled: int, interactions: bool
) -> None:
    """With fewer labelled designs than features the ridge interpolates its labels (leverage near
    1): its leave-one-out errors must still be the real ones, not clipped to almost nothing (they
    were, and intervals covered about 65% of fresh scores at 10 designs, bench/strategies_truth).
    The first-order model (no pair features) is held to the same; both rank fresh designs."""
    space = SearchSpace(model="fake/model")
    rng = np.random.default_rng(2)
    effect = {name: rng.normal(0.0, 0.1) for slot in SLOTS for name in space.components(slot)}

    def score(spec: AgentSpec) -> float:
        return 0.5 + sum(effect[spec[slot].name] for slot in SLOTS) + rng.normal(0.0, 0.1)

    covered, ranked = [], []
    for _ in range(4):
        specs = [space.sample(rng) for _ in range(n_labelled + 200)]
        rows = [Labelled(spec=s, description="d", score=score(s)) for s in specs[:n_labelled]]
        model = ValueModel(seed=0, interactions=interactions).fit(rows)
        mean, std = model.predict(specs[n_labelled:], description="d")
        fresh = np.array([score(s) for s in specs[n_labelled:]])
        covered.append(np.mean(np.abs(fresh - mean) <= 1.96 * std))
        ranked.append(rank_correlation(mean, fresh))
    assert 0.85 <= float(np.mean(covered)) <= 0.998, covered
    assert float(np.mean(ranked)) > 0.2, ranked
    first_order = design_features(specs[:2], interactions=False)
    pairs = design_features(specs[:2]).shape[1] - first_order.shape[1]
    assert pairs > len(effect)  # the pairs outnumber the components they are made of


def test_designs_weighted_down_leave_the_value_model_uncertain_not_broken() -> None:
    """Partial labels (racing's stopped designs) weigh less; the ridge must still estimate a
    positive noise (a negative one let it interpolate its labels), and every prediction keeps a
    positive spread."""
    space = SearchSpace(model="fake/model")
    rng = np.random.default_rng(1)
    for _ in range(10):
        specs = [space.sample(rng) for _ in range(8)]
        rows = [
            Labelled(spec=s, description="d", score=float(i % 2), weight=0.25 + 0.75 * (i < 2))
            for i, s in enumerate(specs)
        ]
        model = ValueModel(seed=0).fit(rows)
        assert model._ridge.alpha_ > 0  # the ridge's noise precision (a private member's)
        _, std = model.predict(specs, description="d")
        assert np.all(np.isfinite(std)) and np.all(std > 0), std


def test_an_unfitted_value_model_is_uncertain_and_a_fitted_one_ranks() -> None:
    space = SearchSpace(model="fake/model")
    specs = [space.sample(np.random.default_rng(i)) for i in range(3)]
    mean, std = ValueModel().predict(specs, description="x")
    assert np.all(std > 0) and np.ptp(mean) == 0
    assert rank_correlation(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0])) == 0.0


def test_strategies_propose_unseen_designs_from_a_history() -> None:
    space = SearchSpace(model="fake/model", **QUICK)  # type: ignore[arg-type]
    rng = np.random.default_rng(0)
    seen = [space.sample(rng) for _ in range(6)]
    history = History(
        description="d",
        trials=tuple(
            Trial(spec=s, state="complete", score=float(i % 2)) for i, s in enumerate(seen)
        ),
    )
    for name in STRATEGIES:
        proposal = make_strategy(name, space=space, seed=0).propose(history)
        if proposal is None:  # optuna strategies leave it to their sampler
            continue
        assert proposal.spec.spec_hash not in history.seen and space.contains(proposal.spec)


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_replay_answers_from_the_table_and_never_repeats(table: ReplayTable, strategy: str) -> None:
    result = replay_search(table, strategy, seed=1, n_evaluations=12)
    assert len(result.hashes) == 12 == len(set(result.hashes))
    assert set(result.hashes) <= set(table.by_hash())
    assert result.best_after(12) >= result.best_after(5)
    assert result.tokens_after(12) == sum(table.by_hash()[h].tokens for h in result.hashes)


@pytest.mark.parametrize(
    "sampler",
    [
        lambda: optuna.samplers.TPESampler(seed=0, n_startup_trials=4),
        lambda: optuna.samplers.NSGAIISampler(seed=0, population_size=4),
    ],
    ids=["tpe", "nsga2"],
)
def test_a_replayed_sampler_learns_from_the_design_evaluated_and_its_own_score(
    table: ReplayTable,
    monkeypatch: pytest.MonkeyPatch,
    sampler: Callable[[], optuna.samplers.BaseSampler],
) -> None:
    learnt: list[optuna.trial.FrozenTrial] = []
    watched = sampler()
    before_trial = watched.before_trial

    def watching(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        learnt.extend(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
        before_trial(study, trial)

    watched.before_trial = watching  # type: ignore[method-assign]

    def make(name: str, **kwargs: Any) -> OptunaStrategy:
        return OptunaStrategy(sampler=lambda seed: watched, **kwargs)

    monkeypatch.setattr("agentdesign.benchmarking._replay.make_strategy", make)
    result = replay_search(table, "watched", seed=0, n_evaluations=16)
    designs, space = table.by_hash(), table.space()
    assert len(set(result.hashes)) == 16 and learnt
    for trial in learnt:
        spec = AgentSpec.from_json(trial.user_attrs["spec"])
        assert trial.params == space.trial_params(spec)  # the evaluated design, not the proposal
        assert trial.values == [designs[spec.spec_hash].mean]
    if isinstance(watched, optuna.samplers.NSGAIISampler):  # generations still advance
        key = watched._get_generation_key()
        assert max(t.system_attrs.get(key, 0) for t in learnt) >= 2


def test_a_replayed_guided_strategy_screens_before_its_choice_is_mapped(
    table: ReplayTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    screened: list[AgentSpec] = []

    class Watching(MctsStrategy):
        def predict(
            self, specs: list[AgentSpec], history: History, weight: float
        ) -> tuple[np.ndarray, np.ndarray]:
            screened.extend(specs)
            return super().predict(specs, history, weight)

    monkeypatch.setattr(
        "agentdesign.benchmarking._replay.make_strategy",
        lambda name, **kwargs: Watching(n_initial=4, **kwargs),
    )
    result = replay_search(table, "mcts", seed=0, n_evaluations=10)
    recorded = set(table.by_hash())
    assert set(result.hashes) <= recorded and len(set(result.hashes)) == 10
    # as in a live run, the offspring are designs of the whole space, not only the table's
    assert sum(s.spec_hash not in recorded for s in screened) > len(screened) // 2


def test_a_shuffled_replay_takes_the_table_in_a_seeded_random_order(table: ReplayTable) -> None:
    first, again = (shuffled_replay(table, seed=3, n_evaluations=len(table.designs)) for _ in "ab")
    assert first == again and sorted(first.hashes) == sorted(table.by_hash())
    other = shuffled_replay(table, seed=4, n_evaluations=10)
    assert len(other.hashes) == 10 and other.hashes != first.hashes[:10]


def test_split_half_reliability_tells_structure_from_noise(table: ReplayTable) -> None:
    assert split_half_reliability(table) > 0.4  # component effects rank designs the same way
    rng = np.random.default_rng(0)
    noise = dataclasses.replace(
        table,
        designs=tuple(
            dataclasses.replace(d, scores=tuple(float(s) for s in rng.random(20) < 0.5))
            for d in table.designs
        ),
    )
    assert abs(split_half_reliability(noise)) < 0.3  # every design equally good: no ranking
    one_task = dataclasses.replace(
        table,
        task_ids=table.task_ids[:1],
        designs=tuple(dataclasses.replace(d, scores=d.scores[:1]) for d in table.designs),
    )
    with pytest.raises(AgentDesignError, match="two tasks"):
        split_half_reliability(one_task)


def test_a_replay_table_round_trips_and_a_bad_one_is_refused(
    table: ReplayTable, tmp_path: Path
) -> None:
    path = tmp_path / "t.json"
    table.save(path)
    again = ReplayTable.load(path)
    assert again.synthetic and again.by_hash().keys() == table.by_hash().keys()
    path.write_text('{"format": "other"}')
    with pytest.raises(AgentDesignError, match="not a replay table"):
        ReplayTable.load(path)


def test_a_replay_table_exports_from_an_archive(archive: Archive) -> None:
    run_search(
        archive,
        config("exp", "random", budget=Budget(max_agents=3)),
        llm=FakeChatModel(cot_is_right),
    )
    table = ReplayTable.from_archive(archive, benchmark="gsm8k")
    assert len(table.designs) == 3 and len(table.task_ids) == 6 and not table.synthetic
    best = archive.leaderboard(run_name="exp", limit=1)[0]
    assert table.ranked()[0].mean == best.mean
