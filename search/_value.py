"""The predictive value model: an agent's score on a benchmark with an uncertainty,, quickly.

It screens candidate designs so that only the promising few get a real, slow evaluation; it never
picks a winner (real scores do). Features are the design (one-hot components, scaled parameters,
pairwise component interactions), hashed words of the benchmark description and the model string,
so one model learns across benchmarks and a new benchmark starts warm.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy.stats import spearmanr
from sklearn.ensemble import RandomForestRegressor
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.linear_model import BayesianRidge
from sklearn.model_selection import KFold
from threadpoolctl import ThreadpoolController

from agentdesign.archive import Archive
from agentdesign.components import REGISTRY, SLOTS, AgentSpec, ParamInfo
from agentdesign.evaluators import BenchmarkError, get_benchmark

__all__ = [
    "Labelled",
    "ValueModel",
    "ValueReport",
    "assess_value_model",
    "design_features",
    "held_out_predictions",
    "labelled_from_archive",
    "rank_correlation",
    "value_report",
]

_TEXT_FEATURES = 32
_MODEL_FEATURES = 8
# The z-value of a two-sided 95% interval: calibration counts real scores inside mean +- Z * std.
_Z95 = 1.959964


@dataclass(frozen=True)
class Labelled:
    """One real result: a design's mean score on a benchmark (and its tokens per task)."""

    spec: AgentSpec
    description: str
    score: float
    tokens_per_task: float = 0.0


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


def _text_hasher(n_features: int) -> HashingVectorizer:
    return HashingVectorizer(
        n_features=n_features, alternate_sign=False, norm="l2", token_pattern=r"[A-Za-z0-9.]+"
    )


def design_features(
    specs: Sequence[AgentSpec], descriptions: Sequence[str] | str = ""
) -> np.ndarray:
    """One row per spec: components, parameters, component pairs, description and model words.

    `descriptions` is the benchmark's description, one for all specs or one per spec. A parameter
    of a component the spec does not use is 0, so it only matters under its component.
    """
    components, params = _vocabulary()
    rows = []
    for spec in specs:
        chosen = {(slot, spec[slot].name) for slot in SLOTS}
        onehot = np.array([float(key in chosen) for key in components])
        values: list[float] = []
        for slot, name, info in params:
            if spec[slot].name == name:
                values += _param_features(info, getattr(spec[slot], info.name))
            else:
                values += [0.0] * (
                    len(info.choices) if info.kind == "choice" and info.choices else 1
                )
        pairs = np.outer(onehot, onehot)[np.triu_indices(len(components), k=1)]
        rows.append(np.concatenate([onehot, values, pairs]))
    design = np.array(rows).reshape(len(specs), -1)
    texts = [descriptions] * len(specs) if isinstance(descriptions, str) else list(descriptions)
    index = {text: i for i, text in enumerate(dict.fromkeys(texts))}
    hashed = _text_hasher(_TEXT_FEATURES).transform(list(index)).toarray()
    text = hashed[[index[t] for t in texts]].reshape(len(specs), _TEXT_FEATURES)
    model = _text_hasher(_MODEL_FEATURES).transform([s.model for s in specs]).toarray()
    return np.hstack([design, text, model])


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
    average; its variance is each member's own (the ridge posterior, the spread of the trees)
    averaged, plus their disagreement.

    Unfitted (fewer than two results), it predicts the middle of the score range with the widest
    uncertainty, so screening by an optimistic bound then falls back to exploring.
    """

    def __init__(self, *, n_trees: int = 30, seed: int = 0) -> None:
        self._ridge = BayesianRidge()
        self._forest = RandomForestRegressor(
            n_estimators=n_trees, max_features=0.5, random_state=seed, n_jobs=1
        )
        self._fitted = False

    @property
    def fitted(self) -> bool:
        return self._fitted

    def fit(self, rows: Sequence[Labelled]) -> ValueModel:
        """Refits on `rows` from scratch: results arrive one at a time and a fit is cheap."""
        self._fitted = len(rows) >= 2
        if self._fitted:
            x = design_features([r.spec for r in rows], [r.description for r in rows])
            y = np.array([r.score for r in rows])
            with _one_blas_thread():
                self._ridge.fit(x, y)
                self._forest.fit(x, y)
        return self

    def predict(
        self, specs: Sequence[AgentSpec], *, description: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """Predicted mean score and standard deviation of each spec on the described benchmark."""
        if not specs:
            return np.zeros(0), np.zeros(0)
        if not self._fitted:
            return np.full(len(specs), 0.5), np.full(len(specs), 0.5)
        x = design_features(specs, description)
        with _one_blas_thread():
            ridge_mean, ridge_std = self._ridge.predict(x, return_std=True)
            trees = np.stack([tree.predict(x) for tree in self._forest.estimators_])
        means = np.stack([ridge_mean, trees.mean(axis=0)])
        variance = (ridge_std**2 + trees.var(axis=0)) / 2 + means.var(axis=0)
        return means.mean(axis=0), np.sqrt(variance)


def held_out_predictions(
    rows: Sequence[Labelled], *, folds: int = 5, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's predicted mean and std from a model fit on the other folds: the model judged on
    designs it did not see, as the search uses it."""
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
    if np.ptp(predicted) == 0 or np.ptp(real) == 0:
        return 0.0
    return float(spearmanr(predicted, real).statistic)


def labelled_from_archive(
    archive: Archive, *, benchmark: str | None = None, unseen: Collection[str] = ()
) -> list[Labelled]:
    """Every complete search-split evaluation in the archive, on every benchmark, except those on
    `benchmark` that scored any of the `unseen` task ids (a run's holdout): another run's search
    items may be this run's holdout, and a prior fitted on them would leak it into the search."""
    rows = []
    descriptions: dict[str, str] = {}
    hidden = frozenset(unseen)
    for row in archive.leaderboard(limit=1_000_000):
        if row.benchmark == benchmark and not hidden.isdisjoint(row.task_ids):
            continue
        if row.benchmark not in descriptions:
            try:
                descriptions[row.benchmark] = get_benchmark(row.benchmark).description
            except BenchmarkError:  # archived by a plugin this process lacks: its name only
                descriptions[row.benchmark] = row.benchmark
        try:
            spec = AgentSpec.from_dict(row.spec)
        except ValueError:  # a component this version no longer has
            continue
        rows.append(
            Labelled(
                spec=spec,
                description=descriptions[row.benchmark],
                score=row.mean,
                tokens_per_task=(row.prompt_tokens + row.completion_tokens) / max(row.n_tasks, 1),
            )
        )
    return rows
