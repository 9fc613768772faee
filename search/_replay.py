"""Replaying a search against a recorded table: every evaluation is answered from the table.

A strategy may only evaluate the table's designs. Each proposal (a strategy's, or an optuna
sampler's) is mapped to its nearest table design not yet evaluated, by the value model's design
features; the trial then holds that design's spec and is told its recorded score, so the strategy
learns from exactly what a live run would have measured. The value-guided strategies screen their
candidates after this mapping, so they choose among table designs too. Mapping to the nearest
*untried* design means no replay evaluates a design twice, as no live run does.

Two yardsticks go with it. `shuffled_replay` evaluates the table in a random order, with no
mapping: the no-information baseline for a finite table (the mapping itself can favour designs in
sparse corners of the space). `split_half_reliability` says how far the table's own scores agree
with themselves, which bounds how well any value model can rank them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import optuna

from agentdesign.components import AgentDesignError
from agentdesign.search._base import ask_trial, history_from_study, snap
from agentdesign.search._strategies import make_strategy
from agentdesign.search._table import ReplayDesign, ReplayTable
from agentdesign.search._value import (
    Labelled,
    ValueModel,
    ValueReport,
    rank_correlation,
    value_report,
)

__all__ = [
    "ReplayResult",
    "held_out_accuracy",
    "replay_search",
    "shuffled_replay",
    "split_half_reliability",
]


@dataclass(frozen=True)
class ReplayResult:
    """The designs one replayed search evaluated, in order, with their recorded scores, tokens."""

    strategy: str
    seed: int
    hashes: tuple[str, ...]
    scores: tuple[float, ...]
    tokens: tuple[int, ...]

    def evaluations_to(self, targets: frozenset[str]) -> int | None:
        """How many evaluations it took to evaluate one of `targets` (None: never did)."""
        for n, spec_hash in enumerate(self.hashes, start=1):
            if spec_hash in targets:
                return n
        return None

    def best_after(self, n: int) -> float:
        return max(self.scores[:n])

    def tokens_after(self, n: int) -> int:
        return sum(self.tokens[:n])

    @classmethod
    def of(cls, strategy: str, seed: int, evaluated: Sequence[ReplayDesign]) -> ReplayResult:
        """The result of evaluating `evaluated` in this order."""
        return cls(
            strategy=strategy,
            seed=seed,
            hashes=tuple(d.spec.spec_hash for d in evaluated),
            scores=tuple(d.mean for d in evaluated),
            tokens=tuple(d.tokens for d in evaluated),
        )


def replay_search(
    table: ReplayTable,
    strategy: str,
    *,
    seed: int,
    n_evaluations: int,
    objective: str = "score",
) -> ReplayResult:
    """Runs `strategy` for `n_evaluations` (at most the table's size) in an in-memory study."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = table.space()
    chosen = make_strategy(strategy, space=space, seed=seed, objective=objective)
    study = optuna.create_study(sampler=chosen.sampler(), directions=chosen.directions())
    designs = table.by_hash()
    pool = tuple(d.spec for d in table.designs)
    evaluated: list[ReplayDesign] = []
    for _ in range(min(n_evaluations, len(designs))):
        history = history_from_study(study, description=table.description, pool=pool)
        trial = ask_trial(study, chosen, history)
        nearest = snap([space.suggest(trial)], history)[0]
        design = designs[nearest.spec_hash]
        trial.set_user_attr("spec", nearest.to_json())
        per_task = design.tokens / len(design.scores)
        study.tell(trial, [design.mean] if objective == "score" else [design.mean, per_task])
        evaluated.append(design)
    return ReplayResult.of(strategy, seed, evaluated)


def shuffled_replay(table: ReplayTable, *, seed: int, n_evaluations: int) -> ReplayResult:
    """The table's designs in a seeded random order: uniform sampling without replacement."""
    order = np.random.default_rng(seed).permutation(len(table.designs))[:n_evaluations]
    return ReplayResult.of("shuffled", seed, [table.designs[i] for i in order])


def held_out_accuracy(table: ReplayTable, *, n_labelled: int, seed: int) -> ValueReport:
    """The value model's accuracy on the table's designs it was not fit on, after fitting on
    `n_labelled` designs drawn at random: what a search knows after that many evaluations."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(table.designs))
    rows = [
        Labelled(spec=d.spec, description=table.description, score=d.mean) for d in table.designs
    ]
    model = ValueModel(seed=seed).fit([rows[i] for i in order[:n_labelled]])
    held_out = [rows[i] for i in order[n_labelled:]]
    means, stds = model.predict([r.spec for r in held_out], description=table.description)
    return value_report(means, stds, np.array([r.score for r in held_out]))


def split_half_reliability(table: ReplayTable, *, n_splits: int = 200, seed: int = 0) -> float:
    """How reproducible the table's ranking of designs is from its own tasks.

    Splits the tasks at random into two halves, ranks the designs by each half's mean, and takes
    Spearman's rho between the two rankings, averaged over `n_splits` splits and stepped up to the
    full task count (Spearman-Brown). Near 1: more tasks would barely reorder the designs; a value
    model's rank correlation with these scores can hardly exceed the square root of it.
    """
    n_tasks = len(table.task_ids)
    if n_tasks < 2:
        raise AgentDesignError("split-half reliability needs at least two tasks")
    scores = np.array([d.scores for d in table.designs])
    rng = np.random.default_rng(seed)
    halves = []
    for _ in range(n_splits):
        order = rng.permutation(n_tasks)
        first, second = order[: n_tasks // 2], order[n_tasks // 2 :]
        halves.append(rank_correlation(scores[:, first].mean(1), scores[:, second].mean(1)))
    half = float(np.mean(halves))
    return 2 * half / (1 + half) if half > -1 else -1.0
