"""What the bench scripts share: the search items, archive-backed evaluation, score intervals
recomputed from task scores, markdown tables, scratch archives on SQLite or PostgreSQL, a fake model
with a fixed latency, timing cells."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from sqlalchemy import create_engine, make_url, text

from agentdesign.archive import Archive, EvaluationRecord
from agentdesign.components import AgentSpec, ChatModel
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import (
    Benchmark,
    ScoreSummary,
    Task,
    TaskOutcome,
    examples_from_tasks,
    make_split,
    summarize,
)
from agentdesign.evaluators.stats._stats import BOOTSTRAP, EXACT
from agentdesign.search import evaluate_agent


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


def recorded(
    archive: Archive, spec_hash: str, benchmark: Benchmark, tasks: Sequence[Task]
) -> tuple[EvaluationRecord, dict[str, TaskOutcome]] | None:
    """The complete evaluation of agent `spec_hash` on exactly `tasks`, without running or writing
    anything (for --archived): None when the archive holds none."""
    found = [
        evaluation
        for evaluation, _ in archived(archive, benchmark, tasks)
        if evaluation.agent_hash == spec_hash
    ]
    return (found[0], archive.task_results(found[0].id)) if found else None


def archived(
    archive: Archive, benchmark: Benchmark, tasks: Sequence[Task]
) -> list[tuple[EvaluationRecord, Mapping[str, object]]]:
    """Every complete search evaluation on exactly `tasks`, oldest first, with its agent's spec as
    stored (an older design may no longer parse); reads only."""
    ids = tuple(sorted(t.id for t in tasks))
    rows = archive.leaderboard(benchmark=benchmark.name, split="search", limit=100_000)
    return sorted(
        (
            (archive.get_evaluation(row.evaluation_id), row.spec)
            for row in rows
            if tuple(sorted(row.task_ids)) == ids
        ),
        key=lambda pair: pair[0].id,
    )


def score_summary(results: Mapping[str, TaskOutcome]) -> ScoreSummary:
    """Mean and 95% interval recomputed from the task scores (`summarize`), not the interval an
    evaluation stored: archives written before the intervals were mended store a percentile
    bootstrap, which shows [1.00, 1.00] for 8 of 8."""
    return summarize([results[task_id].score for task_id in sorted(results)])


# Short names of `summarize`'s interval methods for table cells; `interval_legend` spells them out.
_METHOD_NAMES = {
    EXACT: ("CP", "Clopper-Pearson (0/1 scores)"),
    BOOTSTRAP: (
        "boot",
        "widest of BCa bootstrap, t and edge-floor intervals (partial-credit scores)",
    ),
}


def score_cell(summary: ScoreSummary) -> str:
    """`0.50 [0.27, 0.73] CP n=20`: mean, 95% interval, its method and the items it rests on."""
    short = _METHOD_NAMES.get(summary.method, (summary.method, ""))[0]
    return f"{summary.mean:.2f} [{summary.ci_low:.2f}, {summary.ci_high:.2f}] {short} n={summary.n}"


def interval_legend(summaries: Sequence[ScoreSummary]) -> str:
    """The line under a table that names the interval methods its cells use."""
    methods = sorted({s.method for s in summaries})
    names = [
        f"{short} = {long}" if long else short
        for short, long in (_METHOD_NAMES.get(m, (m, "")) for m in methods)
    ]
    return f"95% intervals: {'; '.join(names)}; n = items scored."


def measures(
    evaluation: EvaluationRecord, results: Mapping[str, TaskOutcome], summary: ScoreSummary
) -> dict[str, str]:
    """The table cells of one evaluation: its score `summary` (see `score_summary`), per-item
    costs, errors."""
    n = len(results)
    calls = sum(len(o.details.get("trace", [])) for o in results.values())
    kinds = Counter(o.error_kind for o in results.values() if o.error_kind is not None)
    errors = str(sum(kinds.values()))
    if kinds:
        errors += " (" + ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items())) + ")"
    tokens = evaluation.prompt_tokens + evaluation.completion_tokens
    return {
        "score [95% CI] method n": score_cell(summary),
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


@contextmanager
def child_server(command: Sequence[str]) -> Iterator[str]:
    """The base URL of a loopback server that `command` starts in a child process (it prints its
    port on its first line), stopped on the way out."""
    process = subprocess.Popen(list(command), stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def server_stats(url: str) -> dict[str, Any]:
    """What a child server counted, from its `/stats` page."""
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=10) as response:
        stats: dict[str, Any] = json.load(response)
    return stats

