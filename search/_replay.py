"""Replaying a search against a recorded table: every evaluation is answered from the table.

A strategy may only evaluate the table's designs. Each proposal (a strategy's, or an optuna
sampler's) is mapped to its nearest table design not yet evaluated, by the value model's design
features; the trial then holds that design's spec and is told its recorded score, so the strategy
learns from exactly what a live run would have measured. The value-guided strategies screen their
candidates after this mapping, so they choose among table designs too. Mapping to the nearest
*untried* design means no replay evaluates a design twice, as no live run does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import optuna

from agentdesign.search._base import ask_trial, history_from_study, snap
from agentdesign.search._strategies import make_strategy
from agentdesign.search._table import ReplayTable
from agentdesign.search._value import Labelled, ValueModel, ValueReport, value_report

__all__ = ["ReplayResult", "held_out_accuracy", "replay_search"]


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
    hashes: list[str] = []
    for _ in range(min(n_evaluations, len(designs))):
        history = history_from_study(study, description=table.description, pool=pool)
        trial = ask_trial(study, chosen, history)
        nearest = snap([space.suggest(trial)], history)[0]
        design = designs[nearest.spec_hash]
        trial.set_user_attr("spec", nearest.to_json())
        per_task = design.tokens / len(design.scores)
        study.tell(trial, [design.mean] if objective == "score" else [design.mean, per_task])
        hashes.append(nearest.spec_hash)
    return ReplayResult(
        strategy=strategy,
        seed=seed,
        hashes=tuple(hashes),
        scores=tuple(designs[h].mean for h in hashes),
        tokens=tuple(designs[h].tokens for h in hashes),
    )


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
