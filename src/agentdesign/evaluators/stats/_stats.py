"""Uncertainty for benchmark scores: intervals that hold at small n and paired comparisons of two
agents; how much a search's selection of its winner overfit is `_overfit`'s.

Search compares agents on a few dozen tasks, where a 5-point gap is often noise; these helpers say
how much noise. bench/honesty.py measures by simulation that the intervals cover the true rate.
Everything random is seeded, so a reported number can be reproduced exactly.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# scipy.stats is imported in the functions that use it: its import takes most of a second, which a
# command that computes no statistic (`agentdesign --help`, a refused option) need not pay.
__all__ = ["PairedComparison", "ScoreSummary", "paired_difference", "score_interval", "summarize"]

FloatArray = npt.NDArray[np.float64]

# Interval methods, as reported next to every interval.
EXACT = "Clopper-Pearson"
BOOTSTRAP = "widest of BCa bootstrap, t and edge floor"
PAIRED_EXACT = "exact McNemar; Tango score interval, reaching 0 unless the test rejects"
PAIRED_BOOTSTRAP = "widest of BCa paired bootstrap, t and edge floor; p inverts the interval"

# Bootstrap resamples held in memory at once, in values (8 bytes each): caps a batch at ~32 MB.
_BATCH_VALUES = 4_000_000


@dataclass(frozen=True)
class ScoreSummary:
    """Mean score over `n` tasks with its confidence interval and the interval's method."""

    mean: float
    ci_low: float
    ci_high: float
    n: int
    method: str


@dataclass(frozen=True)
class PairedComparison:
    """Agent a minus agent b on the same tasks; wins count tasks where a scored higher.

    `p_value` is two-sided, for "no difference", and below 1 - confidence exactly when the
    interval excludes 0; `method` names the test, then the interval.
    """

    mean_diff: float
    ci_low: float
    ci_high: float
    n: int
    wins: int
    losses: int
    ties: int
    p_value: float
    method: str


def summarize(
    scores: Sequence[float], *, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> ScoreSummary:
    """Mean, interval, count and interval method, the way results are reported.

    All-0/1 scores get the Clopper-Pearson interval: Wilson's dips to 0.91 coverage at n=10 (true
    rate 0.05), Clopper-Pearson's stays at 0.95 or more. Other scores get the widest of three
    intervals, clipped to the score range (see _mean_intervals): a BCa bootstrap for skew, a t
    interval because a bootstrap is too narrow at small n, and an edge floor, so that equal scores
    on a handful of items never give a zero-width interval.
    """
    from scipy import stats

    values = _as_scores(scores, "scores")
    _check_options(confidence, n_resamples)
    if _is_binary(values):
        interval = stats.binomtest(int(values.sum()), values.size).proportion_ci(
            confidence_level=confidence, method="exact"
        )
        low, high, method = float(interval.low), float(interval.high), EXACT
    else:
        lows, highs = _mean_intervals(
            values[np.newaxis],
            bounds=_bounds(values, 0.0, 1.0),
            confidence=confidence,
            n_resamples=n_resamples,
            seed=seed,
        )
        low, high, method = float(lows[0]), float(highs[0]), BOOTSTRAP
    return ScoreSummary(float(values.mean()), low, high, values.size, method)


def score_interval(
    scores: Sequence[float], *, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> tuple[float, float, str]:
    """The interval of `summarize` as (low, high, method): what an evaluation stores."""
    summary = summarize(scores, confidence=confidence, n_resamples=n_resamples, seed=seed)
    return summary.ci_low, summary.ci_high, summary.method


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
    separate intervals would. The p-value and the interval are one procedure, so that "the
    interval excludes 0" and "p < 1 - confidence" are the same event. For 0/1 scores: the exact
    McNemar test (see `_mcnemar_p`) and Tango's score interval, widened to reach 0 where the test
    does not reject; simulated at n=10-200 and outcome correlations 0-0.95, Tango's coverage stayed
    at 0.938 or more, where Newcombe's hybrid score interval fell to 0.91 for strongly correlated
    agents (the usual case: agents share item difficulty). Otherwise: the interval of `summarize`
    on the differences, in [-1, 1], and the p-value it inverts: the least 1 - confidence at which
    it excludes 0.
    """
    first, second = _as_scores(a, "a"), _as_scores(b, "b")
    if first.size != second.size:
        raise ValueError(f"paired scores need equal lengths, got {first.size} and {second.size}")
    _check_options(confidence, n_resamples)
    diffs = first - second
    wins, losses = int(np.count_nonzero(diffs > 0)), int(np.count_nonzero(diffs < 0))
    if _is_binary(first) and _is_binary(second):
        p_value = float(_mcnemar_p(np.array(wins), np.array(losses)))
        lows, highs = _tango_interval(
            np.array([wins]), np.array([losses]), diffs.size, confidence=confidence
        )
        low, high = float(lows[0]), float(highs[0])
        if p_value >= 1 - confidence:  # no difference shown: the interval says so too
            low, high = min(low, 0.0), max(high, 0.0)
        method = PAIRED_EXACT
    else:
        bounds = _bounds(diffs, -1.0, 1.0)

        def interval(level: float) -> tuple[float, float]:
            lows, highs = _mean_intervals(
                diffs[np.newaxis],
                bounds=bounds,
                confidence=level,
                n_resamples=n_resamples,
                seed=seed,
            )
            return float(lows[0]), float(highs[0])

        low, high = interval(confidence)
        p_value = _inverted_p(
            lambda alpha: not _spans_zero(*interval(1 - alpha)),
            alpha=1 - confidence,
            rejected=not _spans_zero(low, high),
        )
        method = PAIRED_BOOTSTRAP
    return PairedComparison(
        mean_diff=float(diffs.mean()),
        ci_low=low,
        ci_high=high,
        n=diffs.size,
        wins=wins,
        losses=losses,
        ties=diffs.size - wins - losses,
        p_value=p_value,
        method=method,
    )


def _mean_intervals(
    rows: FloatArray,
    *,
    bounds: tuple[float, float],
    confidence: float,
    n_resamples: int,
    seed: int,
) -> tuple[FloatArray, FloatArray]:
    """Intervals for the mean of each row of `rows` (samples x items), clipped to `bounds`.

    Each is the widest of: the BCa bootstrap (skew); the Student t interval (a bootstrap uses the
    plug-in variance and normal tails, so at n=10 it covers only ~0.90); and an edge floor, which
    lets a share w = 1 - ((1 - confidence) / 2) ** (1 / n) of the scores, the Clopper-Pearson
    bound for a kind of score never seen in n items, lie at either bound. For 0/n the floor is
    exactly Clopper-Pearson's [0, 0.31] at n=10; it keeps equal scores on a few items from a zero
    interval, and shrinks as 1/n, so from n=50 on it matters only near the bounds (without it,
    coverage fell to 0.77 at n=10 and 0.94 at n=50 for skewed scores with a mean of 0.05).
    Batched over rows for the bench.
    """
    from scipy import stats

    low_bound, high_bound = bounds
    n = rows.shape[1]
    means = rows.mean(axis=1)
    share = 1 - ((1 - confidence) / 2) ** (1 / n)
    low = means - share * (means - low_bound)
    high = means + share * (high_bound - means)
    if n > 1:
        half = stats.t.ppf((1 + confidence) / 2, n - 1) * rows.std(axis=1, ddof=1) / np.sqrt(n)
        # Rows of equal scores have no BCa interval (NaN); the other two cover them.
        with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            bca = stats.bootstrap(
                (rows,),
                np.mean,
                n_resamples=n_resamples,
                batch=max(1, _BATCH_VALUES // rows.size),
                vectorized=True,
                axis=-1,
                confidence_level=confidence,
                method="BCa",
                rng=np.random.default_rng(seed),
            ).confidence_interval
        low = np.fmin(np.minimum(low, means - half), bca.low)
        high = np.fmax(np.maximum(high, means + half), bca.high)
    return np.clip(low, low_bound, high_bound), np.clip(high, low_bound, high_bound)


def _tango_interval(
    wins: npt.NDArray[np.int64], losses: npt.NDArray[np.int64], n: int, *, confidence: float
) -> tuple[FloatArray, FloatArray]:
    """Tango's (1998) score interval for a difference of paired proportions, (wins - losses) / n,
    by bisection of its score statistic (decreasing in the difference); batched for the bench."""
    from scipy import stats

    # Both bounds in one bisection: the counts twice, the first copy aiming at +z, the second -z.
    b, c = np.tile(wins.astype(np.float64), 2), np.tile(losses.astype(np.float64), 2)
    z = float(stats.norm.ppf((1 + confidence) / 2))
    target = np.repeat([z, -z], wins.size)

    def statistic(delta: FloatArray) -> FloatArray:
        # The restricted maximum-likelihood estimate of P(loss) given the difference delta.
        qa, qb, qc = 2 * n, -b - c + (2 * n - b + c) * delta, -c * delta * (1 - delta)
        loss_rate = (np.sqrt(np.maximum(qb * qb - 4 * qa * qc, 0.0)) - qb) / (2 * qa)
        variance = n * (2 * loss_rate + delta * (1 - delta))
        excess = b - c - n * delta
        # Where the variance vanishes the excess does too (no discordant pair, delta = 0).
        return np.divide(excess, np.sqrt(variance), out=np.zeros_like(excess), where=variance > 0)

    low: FloatArray = np.full(b.shape, -1.0)
    high: FloatArray = np.full(b.shape, 1.0)
    for _ in range(60):  # 2 / 2**60: far below any printed digit
        middle = (low + high) / 2
        right = statistic(middle) > target
        low, high = np.where(right, middle, low), np.where(right, high, middle)
    bounds = (low + high) / 2
    return bounds[: wins.size], bounds[wins.size :]


def _mcnemar_p(wins: npt.NDArray[np.int64], losses: npt.NDArray[np.int64]) -> FloatArray:
    """Two-sided p of "no difference" from the discordant pairs: the exact McNemar test (a binomial
    test at 1/2), or the score test at 0 that Tango's interval inverts where that is larger.

    The larger one only below p = 0.0006 (all counts up to 3000 discordant pairs checked), where
    the exact test's tail falls under the normal one's; taking it there keeps "p < alpha" and
    "Tango's interval excludes 0" one event at every alpha. Batched for the power computation.
    """
    from scipy import stats

    b, c = wins.astype(np.float64), losses.astype(np.float64)
    pairs = b + c
    exact = np.minimum(1.0, 2 * stats.binom.cdf(np.minimum(b, c), pairs, 0.5))
    z = np.abs(b - c) / np.sqrt(np.where(pairs > 0, pairs, 1.0))
    return np.asarray(np.maximum(exact, 2 * stats.norm.sf(z)), dtype=np.float64)


def _inverted_p(rejects: Callable[[float], bool], *, alpha: float, rejected: bool) -> float:
    """The least alpha at which `rejects` (an interval excluding 0 at confidence 1 - alpha, which
    only grows more likely with alpha), by bisection from the side `rejected` at `alpha` says;
    strictly below `alpha` exactly when it rejected there."""
    if rejected:
        below, above = -12.0, float(np.log10(alpha))  # on a log scale, down to 1e-12
        if rejects(10**below):
            return 10**below
        for _ in range(16):  # 3 significant digits
            middle = (below + above) / 2
            below, above = (below, middle) if rejects(10**middle) else (middle, above)
        return float(10 ** ((below + above) / 2))
    below, above = alpha, 1 - 1e-9
    if not rejects(above):
        return 1.0
    for _ in range(16):  # 3 significant digits
        middle = (below + above) / 2
        below, above = (below, middle) if rejects(middle) else (middle, above)
    return (below + above) / 2


def _spans_zero(low: float, high: float) -> bool:
    return low <= 0 <= high


def _is_binary(values: FloatArray) -> bool:
    return bool(np.all((values == 0) | (values == 1)))


def _bounds(values: FloatArray, low: float, high: float) -> tuple[float, float]:
    """The score range: [low, high] (scores are in [0, 1]), widened to what was observed."""
    return min(low, float(values.min())), max(high, float(values.max()))


def _as_scores(scores: Sequence[float], name: str) -> FloatArray:
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
