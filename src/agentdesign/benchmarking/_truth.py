"""A search benchmark with known truth: semi-synthetic evaluations calibrated on recorded ones.

A recorded table cannot say which strategy is better: 60 designs x 10 items rank designs with a
split-half reliability of 0.55, and nobody knows any design's real accuracy. Here every design of
the space has a known true accuracy, and a search's evaluations draw item outcomes from it, so a
strategy is judged by the true accuracy of the design it reports, over as many seeds as wanted.

The model is an item-response (Rasch) model: design d solves item i with probability
sigmoid(theta_d - b_i), where

    theta_d = mu + x_d . beta + (sum of gamma over d's pairs of components) + eps(d's components)

`x_d` holds one-hot components and numeric parameters scaled to [-0.5, 0.5] (on a log scale for
log ranges); with extended features also an indicator per value of each choice and boolean
parameter and the square of each numeric one (so an effect can peak inside a range). `mu`,
`beta` and the items' difficulties come from an L2-regularised logistic regression on recorded
per-item outcomes, the penalty chosen by log loss on held-out designs (`_truth_fit.py`).
What the records cannot resolve, pairwise interactions `gamma` and one effect `eps` per
combination of components, is drawn afresh in each world: the total variance is fitted so that the
recorded designs, simulated on their own items, spread as much as their real means do (the
designs' abilities are predicted by fits that did not see them, so the records' own noise is not
counted twice), and `interaction_share` of it goes to the pairs (the records cannot split it).
Item difficulties are drawn from a normal with the fitted ones' mean and spread.

Tokens per item are multiplicative: log tokens = ridge regression on the same features, plus a
residual per combination of components, an item effect and noise per design and item, each with
the spread seen in the recorded per-task tokens.

Knobs that make a world less like the value model, each off by default (the benchmark as first
published): `redraw` takes mu and beta from a bootstrap refit of the records instead of the one
fit, so worlds carry the uncertainty of effects estimated from few noisy designs;
`item_interaction` adds a design x item effect (sd in logits; one effect per component and item,
summed over a design's components, so designs that share components find the same items hard),
measured on the records as how much designs disagree on which items are hard; `outside` moves
that share of the main effects' variance into structure the value model's features cannot
express: three-way interactions of components, and effects of numeric parameters that rise and
fall (a cosine of the scaled value). `space` narrows what is searched (the default run's quick
space, say); the truth stays the same.

A world is one draw of all of it (seeded), holding hundreds of items of which a run's search
items are a seeded subset. Outcomes are fixed per world, design and item, so strategies compared
in the same world meet the same luck, and a design scored on a subset of items (racing) gets the
same outcomes on those items as on all of them. Strategies run in a world in `_truth_search.py`.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from agentdesign.benchmarking._table import ReplayDesign, ReplayTable
from agentdesign.components import REGISTRY, SLOTS, AgentDesignError, AgentSpec, ParamInfo
from agentdesign.search.space import SearchSpace
from agentdesign.search.strategies import Evaluated, History

__all__ = [
    "FEATURES",
    "WORLD_STREAM",
    "Calibration",
    "Costs",
    "TruthWorld",
    "component_onehot",
    "truth_features",
]

FEATURES = ("linear", "extended")
# Keeps the streams of world draws and of item outcomes apart for the same seed; the knobs'
# draws come from a stream of their own, so a world without them draws what it always drew.
WORLD_STREAM, _OUTCOMES, _KNOBS = 1, 2, (0, 9)
# Designs a world samples to size what `outside` moves out of the main effects.
_REFERENCE = 400
# Values of a scaled parameter tried for the one that maximises its effect.
_PEAK_GRID = np.linspace(-0.5, 0.5, 201)


# -- features ------------------------------------------------------------------------------------


@functools.cache
def _vocabulary() -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str, ParamInfo], ...]]:
    """Every (slot, component) of the registry and every numeric searchable parameter."""
    components = tuple(
        (slot, name) for slot in SLOTS for name in REGISTRY.names(slot, opt_in=False)
    )
    params = tuple(
        (slot, name, info)
        for slot, name in components
        for info in REGISTRY.get(slot, name).param_info()
        if info.searchable and info.kind in ("int", "float")
    )
    return components, params


@functools.cache
def _levels() -> tuple[tuple[str, str, str, object], ...]:
    """Every (slot, component, parameter, value) of a searchable choice or boolean parameter."""
    return tuple(
        (slot, name, info.name, value)
        for slot, name in _vocabulary()[0]
        for info in REGISTRY.get(slot, name).param_info()
        if info.searchable
        for value in info.levels()
    )


def _scaled(info: ParamInfo, value: float) -> float:
    assert info.low is not None and info.high is not None
    low, high, x = float(info.low), float(info.high), float(value)
    if info.log:
        low, high, x = math.log(low), math.log(high), math.log(x)
    return (x - low) / (high - low) - 0.5 if high > low else 0.0


def component_onehot(specs: Sequence[AgentSpec]) -> np.ndarray:
    """One row per spec, one column per (slot, component) of the registry."""
    components = _vocabulary()[0]
    rows = [[float(spec[slot].name == name) for slot, name in components] for spec in specs]
    return np.array(rows, dtype=float).reshape(len(specs), len(components))


def truth_features(specs: Sequence[AgentSpec], *, extended: bool = False) -> np.ndarray:
    """One row per spec: one-hot components, then numeric parameters in [-0.5, 0.5] (0 where the
    spec does not use the parameter's component); `extended` adds an indicator per value of
    each choice or boolean parameter, and each numeric parameter's square less its mean over
    the range (1/12), both 0 where unused."""
    components, params = _vocabulary()
    levels = _levels() if extended else ()
    rows = []
    for spec in specs:
        chosen = {(slot, spec[slot].name) for slot in SLOTS}
        row = [float(key in chosen) for key in components]
        numeric = [
            _scaled(info, getattr(spec[slot], info.name)) if spec[slot].name == name else None
            for slot, name, info in params
        ]
        row += [0.0 if v is None else v for v in numeric]
        if extended:
            row += [
                float(spec[slot].name == name and getattr(spec[slot], param) == value)
                for slot, name, param, value in levels
            ]
            row += [0.0 if v is None else v * v - 1 / 12 for v in numeric]
        rows.append(row)
    width = len(components) + len(params) * (2 if extended else 1) + len(levels)
    return np.array(rows, dtype=float).reshape(len(specs), width)


def _combination(spec: AgentSpec) -> int:
    """The index of the spec's combination of components among all the registry's."""
    return _combination_of([spec[slot].name for slot in SLOTS])


def _combination_of(names: Sequence[str]) -> int:
    index = 0
    for slot, name in zip(SLOTS, names, strict=True):
        options = REGISTRY.names(slot, opt_in=False)
        index = index * len(options) + options.index(name)
    return index


# -- the model -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Costs:
    """Log tokens per item: `intercept` + features . `effects`, plus a residual per combination of
    components, an item effect and noise per design and item (their sds)."""

    intercept: float
    effects: np.ndarray
    residual_sd: float
    item_sd: float
    cell_sd: float


@dataclass(frozen=True)
class Calibration:
    """What `calibrate` fitted; `facts` says how well, for the benchmark's printout.

    `draws` holds bootstrap refits of the intercept and effects (one row each; none unless asked
    for), and `redrawn_residual_sd` the residual spread matched with them."""

    model: str
    description: str
    intercept: float
    effects: np.ndarray
    difficulty_mean: float
    difficulty_sd: float
    residual_sd: float
    interaction_share: float
    costs: Costs
    facts: Mapping[str, float]
    features: str = "linear"
    draws: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    redrawn_residual_sd: float = 0.0

    @property
    def extended(self) -> bool:
        return self.features == "extended"


# -- worlds --------------------------------------------------------------------------------------


class TruthWorld:
    """One draw of the model: item difficulties, interactions, per-combination effects, costs.

    `n_items` items make the bank whose mean is a design's true accuracy; `n_search` of them,
    drawn at random, are the items a run's evaluations score. Worlds differ by `seed`. The knobs
    (`redraw`, `item_interaction`, `outside`) are the module docstring's; `space` is what a
    search there may propose (by default the full space of the calibration's model).
    """

    def __init__(
        self,
        calibration: Calibration,
        *,
        seed: int,
        n_items: int = 500,
        n_search: int = 30,
        space: SearchSpace | None = None,
        redraw: bool = False,
        item_interaction: float = 0.0,
        outside: float = 0.0,
    ) -> None:
        if not 2 <= n_search <= n_items:
            raise AgentDesignError(f"need 2 <= n_search <= n_items, got {n_search}, {n_items}")
        if not 0.0 <= outside < 1.0 or item_interaction < 0.0:
            raise AgentDesignError(
                f"need 0 <= outside < 1 and item_interaction >= 0, got {outside}, "
                f"{item_interaction}"
            )
        if redraw and not len(calibration.draws):
            raise AgentDesignError("redraw needs a calibration with bootstrap draws (n_draws)")
        self.calibration = calibration
        self.seed = seed
        # designs as written: the world scores a design by its features, used or not
        self.space = space or SearchSpace(model=calibration.model, canonical=False)
        self.description = calibration.description
        c = calibration
        knobs = np.random.default_rng([seed, WORLD_STREAM, *_KNOBS])
        self._intercept, self._effects = c.intercept, c.effects
        residual_sd = c.residual_sd
        if redraw:
            draw = c.draws[int(knobs.integers(len(c.draws)))]
            self._intercept, self._effects = float(draw[0]), draw[1:]
            residual_sd = c.redrawn_residual_sd
        rng = np.random.default_rng([seed, WORLD_STREAM])
        self.difficulty = rng.normal(c.difficulty_mean, c.difficulty_sd, n_items)
        self.search_items = tuple(int(i) for i in np.sort(rng.permutation(n_items)[:n_search]))
        n_components = len(_vocabulary()[0])
        n_pairs = math.comb(len(SLOTS), 2)
        pair_sd = residual_sd * math.sqrt(c.interaction_share / n_pairs)
        self._pairs = np.triu(rng.normal(0.0, pair_sd, (n_components, n_components)), k=1)
        combination_sd = residual_sd * math.sqrt(1.0 - c.interaction_share)
        n_combinations = math.prod(len(REGISTRY.names(slot, opt_in=False)) for slot in SLOTS)
        self._combinations = rng.normal(0.0, combination_sd, n_combinations)
        self._cost_residuals = rng.normal(0.0, c.costs.residual_sd, n_combinations)
        self._item_costs = rng.normal(0.0, c.costs.item_sd, n_items)
        self._item_effects: np.ndarray | None = None
        if item_interaction:
            unit = knobs.normal(0.0, 1.0, (n_components, n_items))
            self._item_effects = unit * item_interaction / math.sqrt(len(SLOTS))
        self._triples: np.ndarray | None = None
        self._bumps: tuple[np.ndarray, np.ndarray] | None = None
        if outside:
            self._move_outside(outside, knobs)

    def _move_outside(self, share: float, rng: np.random.Generator) -> None:
        """Shrinks the main effects' variance by `share` and gives it, half each, to three-way
        component interactions and to cosine effects of the numeric parameters, sized on random
        designs of the space."""
        components, params = _vocabulary()
        n = len(components)
        reference = [self.space.sample(rng) for _ in range(_REFERENCE)]
        x = truth_features(reference, extended=self.calibration.extended)
        main = float(np.var(x @ self._effects))
        self._effects = self._effects * math.sqrt(1.0 - share)
        slot_of = np.array([SLOTS.index(slot) for slot, _ in components])
        ordered = (
            (slot_of[:, None, None] < slot_of[None, :, None])
            & (slot_of[None, :, None] < slot_of[None, None, :])
        ).astype(float)
        self._triples = rng.normal(0.0, 1.0, (n, n, n)) * ordered
        self._bumps = (rng.normal(0.0, 1.0, len(params)), rng.uniform(0, 2 * math.pi, len(params)))
        onehot = x[:, :n]
        for term in ("triples", "bumps"):
            spread = float(np.var(self._outside(x, onehot, only=term)))
            scale = math.sqrt(share * main / 2 / spread) if spread > 0 else 0.0
            if term == "triples":
                self._triples = self._triples * scale
            else:
                self._bumps = (self._bumps[0] * scale, self._bumps[1])

    def _outside(self, x: np.ndarray, onehot: np.ndarray, *, only: str = "") -> np.ndarray:
        """The three-way interactions and the parameters' cosine effects of feature rows `x`."""
        total = np.zeros(len(x))
        if self._triples is not None and only != "bumps":
            total += np.einsum("ni,nj,nk,ijk->n", onehot, onehot, onehot, self._triples)
        if self._bumps is not None and only != "triples":
            components, params = _vocabulary()
            used = onehot[:, [components.index((slot, name)) for slot, name, _ in params]]
            values = x[:, len(components) : len(components) + len(params)]
            amplitude, phase = self._bumps
            total += (used * amplitude * np.cos(2 * math.pi * values + phase)).sum(axis=1)
        return total

    @property
    def n_items(self) -> int:
        return len(self.difficulty)

    def design(self, spec: AgentSpec, history: History) -> AgentSpec:
        """Every design of the space exists here: a proposal is evaluated as proposed."""
        return spec

    def _features(self, specs: Sequence[AgentSpec]) -> np.ndarray:
        return truth_features(specs, extended=self.calibration.extended)

    def ability(self, specs: Sequence[AgentSpec]) -> np.ndarray:
        """Each design's theta: its logit of solving an item of difficulty 0 (before any design
        x item effect)."""
        x = self._features(specs)
        return self._ability(x, np.array([_combination(s) for s in specs], dtype=int))

    def _ability(self, x: np.ndarray, combinations: np.ndarray, *, only: str = "") -> np.ndarray:
        """Theta of feature rows `x`; `only` ("triples") leaves the cosine effects out."""
        ability = self._intercept + x @ self._effects + self._interactions(x)
        ability = np.asarray(ability + self._combinations[combinations], dtype=float)
        if self._triples is None:
            return ability
        return np.asarray(ability + self._outside(x, x[:, : self._pairs.shape[0]], only=only))

    def _interactions(self, x: np.ndarray) -> np.ndarray:
        onehot = x[:, : self._pairs.shape[0]]
        return np.asarray(np.einsum("nj,jk,nk->n", onehot, self._pairs, onehot), dtype=float)

    def accuracy(self, specs: Sequence[AgentSpec]) -> np.ndarray:
        """Each design's true accuracy: its mean chance of solving the bank's items."""
        return self._accuracy(self.ability(specs), component_onehot(specs))

    def modelled_accuracy(self, specs: Sequence[AgentSpec], *, pairs: bool) -> np.ndarray:
        """Each design's accuracy from its component and parameter effects alone (and, with
        `pairs`, the pairwise interactions): the most a model of that form could know exactly,
        so its rank correlation with `accuracy` bounds what such a model can reach."""
        x = self._features(specs)
        ability = self._intercept + x @ self._effects
        if pairs:
            ability = ability + self._interactions(x)
        return self._accuracy(np.asarray(ability, dtype=float))

    def _accuracy(self, ability: np.ndarray, onehot: np.ndarray | None = None) -> np.ndarray:
        logit = ability[:, None] - self.difficulty[None, :]
        if self._item_effects is not None and onehot is not None:
            logit = logit + onehot @ self._item_effects
        return np.asarray(special.expit(logit).mean(axis=1), dtype=float)

    @functools.cached_property
    def best_accuracy(self) -> float:
        """The highest true accuracy in the space: every combination of its components with each
        parameter at the value of its range (in this space) that its effects favour most."""
        components, params = _vocabulary()
        index = {key: k for k, key in enumerate(components)}
        bonus = np.zeros(len(components))
        for p, (slot, name, info) in enumerate(params):
            bonus[index[slot, name]] += self._peak(p, slot, info)
        if self.calibration.extended:
            offset = len(components) + len(params)
            best: dict[tuple[str, str, str], float] = {}
            for k, (slot, name, param, _) in enumerate(_levels()):
                effect = float(self._effects[offset + k])
                best[slot, name, param] = max(best.get((slot, name, param), effect), effect)
            for (slot, name, _), effect in best.items():
                bonus[index[slot, name]] += effect
        names = [self.space.components(slot) for slot in SLOTS]
        combos = list(itertools.product(*names))
        onehot = np.zeros((len(combos), len(components)))
        for row, chosen in enumerate(combos):
            onehot[row, [index[slot, name] for slot, name in zip(SLOTS, chosen, strict=True)]] = 1
        x = np.hstack([onehot, np.zeros((len(onehot), self._effects.shape[0] - len(components)))])
        rows = np.array([_combination_of(chosen) for chosen in combos], dtype=int)
        # the parameters' cosine effects are in their peaks already
        ability = self._ability(x, rows, only="triples") + onehot @ bonus
        if self._item_effects is None:
            return float(self._accuracy(np.array([ability.max()]))[0])
        return float(self._accuracy(ability, onehot).max())

    def _peak(self, p: int, slot: str, info: ParamInfo) -> float:
        """The most parameter `p`'s effects add over its range in this space."""
        n_components = len(_vocabulary()[0])
        n_params = len(_vocabulary()[1])
        linear = float(self._effects[n_components + p])
        low, high = (_scaled(info, v) for v in self.space.param_range(slot, info))
        inside = _PEAK_GRID[np.greater(_PEAK_GRID, low) & np.less(_PEAK_GRID, high)]
        grid = np.unique(np.concatenate([[low, high], inside]))
        effect = linear * grid
        if self.calibration.extended:
            square = float(self._effects[n_components + n_params + len(_levels()) + p])
            effect = effect + square * (grid * grid - 1 / 12)
        if self._bumps is not None:
            amplitude, phase = self._bumps
            effect = effect + amplitude[p] * np.cos(2 * math.pi * grid + phase[p])
        return float(effect.max())

    def tokens_per_item(self, specs: Sequence[AgentSpec]) -> np.ndarray:
        """Each design's expected tokens per item."""
        costs = self.calibration.costs
        residuals = self._cost_residuals[[_combination(s) for s in specs]]
        return np.asarray(
            np.exp(costs.intercept + self._features(specs) @ costs.effects + residuals),
            dtype=float,
        )

    def evaluate(self, spec: AgentSpec, items: Sequence[int]) -> Evaluated:
        """The design scored on `items` (bank indices): an outcome drawn per item, fixed for this
        world, design and item, and the tokens it used."""
        chosen = list(items)
        rng = np.random.default_rng([self.seed, _OUTCOMES, int(spec.spec_hash[:15], 16)])
        chance = rng.random(self.n_items)[chosen]
        logit = self.ability([spec])[0] - self.difficulty[chosen]
        if self._item_effects is not None:
            logit = logit + component_onehot([spec])[0] @ self._item_effects[:, chosen]
        solved = chance < special.expit(logit)
        costs = self.calibration.costs
        cells = rng.normal(0.0, costs.cell_sd, self.n_items)[chosen]
        # lognormal noise with mean 1: the design's expected tokens per item stay as fitted
        noise = self._item_costs[chosen] + cells - (costs.item_sd**2 + costs.cell_sd**2) / 2
        tokens = self.tokens_per_item([spec])[0] * np.exp(noise)
        return Evaluated(
            spec=spec, scores=tuple(float(s) for s in solved), tokens=round(float(tokens.sum()))
        )

    def table(self, specs: Sequence[AgentSpec], n_items: int) -> ReplayTable:
        """`specs` scored on `n_items` bank items drawn at random: a simulated replay table, to
        compare with a recorded one (its spread, its split-half reliability)."""
        items = np.random.default_rng([self.seed, WORLD_STREAM, n_items]).permutation(self.n_items)
        designs = []
        for spec in specs:
            evaluated = self.evaluate(spec, [int(i) for i in items[:n_items]])
            designs.append(
                ReplayDesign(
                    spec=spec,
                    scores=evaluated.scores,
                    prompt_tokens=evaluated.tokens,
                    completion_tokens=0,
                    cost=0.0,
                )
            )
        return ReplayTable(
            benchmark="truth",
            description=self.description,
            model=self.calibration.model,
            task_ids=tuple(f"item{i}" for i in items[:n_items]),
            designs=tuple(designs),
            synthetic=True,
            note=f"simulated by the truth benchmark, world {self.seed}",
        )
