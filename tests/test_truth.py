"""The truth benchmark's simulator: calibrated on the recorded GSM8K archives in bench/results
(opened from copies), every design's true accuracy known, strategies run in it."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from agentdesign.components import AgentDesignError, AgentSpec
from agentdesign.search import (
    History,
    Proposal,
    Racing,
    ReplayTable,
    Strategy,
    make_strategy,
    rank_correlation,
    split_half_reliability,
)
from agentdesign.search._replay import Evaluated
from agentdesign.search._truth import Calibration, Record, TruthWorld, calibrate, load_records
from agentdesign.search._truth_search import raced, truth_search

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

    def _internal_propose(self, history: History, rng: np.random.Generator) -> Proposal | None:
        self.seen = tuple(o.state for o in history.observations)
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
