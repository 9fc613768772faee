"""The LLM boundary: costs and tokens recorded, the cache never pays twice, retries and failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentdesign.components import (
    LiteLLMChatModel,
    LLMCallError,
    ResponseCache,
    import_litellm,
)

MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]


class ScriptedLiteLLM:
    """Replaces `litellm.completion`: raises the scripted errors in turn, then answers."""

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.requests: list[dict[str, Any]] = []

    def __call__(self, **request: Any) -> Any:
        self.requests.append(request)
        if self.errors:
            raise self.errors.pop(0)
        litellm = import_litellm()
        # litellm's own mock path builds a real ModelResponse with usage figures.
        return litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response="4")


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Any:
    litellm = import_litellm()
    real = litellm.completion

    def install(errors: list[Exception]) -> ScriptedLiteLLM:
        fake = ScriptedLiteLLM(errors)

        def completion(**request: Any) -> Any:
            if request.get("mock_response"):
                return real(**request)
            return fake(**request)

        monkeypatch.setattr(litellm, "completion", completion)
        return fake

    return install


def complete(llm: LiteLLMChatModel, seed: int = 0) -> Any:
    return llm.complete(
        model="openai/gpt-4o-mini", messages=MESSAGES, temperature=0.0, max_tokens=16, seed=seed
    )


def test_tokens_cost_and_latency_are_recorded(scripted: Any) -> None:
    scripted([])
    done = complete(LiteLLMChatModel())
    assert done.text == "4"
    assert done.prompt_tokens > 0 and done.completion_tokens > 0
    assert done.cost > 0  # gpt-4o-mini is in litellm's local price table
    assert done.latency_s >= 0 and not done.cached


def test_the_cache_answers_a_repeated_request_without_a_call(scripted: Any, tmp_path: Path) -> None:
    fake = scripted([])
    llm = LiteLLMChatModel(cache=ResponseCache(tmp_path / "cache.sqlite"))
    first = complete(llm)
    again = complete(LiteLLMChatModel(cache=ResponseCache(tmp_path / "cache.sqlite")))
    assert len(fake.requests) == 1
    assert again.cached and again.text == first.text
    assert again.prompt_tokens == first.prompt_tokens  # what the design uses, even if not re-paid
    complete(llm, seed=1)  # another seed is another request
    assert len(fake.requests) == 2


def test_stop_strings_reach_the_provider_only_when_given(scripted: Any) -> None:
    fake = scripted([])
    llm = LiteLLMChatModel()
    complete(llm)
    llm.complete(
        model="openai/gpt-4o-mini",
        messages=MESSAGES,
        temperature=0.0,
        max_tokens=16,
        seed=0,
        stop=("\nObservation:",),
    )
    assert "stop" not in fake.requests[0]  # so requests without one keep their cache keys
    assert fake.requests[1]["stop"] == ["\nObservation:"]


def test_transient_errors_are_retried_with_backoff(scripted: Any) -> None:
    litellm = import_litellm()
    fake = scripted(
        [
            litellm.RateLimitError("slow down", llm_provider="openai", model="gpt-4o-mini"),
            litellm.APIConnectionError("reset", llm_provider="openai", model="gpt-4o-mini"),
        ]
    )
    done = complete(LiteLLMChatModel(max_retries=3, backoff_s=0.01))
    assert done.text == "4" and len(fake.requests) == 3


def test_retries_run_out_and_permanent_errors_fail_the_call(scripted: Any) -> None:
    litellm = import_litellm()
    limit = litellm.RateLimitError("slow down", llm_provider="openai", model="gpt-4o-mini")
    scripted([limit, limit, limit])
    with pytest.raises(LLMCallError, match="RateLimitError"):
        complete(LiteLLMChatModel(max_retries=2, backoff_s=0.01))
    fake = scripted(
        [litellm.AuthenticationError("bad key", llm_provider="openai", model="gpt-4o-mini")]
    )
    with pytest.raises(LLMCallError, match="bad key"):
        complete(LiteLLMChatModel(max_retries=5, backoff_s=0.01))
    assert len(fake.requests) == 1  # never retried


def test_importing_litellm_reads_the_local_price_list() -> None:
    import os

    import_litellm()
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
