"""The one boundary through which every model call passes: litellm, a disk cache and retries.

litellm is imported lazily (its import takes seconds) and with its price list read from the local
copy, so importing agentdesign never touches the network.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from agentdesign.components._cache import ResponseCache
from agentdesign.components._embedded import register_embedded_provider
from agentdesign.components._trace import Completion, LLMCallError, Message

__all__ = [
    "DEFAULT_LLM_TIMEOUT_S",
    "LiteLLMChatModel",
    "import_litellm",
]

# Seconds a model call may take before it counts as a transient failure: long enough for a slow
# local server's longest answer, short enough that a hung one cannot stall a run unnoticed.
DEFAULT_LLM_TIMEOUT_S = 120.0
# HTTP statuses that say the provider, not the request, failed: the same call may work later.
# 401-404 (a bad or unfunded key, a model the server does not have) are not retried at once,
# but are no score either: fixing the key or the server lets a resume run the task again.
_RETRIED_STATUSES = frozenset({408, 409, 429})
_REFUSED_STATUSES = frozenset({401, 402, 403, 404})


def import_litellm() -> Any:
    """Imports litellm without letting it fetch its price list from the network."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class LiteLLMChatModel:
    """Answers chat requests through litellm, from the cache when the same request was seen.

    A call the provider fails (a rate limit, a timeout, a dropped connection, a 5xx, a garbled
    reply, or an empty one: no text, no tool call, not one completion token) is retried with
    exponential backoff; when the retries run out it raises a transient `LLMCallError`, which the
    agent records as a provider failure, never a score. A refused key or an unknown model raises
    a transient one at once. Anything else (a request the provider rejects) raises a plain
    `LLMCallError`, which the agent records as that task's failure. An empty reply is never cached.
    """

    def __init__(
        self,
        *,
        cache: ResponseCache | None = None,
        api_base: str | None = None,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        timeout_s: float = DEFAULT_LLM_TIMEOUT_S,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.cache = cache
        self.api_base = api_base
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s

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
        request: dict[str, Any] = {
            "model": model,
            "messages": [dict(m) for m in messages],
            "temperature": temperature,
            "max_tokens": max_tokens,
            "seed": seed,
        }
        if stop:  # only when given, so requests without one keep their cache keys
            request["stop"] = list(stop)
        if self.api_base:
            request["api_base"] = self.api_base
        key = ResponseCache.key(request)
        hit = self.cache.get(key) if self.cache is not None else None
        # An empty reply cached before empty replies counted as failures is asked again.
        if hit is not None and not _is_empty(hit.text, hit.completion_tokens):
            return hit
        completion = self._call_with_retries(request)
        if self.cache is not None:
            self.cache.put(key, completion)
        return completion

    def _call_with_retries(self, request: dict[str, Any]) -> Completion:
        litellm = import_litellm()
        client: dict[str, Any] = {"timeout": self.timeout_s}
        if request["model"].startswith("embedded/"):
            register_embedded_provider()
        else:  # the OpenAI client's own retries would multiply ours, and the timeout with them
            client["max_retries"] = 0
        failure = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            started = time.perf_counter()
            try:
                response = litellm.completion(**request, **client)
            except Exception as exc:  # classified below: only the provider's failures retry
                failure = _describe(exc)
                status = _status(litellm, exc)
                if status in _REFUSED_STATUSES:
                    raise LLMCallError(failure, transient=True) from exc
                if status not in _RETRIED_STATUSES and status < 500:
                    raise LLMCallError(failure) from exc
                continue
            completion = _to_completion(litellm, response, time.perf_counter() - started)
            if completion is not None:
                return completion
            failure = "an empty reply: no text, no tool call, no completion token"
        raise LLMCallError(f"{failure} (tried {self.max_retries + 1} times)", transient=True)


def _describe(exc: Exception) -> str:
    """The error in one line, named once (litellm's messages already name their class)."""
    text = " ".join(str(exc).split())
    name = type(exc).__name__
    return text.removeprefix("litellm.") if name in text else f"{name}: {text}"


def _status(litellm: Any, exc: Exception) -> int:
    """The HTTP status a provider error stands for; 503 for a timeout or a dropped connection,
    which have none; 0 for an error that names none."""
    if isinstance(exc, litellm.Timeout | litellm.APIConnectionError):
        return 503
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else 0


def _is_empty(text: str, completion_tokens: int, tool_calls: object = None) -> bool:
    """A reply with nothing in it, which only a failing provider sends. Completion tokens without
    text (a reply cut by a stop string, or spent on hidden reasoning) are the model's answer."""
    return not text and not tool_calls and completion_tokens == 0


def _to_completion(litellm: Any, response: Any, latency_s: float) -> Completion | None:
    """The completion in litellm's `response`; None for an empty reply (see `_is_empty`)."""
    if not response.choices:
        return None
    message = response.choices[0].message
    text = message.content or ""
    usage = getattr(response, "usage", None)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    if _is_empty(text, completion_tokens, getattr(message, "tool_calls", None)):
        return None
    hidden = getattr(response, "_hidden_params", None) or {}
    if "response_cost" in hidden:  # litellm priced the reply already (None: not in its list)
        cost = float(hidden["response_cost"] or 0.0)
    else:
        try:
            cost = float(litellm.completion_cost(completion_response=response))
        except Exception:  # a model missing from litellm's price list costs "unknown", counted 0
            cost = 0.0
    return Completion(
        text=text,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=completion_tokens,
        cost=cost,
        latency_s=latency_s,
    )
