"""The evaluation step: one agent on a task set, run by the runner and kept by the archive.

It lives in the search layer because it ties the two together; the archive below only stores.

Every caller that spends model calls on an agent (the search loop, `agentdesign evaluate`, the bench
scripts that record tables) goes through `evaluate_agent`, so each finished task is committed the
moment the runner sees it end (with the others that ended meanwhile, in one transaction), a killed
process loses at most the tasks in flight, and no task is ever paid twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from agentdesign.archive import (
    Archive,
    ArchiveError,
    ArchiveUnreachableError,
    EvaluationRecord,
    Heartbeat,
    worker_id,
)
from agentdesign.components import (
    AgentSpec,
    ChatModel,
    Example,
    ProviderError,
    build_agent,
    provider_name,
    trace_span,
    traced_model,
    tracing_on,
)
from agentdesign.evaluators import (
    Benchmark,
    Task,
    TaskOutcome,
    check_concurrency,
    evaluate_tasks,
    score_interval,
)

__all__ = ["evaluate_agent"]

log = logging.getLogger(__name__)


class _Lease:
    """This process's lease on an evaluation, renewed by a heartbeat; `lost` once another process
    has taken the evaluation over (this one was held up, e.g. stopped, past the lease)."""

    def __init__(self, archive: Archive, evaluation_id: int, *, owner: str, lease_s: float) -> None:
        self._archive = archive
        self._evaluation_id = evaluation_id
        self._owner = owner
        self._lease_s = lease_s
        self._lost = threading.Event()

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def lose(self) -> None:
        self._lost.set()

    def renew(self) -> None:
        """Renews the lease; refused on a complete evaluation too, which is no takeover."""
        archive, evaluation_id = self._archive, self._evaluation_id
        if (
            not archive.claim_evaluation(evaluation_id, owner=self._owner, lease_s=self._lease_s)
            and archive.get_evaluation(evaluation_id).status != "complete"
        ):
            self.lose()


def evaluate_agent(
    archive: Archive,
    spec: AgentSpec,
    benchmark: Benchmark,
    tasks: Sequence[Task],
    *,
    llm: ChatModel,
    split: str,
    train_examples: Sequence[Example] = (),
    concurrency: int = 1,
    seed: int = 0,
    on_start: Callable[[EvaluationRecord, int], None] | None = None,
    on_result: Callable[[TaskOutcome], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    lease_s: float = 60.0,
    timeout_s: float | None = None,
) -> EvaluationRecord | None:
    """Scores `spec` on `tasks`, reusing every result the archive already holds for them.

    `on_start` gets the evaluation (before any task runs) and how many tasks are already done;
    `on_result` gets each new outcome after it is committed. Returns the finished evaluation, with
    its mean and 95% interval (`score_interval`), or None when `should_stop` ended it part-way: the
    partial evaluation stays in the archive, marked running, and the next call completes it.
    `timeout_s` limits each task (see `evaluate_tasks`); a timed-out task is recorded and not run
    again. A task the provider failed is never a score: it raises `ProviderError` (see
    `_run_claimed`), leaving the evaluation running for the next call to complete.

    Only the holder of the evaluation's lease runs its tasks, so processes that meet on the same
    agent never pay twice for a task: the others wait for its result. The holder renews the lease
    every `lease_s / 3` seconds; if it dies, the lease runs out after `lease_s` and one of them
    takes over. A holder that was only held up (stopped, swapped out) and finds its lease taken
    starts no more tasks: it logs one line and waits for the results like the others.

    While tracing is on (`tracing_on`), the evaluation is a span, the parent of its tasks' spans.
    """
    check_concurrency(concurrency)
    benchmark.check_ready(spec)  # e.g. Java, or a workflow that can play an environment

    def evaluate(model: ChatModel) -> EvaluationRecord | None:
        return _evaluate_agent(
            archive,
            spec,
            benchmark,
            tasks,
            llm=model,
            split=split,
            train_examples=train_examples,
            concurrency=concurrency,
            seed=seed,
            on_start=on_start,
            on_result=on_result,
            should_stop=should_stop,
            lease_s=lease_s,
            timeout_s=timeout_s,
        )

    if not tracing_on():
        return evaluate(llm)
    design = spec.describe()
    attributes: dict[str, str | int] = {
        "gen_ai.provider.name": provider_name(spec.model),
        "gen_ai.request.model": spec.model,
        "agentdesign.agent.hash": spec.spec_hash,
        "agentdesign.agent.design": design,
        "agentdesign.benchmark": benchmark.name,
        "agentdesign.split": split,
        "agentdesign.evaluation.tasks": len(tasks),
    }
    with trace_span(f"evaluate {design}", attributes) as span:
        evaluation = evaluate(traced_model(llm))
        if evaluation is None:
            span.set({"agentdesign.evaluation.status": "stopped"})
        else:
            span.set(
                {
                    "agentdesign.evaluation.id": evaluation.id,
                    "agentdesign.evaluation.status": evaluation.status,
                    "agentdesign.evaluation.mean": evaluation.mean,
                    "agentdesign.evaluation.ci_low": evaluation.ci_low,
                    "agentdesign.evaluation.ci_high": evaluation.ci_high,
                }
            )
    return evaluation


def _evaluate_agent(
    archive: Archive,
    spec: AgentSpec,
    benchmark: Benchmark,
    tasks: Sequence[Task],
    *,
    llm: ChatModel,
    split: str,
    train_examples: Sequence[Example],
    concurrency: int,
    seed: int,
    on_start: Callable[[EvaluationRecord, int], None] | None,
    on_result: Callable[[TaskOutcome], None] | None,
    should_stop: Callable[[], bool],
    lease_s: float,
    timeout_s: float | None,
) -> EvaluationRecord | None:
    """`evaluate_agent`, its checks done."""
    archive.add_agent(spec=spec.to_dict(), spec_hash=spec.spec_hash)
    evaluation = archive.get_or_create_evaluation(
        agent_hash=spec.spec_hash,
        benchmark=benchmark.name,
        task_ids=[t.id for t in tasks],
        split=split,
    )
    owner = worker_id()
    while True:
        while evaluation.status != "complete" and not archive.claim_evaluation(
            evaluation.id, owner=owner, lease_s=lease_s
        ):
            if should_stop():
                return None
            time.sleep(lease_s / 10)  # another process runs it: wait for its results
            evaluation = archive.get_evaluation(evaluation.id)
        if evaluation.status == "complete":
            if on_start is not None:
                on_start(evaluation, len(tasks))
            return evaluation
        lease = _Lease(archive, evaluation.id, owner=owner, lease_s=lease_s)
        try:
            with Heartbeat(interval_s=lease_s / 3, beat=lease.renew):
                finished = _run_claimed(
                    archive,
                    evaluation,
                    spec,
                    benchmark,
                    tasks,
                    llm=llm,
                    train_examples=train_examples,
                    concurrency=concurrency,
                    seed=seed,
                    on_start=on_start,
                    on_result=on_result,
                    should_stop=should_stop,
                    timeout_s=timeout_s,
                    lease=lease,
                )
        finally:
            archive.release_evaluation(evaluation.id, owner=owner)
        if not lease.lost:
            return finished
        log.warning(
            "evaluation %d of agent %s was taken over by another process while this one was held "
            "up past its lease: its tasks are left to that process",
            evaluation.id,
            spec.spec_hash[:10],
        )
        if finished is not None:
            return finished
        evaluation = archive.get_evaluation(evaluation.id)


def _run_claimed(
    archive: Archive,
    evaluation: EvaluationRecord,
    spec: AgentSpec,
    benchmark: Benchmark,
    tasks: Sequence[Task],
    *,
    llm: ChatModel,
    train_examples: Sequence[Example],
    concurrency: int,
    seed: int,
    on_start: Callable[[EvaluationRecord, int], None] | None,
    on_result: Callable[[TaskOutcome], None] | None,
    should_stop: Callable[[], bool],
    timeout_s: float | None,
    lease: _Lease,
) -> EvaluationRecord | None:
    """Runs the tasks of an evaluation whose lease this process holds.

    A result some other process recorded first means that process took the evaluation over: the
    lease is lost, and no new task starts.

    A task the provider failed is recorded as a failure, not a result, and stops the evaluation:
    no new task starts (those in flight finish) and `ProviderError` says so. The task is not tried
    again here: its calls were already retried with backoff, so another try would mostly stall
    on the same outage; the evaluation stays open and the next call runs it.
    """
    done = archive.task_scores([evaluation.id])[evaluation.id]  # not their outputs and traces
    if on_start is not None:
        on_start(evaluation, len(done))
    agent = build_agent(spec, llm=llm, train_examples=train_examples)
    failures: list[TaskOutcome] = []

    def record(outcome: TaskOutcome) -> None:
        if outcome.error_kind == "provider":
            archive.add_task_failure(evaluation.id, outcome)
            failures.append(outcome)
            return
        if not archive.add_task_result(evaluation.id, outcome):
            lease.lose()
            return
        if on_result is not None:
            on_result(outcome)

    def record_together(outcomes: Sequence[TaskOutcome]) -> None:
        """The results of tasks that finished together in one transaction (one write per task
        cost more CPU than the rest of the task at 64 tasks at once); each is committed before
        `on_result` hears of it, as with `record`, which records them one by one when one of
        them fails its checks, so that those before it are kept as they would have been."""
        results = [o for o in outcomes if o.error_kind != "provider"]
        if len(results) < 2:
            for outcome in outcomes:
                record(outcome)
            return
        for outcome in outcomes:
            if outcome.error_kind == "provider":
                record(outcome)
        try:
            added = archive.add_task_results(evaluation.id, results)
        except ArchiveUnreachableError:
            raise
        except ArchiveError:  # a bad outcome: nothing was written
            for outcome in results:
                record(outcome)
            return
        for outcome, new in zip(results, added, strict=True):
            if not new:
                lease.lose()
            elif on_result is not None:
                on_result(outcome)

    evaluate_tasks(
        agent,
        benchmark,
        tasks,
        on_results=record_together,
        done=done.keys(),
        concurrency=concurrency,
        should_stop=lambda: bool(failures) or lease.lost or should_stop(),
        timeout_s=timeout_s,
    )
    if failures:
        n, first = len(failures), " ".join((failures[0].error or "").split())
        raise ProviderError(
            f"the model provider failed {n} task{'s' if n > 1 else ''} of agent "
            f"{spec.spec_hash[:10]} even after the retries, so no score was recorded for "
            f"{'them' if n > 1 else 'it'} ({first[:300]})"
        )
    results = archive.task_scores([evaluation.id])[evaluation.id]
    if len(results) < len(tasks):
        return None
    scores = [results[t.id] for t in tasks]
    low, high, _ = score_interval(scores, seed=seed)
    return archive.finish_evaluation(
        evaluation.id, status="complete", mean=sum(scores) / len(scores), ci_low=low, ci_high=high
    )
