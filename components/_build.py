"""The engine's entry points to the runtime: parsing specs and building agents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentdesign.components._errors import SpecError
from agentdesign.components._llm import LiteLLMChatModel, ResponseCache, default_cache_dir
from agentdesign.components._runtime import Agent, AgentSpec, ChatModel, Example, TaskBudget

__all__ = ["build_agent", "check_model", "default_chat_model", "parse_spec"]


def parse_spec(data: str | Mapping[str, Any]) -> AgentSpec:
    """An `AgentSpec` from JSON text or a dict; a problem is a `SpecError` naming the field."""
    try:
        return AgentSpec.from_json(data) if isinstance(data, str) else AgentSpec.from_dict(data)
    except (ValueError, TypeError) as exc:
        raise SpecError(f"invalid agent spec: {exc}") from None


def check_model(model: str) -> None:
    """Fails fast, before a run writes anything, when an embedded model cannot be loaded here.

    (Hosted models cannot be checked without a paid call; their errors surface per task.)
    """
    if model.startswith("embedded/"):
        from agentdesign.components._embedded import embedded_model_path

        embedded_model_path(model.removeprefix("embedded/"))


def default_chat_model(*, api_base: str | None = None, cache: bool = True) -> LiteLLMChatModel:
    """litellm with the shared on-disk response cache."""
    store = ResponseCache(default_cache_dir() / "responses.sqlite") if cache else None
    return LiteLLMChatModel(cache=store, api_base=api_base)


def build_agent(
    spec: AgentSpec,
    *,
    llm: ChatModel | None = None,
    train_examples: Sequence[Example] = (),
    budget: TaskBudget | None = None,
) -> Agent:
    """A runnable agent for `spec`; calls go through litellm with the response cache by default."""
    return Agent(
        spec,
        llm=llm if llm is not None else default_chat_model(),
        train_examples=train_examples,
        budget=budget,
    )
