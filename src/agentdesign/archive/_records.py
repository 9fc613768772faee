"""Frozen snapshots of archive rows.

The archive hands out these instead of ORM rows (as optuna hands out FrozenTrial), so that no
caller holds a live row bound to a closed session or edits the database by accident. Task results
need no record of their own: the archive stores and returns the runner's `TaskOutcome`, whose
fields its task result columns bear the names of (`record` reads them by name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sqlmodel import SQLModel

from agentdesign.archive.database._tables import EvaluationRow

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "AgentRecord",
    "EvaluationRecord",
    "HoldoutLookRecord",
    "LeaderboardRow",
    "ProposalRecord",
    "RunRecord",
    "RunTotals",
    "as_utc",
    "ident",
    "leaderboard_row",
    "record",
    "utc_now",
]

_Record = TypeVar("_Record", bound="DataclassInstance")


@dataclass(frozen=True, slots=True)
class RunRecord:
    id: int
    name: str
    benchmark: str
    model: str
    strategy: str
    budget: Mapping[str, Any]
    config: Mapping[str, Any]
    split_seed: int
    search_task_ids: tuple[str, ...]
    holdout_task_ids: tuple[str, ...]
    dev_task_ids: tuple[str, ...]
    status: str
    elapsed_s: float
    winner_hash: str | None
    winner_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class AgentRecord:
    id: int
    spec_hash: str
    spec: Mapping[str, Any]
    parent_hash: str | None
    co_parent_hash: str | None
    operator: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class EvaluationRecord:
    """One agent on one task set; totals sum its task results (`wall_s` sums their latencies)."""

    id: int
    agent_hash: str
    benchmark: str
    task_set: str
    task_ids: tuple[str, ...]
    split: str
    n_planned: int
    n_done: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    prompt_tokens: int
    completion_tokens: int
    cost: float
    wall_s: float
    status: str
    created_at: datetime
    updated_at: datetime

    @property
    def tokens_per_item(self) -> float:
        """Prompt plus completion tokens per finished task (0 before any task finished)."""
        return (self.prompt_tokens + self.completion_tokens) / max(self.n_done, 1)


@dataclass(frozen=True, slots=True)
class LeaderboardRow:
    rank: int
    agent_hash: str
    spec: Mapping[str, Any]
    evaluation_id: int
    benchmark: str
    mean: float
    ci_low: float
    ci_high: float
    n_tasks: int
    prompt_tokens: int
    completion_tokens: int
    cost: float
    wall_s: float
    status: str
    task_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ProposalRecord:
    """A design the meta agent proposed for a run, whatever became of it (see `add_proposal`).

    `status` is "accepted" (it made the agent `spec_hash`), "screened" (valid, but another
    design of the same reply screened better and was evaluated instead), "duplicate"
    (`spec_hash`, if known, is the archived design it repeats), "invalid" or "failed";
    `reason` says why it was refused or failed. The tokens are informational: the call counts
    in the run's totals as a search call.
    """

    id: int
    run_name: str
    operator: str
    parents: tuple[str, ...]
    prompt: str
    response: str
    status: str
    reason: str | None
    spec_hash: str | None
    prompt_tokens: int
    completion_tokens: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class HoldoutLookRecord:
    """A design scored on holdout items (see `record_holdout_look`): `source` "run" when run
    `run_name` confirmed it, "evaluate" when the evaluate command scored it (`run_name`: the run
    it named, if any). `task_ids` are the items scored, sorted."""

    id: int
    benchmark: str
    task_ids: tuple[str, ...]
    run_name: str | None
    agent_hash: str
    evaluation_id: int
    source: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class RunTotals:
    """What a run cost: its evaluations, reused ones included (the archive does not know who paid),
    and the model calls the search made itself (`n_search_calls`, in the tokens and cost).
    `wall_s` sums the evaluations' task latencies. Agents count the designs searched: `n_complete`
    were scored on every search item, `n_finished` also counts those racing dropped."""

    run_name: str
    n_agents: int
    n_complete: int
    n_finished: int
    prompt_tokens: int
    completion_tokens: int
    cost: float
    wall_s: float
    n_search_calls: int = 0


# -- rows to records ------------------------------------------------------------------------------


def ident(row_id: int | None) -> int:
    assert row_id is not None, "records are built from stored rows only"
    return row_id


def record(record_type: type[_Record], row: SQLModel, **given: Any) -> _Record:
    """A `record_type` with each field read off the row's attribute of the same name, except the
    fields in `given` (ones the row has no column for), which are taken as they are.

    Three conversions, by name or by value: `id` (set once stored) becomes a plain int, a JSON list
    a tuple and a timestamp UTC. Everything else, JSON objects included, is taken as it is.
    """
    values: dict[str, Any] = dict(given)
    for field in fields(record_type):
        if field.name in given:
            continue
        value = getattr(row, field.name)
        if field.name == "id":
            value = ident(value)
        elif isinstance(value, list):
            value = tuple(value)
        elif isinstance(value, datetime):
            value = as_utc(value)
        values[field.name] = value
    return record_type(**values)


def leaderboard_row(rank: int, row: EvaluationRow, spec: Mapping[str, Any]) -> LeaderboardRow:
    # finish_evaluation sets all three before it marks an evaluation complete.
    assert row.mean is not None and row.ci_low is not None and row.ci_high is not None
    return LeaderboardRow(
        rank=rank,
        agent_hash=row.agent_hash,
        spec=spec,
        evaluation_id=ident(row.id),
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


def utc_now() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """SQLite returns timestamps without a zone, PostgreSQL in the session's zone: make both UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
