"""The slots: what each kind of component does, as the base classes components subclass.

The components themselves are in `_functional.py` and `_workflows.py`. The `Solver` they are
handed is built from these slots, so it is imported for type checking only.

Standard library only, like every module export inlines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from agentdesign.components._registry import Component
from agentdesign.components.library._memory import Example, MemoryStore, Recall

if TYPE_CHECKING:
    from agentdesign.components._agent import Solver

__all__ = [
    "Attempt",
    "Memory",
    "Observation",
    "Planning",
    "Reasoning",
    "Reflection",
    "Tool",
    "Workflow",
]


@dataclass(frozen=True)
class Attempt:
    """One solution attempt: the last output, the answer parsed from it, and the planning context it
    was solved with (revisions reuse it)."""

    output: str
    answer: str
    context: str = ""


@dataclass(frozen=True)
class Observation:
    """What a tool returned, as shown to the model; `error` says why it failed, if it did, and
    `isolation` what confined the code it ran, if any."""

    text: str
    error: str | None = None
    isolation: str | None = None


@dataclass(frozen=True, kw_only=True)
class Planning(Component):
    """Works out context for the solver before it solves: a plan, a principle, or nothing."""

    slot: ClassVar[str] = "planning"

    def plan(self, solver: Solver, question: str, *, seed: int) -> str:
        """The text added to the question (empty for none); calls are made with role 'planner'."""
        return ""


@dataclass(frozen=True, kw_only=True)
class Reasoning(Component):
    """How the solver is asked to answer; `max_tokens` caps every solver call."""

    slot: ClassVar[str] = "reasoning"
    instruction: str = ""
    max_tokens: int = 512

    def render_example(self, example: Example) -> str:
        return f"Answer: {example.answer}"


@dataclass(frozen=True, kw_only=True)
class Memory(Component):
    """What the model is shown besides the question, and what the agent learns while it runs."""

    slot: ClassVar[str] = "memory"
    # True for memories that only show training examples: on a benchmark without any they are
    # the same design as no memory, so narrowed design spaces leave them out there.
    shows_examples: ClassVar[bool] = False

    def select(self, pool: Sequence[Example]) -> tuple[Example, ...]:
        """The training items kept from `pool`: all this memory reads later, all an export carries.

        Selecting again from the kept items keeps them all, in the same order.
        """
        return ()

    def recall(self, question: str, store: MemoryStore) -> Recall:
        return Recall()

    def learn(self, store: MemoryStore, question: str, complaints: Sequence[str]) -> None:
        """Called after each task with the complaints its reviewers made (none if they accepted)."""


@dataclass(frozen=True, kw_only=True)
class Tool(Component):
    """Something the model can call while it works; `action` names it in ReAct's protocol."""

    slot: ClassVar[str] = "tool"
    action: ClassVar[str] = ""
    action_doc: ClassVar[str] = ""

    @property
    def protocol(self) -> str:
        """The text that teaches the model how to call the tool (empty for no tool)."""
        return ""

    @property
    def call_limit(self) -> int:
        """Tool calls allowed per solver attempt."""
        return 0

    def find_call(self, text: str) -> tuple[str, str] | None:
        """(text up to and including the call, the call's argument), or None if none is made."""
        return None

    def execute(self, argument: str) -> Observation:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class Reflection(Component):
    """What happens to a finished attempt: returned as it is, or reviewed and revised."""

    slot: ClassVar[str] = "reflection"

    def reflect(self, solver: Solver, question: str, attempt: Attempt, *, seed: int) -> Attempt:
        return attempt


@dataclass(frozen=True, kw_only=True)
class Workflow(Component):
    """How the calls of one task are orchestrated; `plays_episodes` if it can play an
    environment's episode (the solver then holds the environment)."""

    slot: ClassVar[str] = "workflow"
    plays_episodes: ClassVar[bool] = False

    def run(self, solver: Solver, question: str) -> Attempt:
        raise NotImplementedError
