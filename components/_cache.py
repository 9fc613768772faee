"""The disk caches: where they live, and the response cache that keeps re-runs from paying twice.

Below both the LLM boundary and the embedded models (whose joined weights it also holds), so
neither has to import the other to find it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentdesign.components._trace import Completion

__all__ = ["ResponseCache", "default_cache_dir"]


def default_cache_dir() -> Path:
    """Where caches and weights live: $AGENTDESIGN_CACHE_DIR, else ~/.cache/agentdesign."""
    configured = os.environ.get("AGENTDESIGN_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "agentdesign"


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
        conn = sqlite3.connect(self.path, timeout=30)
        # In WAL mode a commit then survives the process being killed without waiting for the
        # disk; with a sync per reply, 64 tasks at once queued behind one another's fsync.
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @staticmethod
    def key(request: Mapping[str, Any]) -> str:
        return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()

    def get(self, key: str) -> Completion | None:
        # WAL readers never wait for a writer: only writes take turns (`put`), or 64 tasks at
        # once queue here for their cache misses.
        with self._connect() as conn:
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
        with self._lock, self._connect() as conn:  # not in SQLite's busy-wait sleeps
            conn.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)", (key, value))
