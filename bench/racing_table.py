"""Chooses racing's settings on a recorded table: rules, alphas and first stages on the same seeds.

    .venv/bin/python bench/racing_table.py TABLE [--model M] [--items FIRST:LAST] [--seeds 50]
        [--search-items 30] [--evaluations 20] [--strategies random mcts]
        [--rules bounds paired] [--alphas 0.1 0.2 0.3] [--first-stages 4 8] [--boot 1000]

Each strategy runs once unraced and once raced under each setting (`Racing(rule=, alpha=,
first_stage=)`), all on the same seeds' search items, in bench/strategies_table.py's replay of the
table. One table prints, per strategy and setting: racing's token saving at equal winner
accuracy, the share of raced runs that matched the unraced one's final design, the designs it
stopped, and the paired difference of the final reported designs' table accuracies (raced -
unraced, on the same budget), with 95% intervals from one bootstrap of items and seeds shared by
every row; and the most any rule could save at that setting's stages and alpha (`ceiling`: an
oracle that knows every design's table accuracy, bounded by the Neyman-Pearson test at each
stage), which says whether a saving target is within reach of racing on this table at all. A
setting chosen here is chosen on these items: confirm it on others (`--items` here, then
bench/strategies_table.py with the `--race-*` options on the items left) and report that.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from dataclasses import replace

import numpy as np
from _common import markdown_table
from strategies_table import (
    RACED,
    Bootstrap,
    Settings,
    Trace,
    add_table_arguments,
    heading,
    racing_figures,
    read_table,
    run_seed,
)

from agentdesign.benchmarking import ReplayTable
from agentdesign.components import AgentDesignError
from agentdesign.search import STRATEGIES, Racing


def ceiling(table: ReplayTable, racing: Racing, n_items: int) -> float:
    """The most any rule could save at `racing`'s stages and alpha: the share of the table's tokens
    (all designs once, each on `n_items` items) an oracle would leave unspent that knows every
    design's accuracy p (its table mean) and the best one's, q, and may drop a design as good as
    the best with a chance of at most alpha. Whatever rule stops a design by stage k, the chance it
    has is at most that of the most powerful test at level alpha of p = q against p < q on k
    items (Neyman-Pearson: at most c successes, randomized at c); a design stopped by stage k
    saves the items between stage k and the next, so these bound the saving stage by stage."""
    from scipy.stats import binom

    means = np.array([d.mean for d in table.designs])
    weights = np.array([d.tokens for d in table.designs], dtype=float)
    q = float(means.max())
    bounds = (*racing.stages(n_items), n_items)
    saved = np.zeros(len(means))
    for k, following in itertools.pairwise(bounds):
        c = int(binom.ppf(racing.alpha, k, q))  # the least c with P_q(X <= c) >= alpha
        below = float(binom.cdf(c - 1, k, q)) if c > 0 else 0.0
        at_c = float(binom.pmf(c, k, q))
        share = (racing.alpha - below) / at_c if at_c > 0 else 0.0  # randomized at c
        power = binom.cdf(c - 1, k, means) * (c > 0) + share * binom.pmf(c, k, means)
        saved += power * (following - k) / n_items
    return float(np.sum(weights * saved) / weights.sum())


def runs(table: ReplayTable, name: str, settings: Settings) -> list[Trace]:
    """`name`'s run on every seed, in seed order."""
    return [t for seed in range(settings.seeds) for t in run_seed(table, [name], seed, settings)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_table_arguments(parser)
    parser.add_argument("--strategies", nargs="+", default=["random", "mcts"])
    parser.add_argument("--rules", nargs="+", default=["bounds", "paired"])
    parser.add_argument("--alphas", nargs="+", type=float, default=[0.1, 0.2, 0.3])
    parser.add_argument("--first-stages", nargs="+", type=int, default=[4, 8])
    args = parser.parse_args()
    table, base = read_table(args)
    search_items = base.search_items
    try:
        settings = [
            Racing(rule=rule, alpha=alpha, first_stage=first)
            for rule, alpha, first in itertools.product(args.rules, args.alphas, args.first_stages)
        ]
    except AgentDesignError as exc:
        sys.exit(f"error: {exc}")
    unknown = [s for s in args.strategies if s not in STRATEGIES]
    if unknown:
        sys.exit(f"error: unknown strategies {', '.join(unknown)}")
    started = time.perf_counter()
    print(
        f"{heading(args, table)}; {args.seeds} seeds, {search_items} search items each, at least "
        f"{args.evaluations} evaluations a run; intervals: {args.boot} bootstrap draws of items "
        "and seeds, shared by every row\n"
    )
    boot = Bootstrap(
        np.array([d.scores for d in table.designs]), n_seeds=args.seeds, n_boot=args.boot
    )
    plain = {name: runs(table, name, base) for name in args.strategies}
    rows = []
    for racing in settings:
        stages = ", ".join(map(str, racing.stages(search_items))) or "none"
        most = f"{ceiling(table, racing, search_items):.0%}"  # the table's, whatever the strategy
        for name in args.strategies:
            race = runs(table, name + RACED, replace(base, racing=racing))
            rows.append(
                {
                    "strategy": name,
                    "rule": racing.rule,
                    "alpha": f"{racing.alpha:g}",
                    "stages": stages,
                    **racing_figures(plain[name], race, boot),
                    "the most any rule could save": most,
                }
            )
    print(markdown_table(rows))
    print(f"\n{time.perf_counter() - started:.0f} s wall")


if __name__ == "__main__":
    main()
