"""A run's configuration: one table of settings and their defaults (which the CLI, the Python API
and resume all read), the settings in sections (`RunConfig`), the split of a benchmark's items,
and `resolve`, which turns a configuration and an archive into what the engine runs, once."""

from __future__ import annotations

from agentdesign.search.config._config import (
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
from agentdesign.search.config._resolve import ResolvedRun, resolve, store_run
from agentdesign.search.config._settings import DEFAULTS, SETTINGS, Setting, default_run_note
from agentdesign.search.config._splits import (
    RunItems,
    check_split,
    dev_items,
    draw_items,
    fresh_split_seed,
    holdout_looker,
    holdout_reuse,
    run_header,
)

__all__ = [
    "DEFAULTS",
    "MAX_SEED",
    "MAX_WAIT_S",
    "SETTINGS",
    "Budget",
    "MetaSettings",
    "RaceSettings",
    "ResolvedRun",
    "RunConfig",
    "RunItems",
    "Setting",
    "SpaceSettings",
    "SplitSettings",
    "check_rate_limits",
    "check_seconds",
    "check_seed",
    "check_split",
    "default_baselines",
    "default_run_note",
    "dev_items",
    "dev_task_ids",
    "draw_items",
    "fresh_split_seed",
    "holdout_looker",
    "holdout_reuse",
    "resolve",
    "run_header",
    "store_run",
]
