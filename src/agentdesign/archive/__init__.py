"""The archive: runs, agents, evaluations and task results in one SQL database.

SQLite by default, PostgreSQL (or any SQLAlchemy URL) for parallel workers; each run's optuna study
lives in the same database. Evaluations are keyed by agent and task set, so no run pays twice for
the same agent on the same tasks.
"""

from __future__ import annotations

from agentdesign.archive._archive import Archive
from agentdesign.archive._errors import ArchiveError, ArchiveUnreachableError
from agentdesign.archive._lease import Heartbeat, worker_id
from agentdesign.archive._records import (
    AgentRecord,
    EvaluationRecord,
    HoldoutLookRecord,
    LeaderboardRow,
    ProposalRecord,
    RunRecord,
    RunTotals,
)
from agentdesign.archive.database._engine import database_url
from agentdesign.archive.database._trials import TrialStorage

__all__ = [
    "AgentRecord",
    "Archive",
    "ArchiveError",
    "ArchiveUnreachableError",
    "EvaluationRecord",
    "Heartbeat",
    "HoldoutLookRecord",
    "LeaderboardRow",
    "ProposalRecord",
    "RunRecord",
    "RunTotals",
    "TrialStorage",
    "database_url",
    "worker_id",
]
