"""What the parts of one process's run share (`RunContext`): the engine (`_loop`), its workers'
trials (`_workers`), its scoring within the budget (`_scoring`), its holdout confirmation
(`_holdout`) and its model operators (`_operators`) each hold the same one, so that what one part
changes (the run as last read, the budget, where progress goes) the others see."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentdesign.archive import Archive, RunRecord
from agentdesign.components import ChatModel, Example
from agentdesign.evaluators import Benchmark, Task, examples_from_tasks
from agentdesign.search.config import Budget, ResolvedRun, RunConfig
from agentdesign.search.study._reporting import Reporter

__all__ = ["RunContext"]


@dataclass(eq=False)
class RunContext:
    """One process's run: the archive it lives in, the run as last read from it, what its
    configuration resolved to (once: see `resolve`), the budget this process runs to (the
    config's, unless the caller set another), where progress goes, and the run's tasks."""

    archive: Archive
    run: RunRecord
    resolved: ResolvedRun
    budget: Budget
    reporter: Reporter
    heartbeat_s: int
    examples: Sequence[Example]
    search_tasks: Sequence[Task]
    holdout_tasks: Sequence[Task]
    dev_tasks: Sequence[Task]

    @classmethod
    def open(
        cls,
        archive: Archive,
        run: RunRecord,
        resolved: ResolvedRun,
        *,
        reporter: Reporter | None,
        heartbeat_s: int,
    ) -> RunContext:
        benchmark = resolved.benchmark
        return cls(
            archive=archive,
            run=run,
            resolved=resolved,
            budget=resolved.config.budget,
            reporter=reporter or Reporter(),
            heartbeat_s=heartbeat_s,
            examples=examples_from_tasks(benchmark.train_examples()),
            search_tasks=benchmark.tasks_by_ids(run.search_task_ids),
            holdout_tasks=benchmark.tasks_by_ids(run.holdout_task_ids),
            dev_tasks=benchmark.tasks_by_ids(resolved.items.dev),
        )

    @property
    def config(self) -> RunConfig:
        return self.resolved.config

    @property
    def benchmark(self) -> Benchmark:
        return self.resolved.benchmark

    @property
    def llm(self) -> ChatModel:
        return self.resolved.llm
