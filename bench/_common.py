"""What the bench scripts share: the search items, archive-backed evaluation, markdown tables,
scratch archives on SQLite or PostgreSQL, a fake model with a fixed latency, timing cells."""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np
from sqlalchemy import create_engine, make_url, text

from agentdesign.archive import Archive, EvaluationRecord, evaluate_agent
from agentdesign.components import AgentSpec, ChatModel, FakeChatModel
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


# The server the archive tests use (see tests/conftest.py); the bench scripts share it.
POSTGRES_URL = os.environ.get(
    "AGENTDESIGN_TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
)
BACKENDS = ("sqlite", "postgres")


@contextmanager
def scratch_archive_url(backend: str) -> Iterator[str]:
    """The URL of an empty database that is gone afterwards: a SQLite file in a temporary
    directory, or a fresh PostgreSQL schema, dropped at the end (close every Archive first)."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="agentdesign-bench-") as directory:
            yield f"sqlite:///{directory}/archive.db"
        return
    engine = create_engine(POSTGRES_URL)
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with engine.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


def _worked_answer(
    model: str, messages: Sequence[Mapping[str, str]], temperature: float, seed: int | None
) -> str:
    """A chain of thought of typical length that ends in an answer: the same for the same prompt."""
    words = messages[-1]["content"].split()
    number = len(words) % 50 + 2
    return (
        f"Let's think step by step. The question gives {len(words)} words of facts. "
        f"First we take the quantities in order and add the parts that belong together, "
        f"then we check the units and the total once more before we answer. "
        f"Adding them up gives {number}. Answer: {number}"
    )


def fake_llm(latency_s: float) -> FakeChatModel:
    """A deterministic model that answers every prompt after `latency_s` seconds."""
    return FakeChatModel(_worked_answer, latency_s=latency_s)


def ms_cells(seconds: Sequence[float]) -> dict[str, str]:
    """Mean and 95th percentile of timings, in milliseconds."""
    ms = np.asarray(seconds) * 1000
    return {
        "n": f"{len(ms):,}",
        "mean ms": f"{ms.mean():.2f}",
        "p95 ms": f"{np.percentile(ms, 95):.2f}",
    }
