"""How fast a provider lets this process call it: one `RateLimiter` per model and server, shared
by every call the process makes to it.

A limiter holds the calls that may not start yet, for three reasons:

- the provider said when to come back: a `Retry-After` (or `retry-after-ms`) on a rate-limited
  reply, or `x-ratelimit-remaining-requests: 0` (tokens too, and Anthropic's
  `anthropic-ratelimit-*`) on any reply, with the time its `reset` names;
- too many calls at once: the first rate-limited reply caps the calls in flight at half of those
  then running, each later one (of a call started after the last cut) halves the cap again, and
  every answer while the cap binds raises it by 1/cap, about one call more per round of calls
  (AIMD, as TCP paces itself);
- the caps the user set: requests and tokens per minute (`rpm`, `tpm`), as token buckets that
  hold a second's worth (a request at least, however large).

Standard library only: the export copies this module into an exported agent's runtime.
"""

from __future__ import annotations

import email.utils
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

__all__ = [
    "DEFAULT_RETRY_BUDGET_S",
    "RateLimiter",
    "Ticket",
    "rate_limiter",
    "retry_after_s",
]

# How long a call the provider keeps rate-limiting goes on trying: long enough to ride out a
# provider's per-minute limits many times over, short enough that a quota spent for the day
# stops the run within minutes.
DEFAULT_RETRY_BUDGET_S = 600.0
_DECREASE = 0.5  # the cap on calls at once, times this, on a rate-limited reply
_POLL_S = 0.25  # how often a waiting call looks whether its caller gave it up
_FORGET_S = 300.0  # a limiter unused this long starts afresh: the provider's limits moved on
# A duration as OpenAI writes its resets ("1s", "6m0s", "1h2m3.5s", "20ms").
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?"
                       r"(?:(\d+(?:\.\d+)?)ms)?")  # fmt: skip


@dataclass
class Ticket:
    """A call let through by a limiter: when it started, and the tokens it reserved."""

    started_at: float
    tokens: int


class _Bucket:
    """A token bucket: `per_minute` a minute, holding a second's worth (at least one `need`)."""

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self.at = time.monotonic()

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now

    def wait_s(self, need: float, now: float) -> float:
        """Seconds until `need` can be taken (0: now); a need past the capacity waits for a full
        bucket, then runs it into debt."""
        self._refill(now)
        need = min(need, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def take(self, amount: float) -> None:
        self.level -= amount


class RateLimiter:
    """The calls of one process to one model on one server (see the module's docstring).

    `acquire` lets a call start, or waits; `release` tells the limiter how it went. Thread-safe.
    """

    def __init__(self, name: str, *, rpm: float | None = None, tpm: float | None = None) -> None:
        self.name = name
        self._cond = threading.Condition()
        self.cap = math.inf  # calls at once; infinite until the provider first rate-limits
        self.in_flight = 0
        self.resume_at = 0.0  # no call starts before this (time.monotonic)
        self.why = ""  # why resume_at is where it is, for the waiting line
        self._cut_at = -math.inf  # calls started before the last cut do not cut again
        self.rate_limited = 0  # rate-limited replies seen
        self.used_at = time.monotonic()
        self.set_caps(rpm=rpm, tpm=tpm)

    def set_caps(self, *, rpm: float | None, tpm: float | None) -> None:
        """Sets the requests and tokens per minute not to exceed (None: no cap)."""
        for name, value in (("rpm", rpm), ("tpm", tpm)):
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number, got {value}")
        with self._cond:
            self.rpm, self.tpm = rpm, tpm
            self._requests = _Bucket(rpm) if rpm else None
            self._tokens = _Bucket(tpm) if tpm else None

    def acquire(
        self,
        tokens: int,
        *,
        given_up: Callable[[], bool] = lambda: False,
        on_wait: Callable[[str, bool], None] = lambda why, by_provider: None,
    ) -> Ticket | None:
        """Waits until a call of about `tokens` tokens may start, and starts it; None if
        `given_up()` turns true first. `on_wait` hears why, once, if the call has to wait, and
        whether the provider's limits hold it (else the caps set here)."""
        told = False
        with self._cond:
            while True:
                if given_up():
                    return None
                now = time.monotonic()
                if now - self.used_at > _FORGET_S and self.in_flight == 0:
                    self._forget()
                self.used_at = now
                wait_s, why, by_provider = self._wait(tokens, now)
                if wait_s <= 0:
                    self.in_flight += 1
                    if self._requests is not None:
                        self._requests.take(1)
                    if self._tokens is not None:
                        self._tokens.take(tokens)
                    return Ticket(started_at=now, tokens=tokens)
                if not told:
                    on_wait(why, by_provider)
                    told = True
                self._cond.wait(min(wait_s, _POLL_S))

    def _wait(self, tokens: int, now: float) -> tuple[float, str, bool]:
        """Seconds the next call must wait (0: none), why, and whether the provider's limits
        are the reason."""
        if now < self.resume_at:
            return self.resume_at - now, self.why, True
        if self.in_flight >= self.calls_at_once:
            return _POLL_S, f"rate limited: {self.calls_at_once:g} calls at once for now", True
        if self._requests is not None and (w := self._requests.wait_s(1, now)) > 0:
            return w, f"at the cap of {self.rpm:g} requests a minute", False
        if self._tokens is not None and (w := self._tokens.wait_s(tokens, now)) > 0:
            return w, f"at the cap of {self.tpm:g} tokens a minute", False
        return 0.0, "", False

    @property
    def calls_at_once(self) -> float:
        """How many calls may run at once now (infinite: no cap)."""
        return self.cap if math.isinf(self.cap) else max(1, math.floor(self.cap))

    def _forget(self) -> None:
        self.cap, self.resume_at, self._cut_at = math.inf, 0.0, -math.inf

    def release(
        self,
        ticket: Ticket,
        *,
        rate_limited: bool = False,
        headers: Mapping[str, str] | None = None,
        used_tokens: int | None = None,
    ) -> float | None:
        """Ends `ticket`'s call: rate limited (a 429) or not, with the reply's headers and the
        tokens it used. Returns the seconds the provider asked to wait, if it said."""
        now = time.monotonic()
        said = retry_after_s(headers or {}, now=time.time())
        with self._cond:
            if self._tokens is not None and used_tokens is not None:
                self._tokens.take(used_tokens - ticket.tokens)  # the estimate, corrected
            if rate_limited:
                self.rate_limited += 1
                if ticket.started_at >= self._cut_at:  # one cut per round of calls
                    self.cap = max(1.0, min(self.cap, self.in_flight) * _DECREASE)
                    self._cut_at = now
                if said is not None:
                    self._pause(now + said, f"rate limited: the provider asked to wait {said:g} s")
            else:
                # the cap binds on a call started since the last cut: it grows
                if ticket.started_at >= self._cut_at and self.in_flight >= self.calls_at_once:
                    self.cap += 1.0 / self.cap
                pause = _spent_s(headers or {}, ticket.tokens, now=time.time())
                if pause is not None:
                    self._pause(now + pause, f"the provider's limit is spent for {pause:.3g} s")
            self.in_flight -= 1
            self._cond.notify_all()
        return said

    def _pause(self, until: float, why: str) -> None:
        if until > self.resume_at:
            self.resume_at, self.why = until, why


_limiters: dict[tuple[str, str], RateLimiter] = {}
_limiters_lock = threading.Lock()


def rate_limiter(
    model: str, api_base: str | None, *, rpm: float | None = None, tpm: float | None = None
) -> RateLimiter:
    """The process's limiter of `model` at `api_base` (its provider's own server if None), with
    the caps of the latest caller."""
    key = (model, api_base or "")
    with _limiters_lock:
        limiter = _limiters.get(key)
        if limiter is None:
            limiter = _limiters[key] = RateLimiter(model, rpm=rpm, tpm=tpm)
            return limiter
    if (limiter.rpm, limiter.tpm) != (rpm, tpm):
        limiter.set_caps(rpm=rpm, tpm=tpm)
    return limiter


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """A header, whatever its case, also as litellm passes them on ("llm_provider-NAME")."""
    for key, value in headers.items():
        bare = key.lower().removeprefix("llm_provider-")
        if bare == name:
            return str(value)
    return None


def retry_after_s(headers: Mapping[str, str], *, now: float) -> float | None:
    """The seconds a reply asks the client to wait (`retry-after-ms`, or `Retry-After` in
    seconds or as an HTTP date), if it asks; `now` is the wall-clock time."""
    ms = _header(headers, "retry-after-ms")
    if ms is not None and (seconds := _header_number(ms)) is not None:
        return seconds / 1000
    value = _header(headers, "retry-after")
    if value is None:
        return None
    seconds = _header_number(value)
    if seconds is None:
        seconds = _instant(value, now=now)
    return None if seconds is None else max(0.0, seconds)


def _spent_s(headers: Mapping[str, str], tokens: int, *, now: float) -> float | None:
    """How long to hold new calls after a reply that says its requests, or the tokens of a call
    like this one, are spent: until one request (or those tokens) is back, at the pace the limit
    names, and no longer than its reset. None if the reply does not say so."""
    longest: float | None = None
    for what, need in (("requests", 1), ("tokens", tokens)):
        for remaining_name, reset_name, limit_name in (
            (f"x-ratelimit-remaining-{what}", f"x-ratelimit-reset-{what}",
             f"x-ratelimit-limit-{what}"),
            (f"anthropic-ratelimit-{what}-remaining", f"anthropic-ratelimit-{what}-reset",
             f"anthropic-ratelimit-{what}-limit"),
        ):  # fmt: skip
            remaining = _header_number(_header(headers, remaining_name) or "")
            if remaining is None or remaining >= need:
                continue
            reset = _reset_s(_header(headers, reset_name) or "", now=now)
            if reset is None:
                continue
            limit = _header_number(_header(headers, limit_name) or "")
            if limit:  # a minute's limit comes back at its pace, not all at the reset
                reset = min(reset, (need - remaining) * 60.0 / limit)
            longest = reset if longest is None else max(longest, reset)
    return longest


def _reset_s(value: str, *, now: float) -> float | None:
    """A reset as providers write it: seconds ("1.5"), a duration ("6m0s", "20ms"), or an
    instant (RFC 3339, as Anthropic's)."""
    value = value.strip()
    if not value:
        return None
    seconds = _header_number(value)
    if seconds is not None:
        return max(0.0, seconds)
    match = _DURATION.fullmatch(value)
    if match and any(match.groups()):
        h, m, s, ms = (float(g) if g else 0.0 for g in match.groups())
        return h * 3600 + m * 60 + s + ms / 1000
    return _instant(value, now=now)


def _instant(value: str, *, now: float) -> float | None:
    """Seconds from `now` to an HTTP date or an RFC 3339 instant; None if it is neither."""
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


def _header_number(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None
