"""The value model's prior: rows of other benchmarks and models inform a run's own labels through
shared terms, never outvote them, and never set the run's uncertainty."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from agentdesign.benchmarking import Calibration, TruthWorld, calibrate, load_records
from agentdesign.components import SLOTS, AgentSpec
from agentdesign.search import (
    Domain,
    History,
    Labelled,
    MctsStrategy,
    SearchSpace,
    Trial,
    ValueModel,
    rank_correlation,
)

RESULTS = Path(__file__).parent.parent / "bench" / "results"
RECORDED = [RESULTS / "replay.sqlite", RESULTS / "workflows.sqlite"]
HERE, ELSEWHERE = "this run's benchmark", "another benchmark"
DOMAIN = Domain(description=HERE, model="fake/model")


def effects(space: SearchSpace, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    return {name: float(rng.normal(0.0, 0.15)) for slot in SLOTS for name in space.components(slot)}


def scored(spec: AgentSpec, effect: dict[str, float]) -> float:
    return 0.5 + sum(effect[spec[slot].name] for slot in SLOTS)


def test_a_large_prior_that_disagrees_does_not_outvote_the_runs_labels() -> None:
    """500 rows of a benchmark on which the components' effects are the opposite of this one's,
    and 30 labels of this one: pooled as one benchmark, the prior wins and the ranking of fresh
    designs is backwards; apart, the run's labels turn it the right way round."""
    space = SearchSpace(model="fake/model")
    rng = np.random.default_rng(0)
    here = effects(space, 1)
    there = {name: -value for name, value in here.items()}
    own = [
        Labelled(spec=s, description=HERE, score=scored(s, here))
        for s in (space.sample(rng) for _ in range(30))
    ]
    prior = [
        Labelled(spec=s, description=ELSEWHERE, score=scored(s, there))
        for s in (space.sample(rng) for _ in range(500))
    ]
    fresh = [space.sample(rng) for _ in range(200)]
    truth = np.array([scored(s, here) for s in fresh])
    pooled, _ = ValueModel(seed=0).fit(own + prior).predict(fresh, description=HERE)
    apart, _ = ValueModel(seed=0, domain=DOMAIN).fit(own + prior).predict(fresh, description=HERE)
    assert rank_correlation(pooled, truth) < -0.3  # what the prior did before it stood apart
    assert rank_correlation(apart, truth) > max(0.1, rank_correlation(pooled, truth) + 0.5)


def test_a_prior_that_agrees_still_helps_a_run_with_few_labels() -> None:
    space = SearchSpace(model="fake/model")
    rng = np.random.default_rng(3)
    here = effects(space, 4)
    own = [
        Labelled(spec=s, description=HERE, score=scored(s, here) + float(rng.normal(0, 0.1)))
        for s in (space.sample(rng) for _ in range(8))
    ]
    prior = [
        Labelled(spec=s, description=ELSEWHERE, score=scored(s, here) + 0.2)
        for s in (space.sample(rng) for _ in range(300))
    ]
    fresh = [space.sample(rng) for _ in range(200)]
    truth = np.array([scored(s, here) for s in fresh])
    apart, _ = ValueModel(seed=0, domain=DOMAIN).fit(own + prior).predict(fresh, description=HERE)
    alone, _ = ValueModel(seed=0).fit(own).predict(fresh, description=HERE)
    assert rank_correlation(apart, truth) > rank_correlation(alone, truth) + 0.2


@pytest.fixture(scope="module")
def calibration() -> Calibration:
    with threadpool_limits(1):  # BLAS threads on tiny matrices only contend on a busy machine
        return calibrate(load_records(RECORDED, benchmark="gsm8k"), benchmark="gsm8k")


def test_in_the_truth_benchmark_another_benchmarks_archive_leaves_the_intervals_calibrated(
    calibration: Calibration,
) -> None:
    """10 labels of a world, 200 rows of a world whose effects are permuted (a benchmark on which
    other components help), as bench/value_prior.py measures over more worlds: pooled, the
    prior's own fit sets the uncertainty and the intervals cover too few observed scores; apart,
    they are scaled on the run's labels, and the ranking is no worse."""
    measured: dict[str, list[tuple[float, float]]] = {"pooled": [], "apart": []}
    for seed in range(4):
        world = TruthWorld(calibration, seed=seed, n_items=200, n_search=30)
        space = SearchSpace(model=calibration.model)
        rng = np.random.default_rng([seed, 1])
        designs = [space.sample(rng) for _ in range(200)]
        accuracy = world.accuracy(designs)
        observed = np.array([world.evaluate(s, world.search_items).mean for s in designs])
        permuted = np.random.default_rng([seed, 7]).permutation(calibration.effects)
        other = TruthWorld(
            dataclasses.replace(calibration, effects=permuted), seed=seed + 2000, n_items=200
        )
        own = labelled(world, [space.sample(rng) for _ in range(10)], world.description)
        prior = labelled(other, [space.sample(rng) for _ in range(200)], ELSEWHERE)
        domain = Domain(description=world.description, model=calibration.model)
        for name, model in (
            ("pooled", ValueModel(seed=seed)),
            ("apart", ValueModel(seed=seed, domain=domain)),
        ):
            mean, std = model.fit(own + prior).predict(designs, description=world.description)
            covered = float(np.mean(np.abs(observed - mean) <= 1.96 * std))
            measured[name].append((rank_correlation(mean, accuracy), covered))
    pooled, apart = (np.array(measured[name]).mean(axis=0) for name in ("pooled", "apart"))
    assert apart[1] >= 0.92 and apart[1] > pooled[1] + 0.05, (pooled, apart)
    assert apart[0] > pooled[0], (pooled, apart)


def labelled(world: TruthWorld, specs: Sequence[AgentSpec], description: str) -> list[Labelled]:
    return [
        Labelled(spec=s, description=description, score=world.evaluate(s, world.search_items).mean)
        for s in specs
    ]


def test_without_a_prior_the_domain_changes_nothing() -> None:
    space = SearchSpace(model="fake/model")
    rng = np.random.default_rng(7)
    rows = [
        Labelled(spec=s, description=HERE, score=float(rng.uniform()))
        for s in (space.sample(rng) for _ in range(20))
    ]
    fresh = [space.sample(rng) for _ in range(50)]
    plain = ValueModel(seed=0).fit(rows).predict(fresh, description=HERE)
    domain = ValueModel(seed=0, domain=DOMAIN).fit(rows).predict(fresh, description=HERE)
    np.testing.assert_array_equal(plain[0], domain[0])
    np.testing.assert_array_equal(plain[1], domain[1])


def test_a_value_guided_strategy_keeps_its_runs_rows_apart_from_the_prior() -> None:
    space = SearchSpace(model="fake/model")
    rng = np.random.default_rng(8)
    here = effects(space, 9)
    there = {name: -value for name, value in here.items()}
    trials = tuple(
        Trial(spec=s, state="complete", score=scored(s, here))
        for s in (space.sample(rng) for _ in range(40))
    )
    prior = tuple(
        Labelled(spec=s, description=ELSEWHERE, score=scored(s, there))
        for s in (space.sample(rng) for _ in range(300))
    )
    history = History(description=HERE, trials=trials, prior=prior)
    strategy = MctsStrategy(space=space, seed=0)
    strategy.learn(history)
    fresh = [space.sample(rng) for _ in range(200)]
    mean, _ = strategy.predict(fresh, history, weight=0.0)
    truth = np.array([scored(s, here) for s in fresh])
    pooled, _ = ValueModel(seed=0).fit(history.labelled()).predict(fresh, description=HERE)
    assert rank_correlation(pooled, truth) < 0  # the model it fitted before, outvoted
    assert rank_correlation(mean, truth) > 0.4  # 0.60-0.82 over rng seeds 8-15
