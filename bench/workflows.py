"""Each workflow with default components on the same GSM8K search items: score, tokens, seconds.

    .venv/bin/python bench/workflows.py [--model embedded/qwen2.5-coder-1.5b] [--items 20]
        [--workflows single program_of_thought ...] [--archive bench/results/workflows.sqlite]
        [--archived]

Evaluates through the engine's own archive path, so a killed run resumes where it stopped and the
archive in bench/results/ keeps every task result and trace. Responses are not cached, so the
seconds are real model time on this machine; a task cut off by a kill is run again from scratch.
`--archived` only reads: it prints every complete evaluation of the chosen workflows that the
archive holds on these items, older versions of a design included (the agent column tells them
apart), and makes no model call. Prints a markdown table (the one in README "Measurements"); each
score's 95% interval is recomputed from the task scores (`summarize`) and shows its method and n.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from _common import (
    archived,
    evaluate,
    interval_legend,
    markdown_table,
    measures,
    score_summary,
    search_tasks,
)

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
    parser.add_argument(
        "--archived",
        action="store_true",
        help="report the archive's complete evaluations only: no model call",
    )
    args = parser.parse_args()
    unknown = sorted(set(args.workflows) - set(REGISTRY.names("workflow")))
    if unknown:
        sys.exit(f"error: unknown workflow(s) {', '.join(unknown)}")
    benchmark = get_benchmark("gsm8k")
    tasks = search_tasks(benchmark, args.items)
    llm = default_chat_model(cache=False)  # loads nothing until a call
    rows, summaries = [], []
    with Archive(f"sqlite:///{args.archive}") as archive:
        stored = archived(archive, benchmark, tasks) if args.archived else []
        for workflow in args.workflows:
            if args.archived:
                found = [
                    evaluation
                    for evaluation, spec in stored
                    if _workflow_name(spec) == workflow and spec.get("model") == args.model
                ]
                if not found:
                    sys.exit(f"error: {args.archive} has no complete evaluation of {workflow}")
            else:
                spec = parse_spec(
                    {"model": args.model, "components": {"workflow": {"name": workflow}}}
                )
                evaluation, _ = evaluate(archive, spec, benchmark, tasks, llm=llm, label=workflow)
                found = [evaluation]
            for evaluation in found:
                results = archive.task_results(evaluation.id)
                summary = score_summary(results)
                summaries.append(summary)
                cells = measures(evaluation, results, summary)
                rows.append({"workflow": workflow, **cells, "agent": evaluation.agent_hash[:8]})
    print(markdown_table(rows, right=("tokens/item", "calls/item", "s/item", "errors")))
    print()
    print(interval_legend(summaries))


def _workflow_name(spec: Mapping[str, object]) -> str | None:
    """The workflow of a spec as the archive stored it."""
    components = spec.get("components")
    workflow = components.get("workflow") if isinstance(components, dict) else None
    return workflow.get("name") if isinstance(workflow, dict) else None


if __name__ == "__main__":
    main()
