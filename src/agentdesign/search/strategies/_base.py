"""The one interface every search strategy has: propose a design from the history, learn from it.

A strategy keeps no state that a crash would lose. Its history is rebuilt from the optuna study
(each trial holds its spec, state and values) and the archive (results on other benchmarks), and
its randomness is seeded by the run's seed and the number of trials so far, so a resumed run, or a
second worker on the same database, proposes what a single uninterrupted process would have.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import optuna

from agentdesign.components import AgentDesignError, AgentSpec
from agentdesign.search.space import PROMPTS_ATTR, SearchSpace, prompt_params
from agentdesign.search.valuemodel import Labelled

__all__ = [
    "OBJECTIVES",
    "History",
    "Proposal",
    "StartUp",
    "Strategy",
    "Trial",
    "softmax",
]

OBJECTIVES = ("score", "score-cost")
# Proposals that repeat a design the run already has are redrawn at random up to this many times.
_REDRAWS = 200


@dataclass(frozen=True)
class Trial:
    """One trial of the run as a strategy sees it: the design it evaluates and its state,
    "complete" (with its score), "pruned" or "running", with its parents and operator.

    `tokens_per_item` is the cost objective; it is known for complete trials of a score-cost run.
    A pruned design's `score` is its mean on the `n_items` search items it had when racing stopped
    it (None where the trial reported none); `n_items` is None where unknown.
    """

    spec: AgentSpec
    state: str
    score: float | None = None
    tokens_per_item: float | None = None
    parents: tuple[str, ...] = ()
    operator: str | None = None
    n_items: int | None = None


@dataclass(frozen=True)
class History:
    """What a strategy may know: this run's trials, results from elsewhere, and the benchmark.

    `prior` holds real results from the rest of the archive (other runs and benchmarks), so a
    value model starts warm.
    """

    description: str
    trials: tuple[Trial, ...] = ()
    prior: tuple[Labelled, ...] = ()

    @functools.cached_property
    def seen(self) -> frozenset[str]:
        return frozenset(o.spec.spec_hash for o in self.trials)

    @property
    def complete(self) -> tuple[Trial, ...]:
        return tuple(o for o in self.trials if o.state == "complete")

    def labelled(self) -> list[Labelled]:
        """Every real result to learn from: this run's complete trials, its pruned ones weighted by
        their share of a complete trial's items, then the prior's others."""
        full = max((o.n_items or 0 for o in self.complete), default=0)
        partial = [
            o
            for o in self.trials
            if o.state == "pruned" and o.score is not None and o.n_items and full
        ]
        own = [
            Labelled(
                spec=o.spec,
                description=self.description,
                score=float(o.score or 0.0),
                tokens_per_item=float(o.tokens_per_item or 0.0),
                weight=1.0 if o.state == "complete" else min((o.n_items or 0) / full, 1.0),
            )
            for o in (*self.complete, *partial)
        ]
        mine = {(r.spec.spec_hash, r.description) for r in own}
        return own + [r for r in self.prior if (r.spec.spec_hash, r.description) not in mine]


@dataclass(frozen=True)
class Proposal:
    """A design to evaluate, with where it came from (recorded in the study and the archive)."""

    spec: AgentSpec
    parents: tuple[str, ...] = ()
    operator: str = "sample"

    def user_attrs(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {"parents": list(self.parents), "operator": self.operator}
        prompts = prompt_params(self.spec, changed_only=True)
        if prompts:
            attrs[PROMPTS_ATTR] = prompts
        return attrs


@dataclass(frozen=True)
class StartUp:
    """The designs a strategy proposes before it learns from any result: how many, how they are
    `drawn`, and what that makes `so` a run whose budget ends among them; the run header says it,
    so that a tiny budget's "tpe" is not taken for a model-based search."""

    n_designs: int
    drawn: str
    so: str


class Strategy:
    """Base of every strategy: subclass it and override the extension points, all public.

    - `suggest(history, rng)`: the next design to evaluate as a `Proposal`, or None to leave the
      trial to the study's sampler. Draw every random number from `rng`: it is seeded by the run's
      seed and the number of trials so far, so a resumed run proposes what it would have.
    - `sampler()`: the optuna sampler that proposes whenever `suggest` returns None (by default
      a seeded random sampler). The optuna strategies (random, tpe, nsga2) only override this.
    - `learn(history)`: brings whatever the strategy derives from results (a value model) up to
      `history`; called before `suggest` by strategies that need it, and idempotent.
    - `start_up()`: the designs proposed before any result counts, for the run's header.

    Callers (the run loop, `Search.ask`, the conformance check) call `propose`, never `suggest`:
    `propose` seeds the generator and redraws a design the run already has. Model-based
    strategies return a Proposal, which the loop enqueues into the study so the trial holds its
    parameters exactly. Those that learn from the rest of the archive set `reads_prior`: only for
    them does the loop read it.
    """

    reads_prior: ClassVar[bool] = False

    def __init__(self, *, space: SearchSpace, seed: int = 0, objective: str = "score") -> None:
        if objective not in OBJECTIVES:
            raise AgentDesignError(
                f"unknown objective '{objective}' (available: {', '.join(OBJECTIVES)})"
            )
        self.space = space
        self.seed = seed
        self.objective = objective

    def directions(self) -> list[optuna.study.StudyDirection]:
        """The study's directions: score up, and tokens per item down when cost counts."""
        up, down = optuna.study.StudyDirection.MAXIMIZE, optuna.study.StudyDirection.MINIMIZE
        return [up] if self.objective == "score" else [up, down]

    def propose(self, history: History) -> Proposal | None:
        """The next design to evaluate, never one the run already has (None: ask the sampler).

        The template callers use; subclasses override `suggest`, not this."""
        rng = np.random.default_rng([self.seed, len(history.trials)])
        proposal = self.suggest(history, rng)
        if proposal is not None:  # the design as it would be evaluated (see `suggest`)
            proposal = dataclasses.replace(proposal, spec=self.space.complete(proposal.spec, rng))
        if proposal is None or proposal.spec.spec_hash not in history.seen:
            return proposal
        for _ in range(_REDRAWS):  # a strategy stuck on known designs falls back to sampling
            spec = self.space.sample(rng)
            if spec.spec_hash not in history.seen:
                return Proposal(spec=spec, operator="sample")
        return None

    # -- extension points --

    def suggest(self, history: History, rng: np.random.Generator) -> Proposal | None:
        """The design this strategy would evaluate next, drawn with `rng`; None (the default)
        leaves the trial to `sampler()`. A design the run already has is redrawn by `propose`."""
        return None

    def sampler(self) -> optuna.samplers.BaseSampler:
        """The study's sampler, which proposes whenever `suggest` returns None."""
        return optuna.samplers.RandomSampler(seed=self.seed)

    def learn(self, history: History) -> None:
        """Brings whatever the strategy derives from results (a value model) up to `history`."""

    def start_up(self) -> StartUp | None:
        """Its start-up designs, if it has any: a strategy that learns from its first result, or
        never learns, has none."""
        return None

    # -- shared by subclasses --

    def fitness(self, history: History, weight: float) -> dict[str, float]:
        """Each complete design's fitness: its score, or under score-cost the score less `weight`
        times its tokens per item over the most any design used. Drawing the weight afresh for
        each proposal (ParEGO's random scalarization) spreads proposals along the whole front."""
        complete = history.complete
        scores = {o.spec.spec_hash: float(o.score or 0.0) for o in complete}
        if self.objective == "score" or not complete:
            return scores
        most = max(float(o.tokens_per_item or 0.0) for o in complete) or 1.0
        return {
            o.spec.spec_hash: scores[o.spec.spec_hash]
            - weight * float(o.tokens_per_item or 0.0) / most
            for o in complete
        }


def softmax(values: np.ndarray, temperature: float) -> np.ndarray:
    from scipy import special  # here: a command that draws nothing need not import it (0.2 s)

    return np.asarray(special.softmax(values / max(temperature, 1e-9)), dtype=float)
