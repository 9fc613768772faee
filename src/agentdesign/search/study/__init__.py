"""The run engine: the resumable search loop, workers sharing an archive,
the holdout confirmation, export of the winners, a run's cost estimated before it runs, and the
Python ask/tell face."""

from __future__ import annotations

from agentdesign.search.study._context import RunContext
from agentdesign.search.study._estimate import EstimatePart, ItemCost, RunEstimate, estimate_run
from agentdesign.search.study._evaluation import evaluate_agent
from agentdesign.search.study._export import export_design, export_evidence
from agentdesign.search.study._holdout import HoldoutConfirmation
from agentdesign.search.study._loop import Engine, study_name
from agentdesign.search.study._operators import ModelOperators
from agentdesign.search.study._prior import labelled_from_archive
from agentdesign.search.study._reporting import Reporter, RunSummary
from agentdesign.search.study._runs import (
    check_searchable,
    finalize_run,
    resume_search,
    run_search,
    run_worker,
    stored_engine,
)
from agentdesign.search.study._scoring import RunScoring
from agentdesign.search.study._workers import (
    DEFAULT_HEARTBEAT_S,
    GRACE_BEATS,
    WorkerTrials,
    trial_storage,
)

__all__ = [
    "DEFAULT_HEARTBEAT_S",
    "GRACE_BEATS",
    "Engine",
    "EstimatePart",
    "HoldoutConfirmation",
    "ItemCost",
    "ModelOperators",
    "Reporter",
    "RunContext",
    "RunEstimate",
    "RunScoring",
    "RunSummary",
    "WorkerTrials",
    "check_searchable",
    "estimate_run",
    "evaluate_agent",
    "export_design",
    "export_evidence",
    "finalize_run",
    "labelled_from_archive",
    "resume_search",
    "run_search",
    "run_worker",
    "stored_engine",
    "study_name",
    "trial_storage",
]
