"""The disk caches: where they live, and the response cache that keeps re-runs from paying twice.

Below both the LLM boundary and the embedded models (whose joined weights it also holds), so
neither has to import the other to find it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from agentdesign.components.llm._trace import Completion

__all__ = ["ResponseCache", "default_cache_dir", "sqlite_disk_full"]

# Free space below which an I/O error of SQLite counts as a full disk: growing its shared-memory
# file takes 32 KB at once, its log a page or more.
_NEARLY_FULL_BYTES = 2**20


def default_cache_dir() -> Path:
    """Where caches and weights live: $AGENTDESIGN_CACHE_DIR, else ~/.cache/agentdesign."""
    configured = os.environ.get("AGENTDESIGN_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "agentdesign"


class ResponseCache:
    """A persistent map from request to completion, so re-runs and resumes never pay twice.

    A small SQLite file with one table; safe for several threads and processes. A write that
    finds its disk full raises OSError(ENOSPC) naming the file, as any file write does, rather
    than SQLite's "database or disk is full" or "disk I/O error", which name none; the cache
    keeps what it held.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._local = threading.local()  # each thread's connection, kept for its next call
        with self._writing(), self._connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as error:
            if not sqlite_disk_full(error, self.path):
                raise
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path)) from error

    def _connect(self) -> sqlite3.Connection:
        """This thread's connection: opening one took a third of a millisecond of CPU, twice a
        task; it closes when its thread ends."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30)
            # In WAL mode a commit then survives the process being killed without waiting for
            # the disk; with a sync per reply, 64 tasks at once queued behind one another's fsync.
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
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
        with self._lock, self._writing(), self._connect() as conn:  # not in SQLite's busy waits
            conn.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)", (key, value))


def sqlite_disk_full(error: sqlite3.Error, path: Path) -> bool:
    """Whether SQLite failed on the database at `path` for want of space: SQLITE_FULL, or an I/O
    error (growing its shared-memory file, say) while the disk holding it has next to none."""
    code = error.sqlite_errorcode
    if code == sqlite3.SQLITE_FULL:
        return True
    if code & 0xFF != sqlite3.SQLITE_IOERR:  # the primary code of an extended one
        return False
    try:
        disk = os.statvfs(path.parent)
    except OSError:
        return False
    return disk.f_bavail * disk.f_frsize < _NEARLY_FULL_BYTES
