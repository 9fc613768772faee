"""Leases: which process runs an evaluation's tasks, and the heartbeat that keeps its claim alive.

Workers prove they are alive with a heartbeat, a daemon thread that calls `beat` every
`interval_s` seconds while work runs: both to the archive (the lease on the evaluation they run)
and to optuna (the trial they hold); a worker that dies stops beating and its work is taken over.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta
from types import TracebackType
from typing import Self

from sqlalchemy import or_, update
from sqlmodel import col

from agentdesign.archive import _validation as check
from agentdesign.archive._errors import ArchiveError
from agentdesign.archive._records import utc_now
from agentdesign.archive.database._engine import ArchiveEngine
from agentdesign.archive.database._tables import EvaluationRow

__all__ = ["Heartbeat", "Leases", "worker_id"]

log = logging.getLogger(__name__)


class Leases(ArchiveEngine):
    """The archive's leases on evaluations, so that processes that meet on one agent never pay
    twice for a task: only the holder runs them, and the others wait for its results."""

    def claim_evaluation(self, evaluation_id: int, *, owner: str, lease_s: float) -> bool:
        """Takes or renews the lease on an unfinished evaluation for `lease_s` seconds.

        False while another process holds a lease that has not run out, or once it is complete.
        """
        now = utc_now()
        conditions = [
            col(EvaluationRow.id) == evaluation_id,
            col(EvaluationRow.status) != "complete",
        ]
        if not self.single_writer:
            conditions.append(
                or_(
                    col(EvaluationRow.lease_owner).is_(None),
                    col(EvaluationRow.lease_owner) == owner,
                    col(EvaluationRow.lease_until) < now,
                )
            )
        lease = timedelta(seconds=check.non_negative(lease_s, "lease_s"))
        with self._write_session() as session:
            self._evaluation_row(session, evaluation_id)
            result = session.execute(
                update(EvaluationRow)
                .where(*conditions)
                .values(lease_owner=check.text(owner, "owner"), lease_until=now + lease)
            )
            session.commit()
            return bool(result.rowcount == 1)  # type: ignore[attr-defined]

    def release_evaluation(self, evaluation_id: int, *, owner: str) -> None:
        """Gives the lease back (if `owner` still holds it), so a waiting process need not wait."""
        with self._write_session() as session:
            session.execute(
                update(EvaluationRow)
                .where(
                    col(EvaluationRow.id) == evaluation_id, col(EvaluationRow.lease_owner) == owner
                )
                .values(lease_owner=None, lease_until=None)
            )
            session.commit()


def worker_id() -> str:
    """A name for this process that no other process, here or on another host, shares."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Heartbeat:
    """Calls `beat` every `interval_s` seconds from a daemon thread, between enter and exit."""

    def __init__(self, *, interval_s: float, beat: Callable[[], object]) -> None:
        self._interval_s = interval_s
        self._beat = beat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agentdesign-heartbeat", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._beat()
            except ArchiveError as exc:  # e.g. its database gone: said in one line
                log.warning("heartbeat failed: %s", exc)
            except Exception:  # a missed beat is retried next time; the work must go on
                log.warning("heartbeat failed", exc_info=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
