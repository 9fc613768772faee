"""Riding through a database outage: a server restart or failover drops every connection and
refuses new ones for a moment, and a worker should neither die of it nor lose what it did.

An archive's engine, and optuna's beside it, connect through `DatabaseOutage.connect`, which
retries a refused connection with backoff; each of their transactions runs through
`DatabaseOutage.ride`, which runs again one that failed on a dropped connection before its commit
(nothing of it was written), or during the commit of one that only read. Both for `bound_s`
seconds from the outage's start: then `ArchiveUnreachableError`, one line. A transaction that
wrote and whose connection dropped during its commit is never run again, as it may have been
written: that is an `ArchiveUnreachableError` at once.

A dropped connection is seen however the transaction reports it: as the driver's error, as
optuna's `StorageInternalError` wrapping it, or as the refusal of a statement tried after the drop
on the same connection (optuna's `_get_trials` catches an `OperationalError` and tries another
query: SQLAlchemy refuses it until the transaction is rolled back).
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import optuna
from sqlalchemy import Engine, event
from sqlalchemy.exc import DBAPIError, PendingRollbackError

from agentdesign.archive._errors import ArchiveUnreachableError

__all__ = ["DEFAULT_RECONNECT_S", "DatabaseOutage", "first_line", "riding"]

log = logging.getLogger(__name__)

# Seconds an archive waits for its database to answer again before it gives up: a restart takes
# about one, a failover tens.
DEFAULT_RECONNECT_S = 60.0
# The pause between tries: doubling from the first, up to the last.
_FIRST_PAUSE_S, _LAST_PAUSE_S = 0.1, 2.0

_T = TypeVar("_T")


class DatabaseOutage:
    """The state of one database's outage (when it began, if it is on), shared by every engine
    and thread that reaches the database, so that they give up together."""

    def __init__(self, *, bound_s: float, shown_url: str) -> None:
        self._bound_s = bound_s
        self._shown_url = shown_url
        self._since: float | None = None
        self._pauses = 0
        self._transaction = threading.local()  # `wrote`: the current one has written

    def listen(self, engine: Engine) -> None:
        """Makes `engine` open its connections through `connect`, noting what each writes."""
        event.listen(engine, "do_connect", self.connect)
        event.listen(engine, "before_cursor_execute", self._note_statement)

    def _note_statement(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip()[:6].upper() != "SELECT":  # SELECT ... FOR UPDATE only locks
            self._transaction.wrote = True

    def connect(self, dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        """A new connection, tried again while the server refuses it (see the module's doc)."""
        while True:
            try:
                connection = dialect.connect(*cargs, **cparams)
            except dialect.loaded_dbapi.OperationalError as err:
                self._pause_or_give_up(err)
                continue
            self._end()
            return connection

    def ride(self, transaction: Callable[[], _T]) -> _T:
        """`transaction()`, run again while it fails on a dropped connection before its commit
        (or in the commit of one that only read)."""
        state = self._transaction
        outer = getattr(state, "wrote", False)  # a transaction this one runs within
        handled = sys.exception()  # raised before this transaction, so no drop of its own
        try:
            while True:
                state.wrote = False
                try:
                    result = transaction()
                except (
                    DBAPIError,
                    PendingRollbackError,
                    optuna.exceptions.StorageInternalError,
                ) as exc:
                    dropped = _dropped_connection(exc, handled)
                    if dropped is None:
                        raise
                    in_commit = isinstance(dropped, DBAPIError) and dropped.statement is None
                    if in_commit and state.wrote:  # written or not, nobody can tell
                        raise self._lost(dropped, "during a commit") from exc
                    self._pause_or_give_up(dropped)
                    continue
                self._end()
                return result
        finally:
            state.wrote = outer or state.wrote

    def _pause_or_give_up(self, err: BaseException) -> None:
        now = time.monotonic()
        if self._since is None:
            self._since, self._pauses = now, 0
            log.warning(
                "lost the archive database %s (%s): reconnecting for up to %g s",
                self._shown_url,
                first_line(err),
                self._bound_s,
            )
        if now - self._since >= self._bound_s:
            raise self._lost(err, f"and it did not answer again within {self._bound_s:g} s")
        time.sleep(min(_LAST_PAUSE_S, _FIRST_PAUSE_S * 2**self._pauses))
        self._pauses += 1

    def _end(self) -> None:
        self._since = None

    def _lost(self, err: BaseException, how: str) -> ArchiveUnreachableError:
        return ArchiveUnreachableError(
            f"lost the archive database {self._shown_url} ({first_line(err)}) {how}"
        )


def _dropped_connection(
    exc: BaseException, handled: BaseException | None
) -> DBAPIError | PendingRollbackError | None:
    """The error of the dropped connection that `exc`, raised by a transaction, comes of, if it
    does: `exc` itself, the error optuna's `StorageInternalError` wraps, or a statement's refusal
    to run on a connection that dropped earlier in the transaction (then the drop, if the refusal
    came while it was handled, else the refusal). `handled`: the exception being handled when the
    transaction began, where the search stops."""
    if isinstance(exc, optuna.exceptions.StorageInternalError):  # optuna's, of any SQLAlchemyError
        exc = exc.__cause__ if exc.__cause__ is not None else exc
    if isinstance(exc, DBAPIError):
        return exc if exc.connection_invalidated else None
    # The Connection's "Can't reconnect until invalid transaction is rolled back" ("8s2b"): its
    # connection dropped within this transaction, which never reached its commit. (The Session's
    # refusal after a failed flush, "7s2a", may follow any error: not a drop by itself.)
    if not isinstance(exc, PendingRollbackError) or exc.code != "8s2b":
        return None
    cause = exc.__context__
    while cause is not None and cause is not handled:
        if isinstance(cause, DBAPIError) and cause.connection_invalidated:
            return cause
        cause = cause.__cause__ if cause.__cause__ is not None else cause.__context__
    return exc


class _Riding(Protocol):
    _outage: DatabaseOutage


def riding(method: Callable[..., _T]) -> Callable[..., _T]:
    """`method`, of an object with an `_outage`, as one transaction that rides through it."""

    @functools.wraps(method)
    def ride(self: _Riding, *args: Any, **kwargs: Any) -> _T:
        return self._outage.ride(lambda: method(self, *args, **kwargs))

    return ride


def first_line(err: BaseException) -> str:
    """The first line of a database error's message (the driver's own, for a DBAPI error)."""
    message = str(err.orig) if isinstance(err, DBAPIError) else str(err)
    lines = message.strip().splitlines()
    return lines[0] if lines else type(err).__name__
