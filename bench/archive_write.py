"""Archive write cost per agent and per task result, on SQLite and on PostgreSQL.

    .venv/bin/python bench/archive_write.py [--agents 50] [--tasks 10] [--backends sqlite postgres]

Per agent is what the search loop writes before an agent's first task: add_agent,
get_or_create_evaluation and add_run_entry (timed together); per task result is add_task_result,
which the runner calls the moment each task ends; finish_evaluation closes each agent. The task
results are real runner outcomes: a self_refine agent answers GSM8K search items through a fake
model that replies at once, so each result carries the trace of its calls, prompts included, as a
search stores it. SQLite writes a file in a temporary directory; PostgreSQL
(AGENTDESIGN_TEST_POSTGRES_URL, default postgresql+psycopg2://postgres@127.0.0.1:5432/test) a
fresh schema that is dropped afterwards. Prints a markdown table of mean and 95th-percentile ms.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence

from _common import BACKENDS, fake_llm, markdown_table, ms_cells, scratch_archive_url, search_tasks

from agentdesign.archive import Archive
from agentdesign.components import AgentSpec, build_agent, parse_spec
from agentdesign.evaluators import TaskOutcome, evaluate_tasks, get_benchmark


def agent_spec(index: int) -> AgentSpec:
    """The `index`-th of a family of distinct self_refine designs (they differ in max_tokens)."""
    return parse_spec(
        {
            "model": "fake/model",
            "components": {
                "workflow": {"name": "self_refine", "params": {"max_rounds": 1}},
                "reasoning": {"name": "cot", "params": {"max_tokens": 128 + index}},
            },
        }
    )


def measure(
    url: str, specs: Sequence[AgentSpec], outcomes: Sequence[TaskOutcome]
) -> dict[str, list[float]]:
    """Seconds each write took, by kind of write, for every agent and its task results."""
    timings: dict[str, list[float]] = {"agent": [], "task result": [], "finish evaluation": []}
    task_ids = [o.task_id for o in outcomes]
    with Archive(url) as archive:
        archive.create_run(
            name="bench",
            benchmark="gsm8k",
            model="fake/model",
            strategy="random",
            budget={"max_agents": len(specs)},
            config={},
            split_seed=0,
            search_task_ids=task_ids,
            holdout_task_ids=[],
        )
        for number, spec in enumerate(specs):
            start = time.perf_counter()
            archive.add_agent(spec=spec.to_dict(), spec_hash=spec.spec_hash)
            evaluation = archive.get_or_create_evaluation(
                agent_hash=spec.spec_hash, benchmark="gsm8k", task_ids=task_ids, split="search"
            )
            archive.add_run_entry(
                run_name="bench",
                agent_hash=spec.spec_hash,
                evaluation_id=evaluation.id,
                trial_number=number,
                max_agents=len(specs),
            )
            timings["agent"].append(time.perf_counter() - start)
            for outcome in outcomes:
                start = time.perf_counter()
                assert archive.add_task_result(evaluation.id, outcome)
                timings["task result"].append(time.perf_counter() - start)
            mean = sum(o.score for o in outcomes) / len(outcomes)
            start = time.perf_counter()
            archive.finish_evaluation(
                evaluation.id, status="complete", mean=mean, ci_low=0.0, ci_high=1.0
            )
            timings["finish evaluation"].append(time.perf_counter() - start)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=10, help="task results per agent")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    args = parser.parse_args()
    benchmark = get_benchmark("gsm8k")
    specs = [agent_spec(i) for i in range(args.agents)]
    outcomes: list[TaskOutcome] = []
    agent = build_agent(specs[0], llm=fake_llm(latency_s=0.0))
    evaluate_tasks(agent, benchmark, search_tasks(benchmark, args.tasks), on_result=outcomes.append)
    calls = sum(len(o.details["trace"]) for o in outcomes) / len(outcomes)
    size = sum(len(json.dumps(o.details)) for o in outcomes) / len(outcomes)
    rows = []
    for backend in args.backends:
        with scratch_archive_url(backend) as url:
            timings = measure(url, specs, outcomes)
        rows += [{"backend": backend, "write": kind, **ms_cells(s)} for kind, s in timings.items()]
    print(
        f"{args.agents} agents x {len(outcomes)} task results; each result's trace has "
        f"{calls:.1f} calls, {size / 1024:.1f} KiB of details JSON\n"
    )
    print(markdown_table(rows, right=("n", "mean ms", "p95 ms")))


if __name__ == "__main__":
    main()
