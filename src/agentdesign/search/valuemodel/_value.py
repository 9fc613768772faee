"""The predictive value model: an agent's score on a benchmark with an uncertainty, quickly.

It screens candidate designs so that only the promising few get a real, slow evaluation; it never
picks a winner (real scores do). Features are the design (one-hot components, scaled parameters,
pairwise component interactions), hashed words and word pairs of the prompts a design rewrote (so
rewritten and model-written designs can be screened), hashed words of the benchmark description
and the model string, so one model learns across benchmarks and a new benchmark starts warm; in
a run over several models, also which of them a design runs on, alone and with each component.

Rows of other benchmarks or models (the archive's prior) share the design's effects with the
run's own rows but do not impose them: for a run's `Domain` (its benchmark and model) every design
feature has a second, domain-only copy in the ridge (a hierarchical model with benchmark x
component terms), the trees weigh the prior's rows together as much as the run's, and the
uncertainty is scaled on the run's rows alone, so a large archive on another benchmark informs a
new run's first labels without outvoting them.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
from threadpoolctl import ThreadpoolController

from agentdesign.components import REGISTRY, SLOTS, AgentSpec, ParamInfo

# scikit-learn and scipy.stats are imported where they are used: together they take about a second
# to import, which a command that fits no model (`agentdesign --help`, a refused option) need not
# pay.
if TYPE_CHECKING:
    from sklearn.feature_extraction.text import HashingVectorizer

__all__ = [
    "Domain",
    "Labelled",
    "ValueModel",
    "ValueReport",
    "assess_value_model",
    "design_features",
    "held_out_predictions",
    "rank_correlation",
    "value_report",
]

# Each tree bootstraps at most this many labelled designs, so that a refit on a large archive
# prior stays bounded (the ridge still sees every design).
_TREE_SAMPLES = 512
_TEXT_FEATURES = 32
_MODEL_FEATURES = 8
_PROMPT_FEATURES = 64
_WORD = re.compile(r"[A-Za-z0-9.]+")
# The z-value of a two-sided 95% interval: calibration counts real scores inside mean +- Z * std.
_Z95 = 1.959964


@dataclass(frozen=True)
class Labelled:
    """One real result: a design's mean score on a benchmark (and its tokens per item).

    `weight` is how much the fit trusts it: 1 for a design scored on every item, its share of the
    items for one that racing stopped early (a partial mean, and a pessimistic one: it was stopped
    because it trailed), so racing does not starve the model of the designs it drops.
    """

    spec: AgentSpec
    description: str
    score: float
    tokens_per_item: float = 0.0
    weight: float = 1.0


@dataclass(frozen=True)
class Domain:
    """The benchmark (by its description, as `Labelled` rows carry it) and model a value model
    predicts for: a run's own. Rows of any other benchmark or model are its prior.

    `scale` is how large the domain's own effects may be against those it shares with the prior
    (the scale of the ridge's domain-only features: its one prior on every weight then allows
    them `scale` times the shared ones' spread); bench/value_prior.py measures it (--scales).

    `models` are the models a run searches when it searches several (`model` among them): rows
    on any of them are the domain's, and the design features tell those models apart (see
    `design_features`), so that the fit learns each model's own effects."""

    description: str
    model: str
    scale: float = 2.0
    models: tuple[str, ...] = ()

    def holds(self, specs: Sequence[AgentSpec], descriptions: Sequence[str]) -> np.ndarray:
        """1.0 for each design of this domain, 0.0 for the others, as a column."""
        models = self.models or (self.model,)
        return np.array(
            [
                [float(d == self.description and s.model in models)]
                for s, d in zip(specs, descriptions, strict=True)
            ]
        ).reshape(len(specs), 1)


@dataclass(frozen=True)
class ValueReport:
    """The value model's accuracy on agents it was not fit on (k-fold held-out predictions).

    `coverage_95` is the share of held-out real scores inside the predicted mean +- 1.96 std: a
    calibrated model is near 0.95, an overconfident one below.
    """

    n_agents: int
    spearman: float
    coverage_95: float
    mean_abs_error: float


@cache
def _vocabulary() -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str, ParamInfo], ...]]:
    """Every (slot, component) and every searchable (slot, component, parameter) in a fixed order,
    so features mean the same in every process and across archives."""
    components = tuple((slot, name) for slot in SLOTS for name in REGISTRY.names(slot))
    params = tuple(
        (slot, name, info)
        for slot, name in components
        for info in REGISTRY.get(slot, name).param_info()
        if info.searchable
    )
    return components, params


@dataclass(frozen=True)
class _Layout:
    """Where each component's one-hot column and parameter columns sit in a design row."""

    n_components: int
    n_params: int
    column: dict[tuple[str, str], int]
    params: dict[tuple[str, str], tuple[tuple[int, ParamInfo], ...]]
    pairs: tuple[np.ndarray, np.ndarray]


@cache
def _layout() -> _Layout:
    components, params = _vocabulary()
    offsets: dict[tuple[str, str], list[tuple[int, ParamInfo]]] = {}
    offset = 0
    for slot, name, info in params:
        offsets.setdefault((slot, name), []).append((offset, info))
        offset += len(info.choices) if info.kind == "choice" and info.choices else 1
    return _Layout(
        n_components=len(components),
        n_params=offset,
        column={key: i for i, key in enumerate(components)},
        params={key: tuple(found) for key, found in offsets.items()},
        pairs=np.triu_indices(len(components), k=1),
    )


def _param_features(info: ParamInfo, value: object) -> list[float]:
    if info.kind == "bool":
        return [float(bool(value))]
    if info.kind == "choice":
        assert info.choices is not None
        return [float(value == choice) for choice in info.choices]
    assert info.low is not None and info.high is not None and isinstance(value, int | float)
    low, high, x = float(info.low), float(info.high), float(value)
    if info.log:
        low, high, x = math.log(low), math.log(high), math.log(x)
    return [(x - low) / (high - low) if high > low else 0.0]


@cache
def _text_hasher(n_features: int, ngrams: int = 1) -> HashingVectorizer:
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(
        n_features=n_features,
        alternate_sign=False,
        norm="l2",
        token_pattern=r"[A-Za-z0-9.]+",
        ngram_range=(1, ngrams),
    )


def _rewritten_text(spec: AgentSpec) -> str:
    """What the design's rewritten prompts (and workflow code) add to their component's default:
    the words of each that the default does not have, in order, after the parameter's name.
    Empty for a design that rewrote none. Hashing the whole text instead made two rewrites of one
    prompt look alike (cosine 0.9 in bench/prompt_features.py), the default's words swamping
    what each added."""
    parts = []
    for slot in SLOTS:
        for info in spec[slot].param_info():
            value = getattr(spec[slot], info.name)
            if info.kind != "text" or value == info.default:
                continue
            unused = Counter(_WORD.findall(str(info.default).lower()))
            added = []
            for word in _WORD.findall(value.lower()):
                if unused[word]:
                    unused[word] -= 1
                else:
                    added.append(word)
            parts.append(f"{slot}__{info.name} {' '.join(added)}")
    return "\n".join(parts)


def design_features(
    specs: Sequence[AgentSpec],
    descriptions: Sequence[str] | str = "",
    *,
    models: Sequence[str] = (),
    interactions: bool = True,
) -> np.ndarray:
    """One row per spec: components, parameters, component pairs (unless not `interactions`),
    rewritten prompts' words and word pairs, description and model words; where `models` names
    several (the models a run searches), then which of them the design runs on and that model
    with each component.

    `descriptions` is the benchmark's description, one for all specs or one per spec. A parameter
    of a component the spec does not use is 0, so it only matters under its component. The
    model's words alone can collide in their few hashed columns (and cannot say that a component
    helps one model more than another): the model choice's own columns can, and a run on one
    model has none, so its features are what they always were.
    """
    layout = _layout()
    onehot = np.zeros((len(specs), layout.n_components))
    values = np.zeros((len(specs), layout.n_params))
    for row, spec in enumerate(specs):
        for slot in SLOTS:
            component = spec[slot]
            key = (slot, component.name)
            onehot[row, layout.column[key]] = 1.0
            for offset, info in layout.params.get(key, ()):
                found = _param_features(info, getattr(component, info.name))
                values[row, offset : offset + len(found)] = found
    first, second = layout.pairs
    pairs = onehot[:, first] * onehot[:, second] if interactions else np.zeros((len(specs), 0))
    texts = [descriptions] * len(specs) if isinstance(descriptions, str) else list(descriptions)
    index = {text: i for i, text in enumerate(dict.fromkeys(texts))}
    hashed = _text_hasher(_TEXT_FEATURES).transform(list(index)).toarray()
    text = hashed[[index[t] for t in texts]].reshape(len(specs), _TEXT_FEATURES)
    named = {model: i for i, model in enumerate(dict.fromkeys(s.model for s in specs))}
    hashed_models = _text_hasher(_MODEL_FEATURES).transform(list(named)).toarray()
    model = hashed_models[[named[s.model] for s in specs]].reshape(len(specs), _MODEL_FEATURES)
    prompts = [_rewritten_text(s) for s in specs]
    rewritten = np.zeros((len(specs), _PROMPT_FEATURES))
    if any(prompts):
        rewritten = _text_hasher(_PROMPT_FEATURES, ngrams=2).transform(prompts).toarray()
    parts = [onehot, values, pairs, rewritten, text, model]
    if len(models) > 1:
        chosen = np.array([[float(s.model == m) for m in models] for s in specs])
        per_model = (chosen[:, :, None] * onehot[:, None, :]).reshape(len(specs), -1)
        parts += [chosen, per_model]
    return np.hstack(parts)


def _one_blas_thread() -> AbstractContextManager[object]:
    """The model's matrices are small: BLAS threads only spin against each other and against the
    engine's threads (a fit took about 20 times longer with them on 2 busy cores)."""
    limiter: AbstractContextManager[object] = _blas_controller().limit(limits=1)
    return limiter


@cache
def _blas_controller() -> ThreadpoolController:
    """The loaded BLAS libraries, found once: scanning them costs milliseconds, as much as a
    prediction, while limiting through a found controller costs microseconds."""
    return ThreadpoolController()


class ValueModel:
    """A two-member ensemble: Bayesian ridge regression (a second-order model, through the pairwise
    features) and a random forest (for effects that are not additive). Its mean is the members'
    average. Its variance is each member's own (the ridge posterior, the spread of the trees)
    averaged, plus their disagreement, scaled so that it matches the ensemble's errors on the
    designs each member did not fit (the ridge's leave-one-out residuals, the forest's out-of-bag
    ones): an uncertainty from held-out errors, not from how well it fits its own labels.

    With a `domain` and rows outside it (a prior), the ridge is hierarchical: each design feature
    gets a domain-only copy (scaled by the domain's `scale`) and an indicator of the domain, so the
    prior teaches the shared effects and the domain's rows their own departures from them; the
    trees weigh the prior's rows together as much as the domain's; and the variance is scaled on
    the domain's rows (at least 5 of them), not on the prior's.

    Unfitted (fewer than two results), it predicts the middle of the score range with the widest
    uncertainty, so screening by an optimistic bound then falls back to exploring.

    Without `interactions` it has no component-pair features: a first-order model, which few
    labels may fit better (the pairs outnumber the components, and each pair is seen in few
    designs); bench/strategies_table.py measures both on a recorded table.
    """

    def __init__(
        self,
        *,
        n_trees: int = 30,
        seed: int = 0,
        domain: Domain | None = None,
        interactions: bool = True,
    ) -> None:
        from sklearn.ensemble import RandomForestRegressor
        from sklearn.linear_model import BayesianRidge

        self._ridge = BayesianRidge()
        self._forest = RandomForestRegressor(
            n_estimators=n_trees, max_features=0.5, random_state=seed, n_jobs=1
        )
        self._domain = domain
        self._interactions = interactions
        self._apart = False  # whether rows outside the domain were fitted (the features split)
        self._fitted = False
        self._scale = 1.0  # held-out squared error over the model's own variance

    @property
    def fitted(self) -> bool:
        return self._fitted

    def fit(self, rows: Sequence[Labelled]) -> ValueModel:
        """Refits on `rows` from scratch, so that a resumed run's model is the one an uninterrupted
        run would have; its cost is bounded by `_TREE_SAMPLES` designs per tree."""
        self._fitted = len(rows) >= 2
        if self._fitted:
            specs, descriptions = [r.spec for r in rows], [r.description for r in rows]
            own = (
                np.ones((len(rows), 1))
                if self._domain is None
                else self._domain.holds(specs, descriptions)
            )
            self._apart = not own.all()
            x = self._features(specs, descriptions)
            y = np.array([r.score for r in rows])
            weights = np.array([r.weight for r in rows])
            # scaled to mean 1: BayesianRidge counts designs, not weight, when it estimates the
            # noise, and lighter weights than that made its noise precision negative
            weights = weights * len(weights) / weights.sum()
            self._forest.set_params(
                max_samples=_TREE_SAMPLES if len(rows) > _TREE_SAMPLES else None
            )
            with _one_blas_thread():
                self._ridge.fit(x, y, sample_weight=weights)
                self._forest.fit(x, y, sample_weight=self._forest_weights(weights, own[:, 0] > 0))
                self._scale = self._held_out_scale(x, y, weights, own=own[:, 0] > 0)
        return self

    def predict(
        self, specs: Sequence[AgentSpec], *, description: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """Predicted mean score and standard deviation of each spec on the described benchmark."""
        if not specs:
            return np.zeros(0), np.zeros(0)
        if not self._fitted:
            return np.full(len(specs), 0.5), np.full(len(specs), 0.5)
        x = self._features(specs, [description] * len(specs))
        with _one_blas_thread():
            ridge_mean, ridge_var = self._ridge.predict(x), self._ridge_variance(x)
            trees = self._tree_predictions(x)
        means = np.stack([ridge_mean, trees.mean(axis=0)])
        variance = (ridge_var + trees.var(axis=0)) / 2 + means.var(axis=0)
        return means.mean(axis=0), np.sqrt(np.clip(self._scale * variance, 0.0, None))

    def _forest_weights(self, weights: np.ndarray, own: np.ndarray) -> np.ndarray:
        """The trees' row weights: the prior's rows together weigh as much as the domain's own.
        Trees split on whichever features fit most rows, so a large prior would otherwise shape
        every split and its ranking outvote the run's labels (the ridge has its domain terms)."""
        if not self._apart or not own.any():
            return weights
        balanced = np.array(weights, dtype=float)
        balanced[~own] *= weights[own].sum() / weights[~own].sum()
        scaled: np.ndarray = balanced * len(balanced) / balanced.sum()
        return scaled

    def _features(self, specs: Sequence[AgentSpec], descriptions: Sequence[str]) -> np.ndarray:
        """The design features; once rows outside the domain were fitted, with their domain-only
        copy and the domain's indicator after them."""
        models = () if self._domain is None else self._domain.models
        x = design_features(specs, descriptions, models=models, interactions=self._interactions)
        if not self._apart:
            return x
        assert self._domain is not None
        own = self._domain.holds(specs, descriptions)
        return np.hstack([x, self._domain.scale * x * own, own])

    def _tree_predictions(self, x: np.ndarray) -> np.ndarray:
        """Each tree's prediction (one row per tree), read from the leaves `tree_.apply` finds:
        `tree.predict` checks its input anew per tree, most of the time of a prediction."""
        rows = np.asarray(x, dtype=np.float32)
        return np.stack(
            [tree.tree_.value[tree.tree_.apply(rows), 0, 0] for tree in self._forest.estimators_]
        )

    def _ridge_variance(self, x: np.ndarray) -> np.ndarray:
        """The ridge's predictive variance, as `predict(return_std=True)` squares it, with the
        posterior term clipped at 0: fitted on weighted or repeated designs, rounding can make it
        slightly negative, and its square root nan."""
        posterior = np.asarray(((x @ self._ridge.sigma_) * x).sum(axis=1), dtype=float)
        noise = 1.0 / float(self._ridge.alpha_)
        variance: np.ndarray = np.clip(posterior, 0.0, None) + noise
        return variance

    def _held_out_scale(
        self, x: np.ndarray, y: np.ndarray, weights: np.ndarray, *, own: np.ndarray
    ) -> float:
        """Mean squared held-out error over the mean predicted variance at the same designs: each
        design predicted by the ridge without it (closed-form leave-one-out) and by the trees
        whose bootstrap left it out, over the domain's designs (`own`) where 5 of them were left
        out by some tree, else over all of them: a prior's errors say little of the run's. 1 with
        fewer than 5 designs, too few to estimate it."""
        if len(y) < 5:
            return 1.0
        ridge = self._ridge
        centred = x - np.average(x, axis=0, weights=weights)
        spread = np.clip(((centred @ ridge.sigma_) * centred).sum(axis=1), 0.0, None)
        leverage = ridge.alpha_ * weights * spread + weights / weights.sum()
        ridge_mean = ridge.predict(x)
        # With fewer designs than features the ridge interpolates: leverage near 1, residual near
        # 0, and their ratio is the real leave-one-out error. A floor of 0.05 here once shrank
        # those errors to almost nothing (intervals covered 64% at 10 designs); this one only
        # guards the division.
        ridge_out = y - (y - ridge_mean) / np.clip(1.0 - leverage, 1e-9, None)
        ridge_var = self._ridge_variance(x)
        trees = self._tree_predictions(x)
        out_of_bag = np.ones_like(trees, dtype=bool)
        for k, in_bag in enumerate(self._forest.estimators_samples_):
            out_of_bag[k, in_bag] = False
        seen = out_of_bag.any(axis=0)  # left out by at least one tree
        if (seen & own).sum() >= 5:
            seen = seen & own
        if seen.sum() < 5:
            return 1.0
        oob = np.ma.masked_array(trees, mask=~out_of_bag)
        forest_out = oob.mean(axis=0).filled(0.0)
        forest_var = oob.var(axis=0).filled(0.0)
        means = np.stack([ridge_out, forest_out])
        variance = (ridge_var + forest_var) / 2 + means.var(axis=0)
        errors = (y - means.mean(axis=0)) ** 2
        w = weights[seen]
        predicted = float(np.sum(w * variance[seen]))
        return float(np.sum(w * errors[seen]) / predicted) if predicted > 0 else 1.0


def held_out_predictions(
    rows: Sequence[Labelled], *, folds: int = 5, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's predicted mean and std from a model fit on the other folds: the model judged on
    designs it did not see, as the search uses it."""
    from sklearn.model_selection import KFold

    means = np.zeros(len(rows))
    stds = np.zeros(len(rows))
    splitter = KFold(n_splits=min(folds, len(rows)), shuffle=True, random_state=seed)
    for train, test in splitter.split(np.arange(len(rows))):
        model = ValueModel(seed=seed).fit([rows[i] for i in train])
        for i in test:
            mean, std = model.predict([rows[i].spec], description=rows[i].description)
            means[i], stds[i] = mean[0], std[0]
    return means, stds


def assess_value_model(rows: Sequence[Labelled], *, folds: int = 5, seed: int = 0) -> ValueReport:
    """Fits on k-1 folds and predicts the held-out one, for each fold: accuracy on unseen agents."""
    if len(rows) < 4:
        raise ValueError(f"assessing the value model needs at least 4 results, not {len(rows)}")
    means, stds = held_out_predictions(rows, folds=folds, seed=seed)
    return value_report(means, stds, np.array([r.score for r in rows]))


def value_report(means: np.ndarray, stds: np.ndarray, real: np.ndarray) -> ValueReport:
    """Rank correlation, 95% coverage and mean absolute error of predictions against real scores."""
    return ValueReport(
        n_agents=len(real),
        spearman=rank_correlation(means, real),
        coverage_95=float(np.mean(np.abs(real - means) <= _Z95 * stds)),
        mean_abs_error=float(np.mean(np.abs(real - means))),
    )


def rank_correlation(predicted: np.ndarray, real: np.ndarray) -> float:
    """Spearman's rho; 0 where either side is constant (no ranking to agree with)."""
    from scipy.stats import spearmanr

    if np.ptp(predicted) == 0 or np.ptp(real) == 0:
        return 0.0
    return float(spearmanr(predicted, real).statistic)
