"""A workflow plugin: it imports only names of agentdesign.components, so export can inline it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentdesign.components import Attempt, Solver, Workflow, param


@dataclass(frozen=True, kw_only=True)
class Twice(Workflow):
    """Asks twice and keeps the second attempt, at a searchable temperature."""

    name: ClassVar[str] = "demo_twice"

    temperature: float = param(0.3, low=0.0, high=1.0, doc="sampling temperature")

    def run(self, solver: Solver, question: str) -> Attempt:
        solver.attempt(question, temperature=self.temperature, seed=0)
        return solver.attempt(question, temperature=self.temperature, seed=1)
