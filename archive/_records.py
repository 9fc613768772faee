"""Frozen snapshots of archive rows.

The archive hands out these instead of ORM rows (as optuna hands out FrozenTrial), so that no
caller holds a live row bound to a closed session or edits the database by accident. Task results
need no record of their own: the archive stores and returns the runner's `TaskOutcome`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = [
    "AgentRecord",
    "EvaluationRecord",
    "LeaderboardRow",
    "RunRecord",
    "RunTotals",
]


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
