"""The runner on the fake model: error kinds per task, per-task timeouts, the early-stop hook."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import ClassVar

import pytest

from agentdesign.components import Completion, Message, SandboxLimits, build_agent, parse_spec
from agentdesign.components.testing import FakeChatModel, failing_responder
from agentdesign.evaluators import (
    Benchmark,
    HumanEval,
    Score,
    Task,
    TaskOutcome,
    evaluate_tasks,
    run_task,
)

MODEL = "fake/model"
TASKS = [Task(id=f"echo/{i}", question=f"say {i}", answer=str(i)) for i in range(6)]


class _Echo(Benchmark):
    """Scores 1 when the reply's answer is the task's; "parse" when the reply has no answer."""

    name: ClassVar[str] = "echo"
    description: ClassVar[str] = "Repeat the number."

    def tasks(self) -> Sequence[Task]:
        return TASKS

    def score(self, task: Task, prediction: str) -> Score:
        if "Answer:" not in prediction:
            return Score(0.0, {"error": "no answer line"}, error_kind="parse")
        return Score(float(prediction.split("Answer:")[-1].strip() == task.answer))


def echo(model: str, messages: Sequence[Message], temperature: float, seed: int | None) -> str:
    number = messages[-1]["content"].split()[-1]
    return "I cannot say." if number == "3" else f"Answer: {number}"


def test_error_kinds_from_the_agent_and_the_scorer() -> None:
    echo_agent = build_agent(parse_spec({"model": MODEL}), llm=FakeChatModel(echo))
    right = run_task(echo_agent, _Echo(), TASKS[1])
    assert (right.score, right.error_kind, right.error) == (1.0, None, None)
    unparsable = run_task(echo_agent, _Echo(), TASKS[3])
    assert (unparsable.score, unparsable.error_kind) == (0.0, "parse")
    assert unparsable.error == "no answer line" and unparsable.details["trace"]
    down = build_agent(parse_spec({"model": MODEL}), llm=FakeChatModel(failing_responder("503")))
    failed = run_task(down, _Echo(), TASKS[1])
    assert (failed.score, failed.error_kind, failed.error) == (0.0, "llm", "503")


def test_sandbox_kills_are_recorded_as_sandbox_errors() -> None:
    humaneval = HumanEval(limits=SandboxLimits(wall_s=1.5, cpu_s=1.5))
    task = humaneval.task("humaneval/0")
    loop = (
        "```python\ndef has_close_elements(numbers, threshold):\n    while True:\n        pass\n```"
    )
    wrong = "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"
    model = FakeChatModel(lambda m, msgs, t, s: loop if "loop" in msgs[-1]["content"] else wrong)
    coder = build_agent(parse_spec({"model": MODEL}), llm=model)
    looping = run_task(coder, humaneval, Task(task.id, "loop", task.answer, task.metadata))
    failing = run_task(coder, humaneval, Task(task.id, "fail", task.answer, task.metadata))
    assert (looping.score, looping.error_kind) == (0.0, "sandbox")
    assert (failing.score, failing.error_kind) == (0.0, None)  # a wrong answer, not an error


def test_a_slow_task_times_out_and_the_run_goes_on() -> None:
    release = threading.Event()

    def slow_on_two(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
        if messages[-1]["content"] == "say 2":
            release.wait(10)  # the abandoned call: it returns once the test releases it
        return echo(model, messages, t, s)

    echo_agent = build_agent(parse_spec({"model": MODEL}), llm=FakeChatModel(slow_on_two))
    started = time.perf_counter()
    outcomes = evaluate_tasks(
        echo_agent, _Echo(), TASKS[:4], on_result=lambda o: None, timeout_s=0.5
    )
    elapsed = time.perf_counter() - started
    release.set()
    by_id = {o.task_id: o for o in outcomes}
    assert [o.task_id for o in outcomes] == ["echo/0", "echo/1", "echo/2", "echo/3"]
    timed_out = by_id["echo/2"]
    assert (timed_out.score, timed_out.error_kind) == (0.0, "timeout")
    assert timed_out.error == "no result after 0.5 s" and 0.5 <= timed_out.latency_s < 5
    assert by_id["echo/1"].score == 1.0 and by_id["echo/3"].error_kind == "parse"
    assert elapsed < 5


def test_a_task_within_its_timeout_is_unaffected() -> None:
    echo_agent = build_agent(parse_spec({"model": MODEL}), llm=FakeChatModel(echo))
    outcome = run_task(echo_agent, _Echo(), TASKS[4], timeout_s=30)
    assert (outcome.score, outcome.error_kind) == (1.0, None)
    with pytest.raises(ValueError, match="positive"):
        run_task(echo_agent, _Echo(), TASKS[4], timeout_s=0)


def test_a_scorer_bug_still_raises_through_the_timeout_thread() -> None:
    class Broken(_Echo):
        def score(self, task: Task, prediction: str) -> Score:
            raise RuntimeError("scorer bug")

    echo_agent = build_agent(parse_spec({"model": MODEL}), llm=FakeChatModel(echo))
    with pytest.raises(RuntimeError, match="scorer bug"):
        run_task(echo_agent, Broken(), TASKS[1], timeout_s=30)


def test_scores_reach_the_caller_in_order_and_can_stop_the_run() -> None:
    """An early-stopping rule sees every finished score before the next task starts."""
    echo_agent = build_agent(parse_spec({"model": MODEL}), llm=FakeChatModel(echo))
    seen: list[TaskOutcome] = []
    outcomes = evaluate_tasks(
        echo_agent,
        _Echo(),
        TASKS,
        on_result=seen.append,
        should_stop=lambda: any(o.score == 0.0 for o in seen),  # stop at the first failure
    )
    assert seen == outcomes
    assert [(o.task_id, o.score) for o in seen] == [
        ("echo/0", 1.0),
        ("echo/1", 1.0),
        ("echo/2", 1.0),
        ("echo/3", 0.0),
    ]


def test_concurrent_tasks_are_each_reported_once_in_the_calling_thread() -> None:
    echo_agent = build_agent(parse_spec({"model": MODEL}), llm=FakeChatModel(echo, latency_s=0.05))
    threads = set()

    def record(outcome: TaskOutcome) -> None:
        threads.add(threading.get_ident())

    outcomes = evaluate_tasks(
        echo_agent, _Echo(), TASKS, on_result=record, concurrency=3, timeout_s=30
    )
    assert sorted(o.task_id for o in outcomes) == sorted(t.id for t in TASKS)
    assert threads == {threading.get_ident()}


def test_tasks_that_finish_together_are_reported_together() -> None:
    """`on_results` gets the tasks that finished by the time the runner looked, in the calling
    thread, each once; one of `on_result` and `on_results` is needed."""
    gate = threading.Barrier(3, timeout=10)

    def together(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
        gate.wait()  # the three tasks of a round answer at once
        return echo(model, messages, t, s)

    echo_agent = build_agent(parse_spec({"model": MODEL}), llm=FakeChatModel(together))
    batches: list[list[str]] = []
    threads = set()

    def report(outcomes: Sequence[TaskOutcome]) -> None:
        threads.add(threading.get_ident())
        batches.append(sorted(o.task_id for o in outcomes))
        time.sleep(0.2)  # meanwhile the rest of the round finishes

    outcomes = evaluate_tasks(echo_agent, _Echo(), TASKS, on_results=report, concurrency=3)
    reported = [task_id for batch in batches for task_id in batch]
    assert sorted(reported) == sorted(o.task_id for o in outcomes) == [t.id for t in TASKS]
    assert any(len(batch) > 1 for batch in batches)
    assert threads == {threading.get_ident()}
    with pytest.raises(TypeError, match="one of on_result and on_results"):
        evaluate_tasks(echo_agent, _Echo(), TASKS, on_result=print, on_results=print)
    with pytest.raises(TypeError, match="one of on_result and on_results"):
        evaluate_tasks(echo_agent, _Echo(), TASKS)


class _Remembered:
    """A model whose every reply comes from a response cache: it took 4 s when it first ran."""

    def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        max_tokens: int,
        seed: int | None,
        stop: Sequence[str] = (),
    ) -> Completion:
        number = messages[-1]["content"].split()[-1]
        return Completion(text=f"Answer: {number}", latency_s=4.0, cached=True)


def test_a_reply_from_the_cache_counts_at_the_seconds_it_took_when_it_ran() -> None:
    """A design served from the response cache (after `run --estimate`, or asking what another
    design asked) costs what its calls cost when they ran, not the moment the cache took."""
    agent = build_agent(parse_spec({"model": MODEL}), llm=_Remembered())
    for timeout_s in (None, 30.0):
        outcome = run_task(agent, _Echo(), TASKS[1], timeout_s=timeout_s)
        assert outcome.score == 1.0 and 4.0 <= outcome.latency_s < 5.0
