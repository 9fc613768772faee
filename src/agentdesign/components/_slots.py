"""The slots: what each kind of component does, as the base classes components subclass, and the
`Solver` they are handed: what a component may call, a protocol.

The components themselves are in `_functional.py` and `_workflows.py`; the runtime's solver that
implements the protocol, `TaskSolver`, is in `_agent.py`.

Standard library only, like every module export inlines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from agentdesign.components._environment import Environment, EnvState
from agentdesign.components._registry import Component
from agentdesign.components.library._memory import Example, MemoryStore, Recall
from agentdesign.components.llm._trace import Message, Trace

__all__ = [
    "Attempt",
    "Memory",
    "Observation",
    "Planning",
    "Reasoning",
    "Reflection",
    "Solver",
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


class Solver(Protocol):
    """What a component is handed to work with on one task: the design's other components, its
    recorded model and tool calls, and the plan -> solve -> reflect attempt.

    Every call is recorded in the task's trace with the role that made it; `complaints` collects
    what reviewers objected to, for an experience memory to learn from. An interactive task's
    `environment` is played through `start_episode` and `act`.
    """

    planning: Planning
    reasoning: Reasoning
    tool: Tool
    reflection: Reflection
    trace: Trace
    environment: Environment | None
    complaints: list[str]
    # The key under which two outputs give the same answer, what a vote counts: the benchmark's
    # own reading of an answer where it has one (a function call, not its last number).
    answer_key: Callable[[str], str]

    def call(
        self,
        role: str,
        messages: Sequence[Message],
        *,
        temperature: float,
        seed: int,
        max_tokens: int,
        stop: Sequence[str] = (),
    ) -> str:
        """One model call, recorded and checked against the task's budget; generation ends
        before any of the `stop` strings."""
        ...

    def use_tool(self, argument: str, tool: Tool | None = None) -> Observation:
        """Runs the design's tool (or `tool`) on `argument`, recorded with the tool's name."""
        ...

    def messages(
        self,
        question: str,
        *,
        system: str,
        context: str = "",
        render: Callable[[Example], str] | None = None,
    ) -> list[dict[str, str]]:
        """A conversation: `system`, the recalled lessons and examples, then the question;
        examples become chat turns answered with `render`, or reference text without it."""
        ...

    def plan(self, question: str, *, seed: int, planning: Planning | None = None) -> str:
        """The planning component's (or `planning`'s) context for `question`."""
        ...

    def solve(
        self,
        question: str,
        *,
        temperature: float,
        seed: int,
        context: str = "",
        follow_up: tuple[str, str] | None = None,
        role: str = "solver",
    ) -> Attempt:
        """One answer in the reasoning component's style, calling the tool as often as allowed;
        `follow_up` (an earlier output, a new request about it) continues a conversation."""
        ...

    def attempt(
        self,
        question: str,
        *,
        temperature: float,
        seed: int,
        planning: Planning | None = None,
        reflection: Reflection | None = None,
    ) -> Attempt:
        """Plan, solve, reflect: with the design's components, or the planning/reflection given."""
        ...

    def start_episode(self) -> EnvState:
        """Resets the environment; its first observation is the problem to solve."""
        ...

    def act(self, action: str) -> EnvState:
        """One step of the episode, recorded; raises TaskBudgetExceeded at the step limit."""
        ...


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
    # True for a memory that learns only from reviewers and shows nothing else: in a design with
    # no reviewer it is the same design as no memory (see `AgentSpec.canonical`).
    needs_reviewer: ClassVar[bool] = False

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
    # Slots (each with a "none" component) whose component this workflow never calls: a design's
    # canonical form (`AgentSpec.canonical`) holds "none" there, so a search pays for it once.
    unused_slots: ClassVar[frozenset[str]] = frozenset()

    def run(self, solver: Solver, question: str) -> Attempt:
        raise NotImplementedError
