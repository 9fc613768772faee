"""The benchmark part of the conformance kit: what every benchmark, built-in or third-party, must
satisfy for a search to split, run and score it (see `agentdesign.components.check_component`)."""

from __future__ import annotations

from agentdesign.components import ConformanceError
from agentdesign.evaluators._benchmark import (
    BENCHMARKS,
    Benchmark,
    BenchmarkError,
    Score,
    Task,
)
from agentdesign.evaluators.environments._environments import InteractiveBenchmark

__all__ = ["check_benchmark"]

# Predictions every scorer must judge, twice alike: the gold answer, nothing, and a stray reply.
_PREDICTIONS = ("", "Answer: 42", "I cannot tell.")


def check_benchmark(benchmark: Benchmark, *, n_tasks: int = 3) -> None:
    """Raises ConformanceError naming the first rule `benchmark` breaks.

    The rules: it has a name and a description; a registered name opens this very class; its pool
    is a non-empty list of tasks with unique, non-empty ids, each found again by id; and scoring is
    deterministic: the same prediction for the same task gets the same Score (value and error
    kind) every time, for the first `n_tasks` tasks (an interactive benchmark's episodes are
    scored by their environment instead, which this check does not start); and its `answer_key`,
    which a vote among an agent's samples counts, is a string, the same every time, and not
    empty for the gold answer (a vote would otherwise never count the right answer).
    """
    if not isinstance(benchmark, Benchmark):
        raise ConformanceError(f"{benchmark!r} is not a Benchmark instance")
    name = getattr(benchmark, "name", None)
    if not isinstance(name, str) or not name or not getattr(benchmark, "description", None):
        raise ConformanceError(f"{type(benchmark).__qualname__} needs a name and a description")
    where = f"benchmark '{name}'"
    if name in BENCHMARKS and not isinstance(benchmark, BENCHMARKS[name]):
        raise ConformanceError(f"{where} is registered for another class")
    tasks = list(benchmark.tasks())
    if not tasks or not all(isinstance(t, Task) and t.id and t.question for t in tasks):
        raise ConformanceError(f"{where}: tasks() must be a non-empty list of Tasks with ids")
    try:
        found = benchmark.tasks_by_ids(t.id for t in tasks)
    except BenchmarkError as error:
        raise ConformanceError(f"{where}: {error}") from None
    if list(found) != tasks:
        raise ConformanceError(f"{where}: a task looked up by its id is another task")
    if isinstance(benchmark, InteractiveBenchmark):
        return  # its episodes are scored by their environment, which needs the simulator
    for task in tasks[:n_tasks]:
        for prediction in (task.answer, *_PREDICTIONS):
            first, second = benchmark.score(task, prediction), benchmark.score(task, prediction)
            if not isinstance(first, Score):
                raise ConformanceError(f"{where}: score() returned {first!r}, not a Score")
            if (first.value, first.error_kind) != (second.value, second.error_kind):
                raise ConformanceError(
                    f"{where}: task {task.id!r} scored {prediction!r} as {first.value} then as "
                    f"{second.value}: scoring must be deterministic"
                )
            key = benchmark.answer_key(task, prediction)
            if not isinstance(key, str) or key != benchmark.answer_key(task, prediction):
                raise ConformanceError(
                    f"{where}: answer_key() of {prediction!r} for task {task.id!r} must be the "
                    f"same string every time, not {key!r}"
                )
            if prediction == task.answer and not key:
                raise ConformanceError(
                    f"{where}: answer_key() of task {task.id!r}'s gold answer is empty: a vote "
                    "would never count the right answer"
                )
