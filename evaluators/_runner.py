"""Runs an agent over benchmark tasks, reporting each task's outcome the moment it finishes.

The runner knows nothing of archives: the caller passes `on_result`, which is where results become
durable (the search layer commits each one to the archive), and the ids of tasks already done, which
are never run again.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from agentdesign.components import Agent, Example
from agentdesign.evaluators._benchmark import Benchmark, Task

__all__ = ["TaskOutcome", "evaluate_tasks", "examples_from_tasks", "run_task"]


@dataclass(frozen=True)
class TaskOutcome:
    """One task's result: what the agent said, its score, what it cost, and any error."""

    task_id: str
    output: str
    answer: str
    score: float
    prompt_tokens: int
    completion_tokens: int
    cost: float
    latency_s: float
    error_kind: str | None = None
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def examples_from_tasks(tasks: Sequence[Task]) -> list[Example]:
    """Training tasks as few-shot examples; a task's worked solution is its `rationale` metadata."""
    return [
        Example(
            question=t.question, answer=t.answer, rationale=str(t.metadata.get("rationale", ""))
        )
        for t in tasks
    ]


def run_task(agent: Agent, benchmark: Benchmark, task: Task) -> TaskOutcome:
    """Runs and scores one task; model failures and empty outputs score 0 and say why.

    An interactive task is played in the environment its benchmark provides and scores what the
    environment scored when the episode ended (`Episode`), a budget or model failure included.

    The details keep the scorer's findings and the task's full trace (every model and tool call
    with its tokens, cost, latency and error), so a result can be audited from the archive alone.
    """
    started = time.perf_counter()
    with benchmark.environment(task) as environment:
        result = agent.run(task.question, environment=environment)
    latency = time.perf_counter() - started
    details: dict[str, Any]
    if result.episode is not None:  # the environment's score, however the episode ended
        score, details = result.episode.score, {"episode": dataclasses.asdict(result.episode)}
        if result.error_kind is not None:
            details["error"] = result.error_kind
    elif result.error_kind is not None:
        score, details = 0.0, {"error": result.error_kind}
    else:
        scored = benchmark.score(task, result.output)
        score, details = scored.value, dict(scored.details)
    details["trace"] = [dataclasses.asdict(record) for record in result.trace]
    return TaskOutcome(
        task_id=task.id,
        output=result.output,
        answer=result.answer,
        score=score,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cost=result.cost,
        latency_s=latency,
        error_kind=result.error_kind,
        error=result.error,
        details=details,
    )


def evaluate_tasks(
    agent: Agent,
    benchmark: Benchmark,
    tasks: Sequence[Task],
    *,
    on_result: Callable[[TaskOutcome], None],
    done: Collection[str] = (),
    concurrency: int = 1,
    should_stop: Callable[[], bool] = lambda: False,
) -> list[TaskOutcome]:
    """Runs the tasks not in `done`, `concurrency` at a time, calling `on_result` for each.

    `on_result` runs in the calling thread, one outcome at a time, so it may write to a database
    connection that is not thread-safe. `should_stop` is checked before each task starts (a budget
    running out, or an early-stopping rule); tasks already started are finished and reported.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    pending = [t for t in tasks if t.id not in done]
    outcomes: list[TaskOutcome] = []
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        running: set[Future[TaskOutcome]] = set()
        while pending or running:
            while pending and len(running) < concurrency and not should_stop():
                running.add(pool.submit(run_task, agent, benchmark, pending.pop(0)))
            if not running:
                break
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                outcome = future.result()
                outcomes.append(outcome)
                on_result(outcome)
    return outcomes
