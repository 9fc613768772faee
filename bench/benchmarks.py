"""A chain-of-thought agent on each benchmark's search items: score, tokens, seconds, errors.

    .venv/bin/python bench/benchmarks.py [--model embedded/qwen2.5-coder-1.5b] [--items 20]
        [--benchmarks gsm8k humaneval ...] [--archive bench/results/benchmarks.sqlite] [--archived]

The agent is the default design with `cot` reasoning (single call); an interactive benchmark, any
registered one beyond the single-turn set below, gets the ReAct workflow instead. Items are the
seed-0 search split (no holdout). Evaluates through the engine's archive path, so a killed run
resumes where it stopped; responses are not cached, so seconds are real model time on this machine.
`--archived` only reads: it prints the evaluations the archive already holds and makes no model
call (a missing one is an error). Prints a markdown table (the one in README "Measurements"); each
score's 95% interval is recomputed from the task scores (`summarize`) and shows its method and n.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _common import (
    evaluate,
    interval_legend,
    markdown_table,
    measures,
    recorded,
    score_summary,
    search_tasks,
)

from agentdesign.archive import Archive
from agentdesign.components import default_chat_model, parse_spec
from agentdesign.evaluators import available_benchmarks, get_benchmark

# Single-turn benchmarks, cheapest first; "bfcl" is left out as the union of its categories.
SINGLE_TURN = ("bfcl-irrelevance", "bfcl-simple", "bfcl-multiple", "gsm8k", "humaneval")
POOLED = ("bfcl",)


def main() -> None:
    registered = available_benchmarks()
    interactive = [name for name in registered if name not in SINGLE_TURN + POOLED]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded/qwen2.5-coder-1.5b")
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument(
        "--benchmarks",
        nargs="+",
        default=[*SINGLE_TURN, *interactive],
        choices=sorted(registered),
        metavar="NAME",
    )
    parser.add_argument(
        "--archive", type=Path, default=Path(__file__).parent / "results" / "benchmarks.sqlite"
    )
    parser.add_argument(
        "--archived",
        action="store_true",
        help="report the archive's complete evaluations only: no model call",
    )
    args = parser.parse_args()
    llm = default_chat_model(cache=False)  # loads nothing until a call
    rows, summaries = [], []
    with Archive(f"sqlite:///{args.archive}") as archive:
        for name in args.benchmarks:
            benchmark = get_benchmark(name)
            workflow = "react" if name in interactive else "single"
            spec = parse_spec(
                {
                    "model": args.model,
                    "components": {"workflow": {"name": workflow}, "reasoning": {"name": "cot"}},
                }
            )
            tasks = search_tasks(benchmark, args.items)
            if args.archived:
                found = recorded(archive, spec.spec_hash, benchmark, tasks)
                if found is None:
                    sys.exit(f"error: {args.archive} has no complete evaluation of {name}")
                evaluation, results = found
            else:
                evaluation, results = evaluate(archive, spec, benchmark, tasks, llm=llm, label=name)
            summary = score_summary(results)
            summaries.append(summary)
            rows.append(
                {"benchmark": name, "agent": workflow, **measures(evaluation, results, summary)}
            )
    print(markdown_table(rows, right=("tokens/item", "calls/item", "s/item")))
    print()
    print(interval_legend(summaries))


if __name__ == "__main__":
    main()
