"""The `agentdesign` command line, outside the search core: it calls the search's faces, and
nothing in the search imports it."""

from __future__ import annotations

from agentdesign.search.cli._app import app, main
from agentdesign.search.cli._disk import full_disk_error
from agentdesign.search.cli._doctor import DEFAULT_POSTGRES_URL, POSTGRES_ENV, Check, run_checks
from agentdesign.search.cli._evaluate import evaluation_items, evaluation_split
from agentdesign.search.cli._format import (
    ci_text,
    interval_caption,
    interval_text,
    print_json,
    row_summary,
)
from agentdesign.search.cli._leaderboard import (
    latest_run,
    leaderboard_json,
    print_leaderboard,
    print_lineage,
    print_summary,
)
from agentdesign.search.cli._listings import list_benchmarks, list_components, list_strategies
from agentdesign.search.cli._options import (
    DEFAULT_STORAGE,
    ApiBaseOption,
    ConcurrencyOption,
    JsonOption,
    LLMTimeoutOption,
    RunOptions,
    StorageOption,
    TaskTimeoutOption,
    UnsafeSandboxOption,
    with_run_options,
)
from agentdesign.search.cli._progress import ProgressReporter, progress_bars

__all__ = [
    "DEFAULT_POSTGRES_URL",
    "DEFAULT_STORAGE",
    "POSTGRES_ENV",
    "ApiBaseOption",
    "Check",
    "ConcurrencyOption",
    "JsonOption",
    "LLMTimeoutOption",
    "ProgressReporter",
    "RunOptions",
    "StorageOption",
    "TaskTimeoutOption",
    "UnsafeSandboxOption",
    "app",
    "ci_text",
    "evaluation_items",
    "evaluation_split",
    "full_disk_error",
    "interval_caption",
    "interval_text",
    "latest_run",
    "leaderboard_json",
    "list_benchmarks",
    "list_components",
    "list_strategies",
    "main",
    "print_json",
    "print_leaderboard",
    "print_lineage",
    "print_summary",
    "progress_bars",
    "row_summary",
    "run_checks",
    "with_run_options",
]
