"""The one interface every search strategy has: propose a design from the history, learn from it.

A strategy keeps no state that a crash would lose. Its history is rebuilt from the optuna study
(each trial holds its spec, state and values) and the archive (results on other benchmarks), and
its randomness is seeded by the run's seed and the number of trials so far, so a resumed run, or a
second worker on the same database, proposes what a single uninterrupted process would have.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import optuna
from scipy import special

from agentdesign.components import SLOTS, AgentDesignError, AgentSpec
from agentdesign.search._space import PROMPTS_ATTR, SearchSpace, prompt_params
from agentdesign.search._value import Labelled

__all__ = [
    "OBJECTIVES",
    "History",
    "Observation",
    "Proposal",
    "StartUp",
    "Strategy",
    "crossover",
    "history_from_study",
    "merge_prompts",
    "mutate",
    "pairwise_design",
    "report_items",
]

OBJECTIVES = ("score", "score-cost")
# Proposals that repeat a design the run already has are redrawn at random up to this many times.
_REDRAWS = 200


@dataclass(frozen=True)
class Observation:
    """A design the run has asked for: "complete" (with its score), "pruned" or "running".

    `tokens_per_task` is the cost objective; it is known for complete trials of a score-cost run.
    A pruned design's `score` is its mean on the `n_items` search items it had when racing stopped
    it (None where the trial reported none); `n_items` is None where unknown.
    """

    spec: AgentSpec
    state: str
    score: float | None = None
    tokens_per_task: float | None = None
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
    observations: tuple[Observation, ...] = ()
    prior: tuple[Labelled, ...] = ()

    @functools.cached_property
    def seen(self) -> frozenset[str]:
        return frozenset(o.spec.spec_hash for o in self.observations)

    @property
    def complete(self) -> tuple[Observation, ...]:
        return tuple(o for o in self.observations if o.state == "complete")

    def labelled(self) -> list[Labelled]:
        """Every real result to learn from: this run's complete trials, its pruned ones weighted by
        their share of a complete trial's items, then the prior's others."""
        full = max((o.n_items or 0 for o in self.complete), default=0)
        partial = [
            o
            for o in self.observations
            if o.state == "pruned" and o.score is not None and o.n_items and full
        ]
        own = [
            Labelled(
                spec=o.spec,
                description=self.description,
                score=float(o.score or 0.0),
                tokens_per_task=float(o.tokens_per_task or 0.0),
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
    """Base of every strategy. Subclasses override the `_internal_*` hooks, never `propose`.

    The study's sampler (`sampler()`) proposes whenever `_internal_propose` returns None: that is
    how the optuna strategies work. Model-based strategies return a Proposal, which the loop
    enqueues into the study so the trial holds its parameters exactly. Those that learn from the
    rest of the archive set `reads_prior`: only for them does the loop read it.
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
        """The study's directions: score up, and tokens per task down when cost counts."""
        up, down = optuna.study.StudyDirection.MAXIMIZE, optuna.study.StudyDirection.MINIMIZE
        return [up] if self.objective == "score" else [up, down]

    def sampler(self) -> optuna.samplers.BaseSampler:
        return self._internal_sampler()

    def propose(self, history: History) -> Proposal | None:
        """The next design to evaluate, never one the run already has (None: ask the sampler)."""
        rng = np.random.default_rng([self.seed, len(history.observations)])
        proposal = self._internal_propose(history, rng)
        if proposal is None or proposal.spec.spec_hash not in history.seen:
            return proposal
        for _ in range(_REDRAWS):  # a strategy stuck on known designs falls back to sampling
            spec = self.space.sample(rng)
            if spec.spec_hash not in history.seen:
                return Proposal(spec=spec, operator="sample")
        return None

    def learn(self, history: History) -> None:
        """Brings whatever the strategy derives from results (a value model) up to `history`."""
        self._internal_learn(history)

    def start_up(self) -> StartUp | None:
        """Its start-up designs, if it has any: a strategy that learns from its first result, or
        never learns, has none."""
        return None

    # -- hooks --

    def _internal_sampler(self) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=self.seed)

    def _internal_propose(self, history: History, rng: np.random.Generator) -> Proposal | None:
        return None

    def _internal_learn(self, history: History) -> None:
        pass

    # -- shared by subclasses --

    def fitness(self, history: History, weight: float) -> dict[str, float]:
        """Each complete design's fitness: its score, or under score-cost the score less `weight`
        times its tokens per task over the most any design used. Drawing the weight afresh for
        each proposal (ParEGO's random scalarization) spreads proposals along the whole front."""
        complete = history.complete
        scores = {o.spec.spec_hash: float(o.score or 0.0) for o in complete}
        if self.objective == "score" or not complete:
            return scores
        most = max(float(o.tokens_per_task or 0.0) for o in complete) or 1.0
        return {
            o.spec.spec_hash: scores[o.spec.spec_hash]
            - weight * float(o.tokens_per_task or 0.0) / most
            for o in complete
        }


def history_from_study(
    study: optuna.Study,
    *,
    description: str,
    prior: Sequence[Labelled] = (),
) -> History:
    """A run's history as its study stores it: every trial with a spec, failed ones left out."""
    states = {
        optuna.trial.TrialState.COMPLETE: "complete",
        optuna.trial.TrialState.PRUNED: "pruned",
        optuna.trial.TrialState.RUNNING: "running",
        optuna.trial.TrialState.WAITING: "running",
    }
    observations = []
    for trial in study.get_trials(deepcopy=False):
        spec_json = trial.user_attrs.get("spec")
        if spec_json is None or trial.state not in states:
            continue
        values = trial.values or []
        if not values and trial.last_step is not None:  # pruned: the mean when it was stopped
            values = [trial.intermediate_values[trial.last_step]]
        observations.append(
            Observation(
                spec=AgentSpec.from_json(spec_json),
                state=states[trial.state],
                score=values[0] if values else None,
                tokens_per_task=values[1] if len(values) > 1 else None,
                parents=tuple(trial.user_attrs.get("parents", ())),
                operator=trial.user_attrs.get("operator"),
                n_items=trial.last_step,
            )
        )
    return History(
        description=description,
        observations=tuple(observations),
        prior=tuple(prior),
    )


# -- variation operators ------------------------------------------------------------------------


def mutate(spec: AgentSpec, space: SearchSpace, rng: np.random.Generator) -> AgentSpec:
    """One change: another component in one slot (half the time, where the slot has another), or
    one searchable parameter redrawn."""
    slots = [s for s in SLOTS if len(space.components(s)) > 1]
    if slots and rng.random() < 0.5:
        slot = slots[int(rng.integers(len(slots)))]
        others = [n for n in space.components(slot) if n != spec[slot].name]
        name = others[int(rng.integers(len(others)))]
        fixed = {s: spec[s].name for s in SLOTS}
        fresh = space.sample(rng, components={**fixed, slot: name})
        return AgentSpec(model=spec.model, components={**spec.components, slot: fresh[slot]})
    tunable = [
        (slot, info) for slot in SLOTS for info in spec[slot].param_info() if info.searchable
    ]
    if not tunable:
        return spec
    slot, info = tunable[int(rng.integers(len(tunable)))]
    return spec.set_params(**{f"{slot}__{info.name}": space.sample_param(slot, info, rng)})


def crossover(
    a: AgentSpec, b: AgentSpec, rng: np.random.Generator, *, n_slots: int | None = None
) -> AgentSpec:
    """`a` with whole components (and their parameters) taken from `b`: in `n_slots` random slots,
    or each slot with even odds when `n_slots` is None (uniform crossover)."""
    if n_slots is None:
        taken = [slot for slot in SLOTS if rng.random() < 0.5]
    else:
        taken = list(rng.choice(list(SLOTS), size=n_slots, replace=False))
    return AgentSpec(model=a.model, components={s: (b if s in taken else a)[s] for s in SLOTS})


def merge_prompts(a: AgentSpec, b: AgentSpec) -> AgentSpec:
    """`a` with the prompts (and workflow code) `b` rewrote, wherever `a` has the same component
    with that text still at its default: GEPA's merge, which joins the modules two lines of
    descent improved apart. `a` itself when there is nothing to take."""
    taken = {
        f"{slot}__{info.name}": theirs
        for slot in SLOTS
        if a[slot].name == b[slot].name
        for info in a[slot].param_info()
        if info.kind == "text"
        and (theirs := getattr(b[slot], info.name)) != info.default
        and getattr(a[slot], info.name) == info.default
    }
    return a.set_params(**taken) if taken else a


def pairwise_design(
    space: SearchSpace, rng: np.random.Generator, *, given: Sequence[AgentSpec] = ()
) -> list[AgentSpec]:
    """A small set of designs in which every pair of components (of two slots) appears at least
    once, beside the `given` designs: a greedy covering array (AETG), each row completed with
    random parameters."""
    levels = [space.components(slot) for slot in SLOTS]
    uncovered = {
        (i, a, j, b)
        for i in range(len(SLOTS))
        for j in range(i + 1, len(SLOTS))
        for a in levels[i]
        for b in levels[j]
    }
    for spec in given:
        names = [spec[slot].name for slot in SLOTS]
        uncovered -= {
            (i, names[i], j, names[j]) for i in range(len(SLOTS)) for j in range(i + 1, len(SLOTS))
        }

    def gain(row: dict[int, str]) -> int:
        return sum((i, row[i], j, row[j]) in uncovered for i in row for j in row if i < j)

    rows: list[dict[int, str]] = []
    while uncovered:
        best: dict[int, str] = {}
        for _ in range(20):
            i, a, j, b = sorted(uncovered)[int(rng.integers(len(uncovered)))]
            row = {i: a, j: b}
            for k in rng.permutation(len(SLOTS)):
                if int(k) not in row:
                    options = list(levels[int(k)])
                    rng.shuffle(options)
                    row[int(k)] = max(options, key=lambda name: gain({**row, int(k): name}))
            if not best or gain(row) > gain(best):
                best = row
        rows.append(best)
        uncovered -= {(i, best[i], j, best[j]) for i in best for j in best if i < j}
    return [space.sample(rng, components={SLOTS[i]: n for i, n in row.items()}) for row in rows]


def softmax(values: np.ndarray, temperature: float) -> np.ndarray:
    return np.asarray(special.softmax(values / max(temperature, 1e-9)), dtype=float)


def report_items(trial: optuna.Trial, mean: float, n_items: int) -> None:
    """Records a single-objective trial's mean on the `n_items` search items it was scored on, as
    its intermediate value at step `n_items`: a pruned trial keeps its partial mean (optuna's TPE
    and the value model learn from it) and every trial its item count. A no-op for two objectives,
    which optuna cannot report and racing never prunes."""
    if len(trial.study.directions) == 1:
        trial.report(mean, step=n_items)


def ask_trial(study: optuna.Study, strategy: Strategy, history: History) -> optuna.Trial:
    """A new trial of `study` holding the strategy's proposal, or the sampler's when it has none.

    The proposal is enqueued with its parents and operator as user attributes, so the trial, and
    not this process, remembers where the design came from.
    """
    proposal = strategy.propose(history)
    if proposal is not None:
        study.enqueue_trial(
            strategy.space.trial_params(proposal.spec), user_attrs=proposal.user_attrs()
        )
    return study.ask()
