"""Searches in a world: the truth benchmark's (`_truth.py`), where every design of the space has a
known true accuracy, or a recorded table's (`TableWorld` in `_replay.py`), where the table's
designs are the only ones and their full-table means stand in for the truth. A strategy runs
through the replay's ask-and-tell loop, each design it proposes scored in the world on every
search item or, racing, on as few as the live loop would race it, and the run is judged by the
accuracy of the design it reports, after any number of evaluations or tokens.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from agentdesign.components import AgentSpec
from agentdesign.search.racing import Racing
from agentdesign.search.strategies import Evaluated, History, Strategy, drive

__all__ = ["Schedule", "TruthRun", "World", "full_items", "raced", "truth_search"]


class World(Protocol):
    """Where a search runs: its designs' outcomes on its items, and the accuracy judged by."""

    seed: int
    description: str
    search_items: tuple[int, ...]

    def design(self, spec: AgentSpec, history: History) -> AgentSpec | None:
        """The design evaluating `spec` means here (None: nothing is left to evaluate)."""
        ...

    def evaluate(self, spec: AgentSpec, items: Sequence[int]) -> Evaluated:
        """The design scored on `items`, the same outcomes every time it is asked."""
        ...

    def accuracy(self, specs: Sequence[AgentSpec]) -> np.ndarray:
        """The accuracy each design is judged by."""
        ...


# How a run scores one proposed design, given the evaluations so far: every search item (below),
# or, for racing, a few first and more only while the design keeps up with the incumbent (a design
# stopped early is returned with `complete=False`: told as pruned, never reported).
Schedule = Callable[[World, AgentSpec, Sequence[Evaluated]], Evaluated]


def full_items(world: World, spec: AgentSpec, done: Sequence[Evaluated]) -> Evaluated:
    """Every search item, as a run without racing scores each design."""
    return world.evaluate(spec, world.search_items)


def raced(racing: Racing) -> Schedule:
    """Racing as the live loop races: the search items in order, `racing`'s test against the
    incumbent (the best design scored on every item so far) on the first items at each of its
    stages, and a design clearly worse stops there, incomplete, having spent only its items'
    tokens."""

    def schedule(world: World, spec: AgentSpec, done: Sequence[Evaluated]) -> Evaluated:
        items = world.search_items
        full = world.evaluate(spec, items)
        finished = [e for e in done if e.complete]
        if not finished:
            return full
        incumbent = _by_item(min(finished, key=_rank).scores)
        for stage in racing.stages(len(items)):
            if racing.clearly_worse(_by_item(full.scores[:stage]), incumbent, n_items=len(items)):
                stopped = world.evaluate(spec, items[:stage])
                return dataclasses.replace(stopped, complete=False)
        return full

    return schedule


def _by_item(scores: Sequence[float]) -> dict[str, float]:
    """Scores keyed by their position among the search items, as racing pairs them."""
    return {str(i): score for i, score in enumerate(scores)}


def _rank(evaluated: Evaluated) -> tuple[float, int]:
    return -evaluated.mean, evaluated.tokens


@dataclass(frozen=True)
class TruthRun:
    """One search in one world: what it evaluated, in order, and each design's true accuracy.

    The design a run reports is its best observed one among those scored on every search item
    (equal scores: the one that used fewer tokens), as a live run picks its winner.
    """

    strategy: str
    seed: int
    evaluations: tuple[Evaluated, ...]
    accuracies: tuple[float, ...]

    @functools.cached_property
    def _spent(self) -> np.ndarray:
        return np.cumsum([e.tokens for e in self.evaluations])

    @property
    def spent(self) -> np.ndarray:
        """The tokens spent after each evaluation."""
        return self._spent.copy()

    def reported(self) -> tuple[str | None, ...]:
        """After each evaluation, the hash of the design the run would report (None: none yet)."""
        return tuple(
            self.evaluations[best].spec.spec_hash if best >= 0 else None for best in self._reported
        )

    @functools.cached_property
    def _reported(self) -> tuple[int, ...]:
        """After each evaluation, the index of the design the run would report (-1: none yet)."""
        reported, best = [], -1
        for n, e in enumerate(self.evaluations):
            if e.complete and (best < 0 or _rank(e) < _rank(self.evaluations[best])):
                best = n
            reported.append(best)
        return tuple(reported)

    def accuracy_after(self, n: int) -> float:
        """The true accuracy of the reported design after `n` evaluations (nan: none yet)."""
        best = self._reported[min(n, len(self.evaluations)) - 1]
        return self.accuracies[best] if best >= 0 else math.nan

    def accuracy_within(self, tokens: float) -> float:
        """The true accuracy of the reported design once `tokens` are spent (nan: none yet)."""
        n = int(np.searchsorted(self._spent, tokens, side="right"))
        return self.accuracy_after(n) if n else math.nan

    def tokens_to(self, accuracy: float) -> float:
        """Tokens spent when the reported design first had at least `accuracy` (inf: never)."""
        for n, best in enumerate(self._reported):
            if best >= 0 and self.accuracies[best] >= accuracy:
                return float(self._spent[n])
        return math.inf

    @property
    def tokens(self) -> int:
        return int(self._spent[-1]) if self.evaluations else 0


def truth_search(
    world: World,
    strategy: Strategy,
    *,
    name: str,
    stop: Callable[[Sequence[Evaluated]], bool],
    schedule: Schedule = full_items,
) -> TruthRun:
    """Runs `strategy` (built on the world's space) in `world` through the replay's ask-and-tell
    loop, each proposal's design (`world.design`) scored by `schedule`, until `stop` or until the
    world has no design left."""
    done: list[Evaluated] = []

    def evaluate(spec: AgentSpec, history: History) -> Evaluated | None:
        design = world.design(spec, history)
        if design is None:
            return None
        done.append(schedule(world, design, tuple(done)))
        return done[-1]

    drive(strategy, evaluate, description=world.description, stop=stop)
    return TruthRun(
        strategy=name,
        seed=world.seed,
        evaluations=tuple(done),
        accuracies=tuple(float(a) for a in world.accuracy([e.spec for e in done])),
    )
