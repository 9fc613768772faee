"""The one boundary through which every model call passes: litellm, a disk cache and retries.

litellm is imported lazily (its import takes seconds) and with its price list read from the local
copy, so importing agentdesign never touches the network.

Each try of a call to a provider has a deadline for the whole of it, connecting and every read:
the HTTP client's timeout bounds each read alone, so a server that sends a byte a second would
keep a call open for ever. A runner that gives up on a task asks `pending_model_call` whether the
task was waiting on the provider.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager, nullcontext
from typing import Any

from agentdesign.components.llm._cache import ResponseCache
from agentdesign.components.llm._embedded import register_embedded_provider
from agentdesign.components.llm._trace import Completion, LLMCallError, Message

__all__ = [
    "DEFAULT_LLM_TIMEOUT_S",
    "LiteLLMChatModel",
    "PendingCall",
    "import_litellm",
    "pending_model_call",
    "redacted",
]

# Seconds a model call may take before it counts as a transient failure: long enough for a slow
# local server's longest answer, short enough that a hung one cannot stall a run unnoticed.
DEFAULT_LLM_TIMEOUT_S = 120.0
# HTTP statuses that say the provider, not the request, failed: the same call may work later.
# 401-404 (a bad or unfunded key, a model the server does not have) are not retried at once,
# but are no score either: fixing the key or the server lets a resume run the task again.
_RETRIED_STATUSES = frozenset({408, 409, 429})
_REFUSED_STATUSES = frozenset({401, 402, 403, 404})
# Tokens shaped like the API keys of common providers (OpenAI's and Anthropic's sk-..., Groq's
# gsk_..., Hugging Face's hf_..., Google's AIza..., xAI's xai-...), masked ones (sk-ab***yz) too.
_KEY_SHAPED = re.compile(r"\b(?:sk-|gsk_|hf_|AIza|xai-)[A-Za-z0-9_*.\-]{8,}")
# Environment variables whose values are secrets, whatever their shape (shorter values could be
# ordinary words, and are left be).
_SECRET_NAMES = ("_KEY", "_TOKEN", "_SECRET")
_MIN_SECRET_CHARS = 8


def redacted(text: str) -> str:
    """`text` without the API keys a provider may quote back in an error ("Incorrect API key
    provided: sk-..."): the values of the environment's *_API_KEY variables (any *_KEY, *_TOKEN
    or *_SECRET) and every key-shaped token. Every error of a model call passes here, so that no
    stored or printed error shows a key."""
    for name, value in os.environ.items():
        if name.upper().endswith(_SECRET_NAMES) and len(value) >= _MIN_SECRET_CHARS:
            text = text.replace(value, "[redacted]")
    return _KEY_SHAPED.sub("[redacted]", text)


class PendingCall:
    """A call to a provider that a thread is waiting on, as a runner that gives up on the
    thread's task sees it: was the provider failing it, or about to answer?"""

    def __init__(self, deadline_s: float) -> None:
        self._deadline_s = deadline_s
        self._settled = threading.Event()  # a try failed, or the call answered
        self._failure: str | None = None
        self.abandoned = False  # the runner gave up on it: no more tries

    def settle(self, failure: str | None) -> None:
        """Called by the calling thread as each try ends, with its failure (None: it answered)."""
        if self._failure is None:
            self._failure = failure
        self._settled.set()

    def provider_failure(self) -> str | None:
        """Why the provider failed this call, once a try has failed or answered; None if it
        answered. Waits for the try in flight, which its deadline ends within `deadline_s`; the
        call then makes no more tries."""
        self.abandoned = True
        if not self._settled.wait(self._deadline_s + 1.0):  # a second for the caller to settle
            return f"no reply within {self._deadline_s:g} s"
        return self._failure


_pending: dict[int, PendingCall] = {}  # by thread id: the call each thread is waiting on


def pending_model_call(thread_id: int | None) -> PendingCall | None:
    """The call to a provider that thread `thread_id` is waiting on (embedded models have no
    provider to fail them: None), if any."""
    return None if thread_id is None else _pending.get(thread_id)


@contextmanager
def _waiting_on(call: PendingCall) -> Iterator[None]:
    """Makes `call` the one this thread waits on, for `pending_model_call`, until the block ends."""
    _pending[threading.get_ident()] = call
    try:
        yield
    finally:
        _pending.pop(threading.get_ident(), None)


class _DeadlinePassed(Exception):
    """A try of a call to a provider did not end within its deadline."""


def import_litellm() -> Any:
    """Imports litellm without letting it fetch its price list from the network."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class LiteLLMChatModel:
    """Answers chat requests through litellm, from the cache when the same request was seen.

    A call the provider fails (a rate limit, a timeout, a dropped connection, a 5xx, a garbled
    reply, or an empty one: see `_is_empty`) is retried with exponential backoff, with a line on
    stderr before each try that follows a timeout; when the retries run out it raises a transient
    `LLMCallError`, which the agent records as a provider failure, never a score. A refused key or
    an unknown model raises a transient one at once. Anything else (a request the provider
    rejects) raises a plain `LLMCallError`, which the agent records as that task's failure. An
    empty reply is never cached. Errors name no API key (`redacted`).
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
        if max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {max_retries}")
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
        if hit is not None and not _is_empty(model, hit.text, hit.completion_tokens, max_tokens):
            return hit
        completion = self._call_with_retries(request)
        if self.cache is not None:
            self.cache.put(key, completion)
        return completion

    def _call_with_retries(self, request: dict[str, Any]) -> Completion:
        """The one loop where a failed call is tried again (see the class's docstring)."""
        litellm = import_litellm()
        client: dict[str, Any] = {"timeout": self.timeout_s}
        remote = not _is_embedded(request["model"])
        if remote:  # the OpenAI client's own retries would multiply ours, and the timeout with them
            client["max_retries"] = 0
        else:
            register_embedded_provider()
        tries = self.max_retries + 1
        pending = PendingCall(self.timeout_s)
        with _waiting_on(pending) if remote else nullcontext():
            for attempt in range(1, tries + 1):
                completion, failure, timed_out = self._try(litellm, request, client, remote=remote)
                pending.settle(failure)
                if completion is not None:
                    return completion
                if attempt == tries or pending.abandoned:
                    break
                wait_s = self.backoff_s * 2 ** (attempt - 1)
                if timed_out:  # else a hung provider would keep the run silent for minutes
                    print(
                        f"warning: {request['model']}: {failure} (try {attempt} of {tries}); "
                        f"trying again in {wait_s:g} s",
                        file=sys.stderr,
                    )
                time.sleep(wait_s)
        raise LLMCallError(f"{failure} (tried {attempt} times)", transient=True)

    def _try(
        self, litellm: Any, request: dict[str, Any], client: dict[str, Any], *, remote: bool
    ) -> tuple[Completion | None, str | None, bool]:
        """One try: its completion, or why the provider failed it and whether it timed out.
        Raises `LLMCallError` for a failure no retry mends."""
        started = time.perf_counter()

        def call() -> Any:
            return litellm.completion(**request, **client)

        try:
            response = _within(self.timeout_s, call) if remote else call()
        except Exception as exc:  # classified below: only the provider's failures retry
            # the whole try's deadline passed, or the HTTP client's for one read did first
            if isinstance(exc, litellm.Timeout | _DeadlinePassed):
                return None, f"no reply within {self.timeout_s:g} s", True
            failure, status = _describe(exc), _status(litellm, exc)
            if status in _REFUSED_STATUSES:
                raise LLMCallError(failure, transient=True) from exc
            if status not in _RETRIED_STATUSES and status < 500:
                raise LLMCallError(failure) from exc
            return None, failure, False
        latency = time.perf_counter() - started
        completion = _to_completion(litellm, response, latency, request)
        if completion is None:
            return None, "an empty reply: no text, no tool call", False
        return completion, None, False


def _within(deadline_s: float, call: Callable[[], Any]) -> Any:
    """`call()`, in a thread of its own, unless it takes longer than `deadline_s` in all: then
    `_DeadlinePassed`, and the thread is left to end when its connection does."""
    outcome: Future[Any] = Future()

    def work() -> None:
        try:
            outcome.set_result(call())
        except BaseException as exc:  # handed to the waiting thread, which re-raises it
            outcome.set_exception(exc)

    threading.Thread(target=work, name="model call", daemon=True).start()
    try:
        return outcome.result(timeout=deadline_s)
    except FutureTimeout:
        raise _DeadlinePassed from None


def _describe(exc: Exception) -> str:
    """The error in one line, named once (litellm's messages already name their class), without
    any API key a provider quoted back in it."""
    text = " ".join(str(exc).split())
    name = type(exc).__name__
    return redacted(text.removeprefix("litellm.") if name in text else f"{name}: {text}")


def _status(litellm: Any, exc: Exception) -> int:
    """The HTTP status a provider error stands for; 503 for a timeout or a dropped connection,
    which have none; 0 for an error that names none."""
    if isinstance(exc, litellm.Timeout | litellm.APIConnectionError):
        return 503
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else 0


def _is_embedded(model: str) -> bool:
    return model.startswith("embedded/")


def _is_empty(
    model: str, text: str, completion_tokens: int, max_tokens: int, tool_calls: object = None
) -> bool:
    """A reply with nothing in it, which a failing provider sends, whatever tokens it claims;
    unless it spent every token the request allowed (on hidden reasoning, say): then the design
    asked for too few, which no retry mends, and the empty reply is the model's answer. So is
    every reply of an embedded model: no provider stands between it and us, and asked again it
    says the same (a stop string that cuts its first word, say)."""
    return not (text or tool_calls or _is_embedded(model)) and completion_tokens < max_tokens


def _to_completion(
    litellm: Any, response: Any, latency_s: float, request: dict[str, Any]
) -> Completion | None:
    """The completion in litellm's `response` to `request`; None for an empty reply (see
    `_is_empty`)."""
    if not response.choices:
        return None
    message = response.choices[0].message
    text = message.content or ""
    usage = getattr(response, "usage", None)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    tool_calls = getattr(message, "tool_calls", None)
    if _is_empty(request["model"], text, completion_tokens, request["max_tokens"], tool_calls):
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
