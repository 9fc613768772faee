"""Two things every call to a provider carries: the call a thread is waiting on, which a runner
that gives up on a task asks about (was the provider failing it?), and the redaction of API keys
from every error a call can store or print."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["PendingCall", "pending_model_call", "redacted", "waiting_on"]

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
