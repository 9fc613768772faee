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
every row. A setting chosen here is chosen on these items: confirm it on others (`--items` here,
then bench/strategies_table.py with the `--race-*` options on the items left) and report that.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from _common import markdown_table
from strategies_table import (
    RACED,
    Bootstrap,
    Settings,
    Trace,
    item_range,
    racing_figures,
    run_seed,
)

from agentdesign.benchmarking import ReplayTable
from agentdesign.components import AgentDesignError
from agentdesign.search import STRATEGIES, Racing


def runs(table: ReplayTable, name: str, settings: Settings) -> list[Trace]:
    """`name`'s run on every seed, in seed order."""
    return [t for seed in range(settings.seeds) for t in run_seed(table, [name], seed, settings)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", type=Path)
    parser.add_argument("--model", help="the table's model, where the file holds several")
    parser.add_argument("--items", metavar="FIRST:LAST", help="only these of the table's items")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--search-items", type=int, help="default: 30, or the table's items")
    parser.add_argument("--evaluations", type=int, default=20)
    parser.add_argument("--strategies", nargs="+", default=["random", "mcts"])
    parser.add_argument("--rules", nargs="+", default=["bounds", "paired"])
    parser.add_argument("--alphas", nargs="+", type=float, default=[0.1, 0.2, 0.3])
    parser.add_argument("--first-stages", nargs="+", type=int, default=[4, 8])
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap draws")
    args = parser.parse_args()
    try:
        table = ReplayTable.load(args.table, model=args.model)
        if args.items:
            table = table.subset(item_range(args.items, len(table.task_ids)))
        settings = [
            Racing(rule=rule, alpha=alpha, first_stage=first)
            for rule, alpha, first in itertools.product(args.rules, args.alphas, args.first_stages)
        ]
    except AgentDesignError as exc:
        sys.exit(f"error: {exc}")
    unknown = [s for s in args.strategies if s not in STRATEGIES]
    if unknown:
        sys.exit(f"error: unknown strategies {', '.join(unknown)}")
    n_items = len(table.task_ids)
    search_items = args.search_items or min(30, n_items)
    if not 2 <= search_items <= n_items or min(args.seeds, args.evaluations, args.boot) < 1:
        sys.exit(
            f"error: need 2 <= --search-items <= {n_items}, and --seeds, --evaluations, --boot >= 1"
        )
    started = time.perf_counter()
    base = Settings(
        seeds=args.seeds,
        search_items=search_items,
        evaluations=args.evaluations,
        strategies=tuple(args.strategies),
        boot=args.boot,
        value_reps=0,
        racing=Racing(),
    )
    print(
        f"{args.table.name}: {table.model}, {len(table.designs)} designs x {n_items} items "
        f"({args.items or 'all'}) of {table.benchmark}; {args.seeds} seeds, {search_items} search "
        f"items each, at least {args.evaluations} evaluations a run; intervals: {args.boot} "
        "bootstrap draws of items and seeds, shared by every row\n"
    )
    boot = Bootstrap(
        np.array([d.scores for d in table.designs]), n_seeds=args.seeds, n_boot=args.boot
    )
    plain = {name: runs(table, name, base) for name in args.strategies}
    rows = []
    for racing, name in itertools.product(settings, args.strategies):
        race = runs(table, name + RACED, replace(base, racing=racing))
        stages = ", ".join(map(str, racing.stages(search_items))) or "none"
        rows.append(
            {
                "strategy": name,
                "rule": racing.rule,
                "alpha": f"{racing.alpha:g}",
                "stages": stages,
                **racing_figures(plain[name], race, boot),
            }
        )
    print(markdown_table(rows))
    print(f"\n{time.perf_counter() - started:.0f} s wall")


if __name__ == "__main__":
    main()
