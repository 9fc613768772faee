"""The engine's entry points to the runtime: parsing specs and building agents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentdesign.components._agent import Agent
from agentdesign.components._errors import ModelUnavailableError, SpecError
from agentdesign.components._input import check_nesting
from agentdesign.components._spec import AgentSpec
from agentdesign.components.library._memory import Example
from agentdesign.components.llm._cache import ResponseCache, default_cache_dir
from agentdesign.components.llm._embedded import check_embedded_model
from agentdesign.components.llm._limits import DEFAULT_RETRY_BUDGET_S
from agentdesign.components.llm._llm import DEFAULT_LLM_TIMEOUT_S, LiteLLMChatModel, import_litellm
from agentdesign.components.llm._trace import ChatModel, TaskBudget
from agentdesign.components.llm._weights import EMBEDDED_MODELS

__all__ = ["build_agent", "check_model", "default_chat_model", "model_size", "parse_spec"]


def parse_spec(data: str | Mapping[str, Any]) -> AgentSpec:
    """An `AgentSpec` from JSON text or a dict; a problem is a `SpecError` naming the field.

    Text is checked for nesting first: json's recursive parser would end in a RecursionError."""
    try:
        if isinstance(data, str):
            check_nesting(data)
            return AgentSpec.from_json(data)
        return AgentSpec.from_dict(data)
    except (ValueError, TypeError) as exc:
        raise SpecError(f"invalid agent spec: {exc}") from None


def check_model(model: str, *, api_base: str | None = None) -> None:
    """Fails fast, before a run writes anything, when an embedded model cannot be loaded here or
    litellm knows no provider for the model string, which would fail every call of the run.

    (A hosted model itself cannot be checked without a paid call: a refused key or an unknown
    model name surfaces as a provider failure on the first task.)
    """
    if model.startswith("embedded/"):
        check_embedded_model(model)
        return
    try:
        import_litellm().get_llm_provider(model=model, api_base=api_base)
    except Exception:  # litellm's BadRequestError: "LLM Provider NOT provided"
        raise ModelUnavailableError(
            f"litellm knows no provider for model {model!r}: write PROVIDER/MODEL, e.g. "
            "openai/gpt-4o-mini, or openai/NAME with --api-base URL for an OpenAI-compatible "
            "server (providers: https://docs.litellm.ai/docs/providers)"
        ) from None


def model_size(model: str) -> int | None:
    """The bytes of an embedded model's weights, which order embedded models by size; None for
    any other model string, whose size is not known here. An unknown embedded name is refused in
    one line, naming the known ones."""
    if not model.startswith("embedded/"):
        return None
    name = model.removeprefix("embedded/")
    if name not in EMBEDDED_MODELS:
        known = ", ".join(f"embedded/{n}" for n in sorted(EMBEDDED_MODELS))
        raise ModelUnavailableError(f"unknown embedded model {model!r}; known: {known}")
    return EMBEDDED_MODELS[name].size


def default_chat_model(
    *,
    api_base: str | None = None,
    cache: bool = True,
    timeout_s: float = DEFAULT_LLM_TIMEOUT_S,
    retry_budget_s: float = DEFAULT_RETRY_BUDGET_S,
    rpm: float | None = None,
    tpm: float | None = None,
) -> LiteLLMChatModel:
    """litellm with the shared on-disk response cache; `timeout_s` bounds each call, a call
    the provider rate-limits tries again for `retry_budget_s`, and the calls of a model keep to
    `rpm` requests and `tpm` tokens a minute if given (see `LiteLLMChatModel`)."""
    store = ResponseCache(default_cache_dir() / "responses.sqlite") if cache else None
    return LiteLLMChatModel(
        cache=store,
        api_base=api_base,
        timeout_s=timeout_s,
        retry_budget_s=retry_budget_s,
        rpm=rpm,
        tpm=tpm,
    )


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
