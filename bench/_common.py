"""What the bench scripts share: the search items, archive-backed evaluation, markdown tables."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence

from agentdesign.archive import Archive, EvaluationRecord, evaluate_agent
from agentdesign.components import AgentSpec, ChatModel
from agentdesign.evaluators import (
    Benchmark,
    Task,
    TaskOutcome,
    examples_from_tasks,
    make_split,
)


def search_tasks(benchmark: Benchmark, items: int) -> tuple[Task, ...]:
    """The first `items` search items of the seed-0 split: the same items for every script."""
    split = make_split([t.id for t in benchmark.tasks()], seed=0, n_search=items, n_holdout=0)
    return benchmark.tasks_by_ids(split.search_ids)


def evaluate(
    archive: Archive,
    spec: AgentSpec,
    benchmark: Benchmark,
    tasks: Sequence[Task],
    *,
    llm: ChatModel,
    label: str,
) -> tuple[EvaluationRecord, dict[str, TaskOutcome]]:
    """Evaluates through the engine's archive path (resumable), printing progress to stderr."""
    evaluation = evaluate_agent(
        archive,
        spec,
        benchmark,
        tasks,
        llm=llm,
        split="search",
        train_examples=examples_from_tasks(benchmark.train_examples()),
        on_start=lambda e, n: print(f"{label}: {n}/{len(tasks)} done", file=sys.stderr, flush=True),
        on_result=lambda o: print(
            f"  {label} {o.task_id} score={o.score} {o.latency_s:.0f}s"
            + (f" error={o.error_kind}" if o.error_kind else ""),
            file=sys.stderr,
            flush=True,
        ),
    )
    assert evaluation is not None  # nothing stops it part-way
    return evaluation, archive.task_results(evaluation.id)


def measures(evaluation: EvaluationRecord, results: dict[str, TaskOutcome]) -> dict[str, str]:
    """The table cells of one evaluation: score with its 95% interval, per-item costs, errors."""
    n = len(results)
    calls = sum(len(o.details.get("trace", [])) for o in results.values())
    kinds = Counter(o.error_kind for o in results.values() if o.error_kind is not None)
    errors = str(sum(kinds.values()))
    if kinds:
        errors += " (" + ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items())) + ")"
    tokens = evaluation.prompt_tokens + evaluation.completion_tokens
    return {
        "score [95% CI]": (
            f"{evaluation.mean:.2f} [{evaluation.ci_low:.2f}, {evaluation.ci_high:.2f}]"
        ),
        "tokens/item": f"{tokens / n:,.0f}",
        "calls/item": f"{calls / n:.1f}",
        "s/item": f"{evaluation.wall_s / n:.1f}",
        "errors": errors,
    }


def markdown_table(rows: Sequence[dict[str, str]], *, right: Sequence[str] = ()) -> str:
    """A markdown table of rows sharing keys; columns named in `right` are right-aligned."""
    header = list(rows[0])
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---:" if h in right else "---" for h in header) + " |",
    ]
    lines += ["| " + " | ".join(row[h] for h in header) + " |" for row in rows]
    return "\n".join(lines)
