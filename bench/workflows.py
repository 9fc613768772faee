"""Each workflow with default components on the same GSM8K search items: score, tokens, seconds.

    .venv/bin/python bench/workflows.py [--model embedded/qwen2.5-coder-1.5b] [--items 20]
        [--workflows single program_of_thought ...] [--archive bench/results/workflows.sqlite]

Evaluates through the engine's own archive path, so a killed run resumes where it stopped and the
archive in bench/results/ keeps every task result and trace. Responses are not cached, so the
seconds are real model time on this machine; a task cut off by a kill is run again from scratch.
Prints a markdown table (the one in README "Measurements").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _common import evaluate, markdown_table, measures, search_tasks

from agentdesign.archive import Archive
from agentdesign.components import REGISTRY, default_chat_model, parse_spec
from agentdesign.evaluators import get_benchmark

# Cheapest first, so an interrupted sitting has measured the most workflows.
ORDER = (
    "single",
    "program_of_thought",
    "react",
    "self_refine",
    "plan_solve_verify",
    "self_consistency",
    "debate",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded/qwen2.5-coder-1.5b")
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--workflows", nargs="+", default=list(ORDER))
    parser.add_argument(
        "--archive", type=Path, default=Path(__file__).parent / "results" / "workflows.sqlite"
    )
    args = parser.parse_args()
    unknown = sorted(set(args.workflows) - set(REGISTRY.names("workflow")))
    if unknown:
        sys.exit(f"error: unknown workflow(s) {', '.join(unknown)}")
    benchmark = get_benchmark("gsm8k")
    tasks = search_tasks(benchmark, args.items)
    llm = default_chat_model(cache=False)
    rows = []
    with Archive(f"sqlite:///{args.archive}") as archive:
        for workflow in args.workflows:
            spec = parse_spec({"model": args.model, "components": {"workflow": {"name": workflow}}})
            evaluation, results = evaluate(archive, spec, benchmark, tasks, llm=llm, label=workflow)
            rows.append(
                {"workflow": workflow, **measures(evaluation, results), "agent": spec.spec_hash[:8]}
            )
    print(markdown_table(rows, right=("tokens/item", "calls/item", "s/item", "errors")))


if __name__ == "__main__":
    main()
