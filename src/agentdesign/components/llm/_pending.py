"""Three things every call to a provider carries: the call a thread is waiting on, which a runner
that gives up on a task asks about (was the provider failing it?), the time a task's calls spent
held back by rate limits (which a task's time limit does not count), and the redaction of API keys
from every error a call can store or print."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = [
    "PendingCall",
    "ThrottleClock",
    "held_back",
    "pending_model_call",
    "redacted",
    "throttle_clock",
    "waiting_on",
]

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
        self._abandoned = threading.Event()  # the runner gave up on it: no more tries

    def settle(self, failure: str | None) -> None:
        """Called by the calling thread as each try ends, with its failure (None: it answered)."""
        if self._failure is None:
            self._failure = failure
        self._settled.set()

    def provider_failure(self) -> str | None:
        """Why the provider failed this call, once a try has failed or answered; None if it
        answered. Waits for the try in flight, which its deadline ends within `deadline_s`; the
        call then makes no more tries."""
        self._abandoned.set()
        if not self._settled.wait(self._deadline_s + 1.0):  # a second for the caller to settle
            return f"no reply within {self._deadline_s:g} s"
        return self._failure

    @property
    def abandoned(self) -> bool:
        """Whether the runner gave up on the call: it makes no more tries."""
        return self._abandoned.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleeps `seconds` between tries, less if the runner gives up on the call meanwhile
        (then True)."""
        return self._abandoned.wait(seconds)


_pending: dict[int, PendingCall] = {}  # by thread id: the call each thread is waiting on


def pending_model_call(thread_id: int | None) -> PendingCall | None:
    """The call to a provider that thread `thread_id` is waiting on (embedded models have no
    provider to fail them: None), if any."""
    return None if thread_id is None else _pending.get(thread_id)


@contextmanager
def waiting_on(call: PendingCall) -> Iterator[None]:
    """Makes `call` the one this thread waits on, for `pending_model_call`, until the block ends."""
    _pending[threading.get_ident()] = call
    try:
        yield
    finally:
        _pending.pop(threading.get_ident(), None)


class ThrottleClock:
    """The seconds a task's model calls have spent held back by rate limits: waiting for the
    provider's limit (`Retry-After`, too many calls at once), for the run's own `rpm`/`tpm` caps,
    or between the tries of a call the provider rate-limited. A task's time limit measures the
    design, not the provider's throttling, so a runner adds these seconds to it; the retry budget
    still bounds them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done_s = 0.0
        self._since: list[float] = []  # the starts of waits still going on (calls of sub-threads)

    def seconds(self) -> float:
        """Held back so far, the waits still going on included."""
        now = time.monotonic()
        with self._lock:
            return self._done_s + sum(now - since for since in self._since)

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Counts the block's time as held back."""
        started = time.monotonic()
        with self._lock:
            self._since.append(started)
        try:
            yield
        finally:
            with self._lock:
                self._since.remove(started)
                self._done_s += time.monotonic() - started


_clock: ContextVar[ThrottleClock | None] = ContextVar("agentdesign_throttle_clock", default=None)


@contextmanager
def throttle_clock(clock: ThrottleClock) -> Iterator[ThrottleClock]:
    """Makes `clock` count the rate-limit waits of the model calls made in this context (a task)."""
    token = _clock.set(clock)
    try:
        yield clock
    finally:
        _clock.reset(token)


@contextmanager
def held_back() -> Iterator[None]:
    """Counts the block as a rate-limit wait on the current task's clock, if it has one."""
    clock = _clock.get()
    if clock is None:
        yield
        return
    with clock.waiting():
        yield
