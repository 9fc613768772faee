"""Search strategies by name; for now optuna's samplers over the design space."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import optuna

from agentdesign.components import AgentDesignError

__all__ = ["STRATEGIES", "make_sampler"]


def _random(seed: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.RandomSampler(seed=seed)


def _tpe(seed: int) -> optuna.samplers.BaseSampler:
    # group=True models each branch of the conditional space (one per component choice) separately;
    # optuna flags it experimental, but it is the documented way to handle conditional spaces.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna.samplers.TPESampler(
        seed=seed, multivariate=True, group=True, n_startup_trials=4, constant_liar=True
    )


STRATEGIES: dict[str, tuple[str, Callable[[int], optuna.samplers.BaseSampler]]] = {
    "random": ("uniform random designs: the baseline every strategy must beat", _random),
    "tpe": ("optuna's tree-structured Parzen estimator over the conditional space", _tpe),
}


def make_sampler(name: str, *, seed: int) -> optuna.samplers.BaseSampler:
    """The optuna sampler for strategy `name`, seeded for reproducibility."""
    try:
        _, factory = STRATEGIES[name]
    except KeyError:
        known = ", ".join(STRATEGIES)
        raise AgentDesignError(f"unknown strategy '{name}' (available: {known})") from None
    return factory(seed)
