"""Throughput of 1, 2 and 4 worker processes sharing one run on PostgreSQL, against a fake model.

    .venv/bin/python bench/workers.py [--workers 1 2 4] [--agents 24] [--tasks 5] [--latency 0.2]
        [--strategy random]

Each worker is its own process running `run_worker`, what `agentdesign worker` runs, with a
deterministic fake model that answers every call after `--latency` seconds, so the model's time and
not the 2 shared CPU cores bounds the work (each task of the quick space is one call). Every worker
count gets a fresh PostgreSQL schema (AGENTDESIGN_TEST_POSTGRES_URL, dropped afterwards) and the
same run: `--agents` designs of the quick space, `--tasks` GSM8K search items each, no holdout.
Throughput is agents completed and task results committed per unit of time, over the active span
(the archive's first evaluation to its last task result: process start-up left out) and over the
whole wall time. Ideal is linear in the workers. Also counted are the optuna trials the workers
opened: a trial that ends up on a design another worker already took is work proposed twice.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from _common import fake_llm, markdown_table, scratch_archive_url
from sqlalchemy import create_engine, func, select, text

from agentdesign.archive import Archive
from agentdesign.archive.database._tables import EvaluationRow, TaskResultRow
from agentdesign.search import Budget, RunConfig, run_worker, space_from_option

RUN = "bench-workers"


def work(url: str, agents: int, tasks: int, latency_s: float, strategy: str) -> None:
    """One worker process: joins (or starts) the run and works until its budget is spent."""
    quick = space_from_option("quick")
    config = RunConfig.of(
        name=RUN,
        model="fake/model",
        strategy=strategy,
        budget=Budget(max_agents=agents),
        n_search=tasks,
        n_holdout=0,
        choices=quick["choices"],
        limits=quick["limits"],
    )
    with Archive(url) as archive:
        run_worker(archive, config, llm=fake_llm(latency_s), heartbeat_s=1)


def measure(url: str, workers: int, args: argparse.Namespace) -> dict[str, str]:
    command = [sys.executable, __file__, "--worker-of", url]
    command += ["--agents", str(args.agents), "--tasks", str(args.tasks)]
    command += ["--latency", str(args.latency), "--strategy", args.strategy]
    start = time.perf_counter()
    processes = [
        subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(workers)
    ]
    for process in processes:
        _, err = process.communicate()
        if process.returncode != 0:
            sys.exit(f"error: a worker failed:\n{err}")
    wall_s = time.perf_counter() - start
    with Archive(url) as archive:
        n_agents = archive.run_totals(RUN).n_complete
    engine = create_engine(url)
    with engine.connect() as conn:
        first = conn.execute(select(func.min(EvaluationRow.created_at))).scalar_one()
        last, n_tasks = conn.execute(
            select(func.max(TaskResultRow.created_at), func.count(TaskResultRow.id))
        ).one()
        trials = conn.execute(text("SELECT count(*) FROM trials")).scalar_one()
    engine.dispose()
    active_s = (last - first).total_seconds()
    return {
        "workers": str(workers),
        "agents": str(n_agents),
        "task results": str(n_tasks),
        "trials": str(trials),
        "active s": f"{active_s:.1f}",
        "agents/min": f"{n_agents / active_s * 60:.1f}",
        "tasks/s": f"{n_tasks / active_s:.2f}",
        "wall s": f"{wall_s:.1f}",
        "tasks/s (wall)": f"{n_tasks / wall_s:.2f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--agents", type=int, default=24)
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    parser.add_argument("--strategy", default="random")
    parser.add_argument("--worker-of", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker_of is not None:
        work(args.worker_of, args.agents, args.tasks, args.latency, args.strategy)
        return
    rows = []
    for workers in args.workers:
        with scratch_archive_url("postgres") as url:
            rows.append(measure(url, workers, args))
        print(f"  {workers} worker(s): {rows[-1]['wall s']} s", file=sys.stderr, flush=True)
    ideal = args.agents * args.tasks * args.latency
    print(
        f"{args.agents} agents x {args.tasks} tasks, {args.latency} s per call: one worker needs "
        f"{ideal:.0f} s of model time\n"
    )
    print(markdown_table(rows, right=tuple(rows[0])))


if __name__ == "__main__":
    main()
