"""Compares search strategies on a replay table over many seeds, and the value model's accuracy.

    .venv/bin/python bench/search_strategies.py bench/results/replay_gsm8k.json [--seeds 20]
        [--strategies random tpe nsga2 mcts evolution] [--budget 60] [--model M]

Every evaluation is answered from the table (see agentdesign/search/_replay.py for how proposals
map to table designs). Prints, per strategy, over the seeds: evaluations needed to reach the
table's best design and its top 5% (median, and in how many seeds within --budget), the mean best
score after 10/20/30 evaluations, and tokens spent after 30. The first row, `shuffled`, takes the
table's designs in random order with no mapping: the no-information baseline. Then the value
model's accuracy on held-out designs after 10, 20 and 30 labelled designs: Spearman rank
correlation with real scores, the share of real scores inside its 95% interval (calibration), and
mean absolute error; and the table's split-half reliability, which bounds that correlation.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from agentdesign.benchmarking import (
    ReplayResult,
    ReplayTable,
    held_out_accuracy,
    replay_search,
    shuffled_replay,
    split_half_reliability,
)
from agentdesign.components import AgentDesignError
from agentdesign.search import STRATEGIES

CHECKPOINTS = (10, 20, 30)


def _reach(results: list[ReplayResult], targets: frozenset[str]) -> str:
    reached = [n for r in results if (n := r.evaluations_to(targets)) is not None]
    median = f"{statistics.median(reached):.0f}" if reached else "-"
    return f"{median} ({len(reached)}/{len(results)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", type=Path)
    parser.add_argument("--model", help="the table's model, where the file holds several")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES))
    parser.add_argument("--budget", type=int, default=None, help="evaluations (default: all)")
    args = parser.parse_args()
    try:
        table = ReplayTable.load(args.table, model=args.model)
    except AgentDesignError as exc:
        sys.exit(f"error: {exc}")
    unknown = sorted(set(args.strategies) - set(STRATEGIES))
    if unknown:
        sys.exit(f"error: unknown strategies {', '.join(unknown)}")
    budget = min(args.budget or len(table.designs), len(table.designs))
    if table.synthetic:
        print("SYNTHETIC TABLE: made-up scores for development, NOT a measurement\n")
    best, top5 = table.top(0.0), table.top(0.05)
    print(
        f"{args.table}: {len(table.designs)} designs x {len(table.task_ids)} tasks, "
        f"{table.model}; best {table.ranked()[0].mean:.3f} ({len(best)} designs), "
        f"top 5%: {len(top5)} designs; {args.seeds} seeds, budget {budget} evaluations\n"
    )
    header = ["strategy", "evals to best", "evals to top 5%"]
    header += [f"best@{n}" for n in CHECKPOINTS] + ["tokens@30", "s/seed"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for strategy in ["shuffled", *args.strategies]:
        started = time.perf_counter()
        results = [
            shuffled_replay(table, seed=seed, n_evaluations=budget)
            if strategy == "shuffled"
            else replay_search(table, strategy, seed=seed, n_evaluations=budget)
            for seed in range(args.seeds)
        ]
        seconds = (time.perf_counter() - started) / args.seeds
        cells = [strategy, _reach(results, best), _reach(results, top5)]
        cells += [f"{statistics.mean(r.best_after(n) for r in results):.3f}" for n in CHECKPOINTS]
        cells += [f"{statistics.mean(r.tokens_after(30) for r in results):,.0f}", f"{seconds:.1f}"]
        print("| " + " | ".join(cells) + " |", flush=True)
    print("\nvalue model on held-out designs (mean over seeds):")
    print("| labelled designs | Spearman rho | 95% coverage | mean abs error |")
    print("|---|---|---|---|")
    for n in CHECKPOINTS:
        if n < len(table.designs) - 2:
            reports = [held_out_accuracy(table, n_labelled=n, seed=s) for s in range(args.seeds)]
            cells = [
                statistics.mean(getattr(r, field) for r in reports)
                for field in ("spearman", "coverage_95", "mean_abs_error")
            ]
            print(f"| {n} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    reliability = split_half_reliability(table)
    print(
        f"\nsplit-half reliability of the table's scores (Spearman-Brown, 200 splits): "
        f"{reliability:.3f}; a value model's rho with them can hardly exceed "
        f"{max(reliability, 0.0) ** 0.5:.3f}"
    )


if __name__ == "__main__":
    main()
