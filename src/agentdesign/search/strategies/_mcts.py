"""Value-guided hierarchical Monte Carlo tree search over the two-level design space.

The tree chooses the workflow first, then one component per slot (planning, reasoning, memory,
tool, reflection), then the parameters. Its statistics are rebuilt from the run's real results on
every proposal (nothing lives only in memory): a node's visits are the complete designs under it
and its value their mean fitness, so real scores back up the tree. Selection is PUCT: the prior of
each child is a softmax of the value model's best screened prediction under it, and an uncertainty
bonus adds the ensemble's spread and the gap between predicted and real scores under the node.
Expansion makes many offspring by mutation, recombination (a component from another good design)
and fresh samples; the model screens them and only the chosen leaf's best is evaluated.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from agentdesign.components import SLOTS
from agentdesign.search.strategies._base import History, Proposal, softmax
from agentdesign.search.strategies._guided import GuidedStrategy

__all__ = ["MctsStrategy"]


class MctsStrategy(GuidedStrategy):
    """`c_puct` weighs the prior-driven exploration term; `prior_temperature` sharpens the prior."""

    operators: ClassVar[tuple[tuple[str, float], ...]] = (
        ("mutation", 0.4),
        ("recombination", 0.4),
        ("sample", 0.2),
    )

    def __init__(
        self, *, c_puct: float = 1.0, prior_temperature: float = 0.05, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.c_puct = c_puct
        self.prior_temperature = prior_temperature

    def select(
        self,
        history: History,
        offspring: list[Proposal],
        mean: np.ndarray,
        std: np.ndarray,
        fitness: dict[str, float],
        weight: float,
    ) -> Proposal:
        """The best-screened offspring under the leaf that PUCT descends to, slot by slot."""
        complete = list(history.complete)
        real = np.array([fitness[o.spec.spec_hash] for o in complete])
        predicted, _ = self.predict([o.spec for o in complete], history, weight)
        gap = np.abs(real - predicted)
        bound = mean + self.explore * std
        chosen = np.arange(len(offspring))
        visited = np.arange(len(complete))
        for slot in SLOTS:
            children = sorted({offspring[i].spec[slot].name for i in chosen})
            under = {
                c: chosen[[offspring[i].spec[slot].name == c for i in chosen]] for c in children
            }
            seen = {
                c: visited[[complete[i].spec[slot].name == c for i in visited]] for c in children
            }
            prior = softmax(
                np.array([bound[under[c]].max() for c in children]), self.prior_temperature
            )
            total = math.sqrt(len(visited) + 1)
            scores = []
            for child, p in zip(children, prior, strict=True):
                n = len(seen[child])
                value = real[seen[child]].mean() if n else mean[under[child]].mean()
                uncertainty = std[under[child]].mean() + (gap[seen[child]].mean() if n else 0.0)
                scores.append(
                    value + self.c_puct * p * total / (1 + n) + self.explore * uncertainty
                )
            best = children[int(np.argmax(scores))]
            chosen, visited = under[best], seen[best]
        return offspring[int(chosen[np.argmax(bound[chosen])])]
