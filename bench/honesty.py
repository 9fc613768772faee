"""Whether agentdesign's verdicts are honest, by simulation with known true rates.

    .venv/bin/python bench/honesty.py [--draws 2000] [--seed 0]

Prints markdown tables, each over n = 10, 20, 50, 200 items and `--draws` simulated data sets per
cell:
1. coverage of the 95% interval of `summarize` for 0/1 scores at true rates 0.05-0.95 (the
   simulated minimum must be 0.93 or more; the exact minimum, from the binomial distribution, is
   shown beside it);
2. the same for continuous scores drawn from Beta distributions with those means, U-shaped (2a)
   and concentrated (2b), where the edge floor makes small-n intervals conservative;
3. the winner's curse: among 30 designs, the observed mean of the best one minus its true rate,
   before and after subtracting `winner_optimism`;
4. the probability of backtest overfitting on pure noise (expect about 0.5) and with one design
   planted clearly better (expect near 0);
5. coverage of the 95% interval of `paired_difference` for 0/1 outcomes of two correlated designs;
6. PBO's distribution on pure noise, and with one design planted better, at the verdict's sizes
   4 x 6 (the default run's, where it prints no PBO), 8 x 20 (the least where it does) and 30 x 30;
7. whether "beats" (the interval excludes 0) and p < 0.05 agree for every split of up to 30
   discordant pairs (they must, 100%);
8. the minimum detectable effect of the paired 0/1 test (80% power) by items and disagreement;
9. racing: how often racing stops a design as good as, or better than, the incumbent chosen as the
   best of several designs on the same items (and how often it stops worse ones), before and after
   the racing rule spent its alpha over the stages (`racing_stops`; 30 items, `--draws` per cell).
`--only WORD` runs only the sections whose title holds WORD.
The 0/1 cells call the public functions once per distinct outcome (the interval depends only on
the counts); the continuous cells call the same batched code as `summarize`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from _common import markdown_table
from scipy import stats
from threadpoolctl import threadpool_limits

from agentdesign.evaluators import (
    SELECTION_MIN_DESIGNS,
    SELECTION_MIN_ITEMS,
    backtest_overfitting,
    minimum_detectable_effect,
    paired_difference,
    selection_estimable,
    summarize,
    winner_optimism,
)
from agentdesign.evaluators.stats._stats import _mean_intervals
from agentdesign.search import Racing

NS = (10, 20, 50, 200)
RATES = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
CONFIDENCE = 0.95
DESIGNS = 30
# Two designs' true rates and the correlation of their outcomes on an item.
PAIRS = (
    (0.5, 0.5, 0.5),
    (0.5, 0.5, 0.9),
    (0.6, 0.4, 0.5),
    (0.7, 0.5, 0.6),
    (0.55, 0.45, 0.8),
    (0.9, 0.7, 0.5),
    (0.3, 0.1, 0.3),
)
# Designs x items of the PBO sections: the default run's, the least the verdict estimates, larger.
SELECTION_SIZES = ((4, 6), (SELECTION_MIN_DESIGNS, SELECTION_MIN_ITEMS), (30, 30))
# Continuous data sets held at once, bounding memory at n=200 (see _mean_intervals' batching).
CHUNK = 250

Rng = np.random.Generator


def binary_coverage(rng: Rng, draws: int) -> list[dict[str, str]]:
    """Share of intervals containing the true rate, simulated and exact, per n and rate."""
    rows = []
    for n in NS:
        intervals = [summarize([1.0] * k + [0.0] * (n - k)) for k in range(n + 1)]
        low = np.array([s.ci_low for s in intervals])
        high = np.array([s.ci_high for s in intervals])
        simulated, exact = [], []
        for rate in RATES:
            covers = (low <= rate) & (rate <= high)
            simulated.append(float(covers[rng.binomial(n, rate, size=draws)].mean()))
            exact.append(float(stats.binom.pmf(np.arange(n + 1), n, rate)[covers].sum()))
        rows.append(_coverage_row(n, simulated) | {"exact min": f"{min(exact):.3f}"})
    return rows


def continuous_coverage(rng: Rng, draws: int, concentration: float) -> list[dict[str, str]]:
    """Coverage for scores ~ Beta(c * rate, c * (1 - rate)), whose mean is the rate."""
    rows = []
    for n in NS:
        covered = []
        for rate in RATES:
            hits = 0
            for start in range(0, draws, CHUNK):
                scores = rng.beta(
                    concentration * rate,
                    concentration * (1 - rate),
                    size=(min(CHUNK, draws - start), n),
                )
                low, high = _mean_intervals(
                    scores, bounds=(0.0, 1.0), confidence=CONFIDENCE, n_resamples=2000, seed=start
                )
                hits += int(np.count_nonzero((low <= rate) & (rate <= high)))
            covered.append(hits / draws)
        rows.append(_coverage_row(n, covered))
    return rows


def winners_curse(rng: Rng, draws: int) -> list[dict[str, str]]:
    """Mean (observed winner score - its true rate), before and after subtracting the optimism."""
    scenarios: dict[str, npt.NDArray[np.float64]] = {
        "all 0.5": np.full(DESIGNS, 0.5),
        "0.35-0.65": np.linspace(0.35, 0.65, DESIGNS),
        "one 0.8, rest 0.5": np.r_[0.8, np.full(DESIGNS - 1, 0.5)],
    }
    rows = []
    for n in NS:
        row = {"n": str(n)}
        for name, rates in scenarios.items():
            before, after = [], []
            for draw in range(draws):
                matrix = (rng.random((DESIGNS, n)) < rates[:, np.newaxis]).astype(np.float64)
                means = matrix.mean(axis=1)
                # Tied winners: the expectation of a random pick among them.
                gap = float(means.max() - rates[np.isclose(means, means.max())].mean())
                before.append(gap)
                after.append(gap - winner_optimism(matrix, seed=draw))
            row[f"{name}: before"] = f"{np.mean(before):+.3f}"
            row[f"{name}: after"] = f"{np.mean(after):+.3f}"
        rows.append(row)
    return rows


def overfitting(rng: Rng, draws: int) -> list[dict[str, str]]:
    """Mean PBO of picking the best of 30 designs, on noise and with a planted better design."""
    scenarios = {
        "noise (all 0.5)": np.full(DESIGNS, 0.5),
        "planted (one 0.8, rest 0.5)": np.r_[0.8, np.full(DESIGNS - 1, 0.5)],
    }
    rows = []
    for n in NS:
        row = {"n": str(n)}
        for name, rates in scenarios.items():
            pbo = [
                backtest_overfitting(
                    (rng.random((DESIGNS, n)) < rates[:, np.newaxis]).astype(np.float64),
                    seed=draw,
                )
                for draw in range(draws)
            ]
            row[f"{name}: mean PBO"] = f"{np.mean(pbo):.3f}"
        rows.append(row)
    return rows


def paired_coverage(rng: Rng, draws: int) -> list[dict[str, str]]:
    """Coverage of the paired-difference interval for two correlated 0/1 designs."""
    rows = []
    for n in NS:
        row = {"n": str(n)}
        covered = []
        for rate_a, rate_b, rho in PAIRS:
            both = rate_a * rate_b + rho * np.sqrt(rate_a * (1 - rate_a) * rate_b * (1 - rate_b))
            cells = [both, rate_a - both, rate_b - both, 1 - rate_a - rate_b + both]
            # Columns 1 and 2: items only a solved (wins), only b solved (losses).
            outcomes, which = np.unique(
                rng.multinomial(n, cells, size=draws)[:, 1:3], axis=0, return_inverse=True
            )
            bounds = np.array([_paired_interval(n, int(won), int(lost)) for won, lost in outcomes])
            low, high = bounds[which.ravel(), 0], bounds[which.ravel(), 1]
            truth = rate_a - rate_b
            covered.append(float(np.mean((low <= truth + 1e-9) & (truth - 1e-9 <= high))))
            row[f"{rate_a} vs {rate_b}, r={rho}"] = f"{covered[-1]:.3f}"
        row["min"] = f"{min(covered):.3f}"
        rows.append(row)
    return rows


# Racing: the search items, the incumbent's true rate, how many designs it was chosen from, the
# candidates' true rates, and the spread (in logits) of the item difficulty all designs share.
RACE_ITEMS = 30
RACE_INCUMBENT = 0.5
RACE_CHOSEN_FROM = (1, 4, 10, 30)
RACE_CANDIDATES = (0.5, 0.6, 0.3, 0.1)
RACE_DIFFICULTY = {"independent": 0.0, "shared difficulty (sd 1.5)": 1.5}
RACE_RULES = {"before": Racing(rule="paired"), "after": Racing()}
# What each rule's decision at a stage depends on, of (wins, losses, both right, incumbent total):
# McNemar's discordant pairs; the candidate's right answers and the incumbent's (their bounds).
RACE_STATISTICS: dict[str, Callable[[int, int, int, int], tuple[int, ...]]] = {
    "paired": lambda wins, losses, both, total: (wins, losses),
    "bounds": lambda wins, losses, both, total: (wins + both, total),
}
_DECISIONS: dict[tuple[Racing, int, int, tuple[int, ...]], bool] = {}


def racing_stops(rng: Rng, draws: int) -> list[dict[str, str]]:
    """Share of candidates racing stops, and their mean items, by rule: the incumbent is the best
    (by total) of m designs of true rate 0.5 on the same 30 items, as a run's incumbent is."""
    rows = []
    for items, spread in RACE_DIFFICULTY.items():
        for chosen_from in RACE_CHOSEN_FROM:
            for rate in RACE_CANDIDATES:
                # Each draw: one set of item difficulties, the designs' outcomes on them.
                difficulty = rng.normal(0.0, 1.0, size=(draws, RACE_ITEMS)) * spread
                chances = _item_rates(RACE_INCUMBENT, difficulty, spread)
                designs = rng.random((draws, chosen_from, RACE_ITEMS)) < chances[:, np.newaxis]
                incumbent = designs[np.arange(draws), designs.sum(axis=2).argmax(axis=1)]
                candidate = rng.random((draws, RACE_ITEMS)) < _item_rates(rate, difficulty, spread)
                spent = {
                    name: _raced_items(racing, candidate, incumbent)
                    for name, racing in RACE_RULES.items()
                }
                rows.append(
                    {"items": items, "chosen from": str(chosen_from), "candidate": f"{rate}"}
                    | {
                        f"{name}: stopped": f"{np.mean(n < RACE_ITEMS):.3f}"
                        for name, n in spent.items()
                    }
                    | {f"{name}: mean items": f"{np.mean(n):.1f}" for name, n in spent.items()}
                )
    return rows


def _item_rates(
    rate: float, difficulty: npt.NDArray[np.float64], spread: float
) -> npt.NDArray[np.float64]:
    """Per-item success rates logistic(ability - difficulty), the ability set so that the rate
    averaged over the difficulty's distribution, normal with sd `spread`, is `rate`."""
    if spread == 0.0:
        return np.full(difficulty.shape, rate)
    quantiles = stats.norm.ppf((np.arange(2000) + 0.5) / 2000) * spread
    low, high = -20.0, 20.0
    for _ in range(60):  # the averaged rate rises with the ability: bisection
        middle = (low + high) / 2
        low, high = (
            (middle, high) if np.mean(_logistic(middle - quantiles)) < rate else (low, middle)
        )
    return _logistic((low + high) / 2 - difficulty)


def _logistic(x: npt.NDArray[np.float64] | float) -> npt.NDArray[np.float64]:
    return np.asarray(1 / (1 + np.exp(-np.asarray(x))), dtype=np.float64)


def _raced_items(
    racing: Racing, candidate: npt.NDArray[np.bool_], incumbent: npt.NDArray[np.bool_]
) -> npt.NDArray[np.int64]:
    """The items each candidate gets under `racing`'s stages and test (all: never stopped)."""
    n_items = candidate.shape[1]
    spent = np.full(candidate.shape[0], n_items)
    statistic = RACE_STATISTICS[racing.rule]
    for stage in racing.stages(n_items):
        mine, theirs = candidate[:, :stage], incumbent[:, :stage]
        counts = np.stack(
            [
                (mine & ~theirs).sum(axis=1),
                (~mine & theirs).sum(axis=1),
                (mine & theirs).sum(axis=1),
                incumbent.sum(axis=1),
            ],
            axis=1,
        )
        for row in np.flatnonzero(spent == n_items):
            wins, losses, both, total = map(int, counts[row])
            # The tests are slow: one decision for every stage and value of the rule's statistic.
            key = (racing, n_items, stage, statistic(wins, losses, both, total))
            if key not in _DECISIONS:
                _DECISIONS[key] = _stops(racing, n_items, stage, wins, losses, both, total)
            if _DECISIONS[key]:
                spent[row] = stage
    return spent


def _stops(
    racing: Racing, n_items: int, stage: int, wins: int, losses: int, both: int, total: int
) -> bool:
    """Racing's decision on scores with these counts: the candidate ahead on `wins` of the stage's
    items, behind on `losses`, both right on `both`; the incumbent right on `total` of all."""
    mine = [1.0] * (wins + both) + [0.0] * (stage - wins - both)
    theirs = [0.0] * wins + [1.0] * (both + losses) + [0.0] * (stage - wins - both - losses)
    rest = total - both - losses
    theirs += [1.0] * rest + [0.0] * (n_items - stage - rest)
    return racing.clearly_worse(
        {str(i): s for i, s in enumerate(mine)},
        {str(i): s for i, s in enumerate(theirs)},
        n_items=n_items,
    )


def pbo_null(rng: Rng, draws: int) -> list[dict[str, str]]:
    """PBO's distribution over noise matrices (every design at 0.5) and with one design at 0.8,
    at the sizes the verdict meets; whether the verdict prints a PBO at that size."""
    rows = []
    for designs, items in SELECTION_SIZES:
        row = {"designs x items": f"{designs} x {items}"}
        for name, rates in (
            ("noise", np.full(designs, 0.5)),
            ("one 0.8", np.r_[0.8, np.full(designs - 1, 0.5)]),
        ):
            pbo = np.array(
                [
                    backtest_overfitting(
                        (rng.random((designs, items)) < rates[:, np.newaxis]).astype(np.float64),
                        seed=draw,
                    )
                    for draw in range(draws)
                ]
            )
            low, median, high = np.percentile(pbo, [10, 50, 90])
            row[f"{name}: mean"] = f"{pbo.mean():.2f}"
            row[f"{name}: 10th-50th-90th"] = f"{low:.2f}-{median:.2f}-{high:.2f}"
        row["printed"] = "yes" if selection_estimable(designs, items) else "no: too few"
        rows.append(row)
    return rows


def beats_agreement() -> list[dict[str, str]]:
    """For every split (wins, losses) of up to 30 discordant pairs, among a number of tied items:
    whether paired_difference's interval excludes 0 exactly when its p is below 0.05."""
    rows = []
    for ties in (0, 5, 20, 100):
        cases = agree = shown = 0
        for pairs in range(31):
            for wins in range(pairs + 1):
                if pairs + ties == 0:
                    continue
                a, b = _discordant(wins, pairs - wins, ties)
                result = paired_difference(a, b)
                beats = result.ci_low > 0 or result.ci_high < 0
                cases += 1
                shown += beats
                agree += beats == (result.p_value < 0.05)
        rows.append(
            {
                "tied items": str(ties),
                "splits": str(cases),
                "a difference shown": str(shown),
                "agree": str(agree),
                "agreement": f"{agree / cases:.1%}",
            }
        )
    return rows


def detectable_effects() -> list[dict[str, str]]:
    """The gain the paired 0/1 test shows with 80% power, by items and share of items on which
    the two designs differ ("-": none would be)."""
    shares = (0.1, 0.25, 0.5, 0.75)
    rows = []
    for n in (8, *NS):
        row = {"n": str(n)}
        for share in shares:
            pairs = round(share * n)
            gain = minimum_detectable_effect(
                *_discordant(pairs // 2, pairs - pairs // 2, n - pairs)
            )
            row[f"differ on {share:.0%}"] = "-" if gain is None else f"{gain:+.2f}"
        rows.append(row)
    return rows


def _discordant(wins: int, losses: int, ties: int) -> tuple[list[float], list[float]]:
    """Two 0/1 score lists with these counts of wins, losses and (both solved) ties."""
    return [1.0] * wins + [0.0] * losses + [1.0] * ties, [0.0] * wins + [1.0] * losses + [
        1.0
    ] * ties


def _paired_interval(n: int, wins: int, losses: int) -> tuple[float, float]:
    a = [1.0] * wins + [0.0] * (n - wins)
    b = [0.0] * wins + [1.0] * losses + [0.0] * (n - wins - losses)
    result = paired_difference(a, b)
    return result.ci_low, result.ci_high


def _coverage_row(n: int, covered: list[float]) -> dict[str, str]:
    return (
        {"n": str(n)}
        | {f"{rate}": f"{c:.3f}" for rate, c in zip(RATES, covered, strict=True)}
        | {"min": f"{min(covered):.3f}"}
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000, help="data sets per cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", help="run only the sections whose title holds this word")
    args = parser.parse_args()
    only = f" --only {args.only}" if args.only else ""
    print(f"$ .venv/bin/python bench/honesty.py --draws {args.draws} --seed {args.seed}{only}\n")
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    sections: list[tuple[str, Callable[[], list[dict[str, str]]]]] = [
        (
            "1. Coverage of summarize's 95% interval, 0/1 scores (Clopper-Pearson), by true rate",
            lambda: binary_coverage(rng, args.draws),
        ),
        (
            "2a. Coverage, continuous scores ~ Beta(2r, 2(1-r)) (U-shaped), by true mean r",
            lambda: continuous_coverage(rng, args.draws, 2.0),
        ),
        (
            "2b. Coverage, continuous scores ~ Beta(10r, 10(1-r)), by true mean r",
            lambda: continuous_coverage(rng, args.draws, 10.0),
        ),
        (
            f"3. Winner's curse among {DESIGNS} designs: mean (winner's observed score - its true"
            " rate), before and after subtracting winner_optimism",
            lambda: winners_curse(rng, args.draws),
        ),
        (
            f"4. Probability of backtest overfitting, best of {DESIGNS} designs (8 blocks)",
            lambda: overfitting(rng, args.draws),
        ),
        (
            "5. Coverage of paired_difference's 95% interval (Tango's, reaching 0 unless the "
            "exact McNemar test rejects), two correlated 0/1 designs, by true rates and "
            "correlation",
            lambda: paired_coverage(rng, args.draws),
        ),
        (
            "6. PBO on noise (every design at 0.5) and with one design at 0.8, by designs x "
            "items; printed: whether the verdict prints a PBO at that size",
            lambda: pbo_null(rng, args.draws),
        ),
        (
            f"9. Racing: share of candidates stopped before item {RACE_ITEMS}, and their mean"
            f" items, against an incumbent of true rate {RACE_INCUMBENT} chosen as the best of m"
            " designs of that rate on the same items; before: a paired test at alpha"
            f" {Racing().alpha} at every stage; after: the alpha (nominal: the chance of stopping"
            " a design as good) spent over the stages, against the incumbent's lower bound",
            lambda: racing_stops(rng, args.draws),
        ),
    ]
    exact: list[tuple[str, Callable[[], list[dict[str, str]]]]] = [
        (
            '7. "beats" (interval excludes 0) against p < 0.05, every split of 0-30 discordant '
            "pairs",
            beats_agreement,
        ),
        (
            "8. Minimum detectable effect of the paired 0/1 test (80% power, 95% confidence) by "
            "items n and the share of items on which the two designs differ",
            detectable_effects,
        ),
    ]
    for title, section in sections:
        if not args.only or args.only.lower() in title.lower():
            _print_section(title, section, how=f"{args.draws} draws per cell")
    for title, section in exact:
        if not args.only or args.only.lower() in title.lower():
            _print_section(title, section, how="exact")
    print(f"total {time.perf_counter() - started:.0f} s")


def _print_section(title: str, section: Callable[[], list[dict[str, str]]], *, how: str) -> None:
    started = time.perf_counter()
    # Tens of thousands of tiny matrix products: BLAS threads only contend for the cores.
    with threadpool_limits(limits=1):
        rows = section()
    print(f"{title} ({how}, {time.perf_counter() - started:.0f} s)")
    print(markdown_table(rows, right=[key for key in rows[0] if key != "n"]))
    if "min" in rows[0]:
        print(f"minimum coverage: {min(float(row['min']) for row in rows):.3f}")
    print()


if __name__ == "__main__":
    main()
