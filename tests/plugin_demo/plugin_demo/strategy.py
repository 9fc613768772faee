"""A strategy plugin: proposes the space's designs in a seeded random order, never twice."""

from __future__ import annotations

import numpy as np

from agentdesign.search import History, Proposal, Strategy


class Shuffle(Strategy):
    """Seeded random designs proposed directly (not through optuna's sampler)."""

    def suggest(self, history: History, rng: np.random.Generator) -> Proposal | None:
        return Proposal(spec=self.space.sample(rng), operator="shuffle")
