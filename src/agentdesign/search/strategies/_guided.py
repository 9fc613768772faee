"""What the value-guided strategies (mcts, evolution) share: a pairwise cold start, a value model
refit on every result, offspring from the best designs, and screening by the model.

The value model only screens: many offspring designs are generated, the model's optimistic bound
(mean + explore * std) picks the one that gets a real evaluation, and real scores alone rank it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

import numpy as np

from agentdesign.components import SLOTS, AgentSpec
from agentdesign.search.space import SearchSpace, crossover, merge_prompts, mutate, pairwise_design
from agentdesign.search.strategies._base import History, Proposal, StartUp, Strategy, softmax
from agentdesign.search.strategies._meta import MetaAgent
from agentdesign.search.strategies._refine import PromptRefiner
from agentdesign.search.valuemodel import Domain, ValueModel

__all__ = ["GuidedStrategy"]


class GuidedStrategy(Strategy):
    """Abstract base of the value-guided strategies. Its extension points: a subclass declares
    `operators`, its mix of offspring operators by name ("mutation", "recombination", "crossover",
    "merge", "sample"), and may override `select`, which picks the design to evaluate from the
    screened offspring (by default the best optimistic bound).

    `n_initial` caps the pairwise cold start (default 8, so that the value model chooses from the
    ninth proposal on; None: the whole covering design of 28-30 rows); `explore` is k in
    the screening bound mean + k * std; `n_offspring` designs are screened per proposal. With a
    `refiner`, every `refiner.every`-th proposal is instead the fittest design not yet refined with
    one prompt rewritten from its failures (unscreened: the model cannot read prompts). With a
    `meta` agent, every `meta.every`-th proposal is written by it (see `MetaAgent`), screened by
    the value model, from the first complete design on (the cold start included); when its reply
    holds no valid new design, the strategy proposes as usual.
    """

    reads_prior: ClassVar[bool] = True
    # Operator mix of `_offspring`, by name, declared by each subclass: this base has none, so it
    # is no strategy by itself.
    operators: ClassVar[tuple[tuple[str, float], ...]] = ()

    def __init__(
        self,
        *,
        space: SearchSpace,
        seed: int = 0,
        objective: str = "score",
        n_offspring: int = 128,
        explore: float = 1.0,
        n_initial: int | None = 8,
        population: int = 8,
        parent_temperature: float = 0.1,
        uniform_share: float = 0.2,
        refiner: PromptRefiner | None = None,
        meta: MetaAgent | None = None,
    ) -> None:
        if not self.operators:
            raise TypeError(
                f"{type(self).__name__} declares no `operators`: GuidedStrategy is an abstract "
                "base, and each value-guided strategy declares its operator mix"
            )
        super().__init__(space=space, seed=seed, objective=objective)
        self.n_offspring = n_offspring
        self.explore = explore
        self.n_initial = n_initial
        self.population = population
        self.parent_temperature = parent_temperature
        self.uniform_share = uniform_share
        self.refiner = refiner
        self.meta = meta
        self._initial_design = pairwise_design(space, np.random.default_rng([seed, 1]))
        self._fitted_on: tuple[tuple[str, str, float, float], ...] | None = None
        self._score_model = ValueModel(seed=seed)
        self._cost_model = ValueModel(seed=seed)

    def start_up(self) -> StartUp:
        """The cold start: rows of the pairwise covering design, which the value model does not
        choose (the meta agent's designs, from the first complete one on, it screens)."""
        limit = len(self._initial_design) if self.n_initial is None else self.n_initial
        drawn = "from a pairwise covering design" + (
            " (bar the meta agent's)" if self.meta is not None else ""
        )
        return StartUp(
            min(limit, len(self._initial_design)), drawn, "its value model chooses none of them"
        )

    # -- learning: a derived cache, refit whenever the results differ --

    def learn(self, history: History) -> None:
        """Refits the value model (and the cost model under score-cost) when the results differ
        from those it was fitted on."""
        rows = history.labelled()
        key = tuple((r.spec.spec_hash, r.description, r.score, r.weight) for r in rows)
        if key == self._fitted_on:
            return
        # the prior's rows (other benchmarks and models) inform, but do not outvote, the run's own
        domain = Domain(
            description=history.description,
            model=self.space.model,
            models=self.space.model_choices if self.space.searches_models else (),
        )
        self._score_model = ValueModel(seed=self.seed, domain=domain).fit(rows)
        if self.objective == "score-cost":
            costs = [replace(r, score=math.log1p(r.tokens_per_item)) for r in rows]
            self._cost_model = ValueModel(seed=self.seed, domain=domain).fit(costs)
        self._fitted_on = key

    def predict(
        self, specs: list[AgentSpec], history: History, weight: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Predicted fitness and its spread; under score-cost the predicted tokens, normalized by
        the most any complete design used, count against the score with `weight`."""
        mean, std = self._score_model.predict(specs, description=history.description)
        if self.objective == "score-cost" and self._cost_model.fitted:
            cost, _ = self._cost_model.predict(specs, description=history.description)
            most = max((o.tokens_per_item or 0.0 for o in history.complete), default=0.0)
            mean = mean - weight * np.expm1(cost) / (most or 1.0)
        return mean, std

    # -- proposing --

    def suggest(self, history: History, rng: np.random.Generator) -> Proposal | None:
        if self._meta_turn(history):  # from the start: a small budget never ends the cold start
            self.learn(history)
            weight = float(rng.uniform(0.0, 0.5))
            assert self.meta is not None
            written = self.meta.propose(
                history, rng, self.fitness(history, weight), self._screen(history, weight)
            )
            if written is not None:
                return written
        initial = self._cold_start(history)
        if initial is not None:
            return initial
        self.learn(history)
        weight = float(rng.uniform(0.0, 0.5))
        fitness = self.fitness(history, weight)
        if self.refiner is not None and len(history.trials) % self.refiner.every == 0:
            refined = self._refine_fittest(history, rng, fitness)
            if refined is not None:
                return refined
        offspring = self._untried(self._offspring(history, rng, fitness), history)
        if not offspring:
            return None
        mean, std = self.predict([c.spec for c in offspring], history, weight)
        return self.select(history, offspring, mean, std, fitness, weight)

    def _meta_turn(self, history: History) -> bool:
        """Whether the meta agent writes this proposal: every `meta.every`-th one, once the run
        has a complete design to show it (at once, when it is shown none)."""
        if self.meta is None or len(history.trials) % self.meta.every:
            return False
        return bool(history.complete) or not self.meta.n_view

    def _screen(self, history: History, weight: float) -> Callable[[list[AgentSpec]], np.ndarray]:
        """The screening bound (mean + explore * std) of designs, as the model predicts them."""

        def bound(specs: list[AgentSpec]) -> np.ndarray:
            mean, std = self.predict(specs, history, weight)
            return np.asarray(mean + self.explore * std)

        return bound

    def _cold_start(self, history: History) -> Proposal | None:
        """The next row of the pairwise covering design that no trial has the components of."""
        limit = len(self._initial_design) if self.n_initial is None else self.n_initial
        if len(history.trials) >= limit:
            return None
        tried = {tuple(o.spec[s].name for s in SLOTS) for o in history.trials}
        for spec in self._initial_design:
            if tuple(spec[s].name for s in SLOTS) not in tried:
                return Proposal(spec=spec, operator="initial")
        return None

    def _refine_fittest(
        self, history: History, rng: np.random.Generator, fitness: dict[str, float]
    ) -> Proposal | None:
        """One prompt of the fittest of the `population` best designs not yet refined, rewritten."""
        assert self.refiner is not None
        refined = {o.parents[0] for o in history.trials if o.operator == "refinement"}
        ranked = sorted(history.complete, key=lambda o: -fitness[o.spec.spec_hash])
        for parent in ranked[: self.population]:
            if parent.spec.spec_hash in refined:
                continue
            failed = self.refiner.failures_of(parent.spec)
            if not failed:
                continue
            refinement = self.refiner.refine(parent.spec, failed, rng)
            if refinement is None or refinement.spec.spec_hash in history.seen:
                return None
            return Proposal(
                spec=refinement.spec, parents=(parent.spec.spec_hash,), operator="refinement"
            )
        return None

    def _untried(self, offspring: list[Proposal], history: History) -> list[Proposal]:
        """The offspring worth screening: each design once, none the run already has."""
        unique: dict[str, Proposal] = {}
        for child in offspring:
            if child.spec.spec_hash not in history.seen:
                unique.setdefault(child.spec.spec_hash, child)
        return list(unique.values())

    def _offspring(
        self, history: History, rng: np.random.Generator, fitness: dict[str, float]
    ) -> list[Proposal]:
        """`n_offspring` children of the best designs so far, made by the subclass's operators.

        Parents are drawn AFlow-style: a mix of uniform odds and a softmax of fitness, from the
        `population` fittest complete designs; with fewer than two, children are random designs.
        """
        ranked = sorted(history.complete, key=lambda o: -fitness[o.spec.spec_hash])
        parents = [o.spec for o in ranked[: self.population]]
        if len(parents) < 2:
            return [Proposal(spec=self.space.sample(rng)) for _ in range(self.n_offspring)]
        values = np.array([fitness[p.spec_hash] for p in parents])
        odds = self.uniform_share / len(parents) + (1 - self.uniform_share) * softmax(
            values, self.parent_temperature
        )
        names = [name for name, _ in self.operators]
        mix = np.array([share for _, share in self.operators])
        children = []
        for _ in range(self.n_offspring):
            a, b = (parents[int(i)] for i in rng.choice(len(parents), size=2, p=odds / odds.sum()))
            operator = names[int(rng.choice(len(names), p=mix / mix.sum()))]
            if operator == "sample":
                children.append(Proposal(spec=self.space.sample(rng), operator="sample"))
            elif operator == "mutation":
                children.append(
                    Proposal(
                        spec=mutate(a, self.space, rng), parents=(a.spec_hash,), operator=operator
                    )
                )
            elif operator == "merge":  # the prompts one good design rewrote, into another
                children.append(
                    Proposal(
                        spec=merge_prompts(a, b),
                        parents=(a.spec_hash, b.spec_hash),
                        operator=operator,
                    )
                )
            elif operator == "recombination":  # one whole component from another good design
                child = crossover(a, b, rng, n_slots=1)
                children.append(
                    Proposal(spec=child, parents=(a.spec_hash, b.spec_hash), operator=operator)
                )
            else:  # crossover, then one mutation
                child = mutate(crossover(a, b, rng), self.space, rng)
                children.append(
                    Proposal(
                        spec=child,
                        parents=(a.spec_hash, b.spec_hash),
                        operator="crossover+mutation",
                    )
                )
        return children

    def select(
        self,
        history: History,
        offspring: list[Proposal],
        mean: np.ndarray,
        std: np.ndarray,
        fitness: dict[str, float],
        weight: float,
    ) -> Proposal:
        """The design to evaluate, from `offspring` with the value model's `mean` and `std`
        of each (under score-cost already less `weight` times the predicted cost) and the
        `fitness` of each complete design; by default the one with the best optimistic bound."""
        return offspring[int(np.argmax(mean + self.explore * std))]
