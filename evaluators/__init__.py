"""Benchmarks, scoring, statistics, and the runner that evaluates an agent on tasks."""

from __future__ import annotations

from agentdesign.evaluators._benchmark import (
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
from agentdesign.evaluators._environments import InteractiveBenchmark, episode_workflows
from agentdesign.evaluators._gsm8k import GSM8K, extract_final_number
from agentdesign.evaluators._humaneval import HumanEval
from agentdesign.evaluators._runner import (
    TaskOutcome,
    evaluate_tasks,
    examples_from_tasks,
    run_task,
)
from agentdesign.evaluators._scienceworld import ScienceWorld
from agentdesign.evaluators._stats import (
    PairedComparison,
    ScoreSummary,
    bootstrap_ci,
    paired_difference,
    summarize,
)
from agentdesign.evaluators._textworld import TWX_GAMES, TextWorldExpress

__all__ = [
    "GSM8K",
    "TWX_GAMES",
    "Benchmark",
    "BenchmarkError",
    "HumanEval",
    "InteractiveBenchmark",
    "PairedComparison",
    "ScienceWorld",
    "Score",
    "ScoreSummary",
    "Split",
    "Task",
    "TaskOutcome",
    "TextWorldExpress",
    "available_benchmarks",
    "bootstrap_ci",
    "episode_workflows",
    "evaluate_tasks",
    "examples_from_tasks",
    "extract_final_number",
    "get_benchmark",
    "load_jsonl",
    "make_split",
    "paired_difference",
    "register_benchmark",
    "run_task",
    "summarize",
]
