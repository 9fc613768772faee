"""Runs an agent over benchmark tasks, reporting each task's outcome the moment it finishes.

The runner knows nothing of archives: the caller passes `on_result`, which is where results become
durable (the search layer commits each one to the archive), and the ids of tasks already done, which
are never run again.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from agentdesign.components import (
    Agent,
    AgentDesignError,
    CallRecord,
    Example,
    ThrottleClock,
    pending_model_call,
    provider_name,
    throttle_clock,
    trace_span,
    tracing_on,
)
from agentdesign.evaluators._benchmark import Benchmark, Task

# Rate-limit waits shorter than this are a limiter's bookkeeping, not worth a word in an error.
_HELD_WORTH_SAYING_S = 0.1

__all__ = ["TaskOutcome", "check_concurrency", "evaluate_tasks", "examples_from_tasks", "run_task"]


@dataclass(frozen=True)
class TaskOutcome:
    """One task's result: what the agent said, its score, what it cost, and any error.

    `error_kind` is None for a task judged on its merits; otherwise it scores 0 (or what the scorer
    gave) and says why: the agent's own kinds, "llm" (the provider rejected a model call the
    design made), "budget" (the task's call or token budget ran out) and "empty_output"; the
    runner's "timeout"; and the scorer's "parse" (no answer in the expected form) and "sandbox"
    (code killed by the sandbox). "provider" (the provider failed a call, even after the retries,
    or the runner's timeout came while the provider was failing one) is the one kind that is no
    score: `evaluate_agent` records it apart, and the task runs again. `latency_s` is the task's
    seconds, a model reply served from the response cache counted at the seconds it took when it
    ran (so that it is what the design costs).
    """

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


def run_task(
    agent: Agent, benchmark: Benchmark, task: Task, *, timeout_s: float | None = None
) -> TaskOutcome:
    """Runs and scores one task; failures score 0 and say why (see `TaskOutcome.error_kind`).

    An interactive task is played in the environment its benchmark provides and scores what the
    environment scored when the episode ended (`Episode`), a budget or model failure included.

    The details keep the scorer's findings and the task's full trace (every model and tool call
    with its tokens, cost, latency and error), so a result can be audited from the archive alone.

    With `timeout_s`, a task not finished after that many seconds is recorded as a "timeout" and
    the caller moves on. Python cannot kill a thread, so the abandoned task goes on in a daemon
    thread until its workflow ends (each call still bounded by the task budget): its tokens are
    not counted and its result is dropped, an embedded model stays busy with it (the next task
    may wait for the model), and it never keeps the process from exiting.

    The time limit does not count the seconds the task's model calls spent held back by rate
    limits (the provider's, or the run's own `rpm`/`tpm` caps; `ThrottleClock`): a throttled
    provider slows the task, it does not make it the design's timeout. The retry budget bounds
    those waits, and past it the call fails as a provider failure.

    A task that times out while it waits on a provider's answer is no score if the provider was
    failing that call: the runner waits for the call's try in flight to end (its deadline, the
    LLM timeout, bounds the wait), and a try that fails, or one that failed before, makes the
    task a "provider" failure; a try that answers leaves it a "timeout", the design's slowness.

    While tracing is on (`tracing_on`), the task is an `invoke_agent` span, the parent of the
    spans of its model and tool calls, whichever thread runs them.
    """
    if not tracing_on():
        return _run_task(agent, benchmark, task, timeout_s)
    spec = agent.spec
    design = spec.describe()
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": provider_name(spec.model),
        "gen_ai.request.model": spec.model,
        "gen_ai.agent.name": design,
        "gen_ai.agent.id": spec.spec_hash,
        "agentdesign.benchmark": benchmark.name,
        "agentdesign.task.id": task.id,
    }
    with trace_span(f"invoke_agent {design}", attributes) as span:
        outcome = _run_task(agent, benchmark, task, timeout_s)
        span.set(
            {
                "gen_ai.usage.input_tokens": outcome.prompt_tokens,
                "gen_ai.usage.output_tokens": outcome.completion_tokens,
                "agentdesign.task.score": outcome.score,
                "agentdesign.cost_usd": outcome.cost,
                "agentdesign.task.error_kind": outcome.error_kind,
            }
        )
        if outcome.error_kind is not None:
            span.fail(outcome.error_kind, outcome.error)
    return outcome


def _run_task(
    agent: Agent, benchmark: Benchmark, task: Task, timeout_s: float | None
) -> TaskOutcome:
    if timeout_s is None:
        return _run_and_score(agent, benchmark, task)
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    started = time.perf_counter()
    future: Future[TaskOutcome] = Future()
    clock = ThrottleClock()

    def work() -> None:
        try:
            with throttle_clock(clock):
                future.set_result(_run_and_score(agent, benchmark, task))
        except BaseException as exc:  # handed to the waiting thread, which re-raises it
            future.set_exception(exc)

    # in this thread's context, so that the task's spans are children of the current one
    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(work,), name=f"task {task.id}", daemon=True
    )
    thread.start()
    while (left := timeout_s + clock.seconds() - (time.perf_counter() - started)) > 0:
        if wait([future], timeout=left).done:
            return future.result()
    held_s = clock.seconds()
    error_kind, error = "timeout", f"no result after {timeout_s:g} s"
    if held_s >= _HELD_WORTH_SAYING_S:
        error += f" of its own (and {held_s:.1f} s held back by rate limits)"
    call = pending_model_call(thread.ident)
    failure = call.provider_failure() if call is not None else None
    if failure is not None:
        error_kind, error = "provider", f"{error}, waiting on a model call: {failure}"
    return TaskOutcome(
        task_id=task.id,
        output="",
        answer="",
        score=0.0,
        prompt_tokens=0,
        completion_tokens=0,
        cost=0.0,
        latency_s=time.perf_counter() - started,
        error_kind=error_kind,
        error=error,
        details={"error": error_kind},
    )


def _run_and_score(agent: Agent, benchmark: Benchmark, task: Task) -> TaskOutcome:
    started = time.perf_counter()
    with benchmark.environment(task) as environment:
        key = functools.partial(benchmark.answer_key, task)
        result = agent.run(task.question, environment=environment, answer_key=key)
    # A reply from the response cache takes no time now: it counts at the seconds it took when it
    # ran, so that a task's seconds are what the design costs, whatever the cache held (after
    # `run --estimate`, or for two designs that ask the same).
    latency = time.perf_counter() - started + sum(r.latency_s for r in result.trace if r.cached)
    details: dict[str, Any]
    error_kind: str | None
    if result.episode is not None:  # the environment's score, however the episode ended
        score, details = result.episode.score, {"episode": dataclasses.asdict(result.episode)}
        error_kind, error = result.error_kind, result.error
        if error_kind is not None:
            details["error"] = error_kind
    elif result.error_kind is not None:
        score, details = 0.0, {"error": result.error_kind}
        error_kind, error = result.error_kind, result.error
    else:
        scored = benchmark.score(task, result.output)
        score, details, error_kind = scored.value, dict(scored.details), scored.error_kind
        error = str(details.get("error", error_kind)) if error_kind is not None else None
    details["trace"] = [_as_dict(record) for record in result.trace]
    return TaskOutcome(
        task_id=task.id,
        output=result.output,
        answer=result.answer,
        score=score,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cost=result.cost,
        latency_s=latency,
        error_kind=error_kind,
        error=error,
        details=details,
    )


# A trace record's fields, read once: `dataclasses.asdict` deep-copied each of them, a tenth of a
# task thread's CPU time at 64 tasks at once (bench/concurrency.py), and they are all plain values.
_CALL_FIELDS = tuple(f.name for f in dataclasses.fields(CallRecord))


def _as_dict(record: CallRecord) -> dict[str, Any]:
    """What `dataclasses.asdict(record)` gives, the same keys in the same order."""
    if type(record) is not CallRecord:  # a subclass may have fields of its own
        return dataclasses.asdict(record)
    return {name: getattr(record, name) for name in _CALL_FIELDS}


def check_concurrency(concurrency: int) -> None:
    """Refuses a task count no runner can keep, before a caller writes anything for it."""
    if concurrency < 1:
        raise AgentDesignError(
            f"concurrency (tasks run at once) must be at least 1, got {concurrency}"
        )


def evaluate_tasks(
    agent: Agent,
    benchmark: Benchmark,
    tasks: Sequence[Task],
    *,
    on_result: Callable[[TaskOutcome], None] | None = None,
    on_results: Callable[[Sequence[TaskOutcome]], None] | None = None,
    done: Collection[str] = (),
    concurrency: int = 1,
    should_stop: Callable[[], bool] = lambda: False,
    timeout_s: float | None = None,
) -> list[TaskOutcome]:
    """Runs the tasks not in `done`, `concurrency` at a time, calling `on_result` for each.

    `on_result` runs in the calling thread, one outcome at a time, so it may write to a database
    connection that is not thread-safe. It gets each outcome the moment its task finishes: in
    task order when `concurrency` is 1, in finishing order otherwise. `on_results`, given instead,
    gets the outcomes in lists, in the same thread: each list the tasks that had finished, and
    were not yet reported, when the runner last looked (one task when `concurrency` is 1), so
    that a caller may keep those that finish together in one write. `should_stop` is checked
    before each task starts, after `on_result` (or `on_results`) has seen every task finished so
    far, so an early-stopping rule can judge an agent on its scores as they arrive (as can a
    budget running out); tasks already started are finished and reported. `timeout_s` limits
    each task (see `run_task`).
    """
    if (on_result is None) == (on_results is None):
        raise TypeError("evaluate_tasks takes one of on_result and on_results")
    report: Callable[[Sequence[TaskOutcome]], None]
    if on_results is not None:
        report = on_results
    else:
        each = on_result
        assert each is not None

        def report(outcomes: Sequence[TaskOutcome]) -> None:
            for outcome in outcomes:
                each(outcome)

    check_concurrency(concurrency)
    pending = [t for t in tasks if t.id not in done]
    outcomes: list[TaskOutcome] = []
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        running: set[Future[TaskOutcome]] = set()
        while pending or running:
            while pending and len(running) < concurrency and not should_stop():
                task = pending.pop(0)
                # in this thread's context: a task's spans are children of the current one
                in_context = contextvars.copy_context().run
                running.add(
                    pool.submit(in_context, run_task, agent, benchmark, task, timeout_s=timeout_s)
                )
            if not running:
                break
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            batch: list[TaskOutcome] = []
            failed: BaseException | None = None
            for future in finished:
                try:
                    batch.append(future.result())
                except BaseException as exc:  # those before it are reported first
                    failed = exc
                    break
            if batch:
                outcomes.extend(batch)
                report(batch)
            if failed is not None:
                raise failed
    return outcomes
