"""Benchmarks, scoring, statistics, and the runner that evaluates an agent on tasks.

What is exported, and nothing else (the rest is internal and may change):

- benchmarks by name: `get_benchmark`, `available_benchmarks`, `BENCHMARKS`; the bundled ones'
  classes, for their settings (`GSM8K`, `HumanEval`, `BFCL`, `TextWorldExpress`, `ScienceWorld`);
  a user's JSONL data (`open_file_benchmark`, `FileBenchmark`);
- extending: the base classes a new benchmark subclasses (`Benchmark`, `InteractiveBenchmark` for
  an environment's episodes), what they take and return (`Task`, `Score`), `register_benchmark`,
  helpers (`load_jsonl`, `extract_final_number`), the conformance check `check_benchmark`,
  `BenchmarkError`;
- running: `run_task`, `evaluate_tasks` with their `TaskOutcome`, `check_concurrency`,
  `examples_from_tasks`, `episode_workflows`; seeded splits (`make_split`, `Split`);
- statistics: `summarize` (`ScoreSummary`), `score_interval`, `paired_difference`
  (`PairedComparison`) and its `minimum_detectable_effect`, `selection_overfit`
  (`OverfitReport`) with `selection_estimable` (`SELECTION_MIN_DESIGNS`, `SELECTION_MIN_ITEMS`),
  `winner_optimism`, `backtest_overfitting`, `shuffled_pbo`.
"""

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
from agentdesign.evaluators._bfcl import BFCL
from agentdesign.evaluators._conformance import check_benchmark
from agentdesign.evaluators._custom import FileBenchmark, open_file_benchmark
from agentdesign.evaluators._gsm8k import GSM8K, extract_final_number
from agentdesign.evaluators._humaneval import HumanEval
from agentdesign.evaluators._runner import (
    TaskOutcome,
    check_concurrency,
    evaluate_tasks,
    examples_from_tasks,
    run_task,
)
from agentdesign.evaluators.environments._environments import (
    InteractiveBenchmark,
    episode_workflows,
)
from agentdesign.evaluators.environments._scienceworld import ScienceWorld
from agentdesign.evaluators.environments._textworld import TextWorldExpress
from agentdesign.evaluators.stats._overfit import (
    SELECTION_MIN_DESIGNS,
    SELECTION_MIN_ITEMS,
    OverfitReport,
    backtest_overfitting,
    selection_estimable,
    selection_overfit,
    shuffled_pbo,
    winner_optimism,
)
from agentdesign.evaluators.stats._power import minimum_detectable_effect
from agentdesign.evaluators.stats._stats import (
    PairedComparison,
    ScoreSummary,
    paired_difference,
    score_interval,
    summarize,
)

__all__ = [
    "BENCHMARKS",
    "BFCL",
    "GSM8K",
    "SELECTION_MIN_DESIGNS",
    "SELECTION_MIN_ITEMS",
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
    "check_concurrency",
    "episode_workflows",
    "evaluate_tasks",
    "examples_from_tasks",
    "extract_final_number",
    "get_benchmark",
    "load_jsonl",
    "make_split",
    "minimum_detectable_effect",
    "open_file_benchmark",
    "paired_difference",
    "register_benchmark",
    "run_task",
    "score_interval",
    "selection_estimable",
    "selection_overfit",
    "shuffled_pbo",
    "summarize",
    "winner_optimism",
]
