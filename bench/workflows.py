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

from agentdesign.archive import Archive, EvaluationRecord, evaluate_agent
from agentdesign.components import REGISTRY, AgentSpec, default_chat_model, parse_spec
from agentdesign.evaluators import TaskOutcome, examples_from_tasks, get_benchmark, make_split

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
    split = make_split([t.id for t in benchmark.tasks()], seed=0, n_search=args.items, n_holdout=0)
    tasks = benchmark.tasks_by_ids(split.search_ids)
    examples = examples_from_tasks(benchmark.train_examples())
    llm = default_chat_model(cache=False)
    rows = []
    with Archive(f"sqlite:///{args.archive}") as archive:
        for workflow in args.workflows:
            spec = parse_spec({"model": args.model, "components": {"workflow": {"name": workflow}}})
            evaluation = evaluate_agent(
                archive,
                spec,
                benchmark,
                tasks,
                llm=llm,
                split="search",
                train_examples=examples,
                on_start=lambda e, n, w=workflow: print(
                    f"{w}: {n}/{len(tasks)} done", file=sys.stderr, flush=True
                ),
                on_result=lambda o, w=workflow: print(
                    f"  {w} {o.task_id} score={o.score} {o.latency_s:.0f}s",
                    file=sys.stderr,
                    flush=True,
                ),
            )
            assert evaluation is not None  # nothing stops it part-way
            rows.append((workflow, spec, evaluation, archive.task_results(evaluation.id)))
    print(table(rows))


def table(rows: list[tuple[str, AgentSpec, EvaluationRecord, dict[str, TaskOutcome]]]) -> str:
    lines = [
        "| workflow | score [95% CI] | tokens/item | calls/item | s/item | errors | agent |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for workflow, spec, ev, results in rows:
        n = len(results)
        calls = sum(len(o.details.get("trace", [])) for o in results.values())
        errors = sum(o.error_kind is not None for o in results.values())
        lines.append(
            f"| {workflow} | {ev.mean:.2f} [{ev.ci_low:.2f}, {ev.ci_high:.2f}] "
            f"| {(ev.prompt_tokens + ev.completion_tokens) / n:,.0f} | {calls / n:.1f} "
            f"| {ev.wall_s / n:.1f} | {errors} | {spec.spec_hash[:8]} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
