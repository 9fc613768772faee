"""What every part of a search (`_loop.Engine` and the mixins it is made of) shares: the run it
works for, in the archive, and the one evaluation step that spends model calls on a design."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import optuna

from agentdesign.archive import Archive, EvaluationRecord, RunRecord
from agentdesign.components import AgentSpec
from agentdesign.evaluators import Benchmark
from agentdesign.search.study._config import RunConfig

__all__ = ["SearchPart"]


class SearchPart:
    """A part of the search: `_loop.Engine` sets these attributes and evaluates for it."""

    archive: Archive
    run: RunRecord
    config: RunConfig
    benchmark: Benchmark

    @abstractmethod
    def _evaluate(
        self,
        spec: AgentSpec,
        tasks: Sequence[Any],
        split: str,
        trial: optuna.Trial | optuna.trial.FrozenTrial | None,
        *,
        role: str = "candidate",
    ) -> EvaluationRecord | None:
        """Evaluates `spec` on `tasks`, as the search does (see `_loop.Engine._evaluate`)."""
