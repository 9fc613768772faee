"""The LLM boundary: costs and tokens recorded, the cache never pays twice, retries and failures."""

from __future__ import annotations

import contextvars
import threading
from pathlib import Path
from typing import Any

import pytest

from agentdesign.components import (
    DEFAULT_LLM_TIMEOUT_S,
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


def test_provider_failures_are_told_by_their_status(scripted: Any) -> None:
    """A 502 or an overloaded 529 is the provider's, whatever class litellm gives it."""
    litellm = import_litellm()
    fake = scripted(
        [
            litellm.BadGatewayError("bad gateway", llm_provider="openai", model="gpt-4o-mini"),
            litellm.APIError(529, "overloaded", llm_provider="openai", model="gpt-4o-mini"),
        ]
    )
    assert complete(LiteLLMChatModel(backoff_s=0.0)).text == "4" and len(fake.requests) == 3


def test_each_call_has_the_client_timeout_and_no_hidden_retries(scripted: Any) -> None:
    fake = scripted([])
    complete(LiteLLMChatModel())
    complete(LiteLLMChatModel(timeout_s=7.5), seed=1)
    assert [r["timeout"] for r in fake.requests] == [DEFAULT_LLM_TIMEOUT_S, 7.5] == [120.0, 7.5]
    assert all(r["max_retries"] == 0 for r in fake.requests)  # the OpenAI client's: ours only


def test_retries_run_out_as_a_transient_failure(scripted: Any) -> None:
    litellm = import_litellm()
    limit = litellm.RateLimitError("slow down", llm_provider="openai", model="gpt-4o-mini")
    scripted([limit, limit, limit])
    with pytest.raises(LLMCallError, match=r"RateLimitError.*tried 3 times") as failed:
        complete(LiteLLMChatModel(max_retries=2, backoff_s=0.01))
    assert failed.value.transient


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        ("BadRequestError", False),  # the design's request: its failure, scored 0
        ("ContextWindowExceededError", False),
        ("AuthenticationError", True),  # the provider refused the key: no score, not retried
        ("NotFoundError", True),
    ],
)
def test_refused_calls_fail_at_once(scripted: Any, error: str, transient: bool) -> None:
    exc = getattr(import_litellm(), error)("refused", model="gpt-4o-mini", llm_provider="openai")
    fake = scripted([exc])
    with pytest.raises(LLMCallError, match="refused") as failed:
        complete(LiteLLMChatModel(max_retries=5, backoff_s=0.01))
    assert failed.value.transient is transient and len(fake.requests) == 1


def test_an_empty_reply_is_retried_and_never_cached(
    scripted: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No text and no completion token: the provider sent nothing; a reply whose tokens a stop
    string cut away (text empty, tokens counted) is the model's answer and is kept."""
    litellm = import_litellm()
    empty = litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response="")
    empty.usage.completion_tokens = 0
    replies = [empty, empty]
    real = litellm.completion
    monkeypatch.setattr(
        litellm, "completion", lambda **request: replies.pop(0) if replies else real(**request)
    )
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with pytest.raises(LLMCallError, match="an empty reply") as failed:
        complete(LiteLLMChatModel(cache=cache, max_retries=1, backoff_s=0.0))
    assert failed.value.transient and not replies
    replies.append(litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response=""))
    cut = complete(LiteLLMChatModel(cache=cache, backoff_s=0.0))
    assert cut.text == "" and cut.completion_tokens > 0
    assert complete(LiteLLMChatModel(cache=cache)).cached


def test_importing_litellm_reads_the_local_price_list() -> None:
    import os

    import_litellm()
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


def test_the_cache_keeps_one_connection_per_thread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sqlite3
    import threading

    from agentdesign.components import Completion

    opened: list[int] = []
    connect = sqlite3.connect
    monkeypatch.setattr(
        sqlite3, "connect", lambda *a, **k: opened.append(threading.get_ident()) or connect(*a, **k)
    )
    cache = ResponseCache(tmp_path / "cache.sqlite")
    for i in range(5):
        cache.put(str(i), Completion(text=str(i), prompt_tokens=1, completion_tokens=1))
        assert cache.get(str(i)) is not None
    assert len(opened) == 1  # opened once, by this thread
    worker = threading.Thread(target=lambda: cache.get("0"))
    worker.start()
    worker.join()
    assert len(opened) == 2 and opened[1] != opened[0]


def test_calls_run_in_threads_kept_for_the_next_call() -> None:
    """`_within` runs each call in a thread of its own, one kept from an earlier call when it is
    idle; a call past its deadline keeps its thread, and the next call takes another."""
    from agentdesign.components.llm._llm import _DeadlinePassed, _within

    def ident() -> int:
        return threading.get_ident()

    threads = {_within(5, ident) for _ in range(20)}
    assert threading.get_ident() not in threads and len(threads) <= 2
    release = threading.Event()
    with pytest.raises(_DeadlinePassed):
        _within(0.05, lambda: release.wait(5))
    assert _within(5, lambda: 4) == 4  # another thread: the one held still waits
    release.set()
    with pytest.raises(ZeroDivisionError):
        _within(5, lambda: 1 / 0)
    seen = contextvars.ContextVar[int]("seen", default=0)
    assert _within(5, lambda: seen.set(1) and seen.get()) == 1
    assert _within(5, seen.get) == 0  # each call in a context of its own
