"""The one boundary through which every model call passes: litellm, a disk cache and retries.

litellm is imported lazily (its import takes seconds) and with its price list read from the local
copy, so importing agentdesign never touches the network.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentdesign.components._runtime import Completion, LLMCallError, Message

__all__ = ["LiteLLMChatModel", "ResponseCache", "default_cache_dir", "import_litellm"]


def default_cache_dir() -> Path:
    """Where caches and weights live: $AGENTDESIGN_CACHE_DIR, else ~/.cache/agentdesign."""
    configured = os.environ.get("AGENTDESIGN_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "agentdesign"


def import_litellm() -> Any:
    """Imports litellm without letting it fetch its price list from the network."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class ResponseCache:
    """A persistent map from request to completion, so re-runs and resumes never pay twice.

    A small SQLite file with one table; safe for several threads and processes.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    @staticmethod
    def key(request: Mapping[str, Any]) -> str:
        return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()

    def get(self, key: str) -> Completion | None:
        with self._lock, self._connect() as conn:
            row = conn.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        data = json.loads(row[0])
        return Completion(**{**data, "cached": True})

    def put(self, key: str, completion: Completion) -> None:
        value = json.dumps(
            {
                "text": completion.text,
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
                "cost": completion.cost,
                "latency_s": completion.latency_s,
            }
        )
        with self._lock, self._connect() as conn:
            conn.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)", (key, value))


class LiteLLMChatModel:
    """Answers chat requests through litellm, from the cache when the same request was seen.

    Transient provider errors (rate limits, timeouts, connection drops, 5xx) are retried with
    exponential backoff; anything else, or retries running out, raises `LLMCallError`, which the
    agent records as that task's failure.
    """

    def __init__(
        self,
        *,
        cache: ResponseCache | None = None,
        api_base: str | None = None,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        timeout_s: float = 600.0,
    ) -> None:
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
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return hit
        completion = self._call_with_retries(request)
        if self.cache is not None:
            self.cache.put(key, completion)
        return completion

    def _call_with_retries(self, request: dict[str, Any]) -> Completion:
        litellm = import_litellm()
        if request["model"].startswith("embedded/"):
            from agentdesign.components._embedded import register_embedded_provider

            register_embedded_provider()
        transient = (
            litellm.RateLimitError,
            litellm.Timeout,
            litellm.APIConnectionError,
            litellm.ServiceUnavailableError,
            litellm.InternalServerError,
        )
        for attempt in range(self.max_retries + 1):
            started = time.perf_counter()
            try:
                response = litellm.completion(**request, timeout=self.timeout_s)
            except transient as exc:
                if attempt == self.max_retries:
                    raise LLMCallError(f"{type(exc).__name__}: {exc}") from exc
                time.sleep(self.backoff_s * 2**attempt)
                continue
            except Exception as exc:  # any other provider error fails this task, not the run
                raise LLMCallError(f"{type(exc).__name__}: {exc}") from exc
            return _to_completion(litellm, response, time.perf_counter() - started)
        raise AssertionError("unreachable")


def _to_completion(litellm: Any, response: Any, latency_s: float) -> Completion:
    text = response.choices[0].message.content or ""
    usage = getattr(response, "usage", None)
    try:
        cost = float(litellm.completion_cost(completion_response=response))
    except Exception:  # a model missing from litellm's price list costs "unknown", counted as 0
        cost = 0.0
    return Completion(
        text=text,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost=cost,
        latency_s=latency_s,
    )
