"""Intervals, paired comparisons and selection overfitting: known values, edges, signs, errors.

bench/honesty.py measures the intervals' coverage by simulation.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy import stats

from agentdesign.evaluators import (
    OverfitReport,
    ScoreSummary,
    backtest_overfitting,
    minimum_detectable_effect,
    paired_difference,
    score_interval,
    selection_estimable,
    selection_overfit,
    shuffled_pbo,
    summarize,
    winner_optimism,
)
from agentdesign.evaluators.stats._overfit import best_share, debiased_winner_score
from agentdesign.evaluators.stats._stats import (
    BOOTSTRAP,
    EXACT,
    PAIRED_BOOTSTRAP,
    PAIRED_EXACT,
    _mean_intervals,
    _tango_interval,
)

# 60 of 100 tasks solved, in a fixed scattered order.
SCORES = [float(i % 5 < 3) for i in range(100)]


def test_interval_contains_the_mean_and_shrinks_with_more_tasks() -> None:
    low, high, _ = score_interval(SCORES)
    assert low < 0.6 < high
    small_low, small_high, _ = score_interval(SCORES[:20])
    large_low, large_high, _ = score_interval(SCORES * 10)
    assert large_high - large_low < (small_high - small_low) / 2


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
        score_interval(scores, **options)  # type: ignore[arg-type]


def test_binary_scores_get_the_clopper_pearson_interval() -> None:
    summary = summarize(SCORES)
    exact = stats.binomtest(60, 100).proportion_ci(method="exact")
    assert summary == ScoreSummary(0.6, exact.low, exact.high, n=100, method=EXACT)
    assert summary.method == "Clopper-Pearson"
    with pytest.raises(ValueError):
        summarize([])


def test_no_solved_item_in_ten_is_not_a_certain_zero() -> None:
    # The percentile bootstrap said [0, 0]; the exact interval is [0, 0.31].
    summary = summarize([0.0] * 10)
    assert (summary.mean, summary.ci_low) == (0.0, 0.0)
    assert summary.ci_high == pytest.approx(1 - 0.025**0.1)
    assert summary.ci_high == pytest.approx(0.3085, abs=1e-4)


def test_ten_of_ten_is_never_a_certain_one() -> None:
    summary = summarize([1.0] * 10)
    assert summary.ci_low == pytest.approx(0.025**0.1)
    assert summary.ci_low == pytest.approx(0.6915, abs=1e-4)
    assert summary.ci_high == 1.0


def test_score_interval_is_summarize_s_interval() -> None:
    scores = [0.2, 0.9, 0.55, 0.4, 1.0, 0.0, 0.75]
    summary = summarize(scores, seed=3)
    assert score_interval(scores, seed=3) == (summary.ci_low, summary.ci_high, BOOTSTRAP)
    assert score_interval([1.0, 0.0, 1.0])[2] == EXACT


@pytest.mark.parametrize("value", [0.7, 0.3, 0.5])
def test_equal_continuous_scores_get_the_edge_floor(value: float) -> None:
    # No spread to resample: the interval lets a Clopper-Pearson share of unseen scores lie at
    # either bound, which for n=10 is 0.31 of the way to each.
    summary = summarize([value] * 10)
    share = 1 - 0.025**0.1
    assert summary.method == BOOTSTRAP
    assert summary.ci_low == pytest.approx(value - share * value)
    assert summary.ci_high == pytest.approx(value + share * (1 - value))


def test_continuous_interval_is_at_least_bca_and_t() -> None:
    rng = np.random.default_rng(5)
    scores = rng.beta(2, 3, size=40)
    summary = summarize(scores.tolist(), n_resamples=999, seed=11)
    bca = stats.bootstrap(
        (scores,), np.mean, n_resamples=999, method="BCa", rng=np.random.default_rng(11)
    ).confidence_interval
    t = stats.t.interval(0.95, 39, loc=scores.mean(), scale=stats.sem(scores))
    assert summary.ci_low == pytest.approx(min(bca.low, t[0]))
    assert summary.ci_high == pytest.approx(max(bca.high, t[1]))
    assert summary.mean == pytest.approx(scores.mean())


def test_continuous_interval_stays_in_the_score_range() -> None:
    summary = summarize([0.95, 1.0, 0.9, 1.0])
    assert 0.0 <= summary.ci_low < summary.mean < summary.ci_high <= 1.0
    # Scores outside [0, 1] widen the range instead of being clipped into it.
    wide = summarize([3.0, 5.0, 4.0, 4.5])
    assert wide.ci_low < 4.125 < wide.ci_high <= 5.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"confidence": 1.0}, "confidence"),
        ({"n_resamples": 0}, "n_resamples"),
    ],
)
def test_summarize_checks_its_options(options: dict[str, float], message: str) -> None:
    for scores in ([1.0, 0.0], [0.5, 0.25]):
        with pytest.raises(ValueError, match=message):
            summarize(scores, **options)  # type: ignore[arg-type]


def test_paired_difference_sign_and_counts() -> None:
    a = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.5] * 10
    b = [0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0] * 10
    better = paired_difference(a, b)
    assert (better.wins, better.losses, better.ties, better.n) == (40, 10, 30, 80)
    assert better.mean_diff == pytest.approx(0.3125)
    assert 0 < better.ci_low < better.mean_diff < better.ci_high
    assert better.method == PAIRED_BOOTSTRAP
    assert better.p_value < 0.01

    worse = paired_difference(b, a)
    assert (worse.wins, worse.losses, worse.ties) == (10, 40, 30)
    assert worse.mean_diff == pytest.approx(-0.3125)
    assert worse.ci_high < 0
    assert worse.p_value == pytest.approx(better.p_value)


def test_mcnemar_p_value_of_eight_discordant_pairs_one_way() -> None:
    result = paired_difference([1.0] * 8 + [0.0, 1.0], [0.0] * 8 + [0.0, 1.0])
    assert (result.wins, result.losses, result.ties) == (8, 0, 2)
    assert result.p_value == pytest.approx(2 * 0.5**8)
    assert result.method == PAIRED_EXACT
    assert 0 < result.ci_low < 0.8 < result.ci_high <= 1.0


def test_tango_interval_matches_the_published_example() -> None:
    # Cavo et al. (2012) in Fagerland, Lydersen and Laake, "Statistical Analysis of Contingency
    # Tables" (2017), ch. 8: 59 both, 6 first only, 16 second only, 80 neither.
    low, high = _tango_interval(np.array([6]), np.array([16]), 161, confidence=0.95)
    assert low[0] == pytest.approx(-0.1240, abs=5e-5)
    assert high[0] == pytest.approx(-0.0054, abs=5e-5)
    # Tango's interval leaves out 0, but the exact test finds no difference (p = 0.052): the
    # comparison's interval reaches 0, as its p-value says.
    first = [1.0] * 65 + [0.0] * 96
    second = [1.0] * 59 + [0.0] * 6 + [1.0] * 16 + [0.0] * 80
    result = paired_difference(first, second)
    assert result.mean_diff == pytest.approx(-10 / 161)
    assert result.p_value == pytest.approx(stats.binomtest(6, 22).pvalue)
    assert result.p_value == pytest.approx(0.0525, abs=5e-5)
    assert result.ci_low == pytest.approx(low[0]) and result.ci_high == 0.0


def _discordant(wins: int, losses: int, ties: int = 0) -> tuple[list[float], list[float]]:
    """Two 0/1 score lists with these counts of wins, losses and (both solved) ties."""
    a = [1.0] * wins + [0.0] * losses + [1.0] * ties
    b = [0.0] * wins + [1.0] * losses + [1.0] * ties
    return a, b


@pytest.mark.parametrize(
    ("wins", "losses", "p_value"),
    [(4, 0, 0.125), (5, 0, 0.0625), (7, 1, 0.0703), (9, 2, 0.0654), (14, 5, 0.0636)],
)
def test_small_discordant_counts_that_the_exact_test_does_not_reject_are_no_difference(
    wins: int, losses: int, p_value: float
) -> None:
    # Tango's interval alone leaves out 0 for each of these; the exact test does not reject.
    for ties in (0, 10):
        result = paired_difference(*_discordant(wins, losses, ties))
        assert result.p_value == pytest.approx(p_value, abs=5e-5)
        assert result.ci_low <= 0 < result.ci_high


def test_an_interval_excludes_zero_exactly_when_p_is_below_alpha() -> None:
    # every split of up to 30 discordant pairs, among a varying number of tied items
    for pairs in range(31):
        for wins in range(pairs + 1):
            ties = (7 * wins + pairs) % 13 + (pairs == 0)
            result = paired_difference(*_discordant(wins, pairs - wins, ties))
            shown = result.ci_low > 0 or result.ci_high < 0
            assert shown == (result.p_value < 0.05), (wins, pairs - wins, ties)
    for wins, losses in ((6, 0), (7, 1), (8, 1), (10, 2), (12, 3)):  # at another level
        result = paired_difference(*_discordant(wins, losses), confidence=0.9)
        assert (result.ci_low > 0) == (result.p_value < 0.1)


def test_continuous_p_is_the_least_alpha_at_which_the_interval_excludes_zero() -> None:
    rng = np.random.default_rng(4)
    for n, shift in ((6, 0.3), (10, 0.15), (20, 0.1), (40, 0.05), (40, -0.12)):
        a = rng.beta(2, 2, size=n)
        b = np.clip(a - shift + rng.normal(0, 0.2, size=n), 0, 1)
        result = paired_difference(a.tolist(), b.tolist(), n_resamples=500)
        shown = result.ci_low > 0 or result.ci_high < 0
        assert shown == (result.p_value < 0.05)
        if result.p_value < 1:  # just inside and just outside its own level
            for level, excludes in ((1.001, True), (0.999, False)):
                alpha = result.p_value * level
                inner = paired_difference(
                    a.tolist(), b.tolist(), confidence=1 - alpha, n_resamples=500
                )
                assert (inner.ci_low > 0 or inner.ci_high < 0) == (excludes or alpha >= 1)


def test_paired_difference_of_equal_agents() -> None:
    same = paired_difference(SCORES, SCORES)
    assert (same.mean_diff, same.n, same.wins, same.losses, same.ties) == (0.0, 100, 0, 0, 100)
    assert same.p_value == 1.0
    # No discordant pair in 100 is not proof of no difference.
    assert same.ci_low == pytest.approx(-same.ci_high)
    assert 0.01 < same.ci_high < 0.06
    continuous = paired_difference([0.5] * 10, [0.5] * 10)
    assert continuous.p_value == 1.0
    assert continuous.ci_low < 0 < continuous.ci_high


def test_paired_difference_of_a_noisy_gap_is_not_significant() -> None:
    a = [1.0, 0.0] * 10
    b = [0.0, 1.0] * 9 + [0.0, 0.0]
    noisy = paired_difference(a, b)
    assert noisy.ci_low < 0 < noisy.ci_high
    assert noisy.p_value > 0.5


def test_paired_difference_needs_equal_lengths() -> None:
    with pytest.raises(ValueError, match="equal lengths, got 2 and 3"):
        paired_difference([1.0, 0.0], [1.0, 0.0, 1.0])


def _noise(designs: int, items: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random((designs, items)) < 0.5).astype(float)


def test_pbo_is_high_on_noise_and_zero_on_a_planted_winner() -> None:
    # One noise matrix's PBO is itself noisy; averaged over matrices it is about 0.5.
    noise = [backtest_overfitting(_noise(20, 40, seed), seed=seed) for seed in range(40)]
    assert 0.4 < float(np.mean(noise)) < 0.6
    planted = _noise(20, 40, 0)
    planted[7] = 1.0
    planted[7, ::8] = 0.0
    assert backtest_overfitting(planted) < 0.05


def test_pbo_by_hand() -> None:
    # 4 items in 4 blocks: 6 in-sample pairs. Design 0 solves items 0 and 1, the others nothing.
    # In-sample {0, 1}: design 0 wins, ties the others out of sample, at the median: overfit.
    # In-sample {2, 3}: all three tie and share the choice; out of sample design 0 is best and
    # the other two below the median: 2/3 overfit. The 4 mixed pairs: design 0 wins, and is best
    # out of sample. PBO = (1 + 2/3) / 6, whatever the shuffle.
    matrix = np.zeros((3, 4))
    matrix[0, :2] = 1.0
    for seed in range(3):
        assert backtest_overfitting(matrix, n_blocks=4, seed=seed) == pytest.approx(5 / 18)


def test_pbo_blocks_shrink_to_the_items() -> None:
    matrix = _noise(5, 3, 0)
    assert 0.0 <= backtest_overfitting(matrix) <= 1.0
    assert backtest_overfitting(matrix, seed=4) == backtest_overfitting(matrix, seed=4)


def test_optimism_is_positive_on_noise_and_zero_for_a_dominant_design() -> None:
    noise = _noise(30, 20, 1)
    assert winner_optimism(noise) > 0.1
    dominant = np.zeros((5, 20))
    dominant[2] = 1.0
    assert winner_optimism(dominant) == 0.0
    assert debiased_winner_score(dominant) == 1.0
    assert debiased_winner_score(noise) == pytest.approx(
        noise.mean(axis=1).max() - winner_optimism(noise)
    )


def test_optimism_is_the_scaled_split_half_gap() -> None:
    # Two designs, two items, each winning one: every split's winner gains 1 on A over B.
    matrix = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert winner_optimism(matrix, n_splits=10) == pytest.approx(np.sqrt(0.5))


def test_selection_overfit_reports_all() -> None:
    noise = _noise(10, 16, 2)
    report = selection_overfit(noise, n_blocks=4, n_splits=50, n_shuffles=30, seed=3)
    shuffled = shuffled_pbo(noise, n_shuffles=30, n_blocks=4, seed=3)
    winner = int(np.argmax(noise.mean(axis=1)))
    assert report == OverfitReport(
        pbo=backtest_overfitting(noise, n_blocks=4, seed=3),
        shuffled_pbo=pytest.approx(float(shuffled.mean())),  # type: ignore[arg-type]
        shuffled_low=pytest.approx(float(np.percentile(shuffled, 10))),  # type: ignore[arg-type]
        shuffled_high=pytest.approx(float(np.percentile(shuffled, 90))),  # type: ignore[arg-type]
        optimism=winner_optimism(noise, n_splits=50, seed=3),
        best_share=best_share(noise, chosen=winner, seed=3),
        n_designs=10,
        n_items=16,
    )


def test_shuffling_the_designs_within_items_gives_the_pbo_of_equal_designs() -> None:
    planted = _noise(20, 40, 0)
    planted[7] = 1.0
    planted[7, ::8] = 0.0
    assert backtest_overfitting(planted) < 0.05
    shuffled = shuffled_pbo(planted, n_shuffles=100)
    assert 0.35 < float(shuffled.mean()) < 0.65  # the planted winner is gone once shuffled
    assert float(np.percentile(shuffled, 10)) < float(np.percentile(shuffled, 90))
    # each item keeps its scores, only who scored them moves
    same = shuffled_pbo(planted, n_shuffles=5, seed=1)
    assert np.array_equal(same, shuffled_pbo(planted, n_shuffles=5, seed=1))


def test_the_best_share_counts_the_bootstraps_a_design_is_best_in() -> None:
    dominant = _noise(5, 20, 3)
    dominant[2] = 1.0
    assert best_share(dominant, chosen=2) == 1.0
    assert best_share(dominant, chosen=0) == 0.0
    twins = np.vstack([_noise(1, 20, 4)] * 2)
    assert best_share(twins, chosen=0) == pytest.approx(0.5)
    noise = _noise(8, 20, 5)
    assert sum(best_share(noise, chosen=i) for i in range(8)) == pytest.approx(1.0)


def test_selection_overfit_is_estimable_from_8_designs_and_20_items() -> None:
    assert selection_estimable(8, 20)
    assert not selection_estimable(4, 6)
    assert not selection_estimable(7, 100)
    assert not selection_estimable(100, 19)


@functools.cache
def _shown(n: int) -> tuple[tuple[int, int], ...]:
    """The (wins, losses) on n 0/1 items for which paired_difference shows a gain."""
    return tuple(
        (wins, losses)
        for wins in range(n + 1)
        for losses in range(n + 1 - wins)
        if paired_difference(*_discordant(wins, losses, n - wins - losses)).ci_low > 0
    )


def _power(n: int, share: float, gain: float) -> float:
    """P(paired_difference shows a gain) on n 0/1 items, each a win with probability
    (share + gain) / 2 and a loss with (share - gain) / 2, summed over every outcome."""
    cells = [(share + gain) / 2, (share - gain) / 2, 1 - share]
    return float(
        sum(stats.multinomial.pmf([w, loss, n - w - loss], n, cells) for w, loss in _shown(n))
    )


@pytest.mark.parametrize(("n", "discordant"), [(20, 10), (24, 8), (16, 16)])
def test_the_detectable_gain_of_0_1_scores_has_80_percent_power_in_the_printed_test(
    n: int, discordant: int
) -> None:
    a, b = _discordant(discordant // 2, discordant - discordant // 2, n - discordant)
    gain = minimum_detectable_effect(a, b)
    assert gain is not None and 0 < gain <= discordant / n
    share = discordant / n
    assert _power(n, share, gain) == pytest.approx(0.8, abs=1e-6)
    assert _power(n, share, gain * 0.97) < 0.8
    # more power needs a larger gain; a lower confidence, a smaller one
    larger = minimum_detectable_effect(a, b, power=0.9)
    assert larger is None or larger > gain
    smaller = minimum_detectable_effect(a, b, confidence=0.9)
    assert smaller is not None and smaller < gain


def test_no_gain_is_detectable_without_disagreements_or_on_a_handful_of_items() -> None:
    assert minimum_detectable_effect(*_discordant(0, 0, 40)) is None  # they never disagreed
    # 8 items, 2 disagreements: even winning every disagreement is rarely 6 or more wins
    assert minimum_detectable_effect(*_discordant(1, 1, 6)) is None
    assert _power(8, 2 / 8, 2 / 8) < 0.8
    with pytest.raises(ValueError, match="power"):
        minimum_detectable_effect([1.0, 0.0], [0.0, 1.0], power=1.0)
    with pytest.raises(ValueError, match="equal lengths"):
        minimum_detectable_effect([1.0, 0.0], [0.0])


def test_the_detectable_gain_of_other_scores_is_about_80_percent_power_in_simulation() -> None:
    rng = np.random.default_rng(7)
    for n in (10, 30, 80):
        a = rng.beta(2, 2, size=n)
        b = np.clip(a + rng.normal(0, 0.25, size=n), 0, 1)
        gain = minimum_detectable_effect(a.tolist(), b.tolist())
        assert gain is not None
        diffs = a - b
        # the observed differences, centred on the gain, resampled: a data set per row
        shifted = diffs - diffs.mean() + gain
        rows = shifted[rng.integers(0, n, size=(400, n))]
        low, _ = _mean_intervals(rows, bounds=(-1.0, 1.0), confidence=0.95, n_resamples=500, seed=n)
        assert 0.7 < float(np.mean(low > 0)) < 0.9, n


@pytest.mark.parametrize(
    ("matrix", "options", "message"),
    [
        (np.ones((1, 10)), {}, "at least 2 designs and 2 items"),
        (np.ones((5, 1)), {}, "at least 2 designs and 2 items"),
        (np.ones(10), {}, "at least 2 designs and 2 items"),
        (np.array([[0.5, np.nan], [0.5, 1.0]]), {}, "finite"),
        (np.ones((3, 10)), {"n_blocks": 3}, "even"),
        (np.ones((3, 10)), {"n_blocks": 0}, "even"),
        (np.ones((3, 10)), {"n_splits": 0}, "n_splits"),
    ],
)
def test_selection_overfit_checks_its_input(
    matrix: np.ndarray, options: dict[str, int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        selection_overfit(matrix, **options)
