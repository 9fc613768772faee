"""Uncertainty for benchmark scores: bootstrap intervals and paired comparisons of two agents.

Search compares agents on a few dozen tasks, where a 5-point gap is often noise; these helpers say
how much noise. All are seeded, so a reported interval can be reproduced exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["PairedComparison", "ScoreSummary", "bootstrap_ci", "paired_difference", "summarize"]


@dataclass(frozen=True)
class ScoreSummary:
    """Mean score over `n` tasks with its bootstrap confidence interval."""

    mean: float
    ci_low: float
    ci_high: float
    n: int


@dataclass(frozen=True)
class PairedComparison:
    """Agent a minus agent b on the same tasks; wins count tasks where a scored higher.

    `p_value` is two-sided, from a paired sign-flip permutation test of "no difference".
    """

    mean_diff: float
    ci_low: float
    ci_high: float
    n: int
    wins: int
    losses: int
    ties: int
    p_value: float


def bootstrap_ci(
    scores: Sequence[float], *, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap interval for the mean score.

    The bounds are the 100*(1-confidence)/2 and 100*(1+confidence)/2 percentiles (2.5 and 97.5 for
    95%) of resampled means; np.percentile takes percents, which ADAS's code got wrong (0.025).
    """
    values = _as_scores(scores, "scores")
    _check_options(confidence, n_resamples)
    if np.all(values == values[0]):
        mean = float(values.mean())
        return mean, mean
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, values.size, size=(n_resamples, values.size))
    means = values[indices].mean(axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def summarize(
    scores: Sequence[float], *, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> ScoreSummary:
    """Mean, bootstrap interval and count, the way results are reported."""
    values = _as_scores(scores, "scores")
    low, high = bootstrap_ci(scores, confidence=confidence, n_resamples=n_resamples, seed=seed)
    return ScoreSummary(mean=float(values.mean()), ci_low=low, ci_high=high, n=values.size)


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> PairedComparison:
    """Compares two agents scored on the same tasks, in the same order.

    Pairing removes the variance from task difficulty, so this detects much smaller gaps than two
    separate intervals would. The p-value is (1 + #extreme) / (1 + n_resamples), never 0.
    """
    first, second = _as_scores(a, "a"), _as_scores(b, "b")
    if first.size != second.size:
        raise ValueError(f"paired scores need equal lengths, got {first.size} and {second.size}")
    diffs = first - second
    low, high = bootstrap_ci(
        diffs.tolist(), confidence=confidence, n_resamples=n_resamples, seed=seed
    )
    observed = abs(float(diffs.mean()))
    # A separate stream from the bootstrap's, derived from the same seed.
    signs = np.random.default_rng([seed, 1]).choice([-1.0, 1.0], size=(n_resamples, diffs.size))
    flipped = np.abs((signs * diffs).mean(axis=1))
    extreme = int(np.count_nonzero(flipped >= observed - 1e-12))
    return PairedComparison(
        mean_diff=float(diffs.mean()),
        ci_low=low,
        ci_high=high,
        n=diffs.size,
        wins=int(np.count_nonzero(diffs > 0)),
        losses=int(np.count_nonzero(diffs < 0)),
        ties=int(np.count_nonzero(diffs == 0)),
        p_value=(1 + extreme) / (1 + n_resamples),
    )


def _as_scores(scores: Sequence[float], name: str) -> npt.NDArray[np.float64]:
    values = np.asarray(scores, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{name} must be a non-empty sequence of numbers")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must be finite numbers")
    return values


def _check_options(confidence: float, n_resamples: int) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
