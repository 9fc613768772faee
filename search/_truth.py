"""A search benchmark with known truth: semi-synthetic evaluations calibrated on recorded ones.

A recorded table cannot say which strategy is better: 60 designs x 10 items rank designs with a
split-half reliability of 0.55, and nobody knows any design's real accuracy. Here every design of
the space has a known true accuracy, and a search's evaluations draw item outcomes from it, so a
strategy is judged by the true accuracy of the design it reports, over as many seeds as wanted.

The model is an item-response (Rasch) model: design d solves item i with probability
sigmoid(theta_d - b_i), where

    theta_d = mu + x_d . beta + (sum of gamma over d's pairs of components) + eps(d's components)

`x_d` holds one-hot components and numeric parameters scaled to [-0.5, 0.5] (on a log scale for
log ranges). `mu`, `beta` and the items' difficulties come from an L2-regularised logistic
regression on recorded per-item outcomes, the penalty chosen by log loss on held-out designs.
What the records cannot resolve, pairwise interactions `gamma` and one effect `eps` per
combination of components, is drawn afresh in each world: the total variance is fitted so that the
recorded designs, simulated on their own items, spread as much as their real means do (the
designs' abilities are predicted by fits that did not see them, so the records' own noise is not
counted twice), and `interaction_share` of it goes to the pairs (the records cannot split it).
Item difficulties are drawn from a normal with the fitted ones' mean and spread.

Tokens per item are multiplicative: log tokens = ridge regression on the same features, plus a
residual per combination of components, an item effect and noise per design and item, each with
the spread seen in the recorded per-task tokens.

A world is one draw of all of it (seeded), holding hundreds of items of which a run's search
items are a seeded subset. Outcomes are fixed per world, design and item, so strategies compared
in the same world meet the same luck, and a design scored on a subset of items (racing) gets the
same outcomes on those items as on all of them. Strategies run in a world in `_truth_search.py`.
"""

from __future__ import annotations

import functools
import itertools
import math
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import special
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.metrics import log_loss
from sklearn.model_selection import GroupKFold, KFold, cross_val_predict

from agentdesign.archive import Archive
from agentdesign.components import REGISTRY, SLOTS, AgentDesignError, AgentSpec, ParamInfo
from agentdesign.evaluators import get_benchmark
from agentdesign.search._replay import Evaluated
from agentdesign.search._space import SearchSpace
from agentdesign.search._table import ReplayDesign, ReplayTable

__all__ = [
    "Calibration",
    "Record",
    "TruthWorld",
    "calibrate",
    "load_records",
    "records_from_archive",
    "truth_features",
]

# Item one-hot columns are scaled up so the L2 penalty barely shrinks the item difficulties.
_ITEM_SCALE = 10.0
_PENALTIES = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
_ALPHAS = np.logspace(-2, 3, 11)
_RESIDUAL_GRID = np.linspace(0.0, 3.0, 121)
_MATCH_REPS = 400
# Keeps the streams of world draws and of item outcomes apart for the same seed.
_WORLD, _OUTCOMES = 1, 2


@dataclass(frozen=True)
class Record:
    """One recorded evaluation: a design's score and tokens on each item it was given."""

    spec: AgentSpec
    scores: Mapping[str, float]
    tokens: Mapping[str, int]


def load_records(paths: Sequence[Path], *, benchmark: str) -> list[Record]:
    """The records of the archives at `paths`, each opened from a temporary copy: opening an
    archive may migrate it, and recorded results must stay as they were committed."""
    records = []
    with tempfile.TemporaryDirectory() as scratch:
        for n, path in enumerate(paths):
            copy = Path(scratch) / f"{n}.sqlite"
            shutil.copyfile(path, copy)
            with Archive(str(copy)) as archive:
                records += records_from_archive(archive, benchmark=benchmark)
    return records


def records_from_archive(archive: Archive, *, benchmark: str) -> list[Record]:
    """Every complete search-split evaluation on `benchmark`, with its per-item results."""
    records = []
    for row in archive.leaderboard(benchmark=benchmark, limit=1_000_000):
        results = archive.task_results(row.evaluation_id)
        records.append(
            Record(
                spec=AgentSpec.from_dict(row.spec),
                scores={t: r.score for t, r in results.items()},
                tokens={t: r.prompt_tokens + r.completion_tokens for t, r in results.items()},
            )
        )
    return records


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


def _scaled(info: ParamInfo, value: float) -> float:
    assert info.low is not None and info.high is not None
    low, high, x = float(info.low), float(info.high), float(value)
    if info.log:
        low, high, x = math.log(low), math.log(high), math.log(x)
    return (x - low) / (high - low) - 0.5 if high > low else 0.0


def truth_features(specs: Sequence[AgentSpec]) -> np.ndarray:
    """One row per spec: one-hot components, then numeric parameters in [-0.5, 0.5] (0 where the
    spec does not use the parameter's component)."""
    components, params = _vocabulary()
    rows = []
    for spec in specs:
        chosen = {(slot, spec[slot].name) for slot in SLOTS}
        row = [float(key in chosen) for key in components]
        row += [
            _scaled(info, getattr(spec[slot], info.name)) if spec[slot].name == name else 0.0
            for slot, name, info in params
        ]
        rows.append(row)
    return np.array(rows, dtype=float).reshape(len(specs), len(components) + len(params))


def _combination(spec: AgentSpec) -> int:
    """The index of the spec's combination of components among all the registry's."""
    index = 0
    for slot in SLOTS:
        names = REGISTRY.names(slot, opt_in=False)
        index = index * len(names) + names.index(spec[slot].name)
    return index


# -- calibration ---------------------------------------------------------------------------------


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
    """What `calibrate` fitted; `facts` says how well, for the benchmark's printout."""

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


def calibrate(
    records: Sequence[Record],
    *,
    benchmark: str,
    interaction_share: float = 0.5,
    seed: int = 0,
) -> Calibration:
    """Fits the model to `records` of `benchmark`, all of one model (see the module docstring)."""
    if not 0.0 <= interaction_share <= 1.0:
        raise AgentDesignError(f"interaction_share must be in [0, 1], not {interaction_share}")
    models = {r.spec.model for r in records}
    if len(models) != 1:
        raise AgentDesignError(f"calibration needs records of one model, not {sorted(models)}")
    if len(records) < 10:
        raise AgentDesignError(
            f"calibration needs at least 10 recorded designs, not {len(records)}"
        )
    items = sorted({t for r in records for t in r.scores})
    column = {t: i for i, t in enumerate(items)}
    features = truth_features([r.spec for r in records])
    cells = [(d, column[t], s) for d, r in enumerate(records) for t, s in r.scores.items()]
    design = np.array([d for d, _, _ in cells])
    outcome = np.array([s for _, _, s in cells])
    x = np.hstack([np.eye(len(items))[[i for _, i, _ in cells]] * _ITEM_SCALE, features[design]])
    folds = list(GroupKFold(n_splits=min(10, len(records))).split(x, outcome, design))
    fitted = {p: _cross_fit(x, outcome, folds, p) for p in _PENALTIES}
    penalty = min(fitted, key=lambda p: fitted[p][0])
    # Each design's ability as predicted by the fold that did not see it.
    ability = np.zeros(len(records))
    for (_, test), fold in zip(folds, fitted[penalty][1], strict=True):
        unseen = np.unique(design[test])
        ability[unseen] = features[unseen] @ fold.coef_[0][len(items) :] + fold.intercept_[0]
    fit = _logistic(penalty).fit(x, outcome)
    difficulty = -fit.coef_[0][: len(items)] * _ITEM_SCALE
    real_sd, residual_sd = _match_spread(records, ability, difficulty, column, seed)
    return Calibration(
        model=models.pop(),
        description=get_benchmark(benchmark).description,
        intercept=float(fit.intercept_[0]),
        effects=fit.coef_[0][len(items) :].copy(),
        difficulty_mean=float(difficulty.mean()),
        difficulty_sd=float(difficulty.std(ddof=1)),
        residual_sd=residual_sd,
        interaction_share=interaction_share,
        costs=_fit_costs(records, features),
        facts={
            "designs": len(records),
            "items": len(items),
            "outcomes": len(outcome),
            "penalty": penalty,
            "held_out_log_loss": fitted[penalty][0],
            "items_only_log_loss": _cross_fit(x[:, : len(items)], outcome, folds, 1.0)[0],
            "main_effect_sd": float(np.std(ability)),
            "real_sd_of_means": real_sd,
        },
    )


def _logistic(C: float) -> LogisticRegression:
    # Newton's method: a few dozen coefficients, and scaled item columns that slow L-BFGS badly.
    return LogisticRegression(C=C, solver="newton-cholesky", max_iter=200)


def _cross_fit(
    x: np.ndarray, outcome: np.ndarray, folds: Sequence[tuple[np.ndarray, np.ndarray]], C: float
) -> tuple[float, list[LogisticRegression]]:
    """Log loss per outcome on held-out designs, and each fold's fit."""
    loss, fits = 0.0, []
    for train, test in folds:
        fit = _logistic(C).fit(x[train], outcome[train])
        loss += log_loss(outcome[test], fit.predict_proba(x[test])[:, 1], labels=[0, 1]) * len(test)
        fits.append(fit)
    return loss / len(outcome), fits


def _match_spread(
    records: Sequence[Record],
    ability: np.ndarray,
    difficulty: np.ndarray,
    column: Mapping[str, int],
    seed: int,
) -> tuple[float, float]:
    """The real spread of design means (pooled over designs scored on the same items), and the
    residual sd of ability that makes the simulated records spread as much.

    The simulation reuses its random numbers for every residual sd tried (common random numbers),
    so the spread grows smoothly with it and bisection finds the match."""
    rng = np.random.default_rng([seed, _WORLD])
    groups: dict[tuple[str, ...], list[int]] = {}
    for d, record in enumerate(records):
        groups.setdefault(tuple(sorted(record.scores)), []).append(d)
    groups = {tasks: ds for tasks, ds in groups.items() if len(ds) > 1}
    if not groups:
        raise AgentDesignError("calibration needs designs scored on the same items")
    draws = []
    real = 0.0
    for tasks, ds in groups.items():
        means = np.array([np.mean([records[d].scores[t] for t in tasks]) for d in ds])
        real += means.var(ddof=1) * (len(ds) - 1)
        shape = (_MATCH_REPS, len(ds), len(tasks))
        draws.append(
            (ds, [column[t] for t in tasks], rng.normal(size=shape[:2]), rng.random(shape))
        )
    dof = sum(len(ds) - 1 for ds in groups.values())

    def simulated(residual_sd: float) -> float:
        total = 0.0
        for ds, cols, z, u in draws:
            logit = (ability[ds] + residual_sd * z)[:, :, None] - difficulty[cols][None, None, :]
            means = (u < special.expit(logit)).mean(axis=2)
            total += float(means.var(axis=1, ddof=1).mean()) * (len(ds) - 1)
        return math.sqrt(total / dof)

    target = math.sqrt(real / dof)
    low, high = 0.0, 4.0
    if simulated(low) >= target:
        return target, 0.0
    if simulated(high) < target:
        raise AgentDesignError("the recorded designs spread more than the model can reproduce")
    for _ in range(30):
        middle = (low + high) / 2
        low, high = (middle, high) if simulated(middle) < target else (low, middle)
    return target, (low + high) / 2


def _fit_costs(records: Sequence[Record], features: np.ndarray) -> Costs:
    """Log tokens per item: a ridge regression on the features, its held-out residual spread,
    and the spread of items' effects and of what is left per design and item."""
    per_task = [np.log(np.maximum([r.tokens[t] for t in r.scores], 1)) for r in records]
    log_mean = np.log([np.mean(np.exp(logs)) for logs in per_task])
    ridge = RidgeCV(alphas=_ALPHAS).fit(features, log_mean)
    folds = KFold(n_splits=min(10, len(records)), shuffle=True, random_state=0)
    held_out = cross_val_predict(RidgeCV(alphas=_ALPHAS), features, log_mean, cv=folds)
    deviations: dict[str, list[float]] = {}
    for record, logs in zip(records, per_task, strict=True):
        for task, value in zip(record.scores, logs - logs.mean(), strict=True):
            deviations.setdefault(task, []).append(float(value))
    item_effects = {t: float(np.mean(v)) for t, v in deviations.items()}
    cells = [v - item_effects[t] for t, vs in deviations.items() for v in vs]
    return Costs(
        intercept=float(ridge.intercept_),
        effects=np.asarray(ridge.coef_, dtype=float),
        residual_sd=float(np.std(log_mean - held_out)),
        item_sd=float(np.std(list(item_effects.values()))),
        cell_sd=float(np.std(cells)),
    )


# -- worlds --------------------------------------------------------------------------------------


class TruthWorld:
    """One draw of the model: item difficulties, interactions, per-combination effects, costs.

    `n_items` items make the bank whose mean is a design's true accuracy; `n_search` of them,
    drawn at random, are the items a run's evaluations score. Worlds differ by `seed`.
    """

    def __init__(
        self, calibration: Calibration, *, seed: int, n_items: int = 500, n_search: int = 30
    ) -> None:
        if not 2 <= n_search <= n_items:
            raise AgentDesignError(f"need 2 <= n_search <= n_items, got {n_search}, {n_items}")
        self.calibration = calibration
        self.seed = seed
        self.space = SearchSpace(model=calibration.model)
        self.description = calibration.description
        rng = np.random.default_rng([seed, _WORLD])
        c = calibration
        self.difficulty = rng.normal(c.difficulty_mean, c.difficulty_sd, n_items)
        self.search_items = tuple(int(i) for i in np.sort(rng.permutation(n_items)[:n_search]))
        n_components = len(_vocabulary()[0])
        n_pairs = math.comb(len(SLOTS), 2)
        pair_sd = c.residual_sd * math.sqrt(c.interaction_share / n_pairs)
        self._pairs = np.triu(rng.normal(0.0, pair_sd, (n_components, n_components)), k=1)
        combination_sd = c.residual_sd * math.sqrt(1.0 - c.interaction_share)
        n_combinations = math.prod(len(REGISTRY.names(slot, opt_in=False)) for slot in SLOTS)
        self._combinations = rng.normal(0.0, combination_sd, n_combinations)
        self._cost_residuals = rng.normal(0.0, c.costs.residual_sd, n_combinations)
        self._item_costs = rng.normal(0.0, c.costs.item_sd, n_items)

    @property
    def n_items(self) -> int:
        return len(self.difficulty)

    def ability(self, specs: Sequence[AgentSpec]) -> np.ndarray:
        """Each design's theta: its logit of solving an item of difficulty 0."""
        x = truth_features(specs)
        return self._ability(x, np.array([_combination(s) for s in specs], dtype=int))

    def _ability(self, x: np.ndarray, combinations: np.ndarray) -> np.ndarray:
        c = self.calibration
        ability = c.intercept + x @ c.effects + self._interactions(x)
        return np.asarray(ability + self._combinations[combinations], dtype=float)

    def _interactions(self, x: np.ndarray) -> np.ndarray:
        onehot = x[:, : self._pairs.shape[0]]
        return np.asarray(np.einsum("nj,jk,nk->n", onehot, self._pairs, onehot), dtype=float)

    def accuracy(self, specs: Sequence[AgentSpec]) -> np.ndarray:
        """Each design's true accuracy: its mean chance of solving the bank's items."""
        return self._accuracy(self.ability(specs))

    def modelled_accuracy(self, specs: Sequence[AgentSpec], *, pairs: bool) -> np.ndarray:
        """Each design's accuracy from its component and parameter effects alone (and, with
        `pairs`, the pairwise interactions): the most a model of that form could know exactly,
        so its rank correlation with `accuracy` bounds what such a model can reach."""
        x = truth_features(specs)
        ability = self.calibration.intercept + x @ self.calibration.effects
        if pairs:
            ability = ability + self._interactions(x)
        return self._accuracy(np.asarray(ability, dtype=float))

    def _accuracy(self, ability: np.ndarray) -> np.ndarray:
        chance = special.expit(ability[:, None] - self.difficulty[None, :])
        return np.asarray(chance.mean(axis=1), dtype=float)

    @functools.cached_property
    def best_accuracy(self) -> float:
        """The highest true accuracy in the space: every combination of components with each
        numeric parameter at whichever end of its range its effect favours."""
        components, params = _vocabulary()
        index = {key: k for k, key in enumerate(components)}
        bonus = np.zeros(len(components))
        for p, (slot, name, _) in enumerate(params):
            bonus[index[slot, name]] += abs(self.calibration.effects[len(components) + p]) / 2
        names = [REGISTRY.names(slot, opt_in=False) for slot in SLOTS]
        onehot = np.zeros((math.prod(len(n) for n in names), len(components)))
        for row, chosen in enumerate(itertools.product(*names)):
            onehot[row, [index[slot, name] for slot, name in zip(SLOTS, chosen, strict=True)]] = 1
        x = np.hstack([onehot, np.zeros((len(onehot), len(params)))])
        ability = self._ability(x, np.arange(len(onehot))) + onehot @ bonus
        return float(self._accuracy(np.array([ability.max()]))[0])

    def tokens_per_item(self, specs: Sequence[AgentSpec]) -> np.ndarray:
        """Each design's expected tokens per item."""
        costs = self.calibration.costs
        residuals = self._cost_residuals[[_combination(s) for s in specs]]
        return np.asarray(
            np.exp(costs.intercept + truth_features(specs) @ costs.effects + residuals), dtype=float
        )

    def evaluate(self, spec: AgentSpec, items: Sequence[int]) -> Evaluated:
        """The design scored on `items` (bank indices): an outcome drawn per item, fixed for this
        world, design and item, and the tokens it used."""
        chosen = list(items)
        rng = np.random.default_rng([self.seed, _OUTCOMES, int(spec.spec_hash[:15], 16)])
        chance = rng.random(self.n_items)[chosen]
        solved = chance < special.expit(self.ability([spec])[0] - self.difficulty[chosen])
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
        items = np.random.default_rng([self.seed, _WORLD, n_items]).permutation(self.n_items)
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
