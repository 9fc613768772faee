"""The truth benchmark's simulator: calibrated on the recorded GSM8K archives in bench/results
(opened from copies), every design's true accuracy known, strategies run in it."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression
from threadpoolctl import threadpool_limits

from agentdesign.benchmarking import (
    Calibration,
    Record,
    ReplayTable,
    TruthWorld,
    calibrate,
    load_records,
    raced,
    records_from_table,
    split_half_reliability,
    truth_features,
    truth_search,
)
from agentdesign.components import AgentDesignError, AgentSpec
from agentdesign.search import (
    SPACE_PRESETS,
    History,
    Proposal,
    Racing,
    SearchSpace,
    Strategy,
    design_features,
    make_strategy,
    rank_correlation,
)
from agentdesign.search.strategies import Evaluated

RESULTS = Path(__file__).parent.parent / "bench" / "results"


@pytest.fixture(scope="module")
def records() -> list[Record]:
    return load_records(
        [RESULTS / "replay.sqlite", RESULTS / "workflows.sqlite"], benchmark="gsm8k"
    )


@pytest.fixture(scope="module")
def calibration(records: list[Record]) -> Calibration:
    # BLAS threads on tiny matrices only contend on a busy machine: 1 s alone, 14 s with them
    with threadpool_limits(1):
        return calibrate(records, benchmark="gsm8k")


def test_the_calibration_fits_the_records_and_reproduces_their_spread(
    calibration: Calibration,
) -> None:
    facts = calibration.facts
    assert facts["designs"] >= 60 and facts["items"] >= 10
    # design features predict held-out designs' outcomes better than item difficulties alone
    assert facts["held_out_log_loss"] < facts["items_only_log_loss"]
    assert 0.1 < calibration.residual_sd < 2.0 and 0.5 < calibration.difficulty_sd < 4.0
    table = ReplayTable.load(RESULTS / "replay_gsm8k.json")
    spreads, reliabilities = [], []
    for seed in range(6):
        world = TruthWorld(calibration, seed=seed, n_items=200)
        simulated = world.table([d.spec for d in table.designs], len(table.task_ids))
        spreads.append(np.std([d.mean for d in simulated.designs], ddof=1))
        reliabilities.append(split_half_reliability(simulated))
    real = np.std([d.mean for d in table.designs], ddof=1)
    assert abs(np.mean(spreads) - real) < 0.04
    assert 0.3 < np.mean(reliabilities) < 0.75  # the real table: 0.55


def test_calibration_refuses_records_it_cannot_fit(records: list[Record]) -> None:
    with pytest.raises(AgentDesignError, match="at least 10"):
        calibrate(records[:5], benchmark="gsm8k")
    with pytest.raises(AgentDesignError, match="interaction_share"):
        calibrate(records, benchmark="gsm8k", interaction_share=1.5)


def test_a_world_knows_every_designs_true_accuracy_and_draws_outcomes_from_it(
    calibration: Calibration,
) -> None:
    world = TruthWorld(calibration, seed=1, n_items=400, n_search=20)
    rng = np.random.default_rng(0)
    specs = [world.space.sample(rng) for _ in range(150)]
    accuracy = world.accuracy(specs)
    assert np.all((accuracy > 0) & (accuracy < 1)) and np.ptp(accuracy) > 0.2
    assert world.best_accuracy >= accuracy.max()
    observed = np.array([world.evaluate(s, range(world.n_items)).mean for s in specs])
    assert np.abs(observed - accuracy).mean() < 0.05
    assert rank_correlation(observed, accuracy) > 0.9
    # outcomes are fixed per world, design and item: a subset of items sees the same outcomes
    spec, items = specs[0], world.search_items
    assert world.evaluate(spec, items[:5]).scores == world.evaluate(spec, items).scores[:5]
    other = TruthWorld(calibration, seed=2, n_items=400, n_search=20)
    assert other.search_items != world.search_items
    assert not np.allclose(other.accuracy(specs), accuracy)
    tokens = world.evaluate(spec, items).tokens
    assert tokens > 0 and 0.5 < tokens / (world.tokens_per_item([spec])[0] * len(items)) < 2


def test_the_modelled_parts_of_the_truth_bound_what_a_model_can_know(
    calibration: Calibration,
) -> None:
    """Additive effects, then pairwise interactions, explain more and more of the truth; with the
    per-combination effects all zero, the additive part plus pairs is the whole truth."""
    world = TruthWorld(calibration, seed=3, n_items=200, n_search=10)
    rng = np.random.default_rng(0)
    specs = [world.space.sample(rng) for _ in range(300)]
    accuracy = world.accuracy(specs)
    additive = rank_correlation(world.modelled_accuracy(specs, pairs=False), accuracy)
    with_pairs = rank_correlation(world.modelled_accuracy(specs, pairs=True), accuracy)
    assert 0.3 < additive < with_pairs < 1.0
    world._combinations[:] = 0.0
    assert np.allclose(world.modelled_accuracy(specs, pairs=True), world.accuracy(specs))


def _first(n: int) -> Callable[[Sequence[Evaluated]], bool]:
    def stop(done: Sequence[Evaluated]) -> bool:
        return len(done) >= n

    return stop


def test_strategies_search_a_world_and_report_their_best_observed_design(
    calibration: Calibration,
) -> None:
    for seed in range(3):
        world = TruthWorld(calibration, seed=seed, n_items=200, n_search=10)
        for name in ("random", "tpe"):
            strategy = make_strategy(name, space=world.space, seed=seed)
            run = truth_search(world, strategy, name=name, stop=_first(12))
            assert len(run.evaluations) == 12
            assert len({e.spec.spec_hash for e in run.evaluations}) == 12
            assert run.accuracies == tuple(world.accuracy([e.spec for e in run.evaluations]))
            best = max(e.mean for e in run.evaluations)
            assert run.accuracy_after(12) in {
                a for a, e in zip(run.accuracies, run.evaluations, strict=True) if e.mean == best
            }
            assert math.isnan(run.accuracy_within(0))
            assert run.tokens_to(0.0) == run.evaluations[0].tokens
            assert run.tokens_to(world.best_accuracy + 0.01) == math.inf
            again = truth_search(
                world,
                make_strategy(name, space=world.space, seed=seed),
                name=name,
                stop=_first(12),
            )
            assert again.evaluations == run.evaluations  # paired: same world, same luck


class Watching(Strategy):
    """Random designs (the base sampler), noting the states of the history it was shown."""

    seen: tuple[str, ...] = ()

    def suggest(self, history: History, rng: np.random.Generator) -> Proposal | None:
        self.seen = tuple(o.state for o in history.trials)
        return None


def test_a_schedule_can_score_a_design_on_fewer_items_and_it_is_never_reported(
    calibration: Calibration,
) -> None:
    """The hook racing needs: a design stopped early is told as pruned, and never reported."""
    world = TruthWorld(calibration, seed=0, n_items=200, n_search=10)

    def first_only(world: TruthWorld, spec: AgentSpec, done: Sequence[Evaluated]) -> Evaluated:
        if not done:
            return world.evaluate(spec, world.search_items)
        return dataclasses.replace(world.evaluate(spec, world.search_items[:3]), complete=False)

    strategy = Watching(space=world.space, seed=0)
    run = truth_search(world, strategy, name="racing-like", stop=_first(8), schedule=first_only)
    assert [len(e.scores) for e in run.evaluations] == [10] + [3] * 7
    assert strategy.seen == ("complete",) + ("pruned",) * 6
    assert run.accuracy_after(8) == run.accuracies[0]


def test_racing_stops_designs_clearly_worse_than_the_incumbent_on_their_first_items(
    calibration: Calibration,
) -> None:
    world = TruthWorld(calibration, seed=1, n_items=200, n_search=30)
    racing = Racing()
    strategy = make_strategy("random", space=world.space, seed=1)
    run = truth_search(world, strategy, name="random+race", stop=_first(20), schedule=raced(racing))
    stopped = [n for n, e in enumerate(run.evaluations) if not e.complete]
    assert stopped and run.evaluations[0].complete
    for n in stopped:
        evaluated, stage = run.evaluations[n], len(run.evaluations[n].scores)
        assert stage in racing.stages(30)
        full = world.evaluate(evaluated.spec, world.search_items)
        assert evaluated.scores == full.scores[:stage]
        assert evaluated.tokens < full.tokens
        # the live loop's rule: the first items at the stage against the best complete design
        incumbent = max((e for e in run.evaluations[:n] if e.complete), key=lambda e: e.mean)
        assert racing.clearly_worse(
            {str(i): s for i, s in enumerate(evaluated.scores)},
            {str(i): s for i, s in enumerate(incumbent.scores)},
            n_items=30,
        )


# -- the honest knobs ----------------------------------------------------------------------------

# What the first benchmark drew (world 3 of the default calibration, 200 items, 10 search items):
# every figure it published rests on these draws, so with the knobs at their old values they stay.
FIRST = {
    "intercept": -0.7956357955338085,
    "residual_sd": 0.5696496982127428,
    "accuracy": [0.24753080499340008, 0.3304239610766587, 0.275062732713165, 0.39725787778527194],
    "best": 0.7095578293533902,
    "tokens": [1594.7699055260368, 1019.9336279354148, 2700.3790424335816, 5605.721297893748],
    "scores": [0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0],
    "random": [0.23532640636738678, 0.5213781469287544, 0.44727970763020525, 0.3517808682854959],
    "random_tokens": 237465,
}


def test_with_the_knobs_at_their_old_values_a_world_draws_what_it_always_drew(
    calibration: Calibration,
) -> None:
    assert calibration.intercept == pytest.approx(FIRST["intercept"], rel=1e-9)
    assert calibration.residual_sd == pytest.approx(FIRST["residual_sd"], rel=1e-9)
    world = TruthWorld(calibration, seed=3, n_items=200, n_search=10)
    rng = np.random.default_rng(0)
    specs = [world.space.sample(rng) for _ in range(4)]
    assert world.accuracy(specs).tolist() == pytest.approx(FIRST["accuracy"], rel=1e-9)
    assert world.best_accuracy == pytest.approx(FIRST["best"], rel=1e-9)
    assert world.tokens_per_item(specs).tolist() == pytest.approx(FIRST["tokens"], rel=1e-9)
    assert list(world.evaluate(specs[0], world.search_items).scores) == FIRST["scores"]
    strategy = make_strategy("random", space=world.space, seed=3)
    run = truth_search(world, strategy, name="random", stop=_first(12))
    assert list(run.accuracies[:4]) == pytest.approx(FIRST["random"], rel=1e-9)
    assert run.tokens == FIRST["random_tokens"]


def test_a_table_file_holds_the_records_of_the_archive_it_was_exported_from() -> None:
    """So calibrating on a recorded table file is calibrating on its archive."""

    def key(records: list[Record]) -> list[tuple[str, dict[str, float], dict[str, int]]]:
        return sorted((r.spec.spec_hash, dict(r.scores), dict(r.tokens)) for r in records)

    from_table = load_records([RESULTS / "replay_gsm8k_cells.json"], benchmark="gsm8k")
    from_archive = load_records([RESULTS / "replay.sqlite"], benchmark="gsm8k")
    assert key(from_table) == key(from_archive) and len(from_table) == 60
    # a table of the first format kept only totals: its tokens are spread evenly over items
    even = records_from_table(ReplayTable.load(RESULTS / "replay_gsm8k.json"))
    assert len({*even[0].tokens.values()}) == 1
    with pytest.raises(AgentDesignError, match="no archive"):
        load_records([RESULTS / "none.sqlite"], benchmark="gsm8k")


def _specs(world: TruthWorld, n: int) -> list[AgentSpec]:
    rng = np.random.default_rng(5)
    return [world.space.sample(rng) for _ in range(n)]


def test_redrawn_main_effects_differ_between_worlds_and_need_refits(
    calibration: Calibration, records: list[Record]
) -> None:
    with pytest.raises(AgentDesignError, match="bootstrap"):
        TruthWorld(calibration, seed=0, redraw=True)
    with threadpool_limits(1):
        refit = calibrate(records, benchmark="gsm8k", n_draws=8)
    assert refit.draws.shape == (8, 1 + len(refit.effects))
    assert refit.intercept == calibration.intercept  # the fit itself is unchanged
    one, two = (TruthWorld(refit, seed=s, n_items=100, redraw=True) for s in (0, 1))
    specs = _specs(one, 50)
    plain = TruthWorld(refit, seed=0, n_items=100)
    assert not np.allclose(
        one.modelled_accuracy(specs, pairs=False), two.modelled_accuracy(specs, pairs=False)
    )
    assert not np.allclose(
        one.modelled_accuracy(specs, pairs=False), plain.modelled_accuracy(specs, pairs=False)
    )
    assert np.array_equal(one.difficulty, plain.difficulty)  # the knob draws from its own stream


def test_a_design_x_item_effect_makes_designs_disagree_on_items_and_is_measured_back(
    calibration: Calibration,
) -> None:
    """Simulated tables from worlds with and without the effect: calibrating on them measures
    a clearly larger effect where there is one."""
    specs = _specs(TruthWorld(calibration, seed=0), 60)
    measured = []
    for sd in (0.0, 2.0):
        world = TruthWorld(calibration, seed=7, n_items=300, item_interaction=sd)
        table = world.table(specs, 40)
        with threadpool_limits(1):
            fitted = calibrate(records_from_table(table), benchmark="gsm8k")
        measured.append(fitted.facts["item_interaction_sd"])
        accuracy = world.accuracy(specs[:20])
        observed = np.array([world.evaluate(s, range(world.n_items)).mean for s in specs[:20]])
        assert np.abs(observed - accuracy).mean() < 0.05  # outcomes drawn from the same chances
        assert world.best_accuracy >= world.accuracy(specs).max()
    assert measured[0] < 0.9 < 1.2 < measured[1]


def test_an_outside_world_leaves_the_value_models_feature_span(calibration: Calibration) -> None:
    """With every residual on pairs, the truth is all in the value model's linear span; the
    outside share moves part of it where no linear fit on its features reaches."""
    pairs_only = dataclasses.replace(calibration, interaction_share=1.0)
    fits = []
    for outside in (0.0, 0.8):
        world = TruthWorld(pairs_only, seed=2, n_items=100, outside=outside)
        specs = _specs(world, 800)
        ability, x = world.ability(specs), design_features(specs)
        fits.append(LinearRegression().fit(x, ability).score(x, ability))
        assert world.best_accuracy >= world.accuracy(specs).max()
    assert fits[0] > 0.999 and fits[1] < 0.95
    with pytest.raises(AgentDesignError, match="outside"):
        TruthWorld(calibration, seed=0, outside=1.0)


def test_extended_features_add_choice_levels_and_squares_and_a_narrow_space_bounds_the_best(
    records: list[Record],
) -> None:
    spec = AgentSpec.create(
        model="m",
        workflow={"name": "self_consistency", "params": {"aggregate": "judge", "n_samples": 9}},
    )
    linear, extended = truth_features([spec]), truth_features([spec], extended=True)
    assert extended.shape[1] > linear.shape[1] and np.array_equal(
        extended[:, : linear.shape[1]], linear
    )
    added = extended[0, linear.shape[1] :]
    assert added.max() == 1.0  # the judge level
    assert np.isclose(added, 0.5**2 - 1 / 12).any()  # 9 samples: the top of the range, squared
    with threadpool_limits(1):
        fitted = calibrate(records, benchmark="gsm8k", features="extended")
    assert len(fitted.effects) == extended.shape[1]
    quick = SPACE_PRESETS["quick"]
    space = SearchSpace(model=fitted.model, choices=quick["choices"], limits=quick["limits"])
    world = TruthWorld(fitted, seed=1, n_items=150, space=space)
    full = TruthWorld(fitted, seed=1, n_items=150)
    specs = [space.sample(np.random.default_rng(i)) for i in range(60)]
    assert world.accuracy(specs).max() <= world.best_accuracy <= full.best_accuracy
    with pytest.raises(AgentDesignError, match="features"):
        calibrate(records, benchmark="gsm8k", features="cubic")


def _bench(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "bench/strategies_truth.py", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=RESULTS.parent.parent,
    )


def test_the_truth_bench_runs_every_knob_from_a_table_file_and_refuses_bad_ones() -> None:
    done = _bench(
        *("--seeds", "1", "--designs", "40", "--items", "60", "--evaluations", "3"),
        *("--value-seeds", "0", "--space", "quick", "--search-items", "6"),
        *("--strategies", "random", "mcts:n_initial=2", "mcts:n_initial=2+race:first_stage=2"),
        *("--calibrate-on", str(RESULTS / "replay_gsm8k_cells.json"), "--features", "extended"),
        *("--redraw", "--draws", "3", "--item-interaction", "measured", "--outside", "0.3"),
        *("--interaction-share", "0", "1", "--first-seed", "1000"),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("true accuracy of the reported design") == 2  # one per share
    assert "main effects redrawn per world" in done.stdout and "raced as" in done.stdout
    for bad, said in (
        (["--interaction-share", "2"], "interaction-share"),
        (["--strategies", "mcts:bogus=1"], "no setting 'bogus'"),
        (["--strategies", "nope"], "unknown strategy"),
    ):
        refused = _bench(*bad, timeout=300)
        assert refused.returncode != 0 and said in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
