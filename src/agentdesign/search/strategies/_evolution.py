"""Evolutionary search: AFlow-style parents, crossover and mutation, offspring screened by the
value model, and no design evaluated twice (the base class redraws any known spec hash)."""

from __future__ import annotations

from agentdesign.search.strategies._guided import GuidedStrategy

__all__ = ["EvolutionStrategy"]


class EvolutionStrategy(GuidedStrategy):
    """Population: the run's fittest complete designs; each child is a uniform crossover of two
    fitness-weighted parents plus one mutation; the best-screened child is evaluated."""

    operators = (("crossover", 1.0),)
