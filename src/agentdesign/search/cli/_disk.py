"""A disk that fills up under the archive or the response cache: one line naming the file; and
the archive as the commands open it, ended in that line if its disk fills up.

SQLite commits nothing that did not fit, so what the archive (and the cache) held is intact, and
a run resumes once there is room. Only the file is hard to tell: SQLite's errors name none, so an
error of the archive's database is matched with the archive that the command opened.
"""

from __future__ import annotations

import contextlib
import errno
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import make_url

from agentdesign.archive import Archive
from agentdesign.components import AgentDesignError, sqlite_disk_full

__all__ = ["full_disk_error", "open_archive"]

_FULL = (errno.ENOSPC, errno.EDQUOT)


@contextlib.contextmanager
def open_archive(storage: str, *, create: bool = False) -> Iterator[Archive]:
    """The archive; only the commands that start work make one where there is none (a mistyped
    path for `show` says so instead of leaving an empty archive behind). A disk that fills up
    under it while the command runs ends the command with one line (see `full_disk_error`)."""
    with Archive(storage, create=create) as archive:
        try:
            yield archive
        except Exception as error:
            full = full_disk_error(error, archive=archive)
            if full is None:
                raise
            raise full from error


def full_disk_error(error: BaseException, *, archive: Archive | None) -> AgentDesignError | None:
    """The one line to print for `error` if a full disk caused it (or anything it wraps), with
    the `archive` the command has open; None for any other error."""
    file = _full_file(error, archive=_archive_file(archive) if archive is not None else None)
    if file is None:
        return None
    return AgentDesignError(
        f"the disk holding {file} is full: nothing the archive holds is lost; free some space, "
        "then run the command again (`agentdesign resume NAME` continues a run where it stopped)"
    )


def _archive_file(archive: Archive) -> Path | None:
    url = make_url(archive.url)
    return Path(url.database) if url.get_backend_name() == "sqlite" and url.database else None


def _full_file(error: BaseException, *, archive: Path | None) -> str | None:
    """The file a full disk stopped writing, from `error` and the errors it wraps; None if no
    disk was full. An OSError without a file name (a flush) is taken as the archive's."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [error]
    while todo:
        cause = todo.pop()
        if cause is None or id(cause) in seen:
            continue
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno in _FULL:
            return str(cause.filename or archive or "a file this command writes")
        if isinstance(cause, sqlite3.Error) and archive and sqlite_disk_full(cause, archive):
            return str(archive)
        todo += [cause.__cause__, cause.__context__, getattr(cause, "orig", None)]
    return None
