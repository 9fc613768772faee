"""Model calls and the trace of one task: what a chat model is, what each call cost, and the
per-task budget that stops a runaway loop.

Standard library only, like every module export inlines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "CallRecord",
    "ChatModel",
    "Completion",
    "LLMCallError",
    "Message",
    "TaskBudget",
    "TaskBudgetExceeded",
    "Trace",
    "add_call_listener",
]


Message = Mapping[str, str]


@dataclass(frozen=True)
class Completion:
    """One model answer with what it cost; `cached` answers were paid for by an earlier call."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    cached: bool = False


class ChatModel(Protocol):
    """Anything that answers chat messages; raises `LLMCallError` when it cannot."""

    def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        max_tokens: int,
        seed: int | None,
        stop: Sequence[str] = (),
    ) -> Completion: ...


class LLMCallError(Exception):
    """A model call failed for good (after any retries).

    `transient` says the provider failed, not the design (a rate limit, a server error, a timeout,
    a garbled or empty reply, a refused key): the same call may work later, so the task is not
    scored and runs again. Otherwise (a request the provider rejects, say) the task fails and
    scores 0, as any design that makes such a request deserves.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class TaskBudgetExceeded(Exception):
    """A task used more calls or tokens than its budget allows: a runaway loop, stopped."""


@dataclass(frozen=True)
class CallRecord:
    """One step of a task's trace: a model call or a tool call."""

    kind: str  # "llm", "tool" or "env" (an environment's reset or step)
    role: str  # which part made the call, e.g. "solver", "calculator"; "reset" or "step" for env
    input: str
    output: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    error: str | None = None
    isolation: str | None = None  # for a tool call that ran code: the sandbox's isolation level


@dataclass(frozen=True)
class TaskBudget:
    """Per-task limits; generous enough for any sane design, tight enough to stop loops."""

    max_calls: int = 32
    max_tokens: int = 32_000


# Called with each call as a trace records it, in the thread of the task that made it: the
# engine's OpenTelemetry export, when it is on (see `add_call_listener`).
_listeners: list[Callable[[CallRecord], None]] = []


def add_call_listener(listener: Callable[[CallRecord], None]) -> None:
    """Makes every trace call `listener` with each record it adds, right after the call it
    records ended (a listener added twice is called once). A listener must not raise."""
    if listener not in _listeners:
        _listeners.append(listener)


class Trace:
    """The calls one task made, checked against its budget as they happen."""

    def __init__(self, *, budget: TaskBudget) -> None:
        self.budget = budget
        self.records: list[CallRecord] = []

    @property
    def llm_calls(self) -> int:
        return sum(1 for r in self.records if r.kind == "llm")

    @property
    def tokens(self) -> int:
        return sum(r.prompt_tokens + r.completion_tokens for r in self.records)

    def add(self, record: CallRecord) -> None:
        self.records.append(record)
        for listener in _listeners:
            listener(record)
        if self.llm_calls > self.budget.max_calls:
            raise TaskBudgetExceeded(f"more than {self.budget.max_calls} model calls")
        if self.tokens > self.budget.max_tokens:
            raise TaskBudgetExceeded(f"more than {self.budget.max_tokens} tokens")

    def check_before_call(self) -> None:
        if self.llm_calls >= self.budget.max_calls:
            raise TaskBudgetExceeded(f"more than {self.budget.max_calls} model calls")
