"""The one boundary through which every model call passes: litellm, a disk cache and retries.

litellm is imported lazily (its import takes seconds) and with its price list read from the local
copy, so importing agentdesign never touches the network.

Each try of a call to a provider has a deadline for the whole of it, connecting and every read:
the HTTP client's timeout bounds each read alone, so a server that sends a byte a second would
keep a call open for ever. A runner that gives up on a task asks `pending_model_call` whether the
task was waiting on the provider.
"""

from __future__ import annotations

import contextvars
import math
import os
import queue
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from agentdesign.components.llm._cache import ResponseCache
from agentdesign.components.llm._embedded import register_embedded_provider
from agentdesign.components.llm._limits import (
    DEFAULT_RETRY_BUDGET_S,
    RateLimiter,
    Ticket,
    rate_limiter,
)
from agentdesign.components.llm._pending import PendingCall, held_back, redacted, waiting_on
from agentdesign.components.llm._trace import Completion, LLMCallError, Message

__all__ = [
    "DEFAULT_LLM_TIMEOUT_S",
    "DEFAULT_RETRY_BUDGET_S",
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
_MAX_BACKOFF_S = 30.0  # the longest wait between two tries of a rate-limited call, jitter aside
_REFUSED_STATUSES = frozenset({401, 402, 403, 404})


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

    Every call of a model on one server passes the process's `RateLimiter` for them, which holds
    calls while the provider asks it to (`Retry-After`, `x-ratelimit-*`), caps the calls at once
    after a rate limit, and keeps to `rpm` requests and `tpm` tokens a minute if set. With a
    `retry_budget_s` (the default of `default_chat_model`), a rate-limited call (a 429) is tried
    again, after a jittered backoff or the wait the provider asked for, until that many seconds
    have passed since its first rate limit, apart from `max_retries`, with one line on stderr a
    minute at most while calls wait; with none (0, this class's default), a rate limit counts
    among the `max_retries` as any failure.
    """

    def __init__(
        self,
        *,
        cache: ResponseCache | None = None,
        api_base: str | None = None,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        timeout_s: float = DEFAULT_LLM_TIMEOUT_S,
        retry_budget_s: float = 0.0,
        rpm: float | None = None,
        tpm: float | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        if max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {max_retries}")
        if not 0 <= retry_budget_s < math.inf:
            raise ValueError(f"retry_budget_s must be from 0 on, got {retry_budget_s}")
        for name, cap in (("rpm", rpm), ("tpm", tpm)):
            if cap is not None and not 0 < cap < math.inf:
                raise ValueError(f"{name} must be positive, got {cap}")
        self.cache = cache
        self.api_base = api_base
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.retry_budget_s = retry_budget_s
        self.rpm = rpm
        self.tpm = tpm

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
        if _is_embedded(request["model"]):  # in this process: no provider to fail or limit it
            register_embedded_provider()
            return self._call_embedded(litellm, request, client)
        client["max_retries"] = 0  # the OpenAI client's own would multiply ours, and the timeout
        limiter = rate_limiter(request["model"], self.api_base, rpm=self.rpm, tpm=self.tpm)
        estimate = _estimated_tokens(request)
        pending = PendingCall(self.timeout_s)
        failures = limited = 0  # tries failed, other than by a rate limit, and by one
        limited_since: float | None = None
        tries = self.max_retries + 1
        failure: str | None = "given up while waiting on the provider's rate limit"

        def waiting(why: str, by_provider: bool) -> None:
            pending.settle(f"waiting: {why}")  # a task timeout now is no score: the limit's
            if by_provider:
                self._notify(request["model"], why)

        with waiting_on(pending):
            while True:
                with held_back():  # a wait here is the limits', not the design's, time
                    ticket = limiter.acquire(
                        estimate, given_up=lambda: pending.abandoned, on_wait=waiting
                    )
                if ticket is None:  # the runner gave up on the task meanwhile
                    break
                outcome = self._try(litellm, request, client, limiter=limiter, ticket=ticket)
                pending.settle(outcome.failure)
                if outcome.completion is not None:
                    return outcome.completion
                failure = outcome.failure
                if pending.abandoned:
                    break
                throttled = outcome.rate_limited and self.retry_budget_s > 0
                if throttled:
                    limited += 1
                    limited_since = limited_since or time.monotonic()
                    wait_s, past = self._rate_limit_wait(outcome, limited, since=limited_since)
                    if past:
                        failure = f"{failure}; {past}"
                        break
                    asked = outcome.retry_after_s
                    asking = "" if asked is None else f", asking to wait {_duration(asked)}"
                    self._notify(request["model"], f"the provider rate-limits calls (429{asking})")
                else:
                    failures += 1
                    if failures >= tries:
                        break
                    said_s = min(outcome.retry_after_s or 0.0, _MAX_BACKOFF_S)
                    wait_s = max(self.backoff_s * 2 ** (failures - 1), said_s)
                    if outcome.timed_out:  # else a hung provider would keep the run silent
                        print(
                            f"warning: {request['model']}: {failure} (try {failures} of "
                            f"{tries}); trying again in {wait_s:g} s",
                            file=sys.stderr,
                        )
                with held_back() if throttled else nullcontext():
                    if pending.wait(wait_s):  # given up while waiting
                        break
        raise LLMCallError(f"{failure} (tried {failures + limited} times)", transient=True)

    def _rate_limit_wait(
        self, outcome: _Outcome, limited: int, *, since: float
    ) -> tuple[float, str]:
        """The seconds to wait before the next try of a call rate-limited `limited` times, the
        first at `since`: a jittered backoff, or the wait the provider asked for if longer, but
        no later than the retry budget's end, for a last try then; or why the call gives up now:
        the budget is spent, or the provider asked to wait past it."""
        left_s = since + self.retry_budget_s - time.monotonic()
        asked = outcome.retry_after_s
        budget = _duration(self.retry_budget_s)
        if asked is not None and asked >= self.retry_budget_s:
            return 0.0, f"asked to wait {_duration(asked)}, longer than the {budget} retry budget"
        if left_s <= 0 or (asked is not None and asked >= left_s):
            spent = _duration(time.monotonic() - since)
            return 0.0, f"still rate limited after {spent} (the retry budget: {budget})"
        backoff_s = _jittered(self.backoff_s * 2 ** min(limited - 1, 16))
        return min(max(backoff_s, asked or 0.0), left_s), ""

    def _call_embedded(
        self, litellm: Any, request: dict[str, Any], client: dict[str, Any]
    ) -> Completion:
        """An embedded model's call, tried again as a provider's would be, with no deadline."""
        tries = self.max_retries + 1
        for attempt in range(1, tries + 1):
            outcome = self._try(litellm, request, client)
            if outcome.completion is not None:
                return outcome.completion
            if attempt < tries:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
        raise LLMCallError(f"{outcome.failure} (tried {tries} times)", transient=True)

    def _notify(self, model: str, why: str) -> None:
        """One line on stderr that calls of `model` wait, and why; then one a minute at most."""
        if self.retry_budget_s <= 0:  # rate limits are retried as any failure, and as quietly
            return
        now, key = time.monotonic(), (model, self.api_base or "")
        with _notices_lock:
            if now < _notices.get(key, -math.inf) + _NOTICE_EVERY_S:
                return
            _notices[key] = now
        budget = _duration(self.retry_budget_s)
        print(
            f"warning: {model}: {why}; waiting: each call tries again for up to {budget}",
            file=sys.stderr,
        )

    def _try(
        self,
        litellm: Any,
        request: dict[str, Any],
        client: dict[str, Any],
        *,
        limiter: RateLimiter | None = None,
        ticket: Ticket | None = None,
    ) -> _Outcome:
        """One try: its completion, or why the provider failed it. Tells `limiter` how it went.
        Raises `LLMCallError` for a failure no retry mends."""
        started = time.perf_counter()
        remote = limiter is not None

        def call() -> Any:
            return litellm.completion(**request, **client)

        def done(**how: Any) -> float | None:
            if limiter is None or ticket is None:
                return None
            return limiter.release(ticket, **how)

        try:
            response = _within(self.timeout_s, call) if remote else call()
        except Exception as exc:  # classified below: only the provider's failures retry
            # the whole try's deadline passed, or the HTTP client's for one read did first
            if isinstance(exc, litellm.Timeout | _DeadlinePassed):
                done()
                return _Outcome(failure=f"no reply within {self.timeout_s:g} s", timed_out=True)
            failure, status = _describe(exc), _status(litellm, exc)
            said = done(rate_limited=status == 429, headers=_error_headers(exc))
            if status in _REFUSED_STATUSES:
                raise LLMCallError(failure, transient=True) from exc
            if status not in _RETRIED_STATUSES and status < 500:
                raise LLMCallError(failure) from exc
            return _Outcome(failure=failure, rate_limited=status == 429, retry_after_s=said)
        latency = time.perf_counter() - started
        completion = _to_completion(litellm, response, latency, request)
        hidden = getattr(response, "_hidden_params", None) or {}
        usage = getattr(response, "usage", None)
        used = getattr(usage, "total_tokens", None)
        done(
            headers=hidden.get("additional_headers") or {},
            used_tokens=used if isinstance(used, int) else None,
        )
        if completion is None:
            return _Outcome(failure="an empty reply: no text, no tool call")
        return _Outcome(completion=completion)


@dataclass(frozen=True)
class _Outcome:
    """How one try ended: its completion, or why it failed, whether its deadline passed, whether
    the provider rate-limited it, and the seconds it asked to wait."""

    completion: Completion | None = None
    failure: str | None = None
    timed_out: bool = False
    rate_limited: bool = False
    retry_after_s: float | None = None


_NOTICE_EVERY_S = 60.0  # the waiting line, once a minute at most per model
_notices: dict[tuple[str, str], float] = {}  # by model and server
_notices_lock = threading.Lock()


def _jittered(seconds: float) -> float:
    """`seconds` capped at `_MAX_BACKOFF_S`, less up to half of it at random, so that calls
    limited together do not all come back at once."""
    seconds = min(seconds, _MAX_BACKOFF_S)
    return seconds * random.uniform(0.5, 1.0)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.3g} min" if seconds >= 60 else f"{seconds:.3g} s"


def _estimated_tokens(request: dict[str, Any]) -> int:
    """The tokens a request may use, for a tokens-a-minute cap: its text's characters over four
    (about a token each in English), and all the tokens the reply may take."""
    chars = sum(len(str(m.get("content") or "")) for m in request["messages"])
    return chars // 4 + int(request.get("max_tokens") or 0)


def _error_headers(exc: Exception) -> dict[str, str]:
    """The headers of the reply a provider's error came with, if litellm kept them."""
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    try:
        return {str(k): str(v) for k, v in dict(headers or {}).items()}
    except (TypeError, ValueError):
        return {}


def _within(deadline_s: float, call: Callable[[], Any]) -> Any:
    """`call()`, in a thread of its own, unless it takes longer than `deadline_s` in all: then
    `_DeadlinePassed`, and the thread is left to end when its connection does."""
    outcome: Future[Any] = Future()
    _call_threads.submit(call, outcome)
    try:
        return outcome.result(timeout=deadline_s)
    except FutureTimeout:
        raise _DeadlinePassed from None


# Seconds a call thread waits for its next call before it ends.
_CALL_THREAD_IDLE_S = 60.0
_Work = tuple[Callable[[], Any], "Future[Any]"]


class _CallThreads:
    """The daemon threads `_within` runs calls in, each kept for the next call once its call
    returns and ended after `_CALL_THREAD_IDLE_S` without one: a thread started for each call took
    a quarter of a millisecond of CPU a task at 64 tasks at once (bench/cpu_parts.py). A call
    past its deadline keeps its thread until its connection ends; the next call takes another.
    Each call runs in a context of its own, as in a new thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[_Work]] = []  # each idle thread's inbox, latest last
        os.register_at_fork(after_in_child=self._forget)  # a forked child has none of them

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._idle = []

    def submit(self, call: Callable[[], Any], outcome: Future[Any]) -> None:
        """Runs `call` in an idle thread, or a new one, with its result or error in `outcome`."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            thread = threading.Thread(
                target=self._serve, args=(inbox,), name="model call", daemon=True
            )
            thread.start()
        inbox.put((call, outcome))

    def _serve(self, inbox: queue.SimpleQueue[_Work]) -> None:
        while True:
            try:
                call, outcome = inbox.get(timeout=_CALL_THREAD_IDLE_S)
            except queue.Empty:
                with self._lock:
                    if any(idle is inbox for idle in self._idle):
                        self._idle = [idle for idle in self._idle if idle is not inbox]
                        return
                continue  # taken for a call just now: it is on its way
            result: Any = None
            error: BaseException | None = None
            try:
                result = contextvars.Context().run(call)
            except BaseException as exc:  # handed to the waiting thread, which re-raises it
                error = exc
            with self._lock:  # idle before the caller hears, so that its next call comes here
                self._idle.append(inbox)
            if error is None:
                outcome.set_result(result)
            else:
                outcome.set_exception(error)
            del call, outcome, result, error  # nothing of the call is kept while it waits


_call_threads = _CallThreads()


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
