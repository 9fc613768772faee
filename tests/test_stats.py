"""Bootstrap intervals and paired comparisons: correct percentiles, degenerate cases, signs."""

from __future__ import annotations

import numpy as np
import pytest

from agentdesign.evaluators._stats import (
    PairedComparison,
    ScoreSummary,
    bootstrap_ci,
    paired_difference,
    summarize,
)

# 60 of 100 tasks solved, in a fixed scattered order.
SCORES = [float(i % 5 < 3) for i in range(100)]


def test_interval_contains_the_mean() -> None:
    low, high = bootstrap_ci(SCORES)
    assert low < 0.6 < high


def test_interval_is_the_2_5_and_97_5_percentiles() -> None:
    low, high = bootstrap_ci(SCORES, n_resamples=500, seed=7)
    values = np.asarray(SCORES)
    rng = np.random.default_rng(7)
    means = values[rng.integers(0, values.size, size=(500, values.size))].mean(axis=1)
    assert (low, high) == (np.percentile(means, 2.5), np.percentile(means, 97.5))
    # ADAS passed 0.025 to np.percentile: a lower bound at the bottom of the distribution.
    assert low > np.percentile(means, 0.025)
    assert low == pytest.approx(0.5, abs=0.03)
    assert high == pytest.approx(0.7, abs=0.03)


def test_confidence_sets_the_percentiles() -> None:
    low, high = bootstrap_ci(SCORES, confidence=0.8, n_resamples=500, seed=7)
    rng = np.random.default_rng(7)
    values = np.asarray(SCORES)
    means = values[rng.integers(0, values.size, size=(500, values.size))].mean(axis=1)
    assert (low, high) == (np.percentile(means, 10), np.percentile(means, 90))
    wide_low, wide_high = bootstrap_ci(SCORES, confidence=0.99, n_resamples=500, seed=7)
    assert wide_low < low and high < wide_high


def test_interval_shrinks_with_more_tasks() -> None:
    small_low, small_high = bootstrap_ci(SCORES[:20])
    large_low, large_high = bootstrap_ci(SCORES * 10)
    assert large_high - large_low < (small_high - small_low) / 2


def test_interval_is_reproducible_from_its_seed() -> None:
    assert bootstrap_ci(SCORES, seed=3) == bootstrap_ci(SCORES, seed=3)
    assert bootstrap_ci(SCORES, seed=3) != bootstrap_ci(SCORES, seed=4)


@pytest.mark.parametrize("scores", [[0.7], [1.0] * 30, [0.0, 0.0], [0.1] * 7])
def test_degenerate_intervals(scores: list[float]) -> None:
    low, high = bootstrap_ci(scores)
    assert low == high == pytest.approx(scores[0])


@pytest.mark.parametrize(
    ("scores", "options", "message"),
    [
        ([], {}, "non-empty"),
        ([0.5, float("nan")], {}, "finite"),
        ([0.5, 1.0], {"confidence": 1.0}, "confidence"),
        ([0.5, 1.0], {"confidence": 0.0}, "confidence"),
        ([0.5, 1.0], {"n_resamples": 0}, "n_resamples"),
    ],
)
def test_bad_inputs(scores: list[float], options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bootstrap_ci(scores, **options)  # type: ignore[arg-type]


def test_summarize() -> None:
    summary = summarize(SCORES)
    assert summary == ScoreSummary(0.6, *bootstrap_ci(SCORES), n=100)
    with pytest.raises(ValueError):
        summarize([])


def test_paired_difference_sign_and_counts() -> None:
    a = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.5] * 10
    b = [0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0] * 10
    better = paired_difference(a, b)
    assert (better.wins, better.losses, better.ties, better.n) == (40, 10, 30, 80)
    assert better.mean_diff == pytest.approx(0.3125)
    assert 0 < better.ci_low < better.mean_diff < better.ci_high
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    assert (better.ci_low, better.ci_high) == bootstrap_ci(diffs)
    assert better.p_value < 0.01

    worse = paired_difference(b, a)
    assert (worse.wins, worse.losses, worse.ties) == (10, 40, 30)
    assert worse.mean_diff == pytest.approx(-0.3125)
    assert worse.ci_high < 0
    assert worse.p_value == better.p_value


def test_paired_difference_of_equal_agents() -> None:
    same = paired_difference(SCORES, SCORES)
    assert same == PairedComparison(
        mean_diff=0.0, ci_low=0.0, ci_high=0.0, n=100, wins=0, losses=0, ties=100, p_value=1.0
    )


def test_paired_difference_of_a_noisy_gap_is_not_significant() -> None:
    a = [1.0, 0.0] * 10
    b = [0.0, 1.0] * 9 + [0.0, 0.0]
    noisy = paired_difference(a, b)
    assert noisy.ci_low < 0 < noisy.ci_high
    assert noisy.p_value > 0.5


def test_paired_difference_needs_equal_lengths() -> None:
    with pytest.raises(ValueError, match="equal lengths, got 2 and 3"):
        paired_difference([1.0, 0.0], [1.0, 0.0, 1.0])
