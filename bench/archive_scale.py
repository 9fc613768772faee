"""Archive at scale: resuming a run of 10,000 agents, and leaderboard and Pareto queries at 100,000.

    .venv/bin/python bench/archive_scale.py [--resume-agents 10000] [--query-agents 100000]
        [--repeats 10] [--backends sqlite postgres]

Rows are bulk-inserted with executemany (the archive's own write path would take hours): first one
resumable run of `--resume-agents` complete agents, each with 10 task results that carry
a real trace (as bench/archive_write.py makes them), whose 3 best agents are already
confirmed on holdout. Resuming it is then timed as `agentdesign resume` does it: open the archive,
rebuild the run and its optuna study, check the budget (run_totals), find the budget spent, rank
the top agents and reuse their holdout confirmations, mark the run finished. The parts are timed
alone as well. Then more runs of as many agents are added, up to `--query-agents` (no task
results: no query reads them), spread over two benchmarks and four models, and the leaderboard and
Pareto queries are timed as the CLI makes them (3% of these evaluations are unfinished). The
target is under 100 ms per query.

SQLite writes a file in a temporary directory, PostgreSQL (AGENTDESIGN_TEST_POSTGRES_URL) a fresh
schema that is dropped afterwards and is ANALYZEd after each bulk insert, as autovacuum would.
Each timing is the mean and 95th percentile of `--repeats` calls, after one untimed call.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from functools import partial
from typing import Any

import numpy as np
from _common import BACKENDS, fake_llm, markdown_table, ms_cells, scratch_archive_url, search_tasks
from archive_write import agent_spec
from sqlalchemy import Engine, create_engine, insert, select

from agentdesign.archive import Archive
from agentdesign.archive.database._tables import AgentRow, EvaluationRow, RunEntryRow, TaskResultRow
from agentdesign.components import REGISTRY, build_agent, parse_spec
from agentdesign.evaluators import TaskOutcome, evaluate_tasks, get_benchmark
from agentdesign.search import Budget, RunConfig, resume_search
from agentdesign.search.study import Engine as SearchEngine

N_SEARCH = 10
MODELS = (
    "embedded/qwen2.5-coder-1.5b",
    "openai/gpt-4o-mini",
    "ollama/qwen2.5",
    "anthropic/claude-3-5-haiku-latest",
)
FREE_MODELS = frozenset({"embedded/qwen2.5-coder-1.5b", "ollama/qwen2.5"})
CHUNK = 5_000


def designs(start: int, count: int) -> Iterator[dict[str, Any]]:
    """Distinct valid specs: index `i` picks every component choice and cot's max_tokens."""
    slots = [(slot, REGISTRY.names(slot)) for slot in ("workflow", "memory", "tool", "planning")]
    for index in range(start, start + count):
        rest, components = index, {}
        for slot, names in slots:
            rest, choice = divmod(rest, len(names))
            components[slot] = {"name": names[choice]}
        components["reasoning"] = {"name": "cot", "params": {"max_tokens": 128 + rest % 897}}
        spec = parse_spec({"model": MODELS[index % len(MODELS)], "components": components})
        yield {"spec_hash": spec.spec_hash, "spec": spec.to_dict(), "model": spec.model}


def task_set(ids: Sequence[str]) -> str:
    """The archive's key of a task set (see Archive.get_or_create_evaluation)."""
    return hashlib.sha256(json.dumps(sorted(ids)).encode()).hexdigest()


def insert_chunked(engine: Engine, table: Any, rows: Sequence[dict[str, Any]]) -> None:
    with engine.begin() as conn:
        for at in range(0, len(rows), CHUNK):
            conn.execute(insert(table), list(rows[at : at + CHUNK]))


def analyze(engine: Engine) -> None:
    """Refreshes PostgreSQL's planner statistics, as its autovacuum does for an archive that grew
    over days (a bulk insert outruns it). SQLite gathers none unless told, nor does the archive."""
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")


def bulk_run(
    engine: Engine,
    *,
    run_id: int,
    benchmark: str,
    task_ids: Sequence[str],
    first_agent: int,
    count: int,
    complete_share: float,
    outcomes: Sequence[TaskOutcome],
    rng: np.random.Generator,
) -> None:
    """`count` agents with one search evaluation each (`complete_share` of them complete, the rest
    running), linked to the run, with `outcomes` as the task results of each."""
    now = datetime.now(UTC)
    agents = [{**a, "created_at": now} for a in designs(first_agent, count)]
    insert_chunked(engine, AgentRow.__table__, agents)
    n = len(task_ids)
    means = rng.integers(0, n + 1, count) / n
    prompt = rng.integers(200, 20_000, count) * n
    completion = rng.integers(50, 5_000, count) * n
    complete = rng.random(count) < complete_share
    evaluations = []
    for i, agent in enumerate(agents):
        free = agent["model"] in FREE_MODELS
        evaluations.append(
            {
                "agent_hash": agent["spec_hash"],
                "benchmark": benchmark,
                "task_set": task_set(task_ids),
                "task_ids": sorted(task_ids),
                "split": "search",
                "n_planned": n,
                "n_done": n if complete[i] else n // 2,
                "mean": float(means[i]) if complete[i] else None,
                "ci_low": max(0.0, float(means[i]) - 0.3) if complete[i] else None,
                "ci_high": min(1.0, float(means[i]) + 0.3) if complete[i] else None,
                "prompt_tokens": int(prompt[i]),
                "completion_tokens": int(completion[i]),
                "cost": 0.0 if free else float(prompt[i] * 1.5e-7 + completion[i] * 6e-7),
                "wall_s": float(completion[i]) / 50,
                "status": "complete" if complete[i] else "running",
                "created_at": now,
                "updated_at": now,
            }
        )
    insert_chunked(engine, EvaluationRow.__table__, evaluations)
    with engine.connect() as conn:
        ids = dict(
            conn.execute(
                select(EvaluationRow.agent_hash, EvaluationRow.id).where(
                    EvaluationRow.agent_hash.in_([a["spec_hash"] for a in agents])  # type: ignore[attr-defined]
                )
            ).all()
        )
    entries = [
        {
            "run_id": run_id,
            "agent_hash": a["spec_hash"],
            "evaluation_id": ids[a["spec_hash"]],
            "trial_number": number,
            "created_at": now,
        }
        for number, a in enumerate(agents)
    ]
    insert_chunked(engine, RunEntryRow.__table__, entries)
    values = [
        {**{f.name: getattr(o, f.name) for f in fields(o)}, "task_id": task_id}
        for task_id, o in zip(task_ids, outcomes, strict=False)
    ]
    for at in range(0, len(agents), CHUNK // max(1, len(values))):
        results = [
            {**v, "evaluation_id": ids[a["spec_hash"]], "created_at": now}
            for a in agents[at : at + CHUNK // max(1, len(values))]
            for v in values
        ]
        insert_chunked(engine, TaskResultRow.__table__, results)


def timed(call: Callable[[], object], repeats: int) -> list[float]:
    call()  # untimed: warms caches and the connection pool
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return seconds


def confirm_top(archive: Archive, run_name: str, holdout_ids: Sequence[str]) -> None:
    """Marks the run's top 3 as confirmed on holdout, as its first sitting would have left it."""
    for row in archive.leaderboard(run_name=run_name, limit=3):
        evaluation = archive.get_or_create_evaluation(
            agent_hash=row.agent_hash, benchmark="gsm8k", task_ids=holdout_ids, split="holdout"
        )
        archive.add_run_entry(
            run_name=run_name,
            agent_hash=row.agent_hash,
            evaluation_id=evaluation.id,
            trial_number=None,
        )
        for task_id in holdout_ids:
            archive.add_task_result(
                evaluation.id,
                TaskOutcome(task_id, "Answer: 3", "3", 1.0, 100, 20, 0.0, 1.0),
            )
        archive.finish_evaluation(
            evaluation.id, status="complete", mean=1.0, ci_low=1.0, ci_high=1.0
        )


def measure(
    url: str, args: argparse.Namespace, outcomes: Sequence[TaskOutcome]
) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    engine = create_engine(url)
    rng = np.random.default_rng(0)
    llm = fake_llm(latency_s=0.0)
    config = RunConfig.of(
        name="run-0",
        model=MODELS[0],
        strategy="random",
        budget=Budget(max_agents=args.resume_agents),
        n_search=N_SEARCH,
        n_holdout=5,
    )
    start = time.perf_counter()
    with Archive(url) as archive:
        run = SearchEngine(archive, config, llm=llm).run  # stored, with its split
        bulk_run(
            engine,
            run_id=run.id,
            benchmark="gsm8k",
            task_ids=run.search_task_ids,
            first_agent=0,
            count=args.resume_agents,
            complete_share=1.0,
            outcomes=outcomes,
            rng=rng,
        )
        analyze(engine)
        confirm_top(archive, "run-0", run.holdout_task_ids)
    setup_s = time.perf_counter() - start

    def resume() -> None:
        with Archive(url) as archive:
            summary = resume_search(archive, "run-0", llm=llm)
            assert summary.stop_reason.startswith("evaluated"), summary
            assert len(summary.holdout) == 3, summary

    with Archive(url) as archive:
        n_agents = archive.run_totals("run-0").n_agents
        size = f"{n_agents:,} agents"
        rows += [
            {
                "at": size,
                "operation": "resume_search (whole)",
                **ms_cells(timed(resume, args.repeats)),
            },
            {
                "at": size,
                "operation": "open Archive",
                **ms_cells(timed(lambda: Archive(url).close(), args.repeats)),
            },
            {
                "at": size,
                "operation": "run_totals(run)",
                **ms_cells(timed(lambda: archive.run_totals("run-0"), args.repeats)),
            },
            {
                "at": size,
                "operation": "leaderboard(run, top 3)",
                **ms_cells(
                    timed(lambda: archive.leaderboard(run_name="run-0", limit=3), args.repeats)
                ),
            },
        ]
    print(f"  set up {size} in {setup_s:.0f} s", flush=True)

    start = time.perf_counter()
    with Archive(url) as archive:
        run_ids = []
        for number in range(1, args.query_agents // args.resume_agents):
            stored = archive.create_run(
                name=f"run-{number}",
                benchmark=("gsm8k", "humaneval")[number % 2],
                model=MODELS[0],
                strategy="tpe",
                budget={"max_agents": args.resume_agents},
                config={},
                split_seed=number,
                search_task_ids=[f"t{number}-{k}" for k in range(N_SEARCH)],
                holdout_task_ids=[],
            )
            run_ids.append(stored)
    for number, stored in enumerate(run_ids, start=1):
        bulk_run(
            engine,
            run_id=stored.id,
            benchmark=stored.benchmark,
            task_ids=stored.search_task_ids,
            first_agent=number * args.resume_agents,
            count=args.resume_agents,
            complete_share=0.97,
            outcomes=(),
            rng=rng,
        )
    analyze(engine)
    print(
        f"  added {len(run_ids) * args.resume_agents:,} agents "
        f"in {time.perf_counter() - start:.0f} s",
        flush=True,
    )
    engine.dispose()
    queries: dict[str, Callable[[Archive], object]] = {
        "leaderboard(benchmark)": lambda a: a.leaderboard(benchmark="gsm8k"),
        "leaderboard(benchmark, model)": lambda a: a.leaderboard(
            benchmark="gsm8k", model=MODELS[1]
        ),
        "leaderboard(run)": lambda a: a.leaderboard(run_name="run-3"),
        "leaderboard(all)": lambda a: a.leaderboard(),
        "pareto(benchmark)": lambda a: a.pareto(benchmark="gsm8k"),
        "pareto(run)": lambda a: a.pareto(run_name="run-3"),
        "pareto(all)": lambda a: a.pareto(),
    }
    with Archive(url) as archive:
        size = f"{(len(run_ids) + 1) * args.resume_agents:,} agents"
        for name, query in queries.items():
            rows.append(
                {
                    "at": size,
                    "operation": name,
                    **ms_cells(timed(partial(query, archive), args.repeats)),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resume-agents", type=int, default=10_000)
    parser.add_argument("--query-agents", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    args = parser.parse_args()
    if args.resume_agents < 10 or args.query_agents % args.resume_agents:
        parser.error("--query-agents must be a multiple of --resume-agents (at least 10)")
    benchmark = get_benchmark("gsm8k")
    outcomes: list[TaskOutcome] = []
    evaluate_tasks(
        build_agent(agent_spec(0), llm=fake_llm(latency_s=0.0)),
        benchmark,
        search_tasks(benchmark, N_SEARCH),
        on_result=outcomes.append,
    )
    rows = []
    for backend in args.backends:
        print(f"{backend}:", flush=True)
        with scratch_archive_url(backend) as url:
            rows += [{"backend": backend, **row} for row in measure(url, args, outcomes)]
    print()
    print(markdown_table(rows, right=("n", "mean ms", "p95 ms")))


if __name__ == "__main__":
    main()
