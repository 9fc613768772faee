"""The strategy part of the conformance kit: the ask/tell contract every strategy, built-in or
third-party, must keep (see `agentdesign.components.check_component`)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from agentdesign.components import SLOTS, AgentSpec, ConformanceError
from agentdesign.search.space import SearchSpace
from agentdesign.search.strategies._base import History, Strategy, Trial
from agentdesign.search.strategies._drive import Evaluated, drive
from agentdesign.search.strategies._registry import STRATEGIES

__all__ = ["check_strategy"]


def check_strategy(
    strategy: str | Callable[..., Strategy], *, n_asks: int = 6, model: str = "fake/model"
) -> None:
    """Raises ConformanceError naming the first rule the strategy breaks.

    `strategy` is a registered name, a Strategy subclass or a preset factory of one. The rules: it
    makes a Strategy from a space, a seed and an objective; from a history it proposes a design of
    the space that the history does not hold (or None, to leave it to its sampler); the same seed
    and history give the same proposal; and asked and told `n_asks` times through an optuna study,
    as a run does (scores made up from each design's hash), every design it asks for is valid.
    """
    factory = STRATEGIES.lookup(strategy).factory if isinstance(strategy, str) else strategy
    where = f"strategy {strategy if isinstance(strategy, str) else repr(strategy)}"
    space = SearchSpace(model=model)
    made = factory(space=space, seed=0, objective="score")
    if not isinstance(made, Strategy):
        raise ConformanceError(f"{where} made {made!r}, not a Strategy")
    evaluated = drive(
        made, _made_up_score, description="conformance", stop=lambda done: len(done) >= n_asks
    )
    for result in evaluated:
        _check_design(where, space, result.spec)
    history = History(
        description="conformance",
        trials=tuple(Trial(spec=e.spec, state="complete", score=e.mean) for e in evaluated),
    )
    proposals = [factory(space=space, seed=1, objective="score").propose(history) for _ in "ab"]
    first, second = (p.spec.spec_hash if p is not None else None for p in proposals)
    if first != second:
        raise ConformanceError(f"{where}: the same seed and history gave two proposals")
    if proposals[0] is not None:
        _check_design(where, space, proposals[0].spec)
        if first in history.seen:
            raise ConformanceError(f"{where} proposed a design the history already holds")


def _check_design(where: str, space: SearchSpace, spec: AgentSpec) -> None:
    if not isinstance(spec, AgentSpec) or set(spec.components) != set(SLOTS):
        raise ConformanceError(f"{where} proposed {spec!r}, not a complete AgentSpec")
    if not space.contains(spec):
        raise ConformanceError(f"{where} proposed a design outside its space: {spec.to_json()}")
    if AgentSpec.from_json(spec.to_json()).spec_hash != spec.spec_hash:
        raise ConformanceError(f"{where} proposed a design that does not survive to_json")
    if space.form(spec) != spec:
        raise ConformanceError(f"{where} proposed a non-canonical design: {spec.describe()}")


def _made_up_score(spec: AgentSpec, history: History) -> Evaluated:
    """Four item scores drawn from the design's hash: the same design always scores the same."""
    digest = hashlib.sha256(spec.spec_hash.encode()).digest()
    return Evaluated(spec=spec, scores=tuple(b / 255 for b in digest[:4]), tokens=100)
