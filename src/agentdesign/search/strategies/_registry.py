"""Search strategies by name: optuna's samplers (random, tpe, nsga2) and the value-guided ones
(mcts, evolution), all behind the `Strategy` interface, plus the third-party ones that the
`agentdesign.strategies` entry points name."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import optuna

from agentdesign.components import AgentDesignError, NamedRegistry
from agentdesign.search.space import SearchSpace
from agentdesign.search.strategies._base import StartUp, Strategy
from agentdesign.search.strategies._evolution import EvolutionStrategy
from agentdesign.search.strategies._guided import GuidedStrategy
from agentdesign.search.strategies._mcts import MctsStrategy
from agentdesign.search.strategies._meta import MetaAgent
from agentdesign.search.strategies._meta_search import MetaStrategy
from agentdesign.search.strategies._refine import PromptRefiner

__all__ = [
    "STRATEGIES",
    "OptunaStrategy",
    "RegisteredStrategy",
    "check_refinable",
    "make_strategy",
    "register_strategy",
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
        start_up: StartUp | None = None,
    ) -> None:
        super().__init__(space=space, seed=seed, objective=objective)
        self._make_sampler = sampler
        self._start_up = start_up

    def start_up(self) -> StartUp | None:
        return self._start_up

    def sampler(self) -> optuna.samplers.BaseSampler:
        return self._make_sampler(self.seed)


# TPE samples this many designs at random before it models any; NSGA-II's first generation, of
# this many, is random too.
_TPE_STARTUP = 4
_NSGA2_POPULATION = 8
_RANDOM_SEARCH = "this run is a random search"


def _random(seed: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.RandomSampler(seed=seed)


def _tpe(seed: int) -> optuna.samplers.BaseSampler:
    # group=True models each branch of the conditional space (one per component choice) separately;
    # optuna flags it experimental, but it is the documented way to handle conditional spaces.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna.samplers.TPESampler(
        seed=seed, multivariate=True, group=True, n_startup_trials=_TPE_STARTUP, constant_liar=True
    )


def _nsga2(seed: int) -> optuna.samplers.BaseSampler:
    # Small generations: a search evaluates tens of designs, not thousands.
    return optuna.samplers.NSGAIISampler(seed=seed, population_size=_NSGA2_POPULATION)


_Factory = Callable[..., Strategy]


class RegisteredStrategy(NamedTuple):
    """A strategy as the registry holds it: what it does, for listings, and how to make one."""

    description: str
    factory: _Factory


def _adopt(name: str, plugin: Any) -> None:
    """Registers the Strategy subclass a plugin's entry point names (a module registers itself)."""
    if not (isinstance(plugin, type) and issubclass(plugin, Strategy)):
        raise TypeError(f"entry point '{name}' names {plugin!r}, not a Strategy subclass")
    if STRATEGIES.get(name, (None, None))[1] is not plugin:
        register_strategy(name, plugin)


STRATEGIES = NamedRegistry[RegisteredStrategy](
    kind="strategy", group="agentdesign.strategies", adopt=_adopt
)


def register_strategy(name: str, factory: _Factory, *, description: str = "") -> _Factory:
    """Makes `factory` (a `Strategy` subclass, or a configured preset of one, such as a
    `functools.partial` binding its settings) available to `make_strategy` as `name`.

    The factory takes the keywords `space`, `seed` and `objective` (and `refiner`, if it is a
    value-guided strategy); `description` defaults to the first line of its docstring. An abstract
    base, such as `GuidedStrategy` without the `operators` a subclass declares, is refused.
    """
    if isinstance(factory, type) and issubclass(factory, GuidedStrategy) and not factory.operators:
        raise AgentDesignError(
            f"{factory.__name__} declares no `operators`: it is an abstract base, not a strategy"
        )
    about = description or (inspect.getdoc(factory) or "").partition("\n")[0]
    STRATEGIES.register(name, RegisteredStrategy(about, factory))
    return factory


register_strategy(
    "random",
    functools.partial(OptunaStrategy, sampler=_random),
    description="uniform random designs: the baseline every strategy must beat",
)
register_strategy(
    "tpe",
    functools.partial(
        OptunaStrategy,
        sampler=_tpe,
        start_up=StartUp(_TPE_STARTUP, "at random", _RANDOM_SEARCH),
    ),
    description="optuna's tree-structured Parzen estimator over the conditional space",
)
register_strategy(
    "nsga2",
    functools.partial(
        OptunaStrategy,
        sampler=_nsga2,
        start_up=StartUp(_NSGA2_POPULATION, "at random (its first generation)", _RANDOM_SEARCH),
    ),
    description="optuna's NSGA-II genetic algorithm (score and cost: its Pareto front)",
)
register_strategy(
    "mcts",
    MctsStrategy,
    description="value-guided hierarchical MCTS: workflow, then components, then parameters",
)
register_strategy(
    "evolution",
    EvolutionStrategy,
    description=(
        "AFlow-style evolution: fitness-weighted parents, crossover, mutation, model screening"
    ),
)


register_strategy(
    "meta",
    MetaStrategy,
    description="meta agent search: a model reads the run's best designs and writes new ones",
)


def make_strategy(
    name: str,
    *,
    space: SearchSpace,
    seed: int,
    objective: str = "score",
    refiner: PromptRefiner | None = None,
    meta: MetaAgent | None = None,
) -> Strategy:
    """The strategy called `name`, seeded for reproducibility; a `refiner` (value-guided strategies
    only) rewrites a prompt of a good design every `refiner.every` proposals, and a `meta` agent
    writes one every `meta.every` proposals."""
    factory = STRATEGIES.lookup(name, error=AgentDesignError).factory
    extras: dict[str, Any] = {}
    if refiner is not None:
        check_refinable(name)
        extras["refiner"] = refiner
    if meta is not None:
        check_refinable(name, what="the meta agent")
        extras["meta"] = meta
    return factory(space=space, seed=seed, objective=objective, **extras)


def supports_refinement(name: str) -> bool:
    """Whether the strategy called `name` can propose prompt refinements."""
    factory = STRATEGIES[name].factory if name in STRATEGIES else None
    return isinstance(factory, type) and issubclass(factory, GuidedStrategy)


def check_refinable(name: str, *, what: str = "prompt refinement") -> None:
    """Refuse prompt refinement (or the meta agent: `what`) for a strategy that cannot propose
    it, naming those that can."""
    if not supports_refinement(name):
        raise AgentDesignError(
            f"{what} needs a value-guided strategy "
            f"({', '.join(n for n in STRATEGIES if supports_refinement(n))}), not '{name}'"
        )
