"""SQLite specifics: which file an archive is, the pragmas each connection gets, and the lock that
lets one process at a time write it (SQLite serializes writers; PostgreSQL needs none of this).
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path
from typing import IO, Any

from sqlalchemy import URL

from agentdesign.archive._errors import ArchiveError

__all__ = [
    "SQLITE_BUSY_TIMEOUT_MS",
    "configure_sqlite",
    "drop_writer_lock",
    "sqlite_file",
    "sqlite_sync_normal",
    "take_writer_lock",
]

SQLITE_BUSY_TIMEOUT_MS = 30_000


def sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite archive; None for an in-memory one or another database."""
    database = url.database
    if url.get_backend_name() != "sqlite" or database in (None, "", ":memory:"):
        return None
    return Path(database)


def configure_sqlite(dbapi_connection: Any, _connection_record: Any) -> None:
    """Lets writers queue instead of failing, readers read while one writes, and enforces keys.

    In WAL mode, synchronous=NORMAL keeps every commit through a killed process (kill -9 too)
    and the file consistent through a power cut, without an fsync per commit: one per task
    result held 64 tasks at once to a fraction of their pace (bench/concurrency.py).
    """
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def sqlite_sync_normal(dbapi_connection: Any, _connection_record: Any) -> None:
    """See `configure_sqlite`."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


# The SQLite writer locks this process holds: path -> (open lock file, how many archives use it).
_WRITER_LOCKS: dict[Path, tuple[IO[str], int]] = {}
_WRITER_LOCKS_GUARD = threading.Lock()


def take_writer_lock(database: Path, shown_url: str) -> Path:
    """Makes this process the one that writes a SQLite archive, or says which process is.

    An flock on `<database>.lock`: the kernel drops it when the process dies, even by SIGKILL, so
    a crashed run never leaves a stale lock behind. Archives of one process share it.
    """
    with _WRITER_LOCKS_GUARD:
        if database in _WRITER_LOCKS:
            handle, users = _WRITER_LOCKS[database]
            _WRITER_LOCKS[database] = (handle, users + 1)
            return database
        if not os.access(database, os.W_OK):  # e.g. mode 0444: SQLite would fail at the write
            raise ArchiveError(
                f"{shown_url} is read-only for this user, and this command writes to it: make it "
                "writable, or work on a copy"
            )
        try:
            handle = Path(f"{database}.lock").open("a+")  # noqa: SIM115  (held past this call)
        except OSError as err:  # e.g. a read-only folder
            raise ArchiveError(
                f"cannot write {shown_url}: its lock file {database}.lock: {err.strerror}"
            ) from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            pid = handle.read().strip() or "unknown"
            handle.close()
            raise ArchiveError(
                f"{shown_url} is being written by another process (pid {pid}): SQLite allows one "
                "writing process at a time; wait for it to finish, or use PostgreSQL "
                "(--storage postgresql://...) for parallel workers"
            ) from None
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        _WRITER_LOCKS[database] = (handle, 1)
        return database


def drop_writer_lock(database: Path) -> None:
    with _WRITER_LOCKS_GUARD:
        handle, users = _WRITER_LOCKS[database]
        if users > 1:
            _WRITER_LOCKS[database] = (handle, users - 1)
        else:
            del _WRITER_LOCKS[database]
            handle.close()  # closing the file releases the flock
