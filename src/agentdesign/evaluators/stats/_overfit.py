"""How much a search's selection of its winner overfit the items it was chosen on: the
probability of backtest overfitting against its shuffled reference, the winner's optimism, and how
often another draw of items would have picked the same design.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import numpy.typing as npt

from agentdesign.evaluators.stats._stats import FloatArray

# scipy.stats is imported in the functions that use it: its import takes most of a second, which a
# command that computes no statistic (`agentdesign --help`, a refused option) need not pay.
__all__ = [
    "SELECTION_MIN_DESIGNS",
    "SELECTION_MIN_ITEMS",
    "OverfitReport",
    "backtest_overfitting",
    "best_share",
    "debiased_winner_score",
    "selection_estimable",
    "selection_overfit",
    "shuffled_pbo",
    "winner_optimism",
]

# The least designs and items at which the selection-overfit figures are worth printing: below
# them PBO on pure noise spreads over most of [0, 1] and a clearly better design does not move it
# far (bench/honesty.py prints both), and the optimism's error is as large as the optimism.
SELECTION_MIN_DESIGNS = 8
SELECTION_MIN_ITEMS = 20


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


def _tied_best(means: FloatArray) -> npt.NDArray[np.bool_]:
    """Per column, the rows within rounding of the column's best."""
    best = np.isclose(means, means.max(axis=0), rtol=1e-12, atol=1e-12)
    return np.asarray(best, dtype=np.bool_)


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
