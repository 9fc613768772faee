"""The archive: every run, agent, evaluation and task result, kept in one SQL database.

Each public method is one transaction and checks its input before it writes, so a failing call
leaves the archive as it was. Inserts that two processes may race on (the same agent, the same
evaluation) catch the unique-key violation and read the winner's row instead.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Self, TypeVar

import optuna
from optuna.storages._rdb.models import SCHEMA_VERSION as OPTUNA_SCHEMA_VERSION
from sqlalchemy import (
    URL,
    Connection,
    bindparam,
    case,
    create_engine,
    distinct,
    event,
    func,
    insert,
    inspect,
    make_url,
    or_,
    update,
)
from sqlalchemy import select as sql_select  # sqlmodel's select types at most four columns
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    IntegrityError,
    NoSuchModuleError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.orm import aliased
from sqlmodel import Session, SQLModel, col, select
from sqlmodel.sql.expression import Select

from agentdesign.archive._migrate import create_schema, upgrade_schema
from agentdesign.archive._records import (
    AgentRecord,
    EvaluationRecord,
    LeaderboardRow,
    RunRecord,
    RunTotals,
)
from agentdesign.archive._tables import (
    OPTUNA_TABLES,
    SCHEMA_VERSION,
    AgentRow,
    EvaluationRow,
    MetaRow,
    RunEntryRow,
    RunRow,
    SearchCallRow,
    TaskFailureRow,
    TaskResultRow,
)
from agentdesign.components._errors import AgentDesignError
from agentdesign.evaluators import TaskOutcome

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["Archive", "ArchiveError"]

RUN_STATUSES = ("running", "finished", "failed")
FINISHED_EVALUATION_STATUSES = ("complete", "pruned", "failed")
SPLITS = ("search", "holdout", "all")
RUN_ENTRY_ROLES = ("candidate", "dev", "winner", "baseline", "exploratory")

_CREATED_BY = "agentdesign"
_MIGRATION_TABLE = "ad_alembic_version"  # alembic's, named apart from optuna's alembic_version
_SQLITE_BUSY_TIMEOUT_MS = 30_000
# Any fixed 64-bit number: every process opening a PostgreSQL archive takes this advisory lock.
_SETUP_LOCK_KEY = 0x61_64_61_72_63_68  # "adarch"

_Row = TypeVar("_Row", bound=SQLModel)
_Record = TypeVar("_Record", bound="DataclassInstance")
_Query = TypeVar("_Query", bound=Select[*tuple[Any, ...]])


# mypy cannot follow the editable install's package-dir mapping, so under `mypy archive/` the base
# class is Any; with the package resolved (`mypy -p agentdesign.archive`) no ignore is needed.
class ArchiveError(AgentDesignError):  # type: ignore[misc, unused-ignore]
    """The archive cannot be opened, or a call names something it lacks or passes a bad value."""


class Archive:
    """Runs, agents, evaluations and task results, in SQLite or any SQLAlchemy database.

    A plain file path means a SQLite file. Methods return frozen records, never ORM rows.
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        """Opens the archive at `url`; `create` False (read-only commands) refuses to make one
        where there is none, rather than leave an empty archive behind."""
        self._url = _normalize_url(url)
        self._shown_url = self._url.render_as_string(hide_password=True)
        self._writer_lock: Path | None = None
        self._create = create
        file = _sqlite_file(self._url)
        if not create and file is not None and not (file.is_file() and file.stat().st_size):
            raise ArchiveError(f"no archive at {file}")
        try:
            self._engine = create_engine(self._url, pool_pre_ping=True)
        except NoSuchModuleError:
            raise ArchiveError(
                f"cannot open archive {self._shown_url}: unknown database URL scheme "
                f"{self._url.drivername!r} (give a file path, sqlite:///..., or postgresql+psycopg2://...)"
            ) from None
        except ImportError as err:
            raise ArchiveError(
                f"cannot open archive {self._shown_url}: "
                f"its database driver is not installed ({err})"
            ) from err
        if self._url.get_backend_name() == "sqlite":
            event.listen(self._engine, "connect", _configure_sqlite)
        try:
            try:
                self._set_up_with_retries()
            except SQLAlchemyError as err:
                reason = _first_line(err)
                if file is not None and "readonly" in reason:  # e.g. a read-only folder
                    reason += f" (SQLite also writes beside it, in {file.parent})"
                raise ArchiveError(f"cannot open archive {self._shown_url}: {reason}") from err
        except ArchiveError:
            self._engine.dispose()
            raise

    def _set_up_with_retries(self) -> None:
        """Sets up the database; on SQLite, retries while another connection holds it busy.

        Connections that open a new SQLite file at once race to switch it to WAL, and SQLite can
        answer "database is locked" at once there instead of waiting out the busy timeout.
        """
        deadline = time.monotonic() + _SQLITE_BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                with self._engine.begin() as conn:
                    self._set_up(conn)
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
            _drop_writer_lock(self._writer_lock)
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

    # -- runs ---------------------------------------------------------------------------------

    def create_run(
        self,
        *,
        name: str,
        benchmark: str,
        model: str,
        strategy: str,
        budget: Mapping[str, Any],
        config: Mapping[str, Any],
        split_seed: int,
        search_task_ids: Sequence[str],
        holdout_task_ids: Sequence[str],
    ) -> RunRecord:
        search = _task_ids(search_task_ids, "search_task_ids")
        holdout = _task_ids(holdout_task_ids, "holdout_task_ids", allow_empty=True)
        shared = sorted(set(search) & set(holdout))
        if shared:
            raise ArchiveError(
                f"tasks in both the search and the holdout split: {_listing(shared)}"
            )
        now = _now()
        row = RunRow(
            name=_text(name, "run name"),
            benchmark=_text(benchmark, "benchmark"),
            model=_text(model, "model"),
            strategy=_text(strategy, "strategy"),
            budget=_json_object(budget, "budget"),
            config=_json_object(config, "config"),
            split_seed=_int(split_seed, "split_seed"),
            search_task_ids=search,
            holdout_task_ids=holdout,
            status="running",
            elapsed_s=0.0,
            created_at=now,
            updated_at=now,
        )
        with self._write_session() as session:
            session.add(row)
            try:
                session.commit()
            except IntegrityError:
                raise ArchiveError(
                    f"a run named {name!r} already exists in {self._shown_url}: "
                    "resume it or choose another name"
                ) from None
        return _record(RunRecord, row)

    def get_run(self, name: str) -> RunRecord:
        with self._session() as session:
            return _record(RunRecord, self._run_row(session, name))

    def list_runs(self) -> list[RunRecord]:
        with self._session() as session:
            rows = session.exec(select(RunRow).order_by(col(RunRow.created_at), col(RunRow.id)))
            return [_record(RunRecord, row) for row in rows]

    def update_run(
        self, name: str, *, status: str | None = None, add_elapsed_s: float = 0.0
    ) -> RunRecord:
        """Adds elapsed time in SQL (not read-modify-write), so concurrent workers all count."""
        values: dict[str, Any] = {
            "elapsed_s": col(RunRow.elapsed_s) + _non_negative(add_elapsed_s, "add_elapsed_s"),
            "updated_at": _now(),
        }
        if status is not None:
            values["status"] = _choice(status, RUN_STATUSES, "run status")
        with self._write_session() as session:
            row = self._run_row(session, name)
            session.exec(update(RunRow).where(col(RunRow.id) == row.id).values(values))
            session.commit()
            session.refresh(row)
            return _record(RunRecord, row)

    def record_winner(self, name: str, agent_hash: str) -> RunRecord:
        """Fixes the run's winner, once: a second call with another agent is refused.

        The search records it before any holdout task runs, so nothing seen on the holdout can
        change which design the run reports as its winner.
        """
        with self._write_session() as session:
            row = self._run_row(session, name, lock=True)
            self._agent_row(session, agent_hash)
            if row.winner_hash is not None and row.winner_hash != agent_hash:
                raise ArchiveError(
                    f"run {name!r} already recorded {row.winner_hash} as its winner "
                    f"on {_utc(row.winner_at or row.updated_at):%Y-%m-%d %H:%M} UTC; "
                    "a winner is never replaced"
                )
            if row.winner_hash is None:
                row.winner_hash = agent_hash
                row.winner_at = _now()
                session.add(row)
                session.commit()
                session.refresh(row)
            return _record(RunRecord, row)

    # -- agents -------------------------------------------------------------------------------

    def add_agent(
        self,
        *,
        spec: Mapping[str, Any],
        spec_hash: str,
        parent_hash: str | None = None,
        co_parent_hash: str | None = None,
        operator: str | None = None,
    ) -> AgentRecord:
        """Archives an agent once per hash; a second call returns the first one's record.

        `parent_hash` is the agent it was made from (mutation) or its first parent, and
        `co_parent_hash` the second parent of a crossover or recombination."""
        spec_json = _json_object(spec, "agent spec")
        row = AgentRow(
            spec_hash=_text(spec_hash, "spec_hash"),
            spec=spec_json,
            model=spec_json["model"] if isinstance(spec_json.get("model"), str) else None,
            parent_hash=_optional_text(parent_hash, "parent_hash"),
            co_parent_hash=_optional_text(co_parent_hash, "co_parent_hash"),
            operator=_optional_text(operator, "operator"),
            created_at=_now(),
        )
        with self._write_session() as session:
            stored = _get_or_insert(session, row, lambda: _find_agent(session, spec_hash))
        if stored.spec != spec_json:
            raise ArchiveError(
                f"agent {spec_hash} is archived with a different spec: "
                "its spec hash is not canonical"
            )
        return _record(AgentRecord, stored)

    def get_agent(self, spec_hash: str) -> AgentRecord:
        with self._session() as session:
            return _record(AgentRecord, self._agent_row(session, spec_hash))

    # -- evaluations --------------------------------------------------------------------------

    def get_or_create_evaluation(
        self, *, agent_hash: str, benchmark: str, task_ids: Sequence[str], split: str
    ) -> EvaluationRecord:
        """Finds the agent's evaluation on exactly these tasks, from any run, or starts one.

        A found evaluation keeps the split label it was created with.
        """
        ids = sorted(_task_ids(task_ids, "task_ids"))
        task_set = _task_set_digest(ids)
        now = _now()
        row = EvaluationRow(
            agent_hash=agent_hash,
            benchmark=_text(benchmark, "benchmark"),
            task_set=task_set,
            task_ids=ids,
            split=_choice(split, SPLITS, "split"),
            n_planned=len(ids),
            status="running",
            created_at=now,
            updated_at=now,
        )
        query = select(EvaluationRow).where(
            col(EvaluationRow.agent_hash) == agent_hash,
            col(EvaluationRow.benchmark) == benchmark,
            col(EvaluationRow.task_set) == task_set,
        )
        with self._write_session() as session:
            self._agent_row(session, agent_hash)
            stored = _get_or_insert(session, row, lambda: session.exec(query).first())
            return _record(EvaluationRecord, stored)

    def get_evaluation(self, evaluation_id: int) -> EvaluationRecord:
        with self._session() as session:
            return _record(EvaluationRecord, self._evaluation_row(session, evaluation_id))

    def task_results(self, evaluation_id: int) -> dict[str, TaskOutcome]:
        """The evaluation's recorded task results by task id, in the order they were recorded."""
        with self._session() as session:
            self._evaluation_row(session, evaluation_id)
            rows = session.exec(
                select(TaskResultRow)
                .where(col(TaskResultRow.evaluation_id) == evaluation_id)
                .order_by(col(TaskResultRow.id))
            )
            return {row.task_id: _record(TaskOutcome, row) for row in rows}

    def add_task_result(self, evaluation_id: int, outcome: TaskOutcome) -> bool:
        """Records one finished task at once, so an interrupted evaluation resumes where it stopped.

        Returns False, changing nothing, when the task is already recorded.
        """
        row = _task_result_row(evaluation_id, outcome)
        ids = {"evaluation": evaluation_id, "task": outcome.task_id}
        with self._write_session() as session:
            # Its task ids alone, locked so that concurrent writers of its results take turns.
            task_ids = session.execute(_TASK_IDS, ids).scalar_one_or_none()
            if task_ids is None:
                raise ArchiveError(f"no evaluation with id {evaluation_id} in {self._shown_url}")
            if outcome.task_id not in task_ids:
                raise ArchiveError(
                    f"task {outcome.task_id!r} is not among the tasks of evaluation {evaluation_id}"
                )
            if session.execute(_RECORDED, ids).first() is not None:
                return False
            session.add(row)
            try:
                session.flush()
            except IntegrityError:  # another process recorded it since the check above
                return False
            # Added in SQL, in the transaction that inserts the row: as exact as summing every
            # result again (`_refresh_totals`), which grew with the evaluation, per task.
            session.exec(
                _ADD_RESULT,
                params={
                    "evaluation": evaluation_id,
                    "add_prompt": row.prompt_tokens,
                    "add_completion": row.completion_tokens,
                    "add_cost": row.cost,
                    "add_wall": row.latency_s,
                    "now": _now(),
                },
            )
            session.commit()
            return True

    def add_task_failure(self, evaluation_id: int, outcome: TaskOutcome) -> None:
        """Records a task attempt the provider failed: kept for the record, never a score, so the
        task stays open and runs again on resume."""
        row = TaskFailureRow(
            evaluation_id=evaluation_id,
            task_id=_text(outcome.task_id, "task_id"),
            error_kind=_text(outcome.error_kind or "provider", "error_kind"),
            error=outcome.error or "",
            prompt_tokens=_count(outcome.prompt_tokens, "prompt_tokens"),
            completion_tokens=_count(outcome.completion_tokens, "completion_tokens"),
            cost=_non_negative(outcome.cost, "cost"),
            latency_s=_non_negative(outcome.latency_s, "latency_s"),
            created_at=_now(),
        )
        with self._write_session() as session:
            self._evaluation_row(session, evaluation_id)
            session.add(row)
            session.commit()

    def task_failures(self, evaluation_id: int) -> list[TaskOutcome]:
        """The provider failures recorded for an evaluation's tasks, oldest first."""
        with self._session() as session:
            self._evaluation_row(session, evaluation_id)
            rows = session.exec(
                select(TaskFailureRow)
                .where(col(TaskFailureRow.evaluation_id) == evaluation_id)
                .order_by(col(TaskFailureRow.id))
            )
            return [
                TaskOutcome(
                    task_id=row.task_id,
                    output="",
                    answer="",
                    score=0.0,
                    prompt_tokens=row.prompt_tokens,
                    completion_tokens=row.completion_tokens,
                    cost=row.cost,
                    latency_s=row.latency_s,
                    error_kind=row.error_kind,
                    error=row.error,
                )
                for row in rows
            ]

    def finish_evaluation(
        self, evaluation_id: int, *, status: str, mean: float, ci_low: float, ci_high: float
    ) -> EvaluationRecord:
        """Closes an evaluation; "complete" needs every planned task recorded."""
        values = {
            "status": _choice(status, FINISHED_EVALUATION_STATUSES, "evaluation status"),
            "mean": _finite(mean, "mean"),
            "ci_low": _finite(ci_low, "ci_low"),
            "ci_high": _finite(ci_high, "ci_high"),
        }
        if not ci_low <= ci_high:
            raise ArchiveError(f"ci_low {ci_low} is above ci_high {ci_high}")
        with self._write_session() as session:
            row = self._evaluation_row(session, evaluation_id, lock=True)
            if status == "complete":
                n_done = session.exec(
                    select(func.count())
                    .select_from(TaskResultRow)
                    .where(col(TaskResultRow.evaluation_id) == evaluation_id)
                ).one()
                if n_done != row.n_planned:
                    raise ArchiveError(
                        f"evaluation {evaluation_id} has {n_done} of {row.n_planned} task results: "
                        "it cannot be complete"
                    )
            _refresh_totals(session, evaluation_id, **values)
            session.commit()
            session.refresh(row)
            return _record(EvaluationRecord, row)

    def add_run_entry(
        self,
        *,
        run_name: str,
        agent_hash: str,
        evaluation_id: int,
        trial_number: int | None,
        max_agents: int | None = None,
        role: str = "candidate",
    ) -> bool:
        """Notes that a run used an evaluation; a repeat call keeps the first trial and role.

        With `max_agents`, an agent new to the run is refused (False) once the run holds that many:
        the run's row stays locked meanwhile, so workers racing for the last slot get one each.
        """
        with self._write_session() as session:
            run = self._run_row(session, run_name, lock=max_agents is not None)
            evaluation = self._evaluation_row(session, evaluation_id)
            if evaluation.agent_hash != agent_hash:
                raise ArchiveError(
                    f"evaluation {evaluation_id} is of agent {evaluation.agent_hash}, "
                    f"not {agent_hash}"
                )
            entries = select(RunEntryRow).where(col(RunEntryRow.run_id) == run.id)
            if max_agents is not None:
                candidates = entries.where(col(RunEntryRow.role) == "candidate")
                known = session.exec(
                    candidates.where(col(RunEntryRow.agent_hash) == agent_hash)
                ).first()
                n_agents = session.exec(
                    select(func.count(func.distinct(RunEntryRow.agent_hash))).where(
                        col(RunEntryRow.run_id) == run.id, col(RunEntryRow.role) == "candidate"
                    )
                ).one()
                if known is None and n_agents >= _int(max_agents, "max_agents"):
                    return False
            row = RunEntryRow(
                run_id=_ident(run.id),
                agent_hash=agent_hash,
                evaluation_id=evaluation_id,
                trial_number=None if trial_number is None else _int(trial_number, "trial_number"),
                role=_choice(role, RUN_ENTRY_ROLES, "run entry role"),
                created_at=_now(),
            )
            query = entries.where(col(RunEntryRow.evaluation_id) == evaluation_id)
            _get_or_insert(session, row, lambda: session.exec(query).first())
            return True

    def add_search_call(
        self,
        *,
        run_name: str,
        purpose: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cost: float,
        latency_s: float,
    ) -> None:
        """Records a model call the search made for the run itself (a prompt refinement): it
        counts in the run's totals, and so against its token budget, but in no agent's score."""
        row = SearchCallRow(
            run_id=0,  # set below, in the session that finds the run
            purpose=_text(purpose, "purpose"),
            model=_text(model, "model"),
            prompt_tokens=_count(prompt_tokens, "prompt_tokens"),
            completion_tokens=_count(completion_tokens, "completion_tokens"),
            cost=_non_negative(cost, "cost"),
            latency_s=_non_negative(latency_s, "latency_s"),
            created_at=_now(),
        )
        with self._write_session() as session:
            row.run_id = _ident(self._run_row(session, run_name).id)
            session.add(row)
            session.commit()

    # -- reports ------------------------------------------------------------------------------

    def leaderboard(
        self,
        *,
        run_name: str | None = None,
        benchmark: str | None = None,
        model: str | None = None,
        split: str = "search",
        limit: int = 20,
    ) -> list[LeaderboardRow]:
        """Complete evaluations, best mean first; equal means rank the cheaper agent higher."""
        if _int(limit, "limit") < 1:
            raise ArchiveError(f"limit must be at least 1, not {limit}")
        with self._session() as session:
            query = self._ranked(
                session,
                select(EvaluationRow, AgentRow.spec).join(
                    AgentRow, col(AgentRow.spec_hash) == col(EvaluationRow.agent_hash)
                ),
                run_name=run_name,
                benchmark=benchmark,
                model=model,
                split=split,
            )
            query = query.order_by(
                col(EvaluationRow.mean).desc(),
                col(EvaluationRow.cost),
                _tokens(),
                col(EvaluationRow.agent_hash),
                col(EvaluationRow.id),
            ).limit(limit)
            return [
                _leaderboard_row(rank, evaluation, spec)
                for rank, (evaluation, spec) in enumerate(session.exec(query), start=1)
            ]

    def run_totals(self, run_name: str) -> RunTotals:
        """Sums over the run's evaluations, in SQL: a resume at 10,000 agents calls this often."""
        # Agents count the designs searched; baselines and other roles count in tokens and cost.
        candidate = col(RunEntryRow.role) == "candidate"
        agent = case((candidate, col(EvaluationRow.agent_hash)))
        complete = case((candidate & (col(EvaluationRow.status) == "complete"), agent))
        finished = case((candidate & col(EvaluationRow.status).in_(("complete", "pruned")), agent))
        with self._session() as session:
            run = self._run_row(session, run_name)
            query = (
                sql_select(
                    func.count(distinct(agent)),
                    func.count(distinct(complete)),
                    func.count(distinct(finished)),
                    func.coalesce(func.sum(EvaluationRow.prompt_tokens), 0),
                    func.coalesce(func.sum(EvaluationRow.completion_tokens), 0),
                    func.coalesce(func.sum(EvaluationRow.cost), 0.0),
                    func.coalesce(func.sum(EvaluationRow.wall_s), 0.0),
                )
                .join(RunEntryRow, col(RunEntryRow.evaluation_id) == col(EvaluationRow.id))
                .where(col(RunEntryRow.run_id) == run.id)
            )
            n_agents, n_complete, n_finished, prompt, completion, cost, wall = session.execute(
                query
            ).one()
            searching = sql_select(
                func.count(col(SearchCallRow.id)),
                func.coalesce(func.sum(SearchCallRow.prompt_tokens), 0),
                func.coalesce(func.sum(SearchCallRow.completion_tokens), 0),
                func.coalesce(func.sum(SearchCallRow.cost), 0.0),
            ).where(col(SearchCallRow.run_id) == run.id)
            n_calls, search_prompt, search_completion, search_cost = session.execute(
                searching
            ).one()
        return RunTotals(
            run_name=run_name,
            n_agents=int(n_agents),
            n_complete=int(n_complete),
            n_finished=int(n_finished),
            prompt_tokens=int(prompt) + int(search_prompt),
            completion_tokens=int(completion) + int(search_completion),
            cost=float(cost) + float(search_cost),
            wall_s=float(wall),
            n_search_calls=int(n_calls),
        )

    # -- archive at scale: Pareto front, lineage, leases, the optuna storage ------------------

    def pareto(
        self,
        *,
        run_name: str | None = None,
        benchmark: str | None = None,
        model: str | None = None,
        split: str = "search",
    ) -> list[LeaderboardRow]:
        """The complete evaluations that no other beats on both score and cost, cheapest first.

        Cost is compared first and tokens break its ties, so for local models (cost 0) the front is
        score against tokens. Scores are fractions of a task set, so they take few distinct
        values: the front is found by hopping from score to score down the leaderboard index,
        one indexed lookup per score (the cheapest agent at that score), and stops at the score
        of the cheapest agent overall. At 100,000 agents that is a few lookups, not a sweep.
        """
        mean, cost, tokens = col(EvaluationRow.mean), col(EvaluationRow.cost), _tokens()
        front: list[int] = []
        with self._session() as session:

            def ranked(query: _Query) -> _Query:
                return self._ranked(
                    session, query, run_name=run_name, benchmark=benchmark, model=model, split=split
                )

            cheapest = session.exec(
                ranked(select(cost, tokens)).order_by(cost, tokens).limit(1)
            ).first()
            best_key: tuple[float, int] | None = None
            below: float | None = None
            while cheapest is not None and best_key != tuple(cheapest):
                level = ranked(select(col(EvaluationRow.id), mean, cost, tokens))
                if below is not None:
                    level = level.where(mean < below)
                top = session.exec(
                    level.order_by(
                        mean.desc(),
                        cost,
                        tokens,
                        col(EvaluationRow.agent_hash),
                        col(EvaluationRow.id),
                    ).limit(1)
                ).first()
                if top is None:
                    break
                row_id, below, row_cost, row_tokens = top
                key = (row_cost, row_tokens)
                if best_key is None or key < best_key:
                    front.append(_ident(row_id))
                    best_key = key
            query = (
                select(EvaluationRow, AgentRow.spec)
                .join(AgentRow, col(AgentRow.spec_hash) == col(EvaluationRow.agent_hash))
                .where(col(EvaluationRow.id).in_(front))
                .order_by(cost, tokens, mean.desc(), col(EvaluationRow.id))
            )
            return [
                _leaderboard_row(rank, evaluation, spec)
                for rank, (evaluation, spec) in enumerate(session.exec(query), start=1)
            ]

    def run_evaluations(self, run_name: str, *, split: str = "search") -> list[EvaluationRecord]:
        """The run's evaluations on `split`, in the order the run took them up."""
        _choice(split, SPLITS, "split")
        with self._session() as session:
            run = self._run_row(session, run_name)
            rows = session.exec(
                select(EvaluationRow)
                .join(RunEntryRow, col(RunEntryRow.evaluation_id) == col(EvaluationRow.id))
                .where(col(RunEntryRow.run_id) == run.id, col(EvaluationRow.split) == split)
                .order_by(col(RunEntryRow.id))
            )
            return [_record(EvaluationRecord, row) for row in rows]

    def run_roles(self, run_name: str) -> dict[int, str]:
        """Evaluation id -> why the run holds it ("candidate", "winner", "baseline" or
        "exploratory"; see `add_run_entry`)."""
        with self._session() as session:
            run = self._run_row(session, run_name)
            rows = session.exec(select(RunEntryRow).where(col(RunEntryRow.run_id) == run.id))
            return {row.evaluation_id: row.role for row in rows}

    def find_agent(self, prefix: str) -> AgentRecord:
        """The one agent whose spec hash starts with `prefix` (as `git` resolves short hashes)."""
        with self._session() as session:
            rows = session.exec(
                select(AgentRow)
                .where(col(AgentRow.spec_hash).startswith(_text(prefix, "agent"), autoescape=True))
                .limit(2)
            ).all()
        if not rows:
            raise ArchiveError(f"no agent whose hash starts with {prefix!r} in {self._shown_url}")
        if len(rows) > 1:
            raise ArchiveError(
                f"more than one agent's hash starts with {prefix!r}: give more of it"
            )
        return _record(AgentRecord, rows[0])

    def lineage(self, spec_hash: str) -> list[AgentRecord]:
        """The agent, its parent, grandparent and so on, as far as the archive holds them."""
        chain: list[AgentRecord] = []
        with self._session() as session:
            row: AgentRow | None = self._agent_row(session, spec_hash)
            while row is not None and all(a.spec_hash != row.spec_hash for a in chain):
                chain.append(_record(AgentRecord, row))
                row = None if row.parent_hash is None else _find_agent(session, row.parent_hash)
        return chain

    @property
    def single_writer(self) -> bool:
        """Whether one process at most writes this archive (SQLite): leases are then moot, since
        a lease held by anyone else belongs to a process that is gone."""
        return self._url.get_backend_name() == "sqlite"

    def claim_evaluation(self, evaluation_id: int, *, owner: str, lease_s: float) -> bool:
        """Takes or renews the lease on an unfinished evaluation for `lease_s` seconds.

        False while another process holds a lease that has not run out, or once it is complete.
        """
        now = _now()
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
        lease = timedelta(seconds=_non_negative(lease_s, "lease_s"))
        with self._write_session() as session:
            self._evaluation_row(session, evaluation_id)
            result = session.execute(
                update(EvaluationRow)
                .where(*conditions)
                .values(lease_owner=_text(owner, "owner"), lease_until=now + lease)
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

    def study_storage(
        self,
        *,
        heartbeat_interval: int,
        grace_period: int,
        stale_trial_callback: Callable[[optuna.Study, optuna.trial.FrozenTrial], None],
    ) -> optuna.storages.RDBStorage:
        """Optuna's storage in this database, with trial heartbeats.

        Made under the set-up lock: optuna creates its tables on first use, and several workers
        starting at once on a new PostgreSQL database would otherwise race to create them.
        """
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        with self._engine.connect() as conn, conn.begin():
            if not self.single_writer:  # SQLite: optuna's own connection must be free to write
                _lock_for_set_up(conn)
            storage = optuna.storages.RDBStorage(
                self.url,
                heartbeat_interval=heartbeat_interval,
                grace_period=grace_period,
                heartbeat_stale_trial_callback=stale_trial_callback,
            )
        if _sqlite_file(self._url) is not None:  # optuna's commits as the archive's, no fsync
            event.listen(storage.engine, "connect", _sqlite_sync_normal)
            storage.engine.dispose()  # its connections so far reopen with it
        return storage

    def _ranked(
        self,
        session: Session,
        query: _Query,
        *,
        run_name: str | None,
        benchmark: str | None,
        model: str | None,
        split: str,
    ) -> _Query:
        """`query`, a select from the evaluations, narrowed to the complete ones on `split` and
        filtered as asked. The agents are not joined: the Pareto sweep reads every candidate."""
        _choice(split, SPLITS, "split")
        query = query.where(
            col(EvaluationRow.split) == split, col(EvaluationRow.status) == "complete"
        )
        if benchmark is not None:
            query = query.where(col(EvaluationRow.benchmark) == benchmark)
        if model is not None:
            # Correlated, so that SQLite checks the rows it reads in index order and stops at the
            # limit, instead of first listing every agent of the model.
            agent = aliased(AgentRow)  # the query may join the agents already
            of_model = select(agent.id).where(
                col(agent.spec_hash) == col(EvaluationRow.agent_hash), col(agent.model) == model
            )
            query = query.where(of_model.exists())
        if run_name is not None:
            run = self._run_row(session, run_name)
            query = query.join(
                RunEntryRow, col(RunEntryRow.evaluation_id) == col(EvaluationRow.id)
            ).where(col(RunEntryRow.run_id) == run.id)
            if split == "search":  # a refiner's development evaluations are never ranked
                query = query.where(col(RunEntryRow.role) == "candidate")
        return query

    # -- helpers ------------------------------------------------------------------------------

    def _session(self) -> Session:
        # Rows stay readable after commit, so records can be built from them without a reload.
        return Session(self._engine, expire_on_commit=False)

    def _write_session(self) -> Session:
        """A session for a write: on SQLite, only after this process holds the writer lock."""
        file = _sqlite_file(self._url)
        if file is not None and self._writer_lock is None:
            self._writer_lock = _take_writer_lock(file, self._shown_url)
        return self._session()

    def _set_up(self, conn: Connection) -> None:
        """Checks that the database is an archive this code reads, turning an empty one into one."""
        _lock_for_set_up(conn)
        tables = set(inspect(conn).get_table_names())
        if MetaRow.__tablename__ in tables:
            meta = dict(conn.execute(select(MetaRow.key, MetaRow.value)).all())
            version = self._check_meta(meta)
            self._check_migration(conn, tables)
            self._check_optuna(conn, tables)
            if version < SCHEMA_VERSION:
                upgrade_schema(conn, version=version, stamped=_MIGRATION_TABLE in tables)
            return
        foreign = sorted(tables - OPTUNA_TABLES)
        if foreign:
            raise ArchiveError(
                f"{self._shown_url} is not an agentdesign archive: it has no ad_meta table "
                f"but other tables ({_listing(foreign)})"
            )
        if not self._create:
            raise ArchiveError(f"no archive at {self._shown_url}: the database is empty")
        create_schema(conn)
        conn.execute(
            insert(MetaRow),
            [
                {"key": "schema_version", "value": str(SCHEMA_VERSION)},
                {"key": "created_by", "value": _CREATED_BY},
            ],
        )

    def _check_meta(self, meta: Mapping[str, str]) -> int:
        """The archive's schema version, if this code can read it (perhaps after an upgrade)."""
        if meta.get("created_by") != _CREATED_BY:
            raise ArchiveError(
                f"{self._shown_url} is not an agentdesign archive: its ad_meta was not written "
                "by agentdesign"
            )
        version = meta.get("schema_version", "")
        if not version.isdigit():
            raise ArchiveError(f"{self._shown_url} has an unreadable schema_version {version!r}")
        if int(version) > SCHEMA_VERSION:
            raise self._newer_schema(version)
        return int(version)

    def _check_migration(self, conn: Connection, tables: set[str]) -> None:
        """Refuses an archive that a newer agentdesign migrated, even if its ad_meta says less:
        writing into tables this code does not know the shape of could damage them."""
        if _MIGRATION_TABLE not in tables:
            return
        revision = conn.exec_driver_sql(f"SELECT version_num FROM {_MIGRATION_TABLE}").scalar()
        if revision is not None and not (revision.isdigit() and int(revision) <= SCHEMA_VERSION):
            raise self._newer_schema(f"{revision} ({_MIGRATION_TABLE})")

    def _newer_schema(self, found: str) -> ArchiveError:
        return ArchiveError(
            f"{self._shown_url} has archive schema {found}, newer than the {SCHEMA_VERSION} "
            "this agentdesign knows: upgrade agentdesign"
        )

    def _check_optuna(self, conn: Connection, tables: set[str]) -> None:
        """Refuses an archive whose optuna tables a newer optuna wrote, before anything is written:
        optuna itself only finds out when a search opens its storage, after the run is made."""
        if not {"version_info", "alembic_version"} <= tables:
            return
        info = conn.exec_driver_sql("SELECT schema_version, library_version FROM version_info")
        schema, library = info.first() or (None, "?")
        revision = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
        known = _optuna_revisions()
        if (schema is not None and int(schema) > OPTUNA_SCHEMA_VERSION) or (
            known and revision is not None and revision not in known
        ):
            raise ArchiveError(
                f"{self._shown_url} has optuna schema {schema}, revision {revision} (written by "
                f"optuna {library}), which the optuna {optuna.__version__} installed here (schema "
                f"{OPTUNA_SCHEMA_VERSION}) does not know: upgrade optuna"
            )

    def _run_row(self, session: Session, name: str, *, lock: bool = False) -> RunRow:
        query = select(RunRow).where(col(RunRow.name) == name)
        row = session.exec(query.with_for_update() if lock else query).first()
        if row is None:
            names = list(session.exec(select(RunRow.name).order_by(col(RunRow.name))))
            known = f"runs: {_listing(names)}" if names else "the archive has no runs yet"
            raise ArchiveError(f"no run named {name!r} ({known})")
        return row

    def _agent_row(self, session: Session, spec_hash: str) -> AgentRow:
        row = _find_agent(session, spec_hash)
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


def _sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite archive; None for an in-memory one or another database."""
    database = url.database
    if url.get_backend_name() != "sqlite" or database in (None, "", ":memory:"):
        return None
    return Path(database)


@functools.cache
def _optuna_revisions() -> frozenset[str]:
    """The schema revisions the installed optuna knows (named as its migration files are), or
    none if its migrations cannot be listed: then only its schema_version is compared."""
    versions = resources.files("optuna.storages._rdb") / "alembic" / "versions"
    try:
        names = [entry.name for entry in versions.iterdir()]
    except OSError:
        return frozenset()
    return frozenset(n.removesuffix(".py").rstrip("_") for n in names if n.endswith(".py"))


def _normalize_url(url: str) -> URL:
    """A URL as given, or a plain file path as the absolute SQLite URL that optuna can share."""
    if "://" not in url:
        return URL.create("sqlite", database=str(Path(url).expanduser().resolve()))
    try:
        return make_url(url)
    except ArgumentError as err:
        raise ArchiveError(f"cannot parse the archive URL: {err}") from None


def _configure_sqlite(dbapi_connection: Any, _connection_record: Any) -> None:
    """Lets writers queue instead of failing, readers read while one writes, and enforces keys.

    In WAL mode, synchronous=NORMAL keeps every commit through a killed process (kill -9 too)
    and the file consistent through a power cut, without an fsync per commit: one per task
    result held 64 tasks at once to a fraction of their pace (bench/concurrency.py).
    """
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def _sqlite_sync_normal(dbapi_connection: Any, _connection_record: Any) -> None:
    """See `_configure_sqlite`."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _lock_for_set_up(conn: Connection) -> None:
    """Makes processes that open a new archive at once take turns, so only one creates it."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_SETUP_LOCK_KEY})")
    elif conn.dialect.name == "sqlite":
        # pysqlite opens no transaction before DDL by itself; this one takes the write lock.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


# The SQLite writer locks this process holds: path -> (open lock file, how many archives use it).
_WRITER_LOCKS: dict[Path, tuple[IO[str], int]] = {}
_WRITER_LOCKS_GUARD = threading.Lock()


def _take_writer_lock(database: Path, shown_url: str) -> Path:
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
                "(--storage postgresql+psycopg2://...) for parallel workers"
            ) from None
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        _WRITER_LOCKS[database] = (handle, 1)
        return database


def _drop_writer_lock(database: Path) -> None:
    with _WRITER_LOCKS_GUARD:
        handle, users = _WRITER_LOCKS[database]
        if users > 1:
            _WRITER_LOCKS[database] = (handle, users - 1)
        else:
            del _WRITER_LOCKS[database]
            handle.close()  # closing the file releases the flock


def _get_or_insert(session: Session, row: _Row, find: Callable[[], _Row | None]) -> _Row:
    """The row `find` locates, else `row` inserted and committed; if another process inserts the
    same key in between, its row (the unique key rejects ours)."""
    existing = find()
    if existing is not None:
        return existing
    session.add(row)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        winner = find()
        if winner is None:
            raise
        return winner
    return row


def _find_agent(session: Session, spec_hash: str) -> AgentRow | None:
    return session.exec(select(AgentRow).where(col(AgentRow.spec_hash) == spec_hash)).first()


# The statements `add_task_result` runs for every task, built once: building them took longer
# than running them. An evaluation's task ids, locked; whether a task has its result; the
# result's counts added to its evaluation's totals.
_TASK_IDS = (
    sql_select(col(EvaluationRow.task_ids))
    .where(col(EvaluationRow.id) == bindparam("evaluation"))
    .with_for_update()
)
_RECORDED = sql_select(col(TaskResultRow.id)).where(
    col(TaskResultRow.evaluation_id) == bindparam("evaluation"),
    col(TaskResultRow.task_id) == bindparam("task"),
)
_ADD_RESULT = (
    update(EvaluationRow)
    .where(col(EvaluationRow.id) == bindparam("evaluation"))
    .values(
        n_done=col(EvaluationRow.n_done) + 1,
        prompt_tokens=col(EvaluationRow.prompt_tokens) + bindparam("add_prompt"),
        completion_tokens=col(EvaluationRow.completion_tokens) + bindparam("add_completion"),
        cost=col(EvaluationRow.cost) + bindparam("add_cost"),
        wall_s=col(EvaluationRow.wall_s) + bindparam("add_wall"),
        updated_at=bindparam("now"),
    )
    .execution_options(synchronize_session=False)
)


def _refresh_totals(session: Session, evaluation_id: int, **values: Any) -> None:
    """Recomputes an evaluation's counts and sums from its task results (and sets `values`)."""
    results = select(TaskResultRow).where(col(TaskResultRow.evaluation_id) == evaluation_id)
    subquery = results.subquery()

    def total(column: Any) -> Any:
        return select(func.coalesce(func.sum(column), 0)).select_from(subquery).scalar_subquery()

    session.exec(
        update(EvaluationRow)
        .where(col(EvaluationRow.id) == evaluation_id)
        .values(
            n_done=select(func.count()).select_from(subquery).scalar_subquery(),
            prompt_tokens=total(subquery.c.prompt_tokens),
            completion_tokens=total(subquery.c.completion_tokens),
            cost=total(subquery.c.cost),
            wall_s=total(subquery.c.latency_s),
            updated_at=_now(),
            **values,
        )
    )


def _tokens() -> Any:
    return col(EvaluationRow.prompt_tokens) + col(EvaluationRow.completion_tokens)


def _task_set_digest(sorted_ids: Sequence[str]) -> str:
    # JSON keeps ids that contain separators apart: ["a,b"] and ["a", "b"] differ.
    return hashlib.sha256(json.dumps(list(sorted_ids)).encode()).hexdigest()


# -- input checks: each returns the value it accepts or raises ArchiveError before any write ----


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ArchiveError(f"{what} must be a non-empty string, not {value!r}")
    return value


def _optional_text(value: object, what: str) -> str | None:
    return None if value is None else _text(value, what)


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArchiveError(f"{what} must be an integer, not {value!r}")
    return value


def _count(value: object, what: str) -> int:
    count = _int(value, what)
    if count < 0:
        raise ArchiveError(f"{what} must not be negative, not {value!r}")
    return count


def _finite(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ArchiveError(f"{what} must be a finite number, not {value!r}")
    return float(value)


def _non_negative(value: object, what: str) -> float:
    number = _finite(value, what)
    if number < 0:
        raise ArchiveError(f"{what} must not be negative, not {value!r}")
    return number


def _choice(value: str, options: Sequence[str], what: str) -> str:
    if value not in options:
        raise ArchiveError(f"{what} must be one of {', '.join(options)}, not {value!r}")
    return value


def _task_ids(ids: Sequence[str], what: str, *, allow_empty: bool = False) -> list[str]:
    if isinstance(ids, str):
        raise ArchiveError(f"{what} must be a sequence of task ids, not the string {ids!r}")
    checked = [_text(task_id, f"a task id in {what}") for task_id in ids]
    if not checked and not allow_empty:
        raise ArchiveError(f"{what} is empty")
    if len(set(checked)) != len(checked):
        repeated = sorted({task_id for task_id in checked if checked.count(task_id) > 1})
        raise ArchiveError(f"{what} repeats task ids: {_listing(repeated)}")
    return checked


def _task_result_row(evaluation_id: int, outcome: TaskOutcome) -> TaskResultRow:
    return TaskResultRow(
        evaluation_id=evaluation_id,
        task_id=_text(outcome.task_id, "task_id"),
        output=_string(outcome.output, "output"),
        answer=_string(outcome.answer, "answer"),
        score=_finite(outcome.score, "score"),
        prompt_tokens=_count(outcome.prompt_tokens, "prompt_tokens"),
        completion_tokens=_count(outcome.completion_tokens, "completion_tokens"),
        cost=_non_negative(outcome.cost, "cost"),
        latency_s=_non_negative(outcome.latency_s, "latency_s"),
        error_kind=_optional_text(outcome.error_kind, "error_kind"),
        error=None if outcome.error is None else _string(outcome.error, "error"),
        details=_json_object(outcome.details, "details"),
        created_at=_now(),
    )


def _string(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ArchiveError(f"{what} must be a string, not {type(value).__name__}")
    return value


def _json_object(value: Mapping[str, Any], what: str) -> dict[str, Any]:
    """A plain-JSON copy, so that the stored value cannot change under the caller's later edits."""
    if not isinstance(value, Mapping):
        raise ArchiveError(f"{what} must be a mapping, not {type(value).__name__}")
    try:
        copy: dict[str, Any] = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as err:
        raise ArchiveError(f"{what} is not plain JSON: {err}") from None
    return copy


def _listing(names: Sequence[str], most: int = 10) -> str:
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, ... ({len(names) - most} more)"


def _first_line(err: SQLAlchemyError) -> str:
    message = str(err.orig) if isinstance(err, DBAPIError) else str(err)
    lines = message.strip().splitlines()
    return lines[0] if lines else type(err).__name__


def _now() -> datetime:
    return datetime.now(UTC)


def _utc(moment: datetime) -> datetime:
    """SQLite returns timestamps without a zone, PostgreSQL in the session's zone: make both UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


# -- rows to records ------------------------------------------------------------------------------


def _ident(row_id: int | None) -> int:
    assert row_id is not None, "records are built from stored rows only"
    return row_id


def _record(record_type: type[_Record], row: SQLModel) -> _Record:
    """A `record_type` with each field read off the row's attribute of the same name.

    Three conversions, by name or by value: `id` (set once stored) becomes a plain int, a JSON list
    a tuple and a timestamp UTC. Everything else, JSON objects included, is taken as it is.
    """
    values: dict[str, Any] = {}
    for field in fields(record_type):
        value = getattr(row, field.name)
        if field.name == "id":
            value = _ident(value)
        elif isinstance(value, list):
            value = tuple(value)
        elif isinstance(value, datetime):
            value = _utc(value)
        values[field.name] = value
    return record_type(**values)


def _leaderboard_row(rank: int, row: EvaluationRow, spec: Mapping[str, Any]) -> LeaderboardRow:
    # finish_evaluation sets all three before it marks an evaluation complete.
    assert row.mean is not None and row.ci_low is not None and row.ci_high is not None
    return LeaderboardRow(
        rank=rank,
        agent_hash=row.agent_hash,
        spec=spec,
        evaluation_id=_ident(row.id),
        benchmark=row.benchmark,
        mean=row.mean,
        ci_low=row.ci_low,
        ci_high=row.ci_high,
        n_tasks=row.n_done,
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
        cost=row.cost,
        wall_s=row.wall_s,
        status=row.status,
        task_ids=tuple(row.task_ids),
    )
