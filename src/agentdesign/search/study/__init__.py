"""The run engine: a run's configuration, the resumable search loop, workers sharing an archive,
the holdout confirmation, export of the winners, and the Python ask/tell face."""

from __future__ import annotations

from agentdesign.search.study._config import (
    MAX_SEED,
    MAX_WAIT_S,
    Budget,
    MetaSettings,
    RaceSettings,
    RunConfig,
    SpaceSettings,
    SplitSettings,
    check_rate_limits,
    check_seconds,
    check_seed,
    default_baselines,
    dev_task_ids,
)
from agentdesign.search.study._context import RunContext
from agentdesign.search.study._evaluation import evaluate_agent
from agentdesign.search.study._export import export_design, export_evidence
from agentdesign.search.study._holdout import HoldoutConfirmation
from agentdesign.search.study._loop import Engine, study_name
from agentdesign.search.study._operators import ModelOperators
from agentdesign.search.study._prior import labelled_from_archive
from agentdesign.search.study._reporting import Reporter, RunSummary
from agentdesign.search.study._resolve import ResolvedRun, resolve, store_run
from agentdesign.search.study._runs import (
    check_searchable,
    finalize_run,
    resume_search,
    run_search,
    run_worker,
    stored_engine,
)
from agentdesign.search.study._scoring import RunScoring
from agentdesign.search.study._settings import DEFAULTS, SETTINGS, Setting
from agentdesign.search.study._splits import (
    RunItems,
    check_split,
    dev_items,
    draw_items,
    fresh_split_seed,
    holdout_looker,
    holdout_reuse,
    run_header,
)
from agentdesign.search.study._workers import (
    DEFAULT_HEARTBEAT_S,
    GRACE_BEATS,
    WorkerTrials,
    trial_storage,
)

__all__ = [
    "DEFAULTS",
    "DEFAULT_HEARTBEAT_S",
    "GRACE_BEATS",
    "MAX_SEED",
    "MAX_WAIT_S",
    "SETTINGS",
    "Budget",
    "Engine",
    "HoldoutConfirmation",
    "MetaSettings",
    "ModelOperators",
    "RaceSettings",
    "Reporter",
    "ResolvedRun",
    "RunConfig",
    "RunContext",
    "RunItems",
    "RunScoring",
    "RunSummary",
    "Setting",
    "SpaceSettings",
    "SplitSettings",
    "WorkerTrials",
    "check_rate_limits",
    "check_searchable",
    "check_seconds",
    "check_seed",
    "check_split",
    "default_baselines",
    "dev_items",
    "dev_task_ids",
    "draw_items",
    "evaluate_agent",
    "export_design",
    "export_evidence",
    "finalize_run",
    "fresh_split_seed",
    "holdout_looker",
    "holdout_reuse",
    "labelled_from_archive",
    "resolve",
    "resume_search",
    "run_header",
    "run_search",
    "run_worker",
    "store_run",
    "stored_engine",
    "study_name",
    "trial_storage",
]
