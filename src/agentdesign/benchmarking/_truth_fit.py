"""Fitting the truth benchmark's model (`_truth.py`) to recorded evaluations: from archives or
from a recorded table file, so that recalibrating on a new table is one command.

The main effects and item difficulties come from an L2-regularised logistic regression on the
per-item outcomes (item one-hots and design features), its penalty chosen by log loss on held-out
designs. With `n_draws`, the fit is repeated on bootstrap resamples of the designs, and a world
may draw its main effects from those refits instead of taking the one fit as the truth. The
residual spread of ability (pairs and per-combination effects) is matched by simulation, as is
the design x item effect: how much more designs disagree on which items are hard than item
difficulties and binomial noise alone make them.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import special
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.metrics import log_loss
from sklearn.model_selection import GroupKFold, KFold, cross_val_predict

from agentdesign.archive import Archive
from agentdesign.benchmarking._table import ReplayTable, load_tables
from agentdesign.benchmarking._truth import (
    FEATURES,
    WORLD_STREAM,
    Calibration,
    Costs,
    component_onehot,
    truth_features,
)
from agentdesign.components import SLOTS, AgentDesignError, AgentSpec
from agentdesign.evaluators import get_benchmark

__all__ = [
    "Record",
    "calibrate",
    "load_records",
    "records_from_archive",
    "records_from_table",
]

# Item one-hot columns are scaled up so the L2 penalty barely shrinks the item difficulties.
_ITEM_SCALE = 10.0
_PENALTIES = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
_ALPHAS = np.logspace(-2, 3, 11)
_MATCH_REPS = 400
# Simulated recordings per step when the design x item effect is matched, and the fewest designs
# that must have (and lack) a component for its item disagreement to count.
_ITEM_REPS = 200
_MIN_SIDE = 3


@dataclass(frozen=True)
class Record:
    """One recorded evaluation: a design's score and tokens on each item it was given."""

    spec: AgentSpec
    scores: Mapping[str, float]
    tokens: Mapping[str, int]


def load_records(
    paths: Sequence[Path], *, benchmark: str, model: str | None = None
) -> list[Record]:
    """The records of the archives (.sqlite, each opened from a temporary copy: opening an
    archive may migrate it, and recorded results must stay as they were committed) and replay
    table files (.json; `model` picks a table where one holds several) at `paths`."""
    records = []
    with tempfile.TemporaryDirectory() as scratch:
        for n, path in enumerate(paths):
            if path.suffix == ".json":
                tables = load_tables(path)
                chosen = [t for t in tables if model is None or t.model == model]
                if len(chosen) != 1:
                    models = ", ".join(t.model for t in tables)
                    raise AgentDesignError(f"{path} holds tables of {models}: name one model")
                records += records_from_table(chosen[0])
                continue
            if not path.is_file():
                raise AgentDesignError(f"no archive at {path}")
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


def records_from_table(table: ReplayTable) -> list[Record]:
    """Each design of a table as a record: its scores and tokens per item (an equal share of its
    total where the table kept only totals)."""
    return [
        Record(
            spec=design.spec,
            scores=dict(zip(table.task_ids, design.scores, strict=True)),
            tokens={
                t: round(n) for t, n in zip(table.task_ids, design.tokens_per_item(), strict=True)
            },
        )
        for design in table.designs
    ]


def calibrate(
    records: Sequence[Record],
    *,
    benchmark: str,
    interaction_share: float = 0.5,
    seed: int = 0,
    features: str = "linear",
    n_draws: int = 0,
) -> Calibration:
    """Fits the model to `records` of `benchmark`, all of one model (see `_truth.py`).

    `features` "extended" adds choice and boolean parameters and a square of each numeric one
    (non-monotone effects, where the records show them); `n_draws` bootstrap refits let worlds
    redraw their main effects (`TruthWorld(redraw=True)`).
    """
    if not 0.0 <= interaction_share <= 1.0:
        raise AgentDesignError(f"interaction_share must be in [0, 1], not {interaction_share}")
    if features not in FEATURES:
        raise AgentDesignError(f"features must be one of {', '.join(FEATURES)}, not {features}")
    models = {r.spec.model for r in records}
    if len(models) != 1:
        raise AgentDesignError(f"calibration needs records of one model, not {sorted(models)}")
    if len(records) < 10:
        raise AgentDesignError(
            f"calibration needs at least 10 recorded designs, not {len(records)}"
        )
    extended = features == "extended"
    items = sorted({t for r in records for t in r.scores})
    column = {t: i for i, t in enumerate(items)}
    x_designs = truth_features([r.spec for r in records], extended=extended)
    cells = [(d, column[t], s) for d, r in enumerate(records) for t, s in r.scores.items()]
    design = np.array([d for d, _, _ in cells])
    outcome = np.array([s for _, _, s in cells])
    x = np.hstack([np.eye(len(items))[[i for _, i, _ in cells]] * _ITEM_SCALE, x_designs[design]])
    folds = list(GroupKFold(n_splits=min(10, len(records))).split(x, outcome, design))
    fitted = {p: _cross_fit(x, outcome, folds, p) for p in _PENALTIES}
    penalty = min(fitted, key=lambda p: fitted[p][0])
    # Each design's ability as predicted by the fold that did not see it.
    ability = np.zeros(len(records))
    for (_, test), fold in zip(folds, fitted[penalty][1], strict=True):
        unseen = np.unique(design[test])
        ability[unseen] = x_designs[unseen] @ fold.coef_[0][len(items) :] + fold.intercept_[0]
    fit = _logistic(penalty).fit(x, outcome)
    difficulty = -fit.coef_[0][: len(items)] * _ITEM_SCALE
    effects = fit.coef_[0][len(items) :].copy()
    real_sd, residual_sd = _match_spread(records, ability, difficulty, column, seed)
    draws = _bootstrap(x, outcome, design, len(items), penalty, n_draws, seed)
    redrawn_sd = residual_sd
    if n_draws:
        shifted = draws[:, :1] - fit.intercept_[0] + (draws[:, 1:] - effects) @ x_designs.T
        _, redrawn_sd = _match_spread(records, ability + shifted, difficulty, column, seed)
    item_sd, disagreement = _item_interaction(
        records, ability, residual_sd, difficulty, column, seed
    )
    return Calibration(
        model=models.pop(),
        description=get_benchmark(benchmark).description,
        intercept=float(fit.intercept_[0]),
        effects=effects,
        difficulty_mean=float(difficulty.mean()),
        difficulty_sd=float(difficulty.std(ddof=1)),
        residual_sd=residual_sd,
        interaction_share=interaction_share,
        costs=_fit_costs(records, x_designs),
        facts={
            "designs": len(records),
            "items": len(items),
            "outcomes": len(outcome),
            "penalty": penalty,
            "held_out_log_loss": fitted[penalty][0],
            "items_only_log_loss": _cross_fit(x[:, : len(items)], outcome, folds, 1.0)[0],
            "main_effect_sd": float(np.std(ability)),
            "real_sd_of_means": real_sd,
            "item_interaction_sd": item_sd,
            "item_disagreement": disagreement[0],
            "item_disagreement_without": disagreement[1],
        },
        features=features,
        draws=draws,
        redrawn_residual_sd=redrawn_sd,
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


def _bootstrap(
    x: np.ndarray,
    outcome: np.ndarray,
    design: np.ndarray,
    n_items: int,
    penalty: float,
    n_draws: int,
    seed: int,
) -> np.ndarray:
    """The fit's intercept and design effects (after the `n_items` item columns of `x`) refit
    on `n_draws` resamples of the designs, one row each."""
    n_designs = int(design.max()) + 1
    rng = np.random.default_rng([seed, WORLD_STREAM, 0, 5])
    rows_of = [np.nonzero(design == d)[0] for d in range(n_designs)]
    draws = []
    for _ in range(n_draws):
        chosen = rng.integers(n_designs, size=n_designs)
        rows = np.concatenate([rows_of[d] for d in chosen])
        fit = _logistic(penalty).fit(x[rows], outcome[rows])
        draws.append(np.concatenate([fit.intercept_, fit.coef_[0][n_items:]]))
    return np.array(draws, dtype=float).reshape(n_draws, x.shape[1] - n_items + 1)


def _groups(records: Sequence[Record]) -> dict[tuple[str, ...], list[int]]:
    """The designs scored on the same items, by those items (groups of one left out)."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for d, record in enumerate(records):
        groups.setdefault(tuple(sorted(record.scores)), []).append(d)
    return {tasks: ds for tasks, ds in groups.items() if len(ds) > 1}


def _match_spread(
    records: Sequence[Record],
    ability: np.ndarray,
    difficulty: np.ndarray,
    column: Mapping[str, int],
    seed: int,
) -> tuple[float, float]:
    """The real spread of design means (pooled over designs scored on the same items), and the
    residual sd of ability that makes the simulated records spread as much.

    `ability` is one value per design, or one row per bootstrap refit (a simulated recording
    then takes its rows in turn). The simulation reuses its random numbers for every residual sd
    tried (common random numbers), so the spread grows smoothly with it and bisection finds the
    match."""
    rng = np.random.default_rng([seed, WORLD_STREAM])
    rows = ability if ability.ndim == 1 else ability[np.arange(_MATCH_REPS) % len(ability)]
    groups = _groups(records)
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
            logit = (rows[..., ds] + residual_sd * z)[:, :, None] - difficulty[cols][None, None, :]
            means = (u < special.expit(logit)).mean(axis=2)
            total += float(means.var(axis=1, ddof=1).mean()) * (len(ds) - 1)
        return math.sqrt(total / dof)

    target = math.sqrt(real / dof)
    return target, _bisect(simulated, target)


def _bisect(simulated: Callable[[float], float], target: float, high: float = 4.0) -> float:
    """The parameter in [0, high] at which the increasing `simulated` meets `target` (0 where it
    is above it already at 0)."""
    low = 0.0
    if simulated(low) >= target:
        return 0.0
    if simulated(high) < target:
        raise AgentDesignError("the recorded designs spread more than the model can reproduce")
    for _ in range(30):
        middle = (low + high) / 2
        low, high = (middle, high) if simulated(middle) < target else (low, middle)
    return (low + high) / 2


def _item_interaction(
    records: Sequence[Record],
    ability: np.ndarray,
    residual_sd: float,
    difficulty: np.ndarray,
    column: Mapping[str, int],
    seed: int,
) -> tuple[float, tuple[float, float]]:
    """The sd (logits) of the design x item effect that makes simulated records disagree on
    which items are hard as much as the real ones do, with the real disagreement and the one
    simulated without the effect.

    Disagreement, on the largest group of designs scored on the same items: for each component
    that at least a few designs have and a few lack, the variance over items of (mean score of
    the designs with it - of those without it), averaged over components. The effect is one per
    component and item, summed over a design's components (sd / sqrt(slots) each), so designs
    that share components find the same items hard; it is drawn afresh in each world."""
    groups = _groups(records)
    if not groups:
        return 0.0, (math.nan, math.nan)
    tasks, ds = max(groups.items(), key=lambda kv: len(kv[0]) * len(kv[1]))
    onehot = component_onehot([records[d].spec for d in ds])
    sides = onehot.sum(axis=0)
    masks = onehot[:, (sides >= _MIN_SIDE) & (len(ds) - sides >= _MIN_SIDE)].T.astype(bool)
    if not len(masks) or len(tasks) < 3:
        return 0.0, (math.nan, math.nan)

    def disagreement(y: np.ndarray) -> float:
        """y: (recordings, designs, items) of 0/1 scores."""
        return float(
            np.mean([(y[:, m].mean(1) - y[:, ~m].mean(1)).var(axis=1, ddof=1) for m in masks])
        )

    real = disagreement(np.array([[[records[d].scores[t] for t in tasks] for d in ds]]))
    rng = np.random.default_rng([seed, WORLD_STREAM, 0, 6])
    shape = (_ITEM_REPS, len(ds), len(tasks))
    z, u = rng.normal(size=shape[:2]), rng.random(shape)
    effects = rng.normal(size=(_ITEM_REPS, onehot.shape[1], len(tasks)))
    base = (ability[ds] + residual_sd * z)[:, :, None] - difficulty[[column[t] for t in tasks]]
    unit = np.einsum("dc,rci->rdi", onehot, effects) / math.sqrt(len(SLOTS))

    def simulated(sd: float) -> float:
        return disagreement((u < special.expit(base + sd * unit)).astype(float))

    without = simulated(0.0)
    return _bisect(simulated, real), (real, without)


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
