"""The archive's queries: records by key, task results, leaderboards, the Pareto front, a run's
totals (its search calls by purpose too), evaluations, meta agent proposals and holdout looks,
and an agent's lineage. None of them writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from sqlalchemy import case, distinct, func
from sqlalchemy import select as sql_select  # sqlmodel's select types at most four columns
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import Select

from agentdesign.archive import _validation as check
from agentdesign.archive._errors import ArchiveError
from agentdesign.archive._records import (
    AgentRecord,
    EvaluationRecord,
    HoldoutLookRecord,
    LeaderboardRow,
    ProposalRecord,
    RunRecord,
    RunTotals,
    ident,
    leaderboard_row,
    record,
)
from agentdesign.archive._validation import PROPOSAL_STATUSES, RUN_ENTRY_ROLES, SPLITS
from agentdesign.archive.database._engine import ArchiveEngine, lookup_agent
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

__all__ = ["Queries"]

_Query = TypeVar("_Query", bound=Select[*tuple[Any, ...]])
# Bound parameters per IN list: well under SQLite's old limit of 999 variables per statement.
_IDS_PER_QUERY = 500


class Queries(ArchiveEngine):
    """The archive's reads (see the module's docstring)."""

    def get_run(self, name: str) -> RunRecord:
        with self._session() as session:
            return record(RunRecord, self._run_row(session, name))

    def list_runs(self) -> list[RunRecord]:
        with self._session() as session:
            rows = session.exec(select(RunRow).order_by(col(RunRow.created_at), col(RunRow.id)))
            return [record(RunRecord, row) for row in rows]

    def get_agent(self, spec_hash: str) -> AgentRecord:
        with self._session() as session:
            return record(AgentRecord, self._agent_row(session, spec_hash))

    def get_evaluation(self, evaluation_id: int) -> EvaluationRecord:
        with self._session() as session:
            return record(EvaluationRecord, self._evaluation_row(session, evaluation_id))

    def task_results(self, evaluation_id: int) -> dict[str, TaskOutcome]:
        """The evaluation's recorded task results by task id, in the order they were recorded."""
        with self._session() as session:
            self._evaluation_row(session, evaluation_id)
            rows = session.exec(
                select(TaskResultRow)
                .where(col(TaskResultRow.evaluation_id) == evaluation_id)
                .order_by(col(TaskResultRow.id))
            )
            return {row.task_id: record(TaskOutcome, row) for row in rows}

    def task_scores(self, evaluation_ids: Sequence[int]) -> dict[int, dict[str, float]]:
        """Each evaluation's task scores by task id, in the order they were recorded, read in a few
        queries however many there are: what a per-item comparison of a run's designs, or a
        score over an evaluation, needs, without the outputs and traces `task_results` reads."""
        found: dict[int, dict[str, float]] = {i: {} for i in evaluation_ids}
        ids = list(found)
        with self._session() as session:
            for start in range(0, len(ids), _IDS_PER_QUERY):
                chunk = ids[start : start + _IDS_PER_QUERY]
                evaluation = col(TaskResultRow.evaluation_id)
                rows = session.exec(
                    select(evaluation, col(TaskResultRow.task_id), col(TaskResultRow.score))
                    .where(evaluation.in_(chunk))
                    .order_by(col(TaskResultRow.id))
                )
                for evaluation_id, task_id, score in rows:
                    found[evaluation_id][task_id] = score
        return found

    def task_failures(self, evaluation_id: int) -> list[TaskOutcome]:
        """The provider failures recorded for an evaluation's tasks, oldest first."""
        with self._session() as session:
            self._evaluation_row(session, evaluation_id)
            rows = session.exec(
                select(TaskFailureRow)
                .where(col(TaskFailureRow.evaluation_id) == evaluation_id)
                .order_by(col(TaskFailureRow.id))
            )
            # A failure is no answer and no score: the fields it has no columns for are empty.
            return [
                record(TaskOutcome, row, output="", answer="", score=0.0, details={})
                for row in rows
            ]

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
        if check.integer(limit, "limit") < 1:
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
                leaderboard_row(rank, evaluation, spec)
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

    def role_totals(self, run_name: str) -> dict[str, tuple[int, int, int, float]]:
        """The run's evaluations summed by the role the run holds each in (`RUN_ENTRY_ROLES`):
        role -> (evaluations, prompt tokens, completion tokens, cost), in the roles' order, summed
        in SQL; a role the run never used is absent. With the search calls (`search_call_totals`)
        they are what `run_totals` sums."""
        with self._session() as session:
            run = self._run_row(session, run_name)
            query = (
                sql_select(
                    col(RunEntryRow.role),
                    func.count(col(EvaluationRow.id)),
                    func.coalesce(func.sum(EvaluationRow.prompt_tokens), 0),
                    func.coalesce(func.sum(EvaluationRow.completion_tokens), 0),
                    func.coalesce(func.sum(EvaluationRow.cost), 0.0),
                )
                .join(RunEntryRow, col(RunEntryRow.evaluation_id) == col(EvaluationRow.id))
                .where(col(RunEntryRow.run_id) == run.id)
                .group_by(col(RunEntryRow.role))
            )
            totals = {
                str(role): (int(n), int(prompt), int(completion), float(cost))
                for role, n, prompt, completion, cost in session.execute(query)
            }
        return {role: totals[role] for role in RUN_ENTRY_ROLES if role in totals}

    def search_call_totals(self, run_name: str) -> dict[str, tuple[int, int, int, float]]:
        """The model calls the search made for the run itself, by purpose ("meta", "refinement"):
        purpose -> (calls, prompt tokens, completion tokens, cost), purposes in order, summed in
        SQL. Together they are the search calls `run_totals` counts; a purpose never used is
        absent."""
        with self._session() as session:
            run = self._run_row(session, run_name)
            query = (
                sql_select(
                    col(SearchCallRow.purpose),
                    func.count(col(SearchCallRow.id)),
                    func.coalesce(func.sum(SearchCallRow.prompt_tokens), 0),
                    func.coalesce(func.sum(SearchCallRow.completion_tokens), 0),
                    func.coalesce(func.sum(SearchCallRow.cost), 0.0),
                )
                .where(col(SearchCallRow.run_id) == run.id)
                .group_by(col(SearchCallRow.purpose))
                .order_by(col(SearchCallRow.purpose))
            )
            return {
                str(purpose): (int(n), int(prompt), int(completion), float(cost))
                for purpose, n, prompt, completion, cost in session.execute(query)
            }

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
                    front.append(ident(row_id))
                    best_key = key
            query = (
                select(EvaluationRow, AgentRow.spec)
                .join(AgentRow, col(AgentRow.spec_hash) == col(EvaluationRow.agent_hash))
                .where(col(EvaluationRow.id).in_(front))
                .order_by(cost, tokens, mean.desc(), col(EvaluationRow.id))
            )
            return [
                leaderboard_row(rank, evaluation, spec)
                for rank, (evaluation, spec) in enumerate(session.exec(query), start=1)
            ]

    def run_evaluations(
        self, run_name: str, *, split: str = "search", role: str | None = None
    ) -> list[EvaluationRecord]:
        """The run's evaluations on `split`, in the order the run took them up; only those it
        holds in `role` when given (on the search split, "candidate" leaves out the development
        evaluations of a refiner or meta agent, whose items are not the search items)."""
        check.choice(split, SPLITS, "split")
        with self._session() as session:
            run = self._run_row(session, run_name)
            query = (
                select(EvaluationRow)
                .join(RunEntryRow, col(RunEntryRow.evaluation_id) == col(EvaluationRow.id))
                .where(col(RunEntryRow.run_id) == run.id, col(EvaluationRow.split) == split)
            )
            if role is not None:
                query = query.where(
                    col(RunEntryRow.role) == check.choice(role, RUN_ENTRY_ROLES, "run entry role")
                )
            rows = session.exec(query.order_by(col(RunEntryRow.id)))
            return [record(EvaluationRecord, row) for row in rows]

    def run_roles(self, run_name: str) -> dict[int, str]:
        """Evaluation id -> why the run holds it ("candidate", "winner", "baseline" or
        "exploratory"; see `add_run_entry`)."""
        with self._session() as session:
            run = self._run_row(session, run_name)
            rows = session.exec(select(RunEntryRow).where(col(RunEntryRow.run_id) == run.id))
            return {row.evaluation_id: row.role for row in rows}

    def proposals(
        self, run_name: str, *, status: str | None = None, spec_hash: str | None = None
    ) -> list[ProposalRecord]:
        """The designs the run's meta agent proposed, oldest first; only those of `status`, or
        only those that made or repeated the design `spec_hash`, when given."""
        with self._session() as session:
            run = self._run_row(session, run_name)
            query = select(ProposalRow).where(col(ProposalRow.run_id) == run.id)
            if status is not None:
                query = query.where(
                    col(ProposalRow.status)
                    == check.choice(status, PROPOSAL_STATUSES, "proposal status")
                )
            if spec_hash is not None:
                query = query.where(
                    col(ProposalRow.spec_hash) == check.text(spec_hash, "spec_hash")
                )
            rows = session.exec(query.order_by(col(ProposalRow.id)))
            return [record(ProposalRecord, row, run_name=run.name) for row in rows]

    def proposal_counts(self, run_name: str) -> dict[str, int]:
        """How many proposals of the run's meta agent have each status (every status, zeros
        included), counted in SQL without reading their prompts and responses."""
        with self._session() as session:
            run = self._run_row(session, run_name)
            rows = session.exec(
                select(ProposalRow.status, func.count())
                .where(col(ProposalRow.run_id) == run.id)
                .group_by(col(ProposalRow.status))
            )
            counts = dict.fromkeys(PROPOSAL_STATUSES, 0)
            counts.update({status: int(n) for status, n in rows})
            return counts

    def holdout_looks(self, *, benchmark: str) -> list[HoldoutLookRecord]:
        """Every design scored on holdout items of `benchmark` (a run's reference), oldest first,
        whichever run or command scored it (see `record_holdout_look`)."""
        with self._session() as session:
            rows = session.exec(
                select(HoldoutLookRow, RunRow.name)
                .join(RunRow, col(RunRow.id) == col(HoldoutLookRow.run_id), isouter=True)
                .where(col(HoldoutLookRow.benchmark) == check.text(benchmark, "benchmark"))
                .order_by(col(HoldoutLookRow.id))
            )
            return [record(HoldoutLookRecord, row, run_name=name) for row, name in rows]

    def find_agent(self, prefix: str) -> AgentRecord:
        """The one agent whose spec hash starts with `prefix` (as `git` resolves short hashes)."""
        with self._session() as session:
            rows = session.exec(
                select(AgentRow)
                .where(
                    col(AgentRow.spec_hash).startswith(check.text(prefix, "agent"), autoescape=True)
                )
                .limit(2)
            ).all()
        if not rows:
            raise ArchiveError(f"no agent whose hash starts with {prefix!r} in {self._shown_url}")
        if len(rows) > 1:
            raise ArchiveError(
                f"more than one agent's hash starts with {prefix!r}: give more of it"
            )
        return record(AgentRecord, rows[0])

    def lineage(self, spec_hash: str) -> list[AgentRecord]:
        """The agent, its parent, grandparent and so on, as far as the archive holds them."""
        chain: list[AgentRecord] = []
        with self._session() as session:
            row: AgentRow | None = self._agent_row(session, spec_hash)
            while row is not None and all(a.spec_hash != row.spec_hash for a in chain):
                chain.append(record(AgentRecord, row))
                row = None if row.parent_hash is None else lookup_agent(session, row.parent_hash)
        return chain

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
        check.choice(split, SPLITS, "split")
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
        elif split == "search":  # nor across runs, unless another run searched on those items
            query = query.where(~_held_as("dev").exists() | _held_as("candidate").exists())
        return query


def _held_as(role: str) -> Any:
    """A run entry holding the evaluation of the enclosing query in `role` (correlated)."""
    return select(RunEntryRow.id).where(
        col(RunEntryRow.evaluation_id) == col(EvaluationRow.id), col(RunEntryRow.role) == role
    )


def _tokens() -> Any:
    return col(EvaluationRow.prompt_tokens) + col(EvaluationRow.completion_tokens)
