"""A benchmark plugin: adding small numbers, scored on the answer's final number."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from agentdesign.evaluators import Benchmark, Score, Task, extract_final_number


class Sums(Benchmark):
    """Twelve sums of two small numbers."""

    name: ClassVar[str] = "demo_sums"
    description: ClassVar[str] = "Sums of two small numbers; scores 1 if the final number is right."

    def tasks(self) -> Sequence[Task]:
        return [
            Task(id=f"sum/{a}", question=f"What is {a} + {a + 1}?", answer=str(2 * a + 1))
            for a in range(12)
        ]

    def score(self, task: Task, prediction: str) -> Score:
        return Score(float(extract_final_number(prediction) == task.answer))
