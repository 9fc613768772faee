"""How well learners rank a recorded table's designs from their features alone, each design
predicted with every other design labelled (leave one design out): the most feature-based
screening can do on the table, for the value model and for other learners.

    .venv/bin/python bench/value_ceiling.py TABLE [--model M] [--items FIRST:LAST]
        [--label-items 10 30] [--draws 20] [--boot 1000] [--prior TABLE [--prior-model M]]

A design's label is its mean on k of the table's items (the same k for every design in a draw,
as a run labels on its search items; every item for k = all), its truth its mean on all of them.
Each learner predicts each design from the others' labels; its Spearman with the truths is taken
per draw and averaged over draws. The interval comes from one bootstrap of the designs (the
same redraws for every learner, so "- value model" rows are paired): a table of 40 designs says
little about the next 40. "measured" is the labels' own Spearman with the truths: a design
measured on k items rather than predicted.

The learners: the value model as the product ships it (component pairs, `ValueModel()`), its
first-order form (`interactions=False`), a pairwise ranker (logistic regression on the feature
differences of every pair of labelled designs, which of the two scored higher on the same items:
the relative advantages RAAS learns from, C = 1) and a Gaussian process (an RBF kernel on the
first-order features, a constant and a white-noise term, fitted by marginal likelihood). With
--prior (another model's or benchmark's table), also the value model with that table's designs
as its prior, as an archive holding them would fit it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np
from _common import markdown_table
from strategies_table import (
    add_prior_arguments,
    add_table_file_arguments,
    heading,
    load_prior,
    load_table,
    prior_name,
    prior_rows,
)

from agentdesign.benchmarking import ReplayTable
from agentdesign.components import AgentSpec
from agentdesign.search.valuemodel import Domain, Labelled, ValueModel, design_features

# A learner: (specs, features, labels of the labelled designs, index of the one to predict) -> score
Learner = Callable[[Sequence[AgentSpec], np.ndarray, np.ndarray, np.ndarray, int], float]


def _value_model(
    *, interactions: bool = True, domain: Domain | None = None, prior: Sequence[Labelled] = ()
) -> Learner:
    """The value model fit on the labelled designs (described as `domain`'s benchmark, if any)
    and the `prior` rows, which it weighs by how like `domain` they are."""
    description = domain.description if domain is not None else ""

    def predict(
        specs: Sequence[AgentSpec], _: np.ndarray, y: np.ndarray, train: np.ndarray, i: int
    ) -> float:
        own = [Labelled(spec=specs[j], description=description, score=float(y[j])) for j in train]
        model = ValueModel(seed=0, interactions=interactions, domain=domain).fit([*own, *prior])
        return float(model.predict([specs[i]], description=description)[0][0])

    return predict


def _pairwise(
    _: Sequence[AgentSpec], x: np.ndarray, y: np.ndarray, train: np.ndarray, i: int
) -> float:
    from sklearn.linear_model import LogisticRegression

    first, second = np.triu_indices(len(train), k=1)
    a, b = train[first], train[second]
    keep = y[a] != y[b]
    diffs = x[a[keep]] - x[b[keep]]
    won = (y[a[keep]] > y[b[keep]]).astype(int)
    if len(set(won)) < 2:  # one order only: add its mirror so both classes exist
        diffs, won = np.vstack([diffs, -diffs]), np.concatenate([won, 1 - won])
    model = LogisticRegression(C=1.0, fit_intercept=False, max_iter=2000).fit(diffs, won)
    return float(x[i] @ model.coef_[0])


def _gaussian_process(
    _: Sequence[AgentSpec], x: np.ndarray, y: np.ndarray, train: np.ndarray, i: int
) -> float:
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    kernel = ConstantKernel() * RBF(length_scale=3.0) + WhiteKernel()
    model = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0)
    return float(model.fit(x[train], y[train]).predict(x[[i]])[0])


LEARNERS: dict[str, Learner] = {
    "value model": _value_model(),
    "value model, first-order": _value_model(interactions=False),
    "pairwise ranks": _pairwise,
    "Gaussian process": _gaussian_process,
}


def _ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis (ties share their mean rank), as Spearman's rho uses."""
    from scipy.stats import rankdata

    ranked: np.ndarray = rankdata(values, axis=-1)
    return ranked


def spearman_rows(predicted: np.ndarray, truth: np.ndarray, boot: np.ndarray) -> np.ndarray:
    """Spearman's rho of each draw's predictions (rows of `predicted`) with `truth`, on the table
    (column 0) and on each bootstrap redraw of the designs (`boot`'s rows, one per column after);
    0 where a side is constant."""
    samples = np.vstack([np.arange(len(truth)), boot])
    p = _ranks(predicted[:, samples])  # draws x samples x designs
    t = _ranks(truth[samples])[None, :, :]
    p, t = p - p.mean(axis=-1, keepdims=True), t - t.mean(axis=-1, keepdims=True)
    norm = np.sqrt((p**2).sum(axis=-1) * (t**2).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(norm > 0, (p * t).sum(axis=-1) / norm, 0.0)
    return rho


def measure(
    table: ReplayTable,
    label_items: Sequence[int],
    draws: int,
    n_boot: int,
    prior: ReplayTable | None = None,
) -> list[dict[str, str]]:
    """One row per label size and learner (and each learner's paired difference from the value
    model): Spearman on the table's designs with its bootstrap interval."""
    learners = dict(LEARNERS)
    if prior is not None:
        learners[f"value model, {prior_name(prior)}"] = _value_model(
            domain=Domain(description=table.description, model=table.model),
            prior=prior_rows(prior),
        )
    scores = np.array([d.scores for d in table.designs])
    truth = scores.mean(axis=1)
    specs = [d.spec for d in table.designs]
    x = design_features(specs, table.description, interactions=False)
    n_designs, n_items = scores.shape
    boot = np.random.default_rng(1).integers(n_designs, size=(n_boot, n_designs))
    rows = []
    for k in label_items:
        rng = np.random.default_rng(k)
        labels = np.array(
            [
                scores[:, rng.permutation(n_items)[:k]].mean(axis=1)
                for _ in range(draws if k < n_items else 1)
            ]
        )
        rhos = {"measured": spearman_rows(labels, truth, boot).mean(axis=0)}
        for name, learner in learners.items():
            predicted = np.array(
                [
                    [
                        learner(specs, x, y, np.delete(np.arange(n_designs), i), i)
                        for i in range(n_designs)
                    ]
                    for y in labels
                ]
            )
            rhos[name] = spearman_rows(predicted, truth, boot).mean(axis=0)
        base = rhos["value model"]
        for name, rho in rhos.items():
            low, high = np.percentile(rho[1:], [2.5, 97.5])
            rows.append(
                {
                    "label items": "all" if k >= n_items else str(k),
                    "learner": name,
                    "Spearman with the table's means": f"{rho[0]:.3f} [{low:.2f}, {high:.2f}]",
                }
            )
            if name not in ("measured", "value model"):
                diff = rho - base
                low, high = np.percentile(diff[1:], [2.5, 97.5])
                cell = f"{diff[0]:+.3f} [{low:+.2f}, {high:+.2f}]"
                rows.append(
                    {
                        "label items": rows[-1]["label items"],
                        "learner": f"{name} - value model",
                        "Spearman with the table's means": cell,
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_table_file_arguments(parser)
    parser.add_argument("--label-items", type=int, nargs="+", default=[10, 30])
    parser.add_argument("--draws", type=int, default=20, help="item draws per label size")
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap redraws of designs")
    add_prior_arguments(parser)
    args = parser.parse_args()
    table = load_table(args)
    prior = load_prior(args, table)
    n_items = len(table.task_ids)
    if min(args.draws, args.boot) < 1 or not all(k >= 1 for k in args.label_items):
        sys.exit("error: need --draws, --boot and every --label-items at least 1")
    if len(table.designs) < 5:
        sys.exit(f"error: the table has {len(table.designs)} designs; leaving one out needs 5")
    label_items = sorted({min(k, n_items) for k in args.label_items} | {n_items})
    started = time.perf_counter()
    print(
        f"{heading(args, table)}; each design predicted from the other "
        f"{len(table.designs) - 1}; {args.draws} item draws per label size; intervals: "
        f"{args.boot} bootstrap redraws of the designs\n"
    )
    print(markdown_table(measure(table, label_items, args.draws, args.boot, prior)))
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
