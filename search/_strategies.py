"""Search strategies by name: optuna's samplers (random, tpe, nsga2) and the value-guided ones
(mcts, evolution), all behind the `Strategy` interface."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import optuna

from agentdesign.components import AgentDesignError
from agentdesign.search._base import Strategy
from agentdesign.search._evolution import EvolutionStrategy
from agentdesign.search._guided import GuidedStrategy
from agentdesign.search._mcts import MctsStrategy
from agentdesign.search._refine import PromptRefiner
from agentdesign.search._space import SearchSpace

__all__ = [
    "STRATEGIES",
    "OptunaStrategy",
    "check_refinable",
    "make_strategy",
    "supports_refinement",
]


class OptunaStrategy(Strategy):
    """An optuna sampler proposes every design (through `study.ask`); the strategy adds nothing."""

    def __init__(
        self,
        *,
        space: SearchSpace,
        seed: int = 0,
        objective: str = "score",
        sampler: Callable[[int], optuna.samplers.BaseSampler],
    ) -> None:
        super().__init__(space=space, seed=seed, objective=objective)
        self._make_sampler = sampler

    def _internal_sampler(self) -> optuna.samplers.BaseSampler:
        return self._make_sampler(self.seed)


def _random(seed: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.RandomSampler(seed=seed)


def _tpe(seed: int) -> optuna.samplers.BaseSampler:
    # group=True models each branch of the conditional space (one per component choice) separately;
    # optuna flags it experimental, but it is the documented way to handle conditional spaces.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna.samplers.TPESampler(
        seed=seed, multivariate=True, group=True, n_startup_trials=4, constant_liar=True
    )


def _nsga2(seed: int) -> optuna.samplers.BaseSampler:
    # Small generations: a search evaluates tens of designs, not thousands.
    return optuna.samplers.NSGAIISampler(seed=seed, population_size=8)


_Factory = Callable[..., Strategy]


def _optuna(sampler: Callable[[int], optuna.samplers.BaseSampler]) -> _Factory:
    def make(*, space: SearchSpace, seed: int, objective: str) -> Strategy:
        return OptunaStrategy(space=space, seed=seed, objective=objective, sampler=sampler)

    return make


STRATEGIES: dict[str, tuple[str, _Factory]] = {
    "random": ("uniform random designs: the baseline every strategy must beat", _optuna(_random)),
    "tpe": ("optuna's tree-structured Parzen estimator over the conditional space", _optuna(_tpe)),
    "nsga2": (
        "optuna's NSGA-II genetic algorithm (score and cost: its Pareto front)",
        _optuna(_nsga2),
    ),
    "mcts": (
        "value-guided hierarchical MCTS: workflow, then components, then parameters",
        MctsStrategy,
    ),
    "evolution": (
        "AFlow-style evolution: fitness-weighted parents, crossover, mutation, model screening",
        EvolutionStrategy,
    ),
}


def make_strategy(
    name: str,
    *,
    space: SearchSpace,
    seed: int,
    objective: str = "score",
    refiner: PromptRefiner | None = None,
) -> Strategy:
    """The strategy called `name`, seeded for reproducibility; a `refiner` (value-guided strategies
    only) rewrites a prompt of a good design every `refiner.every` proposals."""
    try:
        _, factory = STRATEGIES[name]
    except KeyError:
        known = ", ".join(STRATEGIES)
        raise AgentDesignError(f"unknown strategy '{name}' (available: {known})") from None
    if refiner is None:
        return factory(space=space, seed=seed, objective=objective)
    check_refinable(name)
    return factory(space=space, seed=seed, objective=objective, refiner=refiner)


def supports_refinement(name: str) -> bool:
    """Whether the strategy called `name` can propose prompt refinements."""
    factory = STRATEGIES[name][1] if name in STRATEGIES else None
    return isinstance(factory, type) and issubclass(factory, GuidedStrategy)


def check_refinable(name: str) -> None:
    """Refuse prompt refinement for a strategy that cannot propose it, naming those that can."""
    if not supports_refinement(name):
        raise AgentDesignError(
            f"prompt refinement needs a value-guided strategy "
            f"({', '.join(n for n in STRATEGIES if supports_refinement(n))}), not '{name}'"
        )
