"""The archive's writes: runs, agents, evaluations and their task results, run entries, the
model calls a search makes for itself and the designs its meta agent proposes.

Each method is one transaction and checks its input before it writes, so a failing call leaves
the archive as it was. Inserts that two processes may race on (the same agent, the same
evaluation) catch the unique-key violation and read the winner's row instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from sqlalchemy import Connection, func, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import SQLModel, col, select

from agentdesign.archive import _validation as check
from agentdesign.archive._errors import ArchiveError
from agentdesign.archive._records import (
    AgentRecord,
    EvaluationRecord,
    HoldoutLookRecord,
    ProposalRecord,
    RunRecord,
    as_utc,
    ident,
    record,
    utc_now,
)
from agentdesign.archive._statements import (
    ADD_RESULT,
    INSERT_RESULT,
    RECORDED,
    RECORDED_AMONG,
    TASK_IDS,
    get_or_insert,
    outcome_row,
    outcome_values,
    refresh_totals,
    task_set_digest,
)
from agentdesign.archive._validation import (
    FINISHED_EVALUATION_STATUSES,
    LOOK_SOURCES,
    PROPOSAL_STATUSES,
    RUN_ENTRY_ROLES,
    RUN_STATUSES,
    SPLITS,
)
from agentdesign.archive.database._engine import ArchiveEngine, lookup_agent, without_nul
from agentdesign.archive.database._tables import (
    AgentRow,
    EvaluationRow,
    HoldoutLookRow,
    ProposalRow,
    RunEntryRow,
    RunRow,
    SearchCallRow,
    TaskFailureRow,
    TaskResultRow,
)
from agentdesign.evaluators import TaskOutcome

__all__ = ["Writes"]

_Row = TypeVar("_Row", bound=SQLModel)
# Task ids per IN list: well under SQLite's old limit of 999 variables per statement.
_IDS_PER_QUERY = 500


class Writes(ArchiveEngine):
    """The archive's writes (see the module's docstring)."""

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
        dev_task_ids: Sequence[str] = (),
    ) -> RunRecord:
        """Stores a new run with its split: search, holdout and development items, each set
        disjoint from the others (a development item is seen by the search as a search item is)."""
        search = check.task_ids(search_task_ids, "search_task_ids")
        holdout = check.task_ids(holdout_task_ids, "holdout_task_ids", allow_empty=True)
        dev = check.task_ids(dev_task_ids, "dev_task_ids", allow_empty=True)
        for (one, ids), (other, others) in (
            (("search", search), ("holdout", holdout)),
            (("development", dev), ("search", search)),
            (("development", dev), ("holdout", holdout)),
        ):
            shared = sorted(set(ids) & set(others))
            if shared:
                raise ArchiveError(
                    f"tasks in both the {one} and the {other} split: {check.listing(shared)}"
                )
        now = utc_now()
        row = RunRow(
            name=check.text(name, "run name"),
            benchmark=check.text(benchmark, "benchmark"),
            model=check.text(model, "model"),
            strategy=check.text(strategy, "strategy"),
            budget=check.json_object(budget, "budget"),
            config=check.json_object(config, "config"),
            split_seed=check.integer(split_seed, "split_seed"),
            search_task_ids=search,
            holdout_task_ids=holdout,
            dev_task_ids=dev,
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
        return record(RunRecord, row)

    def update_run(
        self, name: str, *, status: str | None = None, add_elapsed_s: float = 0.0
    ) -> RunRecord:
        """Adds elapsed time in SQL (not read-modify-write), so concurrent workers all count."""
        values: dict[str, Any] = {
            "elapsed_s": col(RunRow.elapsed_s) + check.non_negative(add_elapsed_s, "add_elapsed_s"),
            "updated_at": utc_now(),
        }
        if status is not None:
            values["status"] = check.choice(status, RUN_STATUSES, "run status")
        with self._write_session() as session:
            row = self._run_row(session, name)
            session.exec(update(RunRow).where(col(RunRow.id) == row.id).values(values))
            session.commit()
            session.refresh(row)
            return record(RunRecord, row)

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
                    f"on {as_utc(row.winner_at or row.updated_at):%Y-%m-%d %H:%M} UTC; "
                    "a winner is never replaced"
                )
            if row.winner_hash is None:
                row.winner_hash = agent_hash
                row.winner_at = utc_now()
                session.add(row)
                session.commit()
                session.refresh(row)
            return record(RunRecord, row)

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
        spec_json = check.json_object(spec, "agent spec")
        row = AgentRow(
            spec_hash=check.text(spec_hash, "spec_hash"),
            spec=spec_json,
            model=spec_json["model"] if isinstance(spec_json.get("model"), str) else None,
            parent_hash=check.optional_text(parent_hash, "parent_hash"),
            co_parent_hash=check.optional_text(co_parent_hash, "co_parent_hash"),
            operator=check.optional_text(operator, "operator"),
            created_at=utc_now(),
        )
        with self._write_session() as session:
            stored = get_or_insert(session, row, lambda: lookup_agent(session, spec_hash))
        if without_nul(stored.spec) != without_nul(spec_json):  # as stored, found or not
            raise ArchiveError(
                f"agent {spec_hash} is archived with a different spec: "
                "its spec hash is not canonical"
            )
        return record(AgentRecord, stored)

    def get_or_create_evaluation(
        self, *, agent_hash: str, benchmark: str, task_ids: Sequence[str], split: str
    ) -> EvaluationRecord:
        """Finds the agent's evaluation on exactly these tasks, from any run, or starts one.

        A found evaluation keeps the split label it was created with.
        """
        ids = sorted(check.task_ids(task_ids, "task_ids"))
        task_set = task_set_digest(ids)
        now = utc_now()
        row = EvaluationRow(
            agent_hash=agent_hash,
            benchmark=check.text(benchmark, "benchmark"),
            task_set=task_set,
            task_ids=ids,
            split=check.choice(split, SPLITS, "split"),
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
            stored = get_or_insert(session, row, lambda: session.exec(query).first())
            return record(EvaluationRecord, stored)

    def add_task_result(self, evaluation_id: int, outcome: TaskOutcome) -> bool:
        """Records one finished task at once, so an interrupted evaluation resumes where it stopped.

        Returns False, changing nothing, when the task is already recorded.
        """
        return self._add_task_result(evaluation_id, outcome)

    def _add_task_result(self, evaluation_id: int, outcome: TaskOutcome) -> bool:
        values = outcome_values(TaskResultRow, evaluation_id, outcome)
        ids = {"evaluation": evaluation_id, "task": outcome.task_id}
        with self._write_connection() as connection:
            # Its task ids alone, locked so that concurrent writers of its results take turns.
            task_ids = connection.execute(TASK_IDS, ids).scalar_one_or_none()
            if task_ids is None:
                raise ArchiveError(f"no evaluation with id {evaluation_id} in {self._shown_url}")
            if outcome.task_id not in task_ids:
                raise ArchiveError(
                    f"task {outcome.task_id!r} is not among the tasks of evaluation {evaluation_id}"
                )
            if connection.execute(RECORDED, ids).first() is not None:
                return False
            try:
                connection.execute(INSERT_RESULT, values)
            except IntegrityError:  # another process recorded it since the check above
                return False
            # Added in SQL, in the transaction that inserts the row: as exact as summing every
            # result again (`refresh_totals`), which grew with the evaluation, per task.
            self._add_results_to_totals(connection, evaluation_id, [values])
            connection.commit()
            return True

    def add_task_results(self, evaluation_id: int, outcomes: Sequence[TaskOutcome]) -> list[bool]:
        """Records finished tasks together, in one transaction: as `add_task_result` for each in
        turn would, at a fraction of the cost when many tasks finish at once.

        Returns, for each outcome, whether it was recorded: False for a task already recorded
        (or earlier in `outcomes`). An outcome that fails its checks, or is not of the
        evaluation's tasks, raises `ArchiveError` before anything is written. If another process
        records one of the tasks meanwhile, they are recorded one transaction each.
        """
        if not outcomes:
            return []
        rows = [outcome_values(TaskResultRow, evaluation_id, outcome) for outcome in outcomes]
        with self._write_connection() as connection:
            # Its task ids alone, locked so that concurrent writers of its results take turns.
            task_ids = connection.execute(
                TASK_IDS, {"evaluation": evaluation_id}
            ).scalar_one_or_none()
            if task_ids is None:
                raise ArchiveError(f"no evaluation with id {evaluation_id} in {self._shown_url}")
            planned = set(task_ids)
            for outcome in outcomes:
                if outcome.task_id not in planned:
                    raise ArchiveError(
                        f"task {outcome.task_id!r} is not among the tasks of evaluation "
                        f"{evaluation_id}"
                    )
            asked = list(dict.fromkeys(row["task_id"] for row in rows))
            seen: set[str] = set()
            for start in range(0, len(asked), _IDS_PER_QUERY):
                chunk = asked[start : start + _IDS_PER_QUERY]
                found = connection.execute(
                    RECORDED_AMONG, {"evaluation": evaluation_id, "tasks": chunk}
                )
                seen.update(found.scalars())
            added: list[bool] = []
            new: list[dict[str, Any]] = []
            for row in rows:
                added.append(row["task_id"] not in seen)
                if added[-1]:
                    seen.add(row["task_id"])
                    new.append(row)
            if not new:
                return added
            try:
                connection.execute(INSERT_RESULT, new)
            except IntegrityError:  # another process recorded one since the check above
                connection.rollback()
            else:
                self._add_results_to_totals(connection, evaluation_id, new)
                connection.commit()
                return added
        # Raced by another writer: each in its own transaction, as if written one at a time.
        return [self._add_task_result(evaluation_id, outcome) for outcome in outcomes]

    @staticmethod
    def _add_results_to_totals(
        connection: Connection, evaluation_id: int, rows: Sequence[Mapping[str, Any]]
    ) -> None:
        """Adds each result's counts to its evaluation's totals, in SQL and in turn, as one call
        per result would add them."""
        connection.execute(
            ADD_RESULT,
            [
                {
                    "evaluation": evaluation_id,
                    "add_prompt": row["prompt_tokens"],
                    "add_completion": row["completion_tokens"],
                    "add_cost": row["cost"],
                    "add_wall": row["latency_s"],
                    "now": utc_now(),
                }
                for row in rows
            ],
        )

    def add_task_failure(self, evaluation_id: int, outcome: TaskOutcome) -> None:
        """Records a task attempt the provider failed: kept for the record, never a score, so the
        task stays open and runs again on resume."""
        failure = replace(
            outcome, error_kind=outcome.error_kind or "provider", error=outcome.error or ""
        )
        row = outcome_row(TaskFailureRow, evaluation_id, failure)
        with self._write_session() as session:
            self._evaluation_row(session, evaluation_id)
            session.add(row)
            session.commit()

    def finish_evaluation(
        self, evaluation_id: int, *, status: str, mean: float, ci_low: float, ci_high: float
    ) -> EvaluationRecord:
        """Closes an evaluation; "complete" needs every planned task recorded."""
        values = {
            "status": check.choice(status, FINISHED_EVALUATION_STATUSES, "evaluation status"),
            "mean": check.finite(mean, "mean"),
            "ci_low": check.finite(ci_low, "ci_low"),
            "ci_high": check.finite(ci_high, "ci_high"),
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
            refresh_totals(session, evaluation_id, **values)
            session.commit()
            session.refresh(row)
            return record(EvaluationRecord, row)

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
                if known is None and n_agents >= check.integer(max_agents, "max_agents"):
                    return False
            row = RunEntryRow(
                run_id=ident(run.id),
                agent_hash=agent_hash,
                evaluation_id=evaluation_id,
                trial_number=None
                if trial_number is None
                else check.integer(trial_number, "trial_number"),
                role=check.choice(role, RUN_ENTRY_ROLES, "run entry role"),
                created_at=utc_now(),
            )
            query = entries.where(col(RunEntryRow.evaluation_id) == evaluation_id)
            get_or_insert(session, row, lambda: session.exec(query).first())
            return True

    def record_holdout_look(
        self,
        *,
        benchmark: str,
        evaluation_id: int,
        source: str,
        run_name: str | None = None,
    ) -> HoldoutLookRecord:
        """Records that evaluation `evaluation_id` scored a design on holdout items of
        `benchmark` (a run's reference): `source` "run" for run `run_name`'s own confirmation,
        "evaluate" for the evaluate command (`run_name`: the run it named, if any). A repeat call
        returns the first record: the same scores looked at again tell nothing new."""
        checked_source = check.choice(source, LOOK_SOURCES, "look source")
        if checked_source == "run" and run_name is None:
            raise ArchiveError("a run's holdout look needs the run's name")
        with self._write_session() as session:
            evaluation = self._evaluation_row(session, evaluation_id)
            run_id = None if run_name is None else ident(self._run_row(session, run_name).id)
            row = HoldoutLookRow(
                benchmark=check.text(benchmark, "benchmark"),
                task_set=evaluation.task_set,
                task_ids=list(evaluation.task_ids),
                run_id=run_id,
                agent_hash=evaluation.agent_hash,
                evaluation_id=evaluation_id,
                source=checked_source,
                created_at=utc_now(),
            )
            run_is = (
                col(HoldoutLookRow.run_id).is_(None)
                if run_id is None
                else col(HoldoutLookRow.run_id) == run_id
            )
            query = select(HoldoutLookRow).where(
                col(HoldoutLookRow.evaluation_id) == evaluation_id,
                col(HoldoutLookRow.source) == checked_source,
                run_is,
            )
            stored = get_or_insert(session, row, lambda: session.exec(query).first())
            return record(HoldoutLookRecord, stored, run_name=run_name)

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
            purpose=check.text(purpose, "purpose"),
            model=check.text(model, "model"),
            prompt_tokens=check.count(prompt_tokens, "prompt_tokens"),
            completion_tokens=check.count(completion_tokens, "completion_tokens"),
            cost=check.non_negative(cost, "cost"),
            latency_s=check.non_negative(latency_s, "latency_s"),
            created_at=utc_now(),
        )
        with self._write_session() as session:
            row.run_id = ident(self._run_row(session, run_name).id)
            session.add(row)
            session.commit()

    def add_proposal(
        self,
        *,
        run_name: str,
        operator: str,
        parents: Sequence[str],
        prompt: str,
        response: str,
        status: str,
        reason: str | None,
        spec_hash: str | None,
        prompt_tokens: int,
        completion_tokens: int,
    ) -> ProposalRecord:
        """Records a design the run's meta agent proposed, whatever became of it, so that no
        generation is dropped silently: "accepted" names the design it made (`spec_hash`); a
        refusal ("invalid", "duplicate") or a failure ("failed") says why (`reason`).

        The tokens are the proposing call's, for the record only: the call itself is recorded
        with `add_search_call`, which alone counts it in the run's totals.
        """
        checked_status = check.choice(status, PROPOSAL_STATUSES, "proposal status")
        row = ProposalRow(
            run_id=0,  # set below, in the session that finds the run
            operator=check.text(operator, "operator"),
            parents=check.hashes(parents, "parents"),
            prompt=check.text(prompt, "prompt"),
            response=check.string(response, "response"),
            status=checked_status,
            reason=check.optional_string(reason, "reason"),
            spec_hash=check.optional_text(spec_hash, "spec_hash"),
            prompt_tokens=check.count(prompt_tokens, "prompt_tokens"),
            completion_tokens=check.count(completion_tokens, "completion_tokens"),
            created_at=utc_now(),
        )
        if checked_status == "accepted" and row.spec_hash is None:
            raise ArchiveError("an accepted proposal needs the spec_hash of the design it made")
        if checked_status != "accepted" and not (row.reason or "").strip():
            raise ArchiveError(f"a proposal with status {checked_status!r} needs a reason")
        with self._write_session() as session:
            row.run_id = ident(self._run_row(session, run_name).id)
            session.add(row)
            session.commit()
            return record(ProposalRecord, row, run_name=run_name)
