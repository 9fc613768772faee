"""The conformance kit: every registered component, benchmark and strategy passes it, and it
catches the breaks it is there for."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pytest

from agentdesign.components import (
    REGISTRY,
    SLOTS,
    AgentDesignError,
    Registry,
    Workflow,
    param,
)
from agentdesign.evaluators import BENCHMARKS, Benchmark, Score, Task, get_benchmark
from agentdesign.search import STRATEGIES, History, Proposal, Strategy
from agentdesign.search.checks import (
    ConformanceError,
    check_benchmark,
    check_component,
    check_strategy,
)

COMPONENTS = [(slot, name) for slot in SLOTS for name in REGISTRY.names(slot)]


@pytest.mark.parametrize(("slot", "name"), COMPONENTS, ids=[f"{s}:{n}" for s, n in COMPONENTS])
def test_every_registered_component_conforms(slot: str, name: str) -> None:
    check_component(REGISTRY.get(slot, name))


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_every_registered_benchmark_conforms(name: str) -> None:
    try:
        benchmark = get_benchmark(name)
        benchmark.check_ready()
        check_benchmark(benchmark)
    except ConformanceError:
        raise
    except AgentDesignError as error:  # an environment or sandbox this machine lacks
        pytest.skip(f"{name} cannot run here: {error}")


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_registered_strategy_keeps_the_ask_tell_contract(name: str) -> None:
    check_strategy(name)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Unbounded(Workflow):
    """Searchable, yet with no range a search could sample."""

    name: ClassVar[str] = "unbounded"
    temperature: float = param(0.5)


def test_a_component_without_a_range_or_a_registration_is_caught() -> None:
    with pytest.raises(ConformanceError, match="'unbounded' is not registered"):
        check_component(Unbounded)
    with pytest.raises(ConformanceError, match="not a Component subclass"):
        check_component(int)  # type: ignore[arg-type]
    registry = Registry(SLOTS)
    registry.register(Unbounded)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("agentdesign.components._conformance.REGISTRY", registry)
        with pytest.raises(ConformanceError, match="'temperature' is searchable but has no low"):
            check_component(Unbounded)


class Moody(Benchmark):
    """Scores the same prediction differently each time."""

    name: ClassVar[str] = "moody"
    description: ClassVar[str] = "Never the same score twice."

    def __init__(self) -> None:
        self.calls = 0

    def tasks(self) -> Sequence[Task]:
        return [Task(id="m/1", question="q", answer="a")]

    def score(self, task: Task, prediction: str) -> Score:
        self.calls += 1
        return Score(float(self.calls % 2))


def test_a_benchmark_that_scores_at_random_is_caught() -> None:
    with pytest.raises(ConformanceError, match="scoring must be deterministic"):
        check_benchmark(Moody())


class Blind(Moody):
    """Scores alike every time, but reads no answer out of any output: no vote could count one."""

    def score(self, task: Task, prediction: str) -> Score:
        return Score(float(prediction == task.answer))

    def answer_key(self, task: Task, output: str) -> str:
        return ""


def test_a_benchmark_whose_votes_never_count_the_gold_answer_is_caught() -> None:
    with pytest.raises(ConformanceError, match="gold answer is empty"):
        check_benchmark(Blind())


class Stubborn(Strategy):
    """Always proposes the first design it ever saw, seen or not: the loop would run it twice."""

    def propose(self, history: History) -> Proposal | None:
        if history.trials:
            return Proposal(spec=history.trials[0].spec)
        return Proposal(spec=self.space.sample(np.random.default_rng(0)))


def test_a_strategy_that_repeats_designs_is_caught() -> None:
    with pytest.raises(ConformanceError, match="already holds"):
        check_strategy(Stubborn)
