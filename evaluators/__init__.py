"""Benchmarks, scoring, statistics, and the runner that evaluates an agent on tasks."""

from __future__ import annotations

from agentdesign.evaluators._benchmark import (
    BENCHMARKS,
    Benchmark,
    BenchmarkError,
    Score,
    Split,
    Task,
    available_benchmarks,
    get_benchmark,
    load_jsonl,
    make_split,
    register_benchmark,
)
from agentdesign.evaluators._bfcl import (
    BFCL,
    BFCLIrrelevance,
    BFCLMultiple,
    BFCLSimple,
    check_call,
    parse_calls,
)
from agentdesign.evaluators._checks import check_benchmark
from agentdesign.evaluators._custom import FileBenchmark, open_file_benchmark
from agentdesign.evaluators._environments import InteractiveBenchmark, episode_workflows
from agentdesign.evaluators._gsm8k import GSM8K, extract_final_number
from agentdesign.evaluators._humaneval import HumanEval
from agentdesign.evaluators._runner import (
    TaskOutcome,
    check_concurrency,
    evaluate_tasks,
    examples_from_tasks,
    run_task,
)
from agentdesign.evaluators._scienceworld import ScienceWorld
from agentdesign.evaluators._stats import (
    OverfitReport,
    PairedComparison,
    ScoreSummary,
    backtest_overfitting,
    debiased_winner_score,
    paired_difference,
    score_interval,
    selection_overfit,
    summarize,
    winner_optimism,
)
from agentdesign.evaluators._textworld import TWX_GAMES, TextWorldExpress

__all__ = [
    "BENCHMARKS",
    "BFCL",
    "GSM8K",
    "TWX_GAMES",
    "BFCLIrrelevance",
    "BFCLMultiple",
    "BFCLSimple",
    "Benchmark",
    "BenchmarkError",
    "FileBenchmark",
    "HumanEval",
    "InteractiveBenchmark",
    "OverfitReport",
    "PairedComparison",
    "ScienceWorld",
    "Score",
    "ScoreSummary",
    "Split",
    "Task",
    "TaskOutcome",
    "TextWorldExpress",
    "available_benchmarks",
    "backtest_overfitting",
    "check_benchmark",
    "check_call",
    "check_concurrency",
    "debiased_winner_score",
    "episode_workflows",
    "evaluate_tasks",
    "examples_from_tasks",
    "extract_final_number",
    "get_benchmark",
    "load_jsonl",
    "make_split",
    "open_file_benchmark",
    "paired_difference",
    "parse_calls",
    "register_benchmark",
    "run_task",
    "score_interval",
    "selection_overfit",
    "summarize",
    "winner_optimism",
]
