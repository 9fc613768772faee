"""Test doubles for code built on agentdesign: a deterministic stand-in for a model.

For unit tests of orchestration logic only (a plugin's component, benchmark or strategy, or
agentdesign's own): `FakeChatModel` is a `ChatModel` that answers from a function and records
every request as a `FakeCall`; `failing_responder` makes one that fails every call.

    from agentdesign.components import build_agent, parse_spec
    from agentdesign.components.testing import FakeChatModel

    agent = build_agent(parse_spec({"model": "fake/model"}), llm=FakeChatModel(answer))
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentdesign.components.llm._trace import Completion, LLMCallError, Message

__all__ = ["FakeCall", "FakeChatModel", "Responder", "failing_responder"]

# What a fake answers with: (model, messages, temperature, seed) -> the reply's text.
Responder = Callable[[str, Sequence[Message], float, "int | None"], str]


@dataclass(frozen=True)
class FakeCall:
    """One request the fake received, for tests to assert call sequences."""

    model: str
    messages: tuple[tuple[tuple[str, str], ...], ...]
    temperature: float
    max_tokens: int
    seed: int | None
    stop: tuple[str, ...] = ()


class FakeChatModel:
    """Answers with `responder(model, messages, temperature, seed)`; counts words as tokens.

    A responder that raises `LLMCallError` simulates a provider failure; `latency_s` simulates a
    slow provider.
    """

    def __init__(self, responder: Responder, *, latency_s: float = 0.0) -> None:
        self.responder = responder
        self.latency_s = latency_s
        self.calls: list[FakeCall] = []
        self._lock = threading.Lock()

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
        frozen = tuple(tuple(sorted(m.items())) for m in messages)
        with self._lock:
            self.calls.append(FakeCall(model, frozen, temperature, max_tokens, seed, tuple(stop)))
        if self.latency_s:
            time.sleep(self.latency_s)
        text = self.responder(model, messages, temperature, seed)
        for marker in stop:  # as a provider does: the text ends before the first stop string
            text = text.split(marker, 1)[0]
        prompt_tokens = sum(len(m["content"].split()) for m in messages)
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(text.split()),
            latency_s=self.latency_s,
        )


def failing_responder(message: str, *, transient: bool = False) -> Responder:
    """A responder whose every call fails: a provider outage when `transient` (no score), else
    a request the provider rejects (the task scores 0)."""

    def respond(
        model: str, messages: Sequence[Message], temperature: float, seed: int | None
    ) -> str:
        raise LLMCallError(message, transient=transient)

    return respond
