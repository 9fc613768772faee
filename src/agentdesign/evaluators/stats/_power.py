"""What a paired comparison could have shown: the least gain its test detects with a given power.

A verdict of "no difference shown" on 8 items says little unless it says how large a gain those
8 items could have shown; this computes that gain for the very test `paired_difference` prints.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agentdesign.evaluators.stats._stats import (
    FloatArray,
    _as_scores,
    _bounds,
    _check_options,
    _is_binary,
    _mcnemar_p,
)

# scipy.stats is imported in the functions that use it: its import takes most of a second, which a
# command that computes no statistic (`agentdesign --help`, a refused option) need not pay.
__all__ = ["minimum_detectable_effect"]


def minimum_detectable_effect(
    a: Sequence[float],
    b: Sequence[float],
    *,
    power: float = 0.8,
    confidence: float = 0.95,
) -> float | None:
    """The gain of a over b that `paired_difference` would show (its interval above 0) with
    probability `power`, on as many items with the spread the two agents showed; None when no
    gain in the score range would be.

    This is what a "no difference shown" could have missed. For 0/1 scores it is exact: the
    items a and b disagree on keep their observed share, the gain moves how they split, and the
    power sums the exact McNemar rejections over the binomial counts of both. For other scores it
    is a normal approximation with the observed spread of the differences, against the t and
    edge-floor parts of the interval (tests/test_stats.py checks it by simulating the interval).
    """
    first, second = _as_scores(a, "a"), _as_scores(b, "b")
    if first.size != second.size:
        raise ValueError(f"paired scores need equal lengths, got {first.size} and {second.size}")
    _check_options(confidence, 1)
    if not 0 < power < 1:
        raise ValueError(f"power must be between 0 and 1, got {power}")
    diffs = first - second
    if _is_binary(first) and _is_binary(second):
        return _detectable_split(
            diffs.size, int(np.count_nonzero(diffs)), power=power, alpha=1 - confidence
        )
    return _detectable_shift(diffs, power=power, confidence=confidence)


def _detectable_split(n: int, discordant: int, *, power: float, alpha: float) -> float | None:
    """The least gain (wins - losses) / n at which the paired 0/1 test rejects, for a gain, with
    probability `power`, when each of `n` items is discordant with the observed probability."""
    from scipy import stats

    if discordant == 0:
        return None  # the agents never disagreed: no split of their disagreements to move
    share = discordant / n
    pairs = np.arange(n + 1)
    # Per discordant count, the fewest wins that reject (count + 1: none do), by bisection: the
    # p-value falls as the wins grow past half.
    accepted, critical = pairs // 2, pairs + 1  # never rejects; rejects (or is the sentinel)
    while np.any(critical - accepted > 1):
        guess = (accepted + critical) // 2
        rejects = _mcnemar_p(guess, pairs - guess) < alpha
        accepted, critical = np.where(rejects, accepted, guess), np.where(rejects, guess, critical)
    weights = stats.binom.pmf(pairs, n, share)

    def power_at(gain: float) -> float:
        # the gain is share * (2 * P(a wins a disagreement) - 1)
        return float(weights @ stats.binom.sf(critical - 1, pairs, (1 + gain / share) / 2))

    if power_at(share) < power:
        return None
    below, above = 0.0, share
    for _ in range(50):
        middle = (below + above) / 2
        below, above = (middle, above) if power_at(middle) < power else (below, middle)
    return above


def _detectable_shift(diffs: FloatArray, *, power: float, confidence: float) -> float | None:
    """The least shift of the mean difference at which the interval of `_mean_intervals` clears
    0 with probability `power`, in a normal approximation with the observed spread: the interval
    clears 0 once the mean passes both the t half-width and the mean at which the edge floor
    reaches 0."""
    from scipy import stats

    n = diffs.size
    if n < 2:
        return None
    low_bound, high_bound = _bounds(diffs, -1.0, 1.0)
    error = float(diffs.std(ddof=1)) / np.sqrt(n)
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * error
    share = 1 - ((1 - confidence) / 2) ** (1 / n)
    edge = share * -low_bound / (1 - share)  # mean - share * (mean - low_bound) = 0 there
    gain = max(half, edge) + float(stats.norm.ppf(power)) * error
    return gain if gain <= high_bound else None
