"""Uncertainty for benchmark scores: intervals that hold at small n, paired comparisons of two
agents, and how much a search's selection of its winner overfit the items it was chosen on.

Search compares agents on a few dozen tasks, where a 5-point gap is often noise; these helpers say
how much noise. bench/honesty.py measures by simulation that the intervals cover the true rate.
Everything random is seeded, so a reported number can be reproduced exactly.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import numpy.typing as npt

# scipy.stats is imported in the functions that use it: its import takes most of a second, which a
# command that computes no statistic (`agentdesign --help`, a refused option) need not pay.
__all__ = [
    "SELECTION_MIN_DESIGNS",
    "SELECTION_MIN_ITEMS",
    "OverfitReport",
    "PairedComparison",
    "ScoreSummary",
    "backtest_overfitting",
    "best_share",
    "debiased_winner_score",
    "paired_difference",
    "score_interval",
    "selection_estimable",
    "selection_overfit",
    "shuffled_pbo",
    "summarize",
    "winner_optimism",
]

FloatArray = npt.NDArray[np.float64]

# Interval methods, as reported next to every interval.
EXACT = "Clopper-Pearson"
BOOTSTRAP = "widest of BCa bootstrap, t and edge floor"
PAIRED_EXACT = "exact McNemar; Tango score interval, reaching 0 unless the test rejects"
PAIRED_BOOTSTRAP = "widest of BCa paired bootstrap, t and edge floor; p inverts the interval"

# The least designs and items at which the selection-overfit figures are worth printing: below
# them PBO on pure noise spreads over most of [0, 1] and a clearly better design does not move it
# far (bench/honesty.py prints both), and the optimism's error is as large as the optimism.
SELECTION_MIN_DESIGNS = 8
SELECTION_MIN_ITEMS = 20

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


@dataclass(frozen=True)
class OverfitReport:
    """How much choosing the best of `n_designs` on `n_items` items flattered the choice.

    `pbo` is the probability of backtest overfitting (about 0.5 when the designs differ only by
    noise, near 0 when the winner is really better); `shuffled_pbo` and its 10th-90th percentile
    range, the same matrix's PBO with the designs shuffled within each item (equal designs but for
    noise), is the reference to read it against. `optimism` is how much the winner's search score
    is expected to exceed what it scores on new items; `best_share` is the share of item
    bootstraps in which the chosen design has the best mean.
    """

    pbo: float
    shuffled_pbo: float
    shuffled_low: float
    shuffled_high: float
    optimism: float
    best_share: float
    n_designs: int
    n_items: int


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


def backtest_overfitting(matrix: npt.ArrayLike, *, n_blocks: int = 8, seed: int = 0) -> float:
    """Probability of backtest overfitting of picking the best row (design) of a designs x items
    score matrix, by combinatorially symmetric cross-validation (Bailey, Borwein, Lopez de Prado
    and Zhu, 2015).

    The items are shuffled (seeded) into `n_blocks` blocks (the largest even number up to
    `n_blocks` and the item count). For each choice of half the blocks as in-sample, the design
    best in-sample gets its relative rank w = rank / (designs + 1) among all designs on the other
    half (average ranks for ties); the PBO is the share of choices where logit(w) <= 0, that is
    where the in-sample winner is at or below the median out of sample. Designs tied for best
    in-sample each count for an equal share of their choice: the expectation of a random tie-break,
    without its noise. Raises ValueError for fewer than 2 designs or 2 items.
    """
    from scipy import stats

    scores = _as_matrix(matrix)
    if n_blocks < 2 or n_blocks % 2:
        raise ValueError(f"n_blocks must be an even number of at least 2, got {n_blocks}")
    n_designs, n_items = scores.shape
    blocks = np.array_split(
        np.random.default_rng(seed).permutation(n_items), min(n_blocks, n_items - n_items % 2)
    )
    sums = np.stack([scores[:, block].sum(axis=1) for block in blocks], axis=1)
    sizes = np.array([block.size for block in blocks], dtype=np.float64)
    chosen = np.array(list(combinations(range(len(blocks)), len(blocks) // 2)))
    in_sample = np.zeros((len(chosen), len(blocks)))  # one row per combination of blocks
    np.put_along_axis(in_sample, chosen, 1.0, axis=1)
    in_means = (sums @ in_sample.T) / (sizes @ in_sample.T)
    out_means = (sums @ (1 - in_sample).T) / (sizes @ (1 - in_sample).T)
    ranks = stats.rankdata(out_means, axis=0)  # 1 = worst, per combination
    at_or_below_median = ranks <= (n_designs + 1) / 2  # logit(rank / (n + 1)) <= 0
    winners = _tied_best(in_means)
    return float(np.mean((at_or_below_median & winners).sum(axis=0) / winners.sum(axis=0)))


def winner_optimism(matrix: npt.ArrayLike, *, n_splits: int = 200, seed: int = 0) -> float:
    """Expected optimism of the winner's search score: over `n_splits` random half splits of the
    items, the mean of (the half-A winner's mean on A) minus (its mean on B), scaled by
    sqrt(half / n_items).

    The split-half gap is the optimism of a choice made on half the items; noise in a mean shrinks
    as 1/sqrt(items), so the scale carries it to a choice made on all of them. Unscaled, it
    overcorrected the winner's curse by ~0.1 at n=10-20 in bench/honesty.py; scaled, the residual
    bias is within +-0.02 when designs differ by noise, and slightly negative when one design is
    clearly better. Designs tied for best on A count equally. Raises ValueError for fewer than
    2 designs or 2 items.
    """
    scores = _as_matrix(matrix)
    if n_splits < 1:
        raise ValueError(f"n_splits must be at least 1, got {n_splits}")
    n_items = scores.shape[1]
    half = n_items // 2
    order = np.random.default_rng(seed).permuted(np.tile(np.arange(n_items), (n_splits, 1)), axis=1)
    in_a = np.zeros((n_splits, n_items))  # float, so that @ goes straight to BLAS
    np.put_along_axis(in_a, order[:, :half], 1.0, axis=1)
    means_a = (scores @ in_a.T) / half
    means_b = (scores @ (1 - in_a).T) / (n_items - half)
    winners = _tied_best(means_a)
    gaps = ((means_a - means_b) * winners).sum(axis=0) / winners.sum(axis=0)
    return float(gaps.mean() * np.sqrt(half / n_items))


def debiased_winner_score(matrix: npt.ArrayLike, *, n_splits: int = 200, seed: int = 0) -> float:
    """The best design's mean over all items, less `winner_optimism`."""
    scores = _as_matrix(matrix)
    return float(scores.mean(axis=1).max()) - winner_optimism(scores, n_splits=n_splits, seed=seed)


def shuffled_pbo(
    matrix: npt.ArrayLike, *, n_shuffles: int = 200, n_blocks: int = 8, seed: int = 0
) -> FloatArray:
    """PBO of `matrix` with its design labels shuffled within each item, `n_shuffles` times: the
    designs made equal but for noise while every item keeps its difficulty, so the distribution
    a PBO is to be read against (it is not 0.5 on every matrix: ties and item difficulty move
    it). The blocks are those of `backtest_overfitting` with the same seed."""
    scores = _as_matrix(matrix)
    rng = np.random.default_rng([seed, 2])  # a stream apart from the blocks' shuffle
    return np.array(
        [
            backtest_overfitting(rng.permuted(scores, axis=0), n_blocks=n_blocks, seed=seed)
            for _ in range(n_shuffles)
        ]
    )


def best_share(
    matrix: npt.ArrayLike, *, chosen: int, n_resamples: int = 2000, seed: int = 0
) -> float:
    """Share of bootstrap resamples of the items in which design `chosen` (a row) has the best
    mean; designs tied for best share a resample equally. How often another draw of items of the
    same kind would have picked the same design."""
    scores = _as_matrix(matrix)
    n_items = scores.shape[1]
    counts = np.random.default_rng([seed, 3]).multinomial(
        n_items, np.full(n_items, 1 / n_items), size=n_resamples
    )
    best = _tied_best((scores @ counts.T.astype(np.float64)) / n_items)
    return float(np.mean(best[chosen] / best.sum(axis=0)))


def selection_estimable(n_designs: int, n_items: int) -> bool:
    """Whether a designs x items matrix is large enough for `selection_overfit` to mean much."""
    return n_designs >= SELECTION_MIN_DESIGNS and n_items >= SELECTION_MIN_ITEMS


def selection_overfit(
    matrix: npt.ArrayLike,
    *,
    chosen: int | None = None,
    n_blocks: int = 8,
    n_splits: int = 200,
    n_shuffles: int = 200,
    seed: int = 0,
) -> OverfitReport:
    """PBO with its shuffled reference, winner's optimism and the chosen design's bootstrap share
    of a designs x items score matrix (every design on every item); `chosen` is the winner's row,
    by default the first of the best mean."""
    scores = _as_matrix(matrix)
    shuffled = shuffled_pbo(scores, n_shuffles=n_shuffles, n_blocks=n_blocks, seed=seed)
    winner = int(np.argmax(scores.mean(axis=1))) if chosen is None else chosen
    return OverfitReport(
        pbo=backtest_overfitting(scores, n_blocks=n_blocks, seed=seed),
        shuffled_pbo=float(shuffled.mean()),
        shuffled_low=float(np.percentile(shuffled, 10)),
        shuffled_high=float(np.percentile(shuffled, 90)),
        optimism=winner_optimism(scores, n_splits=n_splits, seed=seed),
        best_share=best_share(scores, chosen=winner, seed=seed),
        n_designs=scores.shape[0],
        n_items=scores.shape[1],
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


def _tied_best(means: FloatArray) -> npt.NDArray[np.bool_]:
    """Per column, the rows within rounding of the column's best."""
    best = np.isclose(means, means.max(axis=0), rtol=1e-12, atol=1e-12)
    return np.asarray(best, dtype=np.bool_)


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


def _as_matrix(matrix: npt.ArrayLike) -> FloatArray:
    scores = np.asarray(matrix, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] < 2 or scores.shape[1] < 2:
        raise ValueError(
            "a selection needs a designs x items matrix of at least 2 designs and 2 items, "
            f"got shape {scores.shape}"
        )
    if not np.all(np.isfinite(scores)):
        raise ValueError("the score matrix must be finite numbers: every design on every item")
    return scores


def _check_options(confidence: float, n_resamples: int) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
