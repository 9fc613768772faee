"""The database an archive lives in: its engine and sessions, shared by every part of the archive.

Opening one sets up its schema (see `_schema`); on SQLite, a write first takes the writer lock
(see `_sqlite`). Each public method of the archive is one session, one transaction, and rides
through a database outage (see `_outage`).

Everything the archive sends to its database passes `without_nul` here, its one write boundary:
a model may write a NUL character, which PostgreSQL's text cannot hold.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import optuna
from sqlalchemy import URL, Connection, create_engine, event, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError, SQLAlchemyError
from sqlmodel import Session, col, select

from agentdesign.archive import _validation as check
from agentdesign.archive._errors import ArchiveError
from agentdesign.archive.database._outage import (
    DEFAULT_RECONNECT_S,
    DatabaseOutage,
    first_line,
    riding,
)
from agentdesign.archive.database._schema import lock_for_set_up, set_up
from agentdesign.archive.database._sqlite import (
    SQLITE_BUSY_TIMEOUT_MS,
    configure_sqlite,
    drop_writer_lock,
    sqlite_file,
    sqlite_sync_normal,
    take_writer_lock,
)
from agentdesign.archive.database._tables import AgentRow, EvaluationRow, RunRow
from agentdesign.archive.database._trials import TrialStorage

__all__ = ["NUL_STAND_IN", "ArchiveEngine", "database_url", "lookup_agent", "without_nul"]

# What the archive stores for each NUL character ("\x00") of a text: the symbol for NUL, U+2400.
# PostgreSQL refuses NUL in text and JSON; replaced on every backend, so that what an archive holds
# does not depend on its database.
NUL_STAND_IN = "\u2400"


class ArchiveEngine:
    """The connection pool of one archive, with the lookups its writes and queries share.

    `Archive` is this plus its writes, queries and leases (`_writes`, `_queries`, `_lease`), each
    public method of which is made to ride through a database outage here (`__init_subclass__`).
    """

    def __init__(
        self, url: str, *, create: bool = True, reconnect_s: float = DEFAULT_RECONNECT_S
    ) -> None:
        """Opens the archive at `url`; `create` False (read-only commands) refuses to make one
        where there is none, rather than leave an empty archive behind. Once open, a database
        that stops answering is waited for up to `reconnect_s` seconds (see `_outage`)."""
        self._url = database_url(url)
        self._shown_url = self._url.render_as_string(hide_password=True)
        self._outage = DatabaseOutage(bound_s=reconnect_s, shown_url=self._shown_url)
        self._writer_lock: Path | None = None
        self._create = create
        file = sqlite_file(self._url)
        if not create and file is not None and not (file.is_file() and file.stat().st_size):
            raise ArchiveError(f"no archive at {file}")
        try:
            self._engine = create_engine(
                self._url,
                pool_pre_ping=True,
                json_serializer=lambda value: json.dumps(without_nul(value)),
            )
        except NoSuchModuleError:
            raise ArchiveError(
                f"cannot open archive {self._shown_url}: unknown database URL scheme "
                f"{self._url.drivername!r} (give a file path, sqlite:///..., or postgresql://...)"
            ) from None
        except ImportError as err:
            raise ArchiveError(
                f"cannot open archive {self._shown_url}: "
                f"its database driver is not installed ({err})"
            ) from err
        if self._url.get_backend_name() == "sqlite":
            event.listen(self._engine, "connect", configure_sqlite)
        event.listen(self._engine, "before_cursor_execute", _parameters_without_nul, retval=True)
        try:
            try:
                self._set_up_with_retries()
            except SQLAlchemyError as err:
                reason = first_line(err)
                if file is not None and "readonly" in reason:  # e.g. a read-only folder
                    reason += f" (SQLite also writes beside it, in {file.parent})"
                raise ArchiveError(f"cannot open archive {self._shown_url}: {reason}") from err
        except ArchiveError:
            self._engine.dispose()
            raise
        # A server's (SQLite has none to restart), and only now: a database that never answered
        # is a wrong URL, said at once, not waited for.
        if not self.single_writer:
            self._outage.listen(self._engine)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each public method a part of the archive defines, one transaction, rides through a
        database outage: run again if its connection dropped before its commit."""
        super().__init_subclass__(**kwargs)
        for name, member in list(vars(cls).items()):
            if inspect.isfunction(member) and not name.startswith("_"):
                setattr(cls, name, riding(member))

    def _set_up_with_retries(self) -> None:
        """Sets up the database; on SQLite, retries while another connection holds it busy.

        Connections that open a new SQLite file at once race to switch it to WAL, and SQLite can
        answer "database is locked" at once there instead of waiting out the busy timeout.
        """
        deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                with self._engine.begin() as conn:
                    set_up(conn, shown_url=self._shown_url, create=self._create)
                return
            except OperationalError as err:
                busy = self._url.get_backend_name() == "sqlite" and "locked" in str(err.orig)
                if not busy or time.monotonic() >= deadline:
                    raise
            time.sleep(0.05)

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of the database, password included: optuna opens the same one."""
        return self._url.render_as_string(hide_password=False)

    def __repr__(self) -> str:
        return f"Archive({self._shown_url!r})"

    def close(self) -> None:
        """Closes the pooled connections (SQLite checkpoints its WAL when the last one closes)."""
        self._engine.dispose()
        if self._writer_lock is not None:
            drop_writer_lock(self._writer_lock)
            self._writer_lock = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def single_writer(self) -> bool:
        """Whether one process at most writes this archive (SQLite): leases are then moot, since
        a lease held by anyone else belongs to a process that is gone."""
        return self._url.get_backend_name() == "sqlite"

    def study_storage(
        self,
        *,
        heartbeat_interval: int,
        grace_period: int,
        stale_trial_callback: Callable[[optuna.Study, optuna.trial.FrozenTrial], None],
    ) -> TrialStorage:
        """Optuna's storage in this database, with trial heartbeats from each trial's start.

        Made under the set-up lock: optuna creates its tables on first use, and several workers
        starting at once on a new PostgreSQL database would otherwise race to create them.
        """
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        with self._engine.connect() as conn, conn.begin():
            if not self.single_writer:  # SQLite: optuna's own connection must be free to write
                lock_for_set_up(conn)
            storage = TrialStorage(
                self.url,
                outage=self._outage,
                heartbeat_interval=heartbeat_interval,
                grace_period=grace_period,
                heartbeat_stale_trial_callback=stale_trial_callback,
            )
        if sqlite_file(self._url) is not None:  # optuna's commits as the archive's, no fsync
            event.listen(storage.engine, "connect", sqlite_sync_normal)
            storage.engine.dispose()  # its connections so far reopen with it
        return storage

    def _session(self) -> Session:
        # Rows stay readable after commit, so records can be built from them without a reload.
        return Session(self._engine, expire_on_commit=False)

    def _write_session(self) -> Session:
        """A session for a write: on SQLite, only after this process holds the writer lock."""
        file = sqlite_file(self._url)
        if file is not None and self._writer_lock is None:
            self._writer_lock = take_writer_lock(file, self._shown_url)
        return self._session()

    @contextmanager
    def _write_connection(self) -> Iterator[Connection]:
        """A connection for a write made of table statements alone, with no ORM session around
        it (the session's machinery took a third of a task result's write): on SQLite, only after
        this process holds the writer lock. Its transaction is rolled back unless committed."""
        file = sqlite_file(self._url)
        if file is not None and self._writer_lock is None:
            self._writer_lock = take_writer_lock(file, self._shown_url)
        with self._engine.connect() as connection:
            yield connection

    def _run_row(self, session: Session, name: str, *, lock: bool = False) -> RunRow:
        query = select(RunRow).where(col(RunRow.name) == name)
        row = session.exec(query.with_for_update() if lock else query).first()
        if row is None:
            names = list(session.exec(select(RunRow.name).order_by(col(RunRow.name))))
            known = f"runs: {check.listing(names)}" if names else "the archive has no runs yet"
            raise ArchiveError(f"no run named {name!r} ({known})")
        return row

    def _agent_row(self, session: Session, spec_hash: str) -> AgentRow:
        row = lookup_agent(session, spec_hash)
        if row is None:
            raise ArchiveError(f"no agent with spec hash {spec_hash!r} in {self._shown_url}")
        return row

    def _evaluation_row(
        self, session: Session, evaluation_id: int, *, lock: bool = False
    ) -> EvaluationRow:
        """Reads an evaluation; `lock` makes concurrent writers of its task results take turns."""
        query = select(EvaluationRow).where(col(EvaluationRow.id) == evaluation_id)
        row = session.exec(query.with_for_update() if lock else query).first()
        if row is None:
            raise ArchiveError(f"no evaluation with id {evaluation_id} in {self._shown_url}")
        return row


def database_url(url: str) -> URL:
    """The database an archive `url` names: a plain file path as the absolute SQLite URL that
    optuna can share; a PostgreSQL URL that names no driver (`postgresql://`, `postgres://`)
    with psycopg2 where it is installed. SQLAlchemy 2.1 reads such a URL as psycopg 3, but
    psycopg2 is the driver the `postgres` extra installs, so the URL most users write works."""
    if "://" not in url:
        return URL.create("sqlite", database=str(Path(url).expanduser().resolve()))
    try:
        parsed = make_url(url)
    except ArgumentError as err:
        raise ArchiveError(f"cannot parse the archive URL: {err}") from None
    if parsed.drivername in ("postgresql", "postgres"):
        psycopg2 = importlib.util.find_spec("psycopg2") is not None
        parsed = parsed.set(drivername="postgresql+psycopg2" if psycopg2 else "postgresql")
    return parsed


def without_nul(value: Any) -> Any:
    """`value` with every NUL of its text as `NUL_STAND_IN`: a string, or the strings (keys too)
    in a JSON value or a statement's parameters, at any depth."""
    if isinstance(value, str):
        return value.replace("\x00", NUL_STAND_IN)
    if isinstance(value, Mapping):
        return {without_nul(key): without_nul(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(without_nul(item) for item in value)
    return value


def _parameters_without_nul(
    _conn: Any,
    _cursor: Any,
    statement: str,
    parameters: Any,
    _context: Any,
    _executemany: bool,
) -> tuple[str, Any]:
    """Every statement's parameters, lookups' too, so that a text is found as it was stored."""
    return statement, without_nul(parameters)


def lookup_agent(session: Session, spec_hash: str) -> AgentRow | None:
    """The agent with exactly this hash, if archived (`Archive.find_agent` resolves a prefix)."""
    return session.exec(select(AgentRow).where(col(AgentRow.spec_hash) == spec_hash)).first()
