"""What a run tells its caller: progress as it happens (`Reporter`) and where it stands when the
search returns (`RunSummary`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from agentdesign.archive import EvaluationRecord, RunRecord
from agentdesign.components import AgentSpec
from agentdesign.evaluators import TaskOutcome

__all__ = ["Reporter", "RunSummary"]


@dataclass(frozen=True)
class RunSummary:
    """Where a run stands after `run_search` or `resume_search` returns."""

    run: RunRecord
    agents_done: int
    tokens: int
    cost: float
    elapsed_s: float
    stop_reason: str
    holdout: tuple[EvaluationRecord, ...]


class Reporter:
    """Receives progress as it happens (the CLI draws a progress bar from it).

    Every hook but `warning` does nothing here, so a reporter overrides only what it draws.
    """

    def warning(self, line: str) -> None:
        """A line the user should read while the run goes on (the dollar budget's warnings):
        printed on stderr here, so that no money is spent unsaid from Python either."""
        print(line, file=sys.stderr)

    def run_started(self, run: RunRecord) -> None:
        """The run passed its checks and starts (or resumes) searching."""

    def run_header(self, lines: Sequence[str]) -> None:
        """The settings that decide what the run sees and proposes, in words, to show under its
        name: its split seed and items, its strategy, and whether its budget gets the strategy
        past its start-up designs."""

    def agent_started(self, spec: AgentSpec, n_tasks: int, n_done: int, split: str) -> None:
        """An evaluation starts, `n_done` of its `n_tasks` already in the archive."""

    def task_finished(self, outcome: TaskOutcome) -> None:
        """A task's result was committed."""

    def agent_finished(self, spec: AgentSpec, evaluation: EvaluationRecord, split: str) -> None:
        """An evaluation finished (complete or pruned)."""

    def search_call_started(self, purpose: str) -> None:
        """The search itself calls a model ("meta": the meta agent writes designs; "refinement":
        a prompt is rewritten), which may take a while on a local model."""

    def search_call_finished(self, purpose: str, tokens: int) -> None:
        """That call returned (or failed: `tokens` 0), having used `tokens`."""
