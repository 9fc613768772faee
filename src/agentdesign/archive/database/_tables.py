"""The archive's database tables (schema version 8; `migrations/` upgrades older archives).

Every table name starts with `ad_` because the optuna study of each run lives in the same database
and owns its own unprefixed tables (and `alembic_version`). Stored JSON is written once and never
edited in place: SQLAlchemy does not notice in-place edits of a JSON value.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index, MetaData, Text, UniqueConstraint, text
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

__all__ = [
    "OPTUNA_TABLES",
    "SCHEMA_VERSION",
    "AgentRow",
    "EvaluationRow",
    "HoldoutLookRow",
    "MetaRow",
    "ProposalRow",
    "RunEntryRow",
    "RunRow",
    "SearchCallRow",
    "TaskFailureRow",
    "TaskResultRow",
    "metadata",
]

# The alembic revision of `migrations/versions/` that creates this schema bears the same number.
SCHEMA_VERSION = 8

# The tables optuna 5's RDBStorage creates in a database it shares with the archive; an archive may
# hold them, any other foreign table means the database belongs to something else.
OPTUNA_TABLES = frozenset(
    {
        "alembic_version",
        "studies",
        "study_directions",
        "study_system_attributes",
        "study_user_attributes",
        "trial_heartbeats",
        "trial_intermediate_values",
        "trial_params",
        "trial_system_attributes",
        "trial_user_attributes",
        "trial_values",
        "trials",
        "version_info",
    }
)

# Named constraints let later alembic migrations (SQLite batch mode in particular) refer to them.
metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


class _Table(SQLModel, registry=registry(metadata=metadata)):
    """Base with its own metadata: `create_all` touches the archive's tables and nobody else's."""


def _json_column() -> Any:
    return Field(sa_column=Column(JSON, nullable=False))


def _timestamp() -> Any:
    return Field(sa_type=DateTime(timezone=True))


class MetaRow(_Table, table=True):
    __tablename__ = "ad_meta"

    key: str = Field(primary_key=True)
    value: str


class RunRow(_Table, table=True):
    __tablename__ = "ad_run"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True)
    benchmark: str
    model: str
    strategy: str
    budget: dict[str, Any] = _json_column()
    config: dict[str, Any] = _json_column()
    split_seed: int
    search_task_ids: list[str] = _json_column()
    holdout_task_ids: list[str] = _json_column()
    # The development items a prompt refiner or the meta agent learns failures from: neither
    # search nor holdout items (empty for a run without them, and for runs stored before).
    dev_task_ids: list[str] = Field(
        default_factory=list, sa_column=Column(JSON, nullable=False, server_default="[]")
    )
    status: str
    elapsed_s: float
    # The design chosen on search scores alone, recorded before any holdout task runs; never
    # changed afterwards, so no later look at the holdout can pick a different winner.
    winner_hash: str | None = None
    winner_at: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))
    created_at: datetime = _timestamp()
    updated_at: datetime = _timestamp()


class AgentRow(_Table, table=True):
    __tablename__ = "ad_agent"

    id: int | None = Field(default=None, primary_key=True)
    spec_hash: str = Field(unique=True, index=True)
    spec: dict[str, Any] = _json_column()
    # The spec's model, copied out of the JSON so that leaderboards can filter on it by index.
    model: str | None = Field(default=None, index=True)
    parent_hash: str | None = Field(default=None, index=True)
    # The second parent of a crossover or recombination; lineage follows `parent_hash`.
    co_parent_hash: str | None = None
    operator: str | None = None
    created_at: datetime = _timestamp()


# An evaluation's tokens, as the leaderboard and the Pareto front order by them.
_TOKENS = text("(prompt_tokens + completion_tokens)")


class EvaluationRow(_Table, table=True):
    """One agent on one set of tasks; the unique key lets every run reuse it, not pay again.

    The totals are recomputed from the task results each time one is added, so the spend of an
    unfinished evaluation is known too. The lease names the one process running its tasks, until
    the time it must renew it by: a worker that dies stops renewing and another takes over.
    """

    __tablename__ = "ad_evaluation"
    # The unique index leads with agent_hash and so also serves lookups by agent. The others hold
    # a query's whole ORDER BY after its filters, so that a leaderboard reads its first rows in
    # order and stops, and the Pareto sweep reads rows in order, instead of sorting every one:
    # at 100,000 agents that is milliseconds instead of a second (bench/archive_scale.py).
    __table_args__ = (
        UniqueConstraint("agent_hash", "benchmark", "task_set"),
        Index(
            "ix_ad_evaluation_leaderboard",
            "split",
            "status",
            "benchmark",
            text("mean DESC"),
            "cost",
            _TOKENS,
            "agent_hash",
            "id",
        ),
        Index(
            "ix_ad_evaluation_leaderboard_all",
            "split",
            "status",
            text("mean DESC"),
            "cost",
            _TOKENS,
            "agent_hash",
            "id",
        ),
        Index(
            "ix_ad_evaluation_pareto",
            "split",
            "status",
            "benchmark",
            "cost",
            _TOKENS,
            text("mean DESC"),
            "id",
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_hash: str = Field(foreign_key="ad_agent.spec_hash")
    benchmark: str
    task_set: str
    task_ids: list[str] = _json_column()
    split: str
    n_planned: int
    n_done: int = 0
    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    wall_s: float = 0.0
    status: str
    lease_owner: str | None = None
    lease_until: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))
    created_at: datetime = _timestamp()
    updated_at: datetime = _timestamp()


class TaskResultRow(_Table, table=True):
    __tablename__ = "ad_task_result"
    # The unique index leads with evaluation_id and so also serves lookups by evaluation.
    __table_args__ = (UniqueConstraint("evaluation_id", "task_id"),)

    id: int | None = Field(default=None, primary_key=True)
    evaluation_id: int = Field(foreign_key="ad_evaluation.id")
    task_id: str
    output: str = Field(sa_type=Text)
    answer: str = Field(sa_type=Text)
    score: float
    prompt_tokens: int
    completion_tokens: int
    cost: float
    latency_s: float
    error_kind: str | None = None
    error: str | None = Field(default=None, sa_type=Text)
    details: dict[str, Any] = _json_column()
    created_at: datetime = _timestamp()


class RunEntryRow(_Table, table=True):
    """Links a run to an evaluation it used, whether it paid for it or reused it.

    Unique per (run, evaluation) rather than per (run, agent): a run's best agents get a second,
    holdout evaluation, and both must be found from the run.
    """

    __tablename__ = "ad_run_entry"
    __table_args__ = (UniqueConstraint("run_id", "evaluation_id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="ad_run.id")
    agent_hash: str = Field(foreign_key="ad_agent.spec_hash", index=True)
    evaluation_id: int = Field(foreign_key="ad_evaluation.id", index=True)
    trial_number: int | None = None
    # Why the run holds it: "candidate" (a searched design), "dev" (a design on the development
    # items a prompt refiner learns from; never ranked), "winner" (the recorded winner's holdout
    # confirmation), "baseline" (a hand-designed agent on the holdout) or "exploratory" (more
    # designs on the holdout after the winner was fixed; never a verdict).
    role: str = Field(default="candidate", sa_column_kwargs={"server_default": "candidate"})
    created_at: datetime = _timestamp()


class SearchCallRow(_Table, table=True):
    """A model call the search itself made for a run (a prompt refinement), not an agent's task.

    Kept apart from task results so scores stay the agents' own, and summed into the run's totals
    so that token budgets and reported costs include what searching cost.
    """

    __tablename__ = "ad_search_call"

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="ad_run.id", index=True)
    purpose: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    latency_s: float
    created_at: datetime = _timestamp()


class TaskFailureRow(_Table, table=True):
    """A task attempt that the provider failed (rate limit, server error, timeout, a garbled or
    empty reply after the retries): kept for the record, never a score; the task runs again."""

    __tablename__ = "ad_task_failure"

    id: int | None = Field(default=None, primary_key=True)
    evaluation_id: int = Field(foreign_key="ad_evaluation.id", index=True)
    task_id: str
    error_kind: str
    error: str = Field(sa_type=Text)
    prompt_tokens: int
    completion_tokens: int
    cost: float
    latency_s: float
    created_at: datetime = _timestamp()


class ProposalRow(_Table, table=True):
    """A design the search's meta agent (a model) proposed for a run, kept whatever became of it:
    its prompt and the model's response, the operator and parents it worked from, and its fate.

    Nothing it generates is dropped silently: "accepted" made the design `spec_hash`, "screened"
    was valid but lost the value model's screening to another design of its reply, "duplicate"
    repeated an archived one, "invalid" did not parse or check, "failed" got no usable response;
    `reason` says why for each of the last three. The tokens are copied from the call's own
    record (`ad_search_call`), which alone counts in the run's totals.
    """

    __tablename__ = "ad_proposal"

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="ad_run.id", index=True)
    operator: str
    # The spec hashes the proposal was made from, first parent first (empty for a new design).
    parents: list[str] = _json_column()
    prompt: str = Field(sa_type=Text)
    response: str = Field(sa_type=Text)
    status: str
    reason: str | None = Field(default=None, sa_type=Text)
    # Indexed: `show --lineage` finds the proposal that made an agent by its hash.
    spec_hash: str | None = Field(default=None, index=True)
    prompt_tokens: int
    completion_tokens: int
    created_at: datetime = _timestamp()


class HoldoutLookRow(_Table, table=True):
    """A design scored on holdout items: by a run confirming its winner, baselines and
    exploratory designs (`source` "run", `run_id` that run), or by `agentdesign evaluate` on
    items that are some run's holdout (`source` "evaluate", `run_id` the run named with --run,
    if any). Every look is kept, so that a verdict can say how often its holdout items have been
    looked at, by any run or command, before and after it."""

    __tablename__ = "ad_holdout_look"

    id: int | None = Field(default=None, primary_key=True)
    # The benchmark as runs store it (its reference), and the items scored, sorted.
    benchmark: str = Field(index=True)
    task_set: str
    task_ids: list[str] = _json_column()
    run_id: int | None = Field(default=None, foreign_key="ad_run.id")
    agent_hash: str = Field(foreign_key="ad_agent.spec_hash")
    evaluation_id: int = Field(foreign_key="ad_evaluation.id")
    source: str
    created_at: datetime = _timestamp()
