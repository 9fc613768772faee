"""Measures search strategies and the value model on a recorded table: real designs, real items.

    .venv/bin/python bench/strategies_table.py TABLE [--model M] [--seeds 50] [--search-items 30]
        [--evaluations 20] [--strategies shuffled random tpe mcts random+race tpe+race mcts+race]
        [--boot 1000] [--value-reps 100] [--items FIRST:LAST] [--prior TABLE [--prior-model M]]
        [--race-rule bounds|paired] [--race-alpha 0.1] [--race-first-stage 4] [--save FILE.json]
        [--quick]

TABLE is a replay table file (bench/replay_export.py; a cells file may hold several models: name one
with --model). Every strategy is replayed in the table's world (`TableWorld`): its designs are the
only ones, a proposal evaluates its nearest design not yet evaluated (the value-guided strategies
first screen their offspring among all designs of the space with the value model, as in the
engine), each evaluation scores the design's recorded outcomes on the run's search items
(--search-items drawn at random from the table's items per seed) and spends their recorded tokens,
and `+race` races it there as the live loop does (`agentdesign.search.racing`'s defaults) on the
table's real item correlations. `shuffled` is the table in a seeded random order: uniform sampling
without replacement, the no-information baseline of a finite table (`random` samples the space and
is mapped to the nearest design, which favours designs in sparse corners). `screened` (not run
unless named) is shuffled's first 5 designs, then the value model's own pick among the designs
left: it tells whether the model's ranking helps to choose among the table's designs at all,
without offspring or the mapping to the nearest design. Every run gets at least
--evaluations evaluations and the tokens uniform sampling spends in that many on its seed's search
items (at most twice as many evaluations, and never more than the table has). --items keeps only
the table's items FIRST to LAST (counted from 1, in the table's order), so that a setting chosen on
one part of the items (racing's rule, alpha and first stage: --race-*) is confirmed on another.

A run is judged by its reported design (its best fully scored design; equal scores: fewer tokens)
and that design's table accuracy: its mean over all the table's items. Printed, with 95% intervals
from a bootstrap that redraws the table's items (so the accuracies judged by) and the seeds
together, the same draws for every strategy (paired):
- each strategy's reported design's table accuracy after 5, 10 and 20 evaluations, and its paired
  difference from shuffled and random;
- tokens until the reported design is within 0.02 of the table's best (median; never: beyond the
  budget), and the share of seeds that got there;
- racing's saving at equal winner accuracy: 1 - the ratio of median tokens until the raced
  variant reports a design as good as the unraced one's at the end of its budget, to the unraced
  one's tokens to it;
- what each slot's component explains of the design means (adjusted R^2, one-way ANOVA);
- the value model's Spearman with the table accuracies of the designs it was not fit on, after 10
  and 30 labelled designs (labels: their means on 10 or 30 of the table's items, drawn at random),
  its 95% intervals' coverage of those designs' observed means, and the labels' own Spearman with
  the table accuracies (what a perfect model of the labels reaches); with its component-pair
  features and first-order (`ValueModel(interactions=False)`), and with --prior (another model's
  or benchmark's table, each design's mean a row) as the archive's prior, on the same draws;
- split-half reliability (Spearman-Brown) and the spread of design means at 10, 30 and 100 items
  (items drawn at random; the spread also less its binomial noise), and the Spearman of those
  means with the full table's.
It ends by saying where the table is too small for a figure to mean anything.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from _common import markdown_table
from threadpoolctl import threadpool_limits

from agentdesign.benchmarking import (
    ReplayTable,
    TableWorld,
    full_items,
    raced,
    split_half_reliability,
    truth_search,
)
from agentdesign.components import SLOTS, AgentDesignError, AgentSpec
from agentdesign.search import (
    STRATEGIES,
    Domain,
    History,
    Labelled,
    Proposal,
    Racing,
    SearchSpace,
    Strategy,
    ValueModel,
    make_strategy,
    rank_correlation,
)
from agentdesign.search.strategies import Evaluated

RACED = "+race"
SHUFFLED = "shuffled"
SCREENED = "screened"
CHECKPOINTS = (5, 10, 20)
NEAR_BEST = 0.02
LABELS = (10, 30)
LABEL_ITEMS = (10, 30)
ITEMS = (10, 30, 100)
Z95 = 1.959964


class Shuffled(Strategy):
    """The given designs in a seeded random order: uniform sampling without replacement."""

    def __init__(self, *, designs: Sequence[AgentSpec], space: SearchSpace, seed: int) -> None:
        super().__init__(space=space, seed=seed)
        order = np.random.default_rng([seed, 7]).permutation(len(designs))
        self._order = [designs[int(i)] for i in order]

    def suggest(self, history: History, rng: np.random.Generator) -> Proposal | None:
        for spec in self._order:
            if spec.spec_hash not in history.seen:
                return Proposal(spec=spec, operator="sample")
        return None


class Screened(Shuffled):
    """The value model's own pick among the table's designs: the first `n_initial` of shuffled's
    order, then the design not yet evaluated with the best optimistic bound (mean + `explore` *
    std, as the guided strategies screen). No offspring and no nearest-design mapping: whether the
    value model's ranking helps to choose among these designs at all."""

    n_initial = 5
    explore = 1.0

    def suggest(self, history: History, rng: np.random.Generator) -> Proposal | None:
        left = [spec for spec in self._order if spec.spec_hash not in history.seen]
        if len(history.seen) < self.n_initial or not left:
            return super().suggest(history, rng)
        model = ValueModel(seed=self.seed).fit(history.labelled())
        mean, std = model.predict(left, description=history.description)
        return Proposal(spec=left[int(np.argmax(mean + self.explore * std))], operator="screen")


# The strategies of the table alone, beside the product's.
OWN: dict[str, type[Shuffled]] = {SHUFFLED: Shuffled, SCREENED: Screened}


@dataclass(frozen=True)
class Trace:
    """One run on the table: after each evaluation, the table row of the design it would report
    (-1: none yet) and the tokens spent; and its token budget."""

    strategy: str
    seed: int
    reported: np.ndarray
    spent: np.ndarray
    budget: float
    stopped: int = 0  # designs racing stopped before their last search item

    def at(self, accuracy: np.ndarray, n: int) -> float:
        row = int(self.reported[min(n, len(self.reported)) - 1])
        return float(accuracy[row]) if row >= 0 else math.nan

    def final(self, accuracy: np.ndarray) -> float:
        return self.at(accuracy, len(self.reported))

    def tokens_to(self, accuracy: np.ndarray, target: float) -> float:
        """Tokens spent when the reported design first had at least `target` (inf: never within
        the budget, which every run spends)."""
        known = self.reported >= 0
        hits = np.nonzero(known & (accuracy[np.maximum(self.reported, 0)] >= target - 1e-12))[0]
        spent = float(self.spent[hits[0]]) if hits.size else math.inf
        return spent if spent <= self.budget else math.inf


def run_seed(
    table: ReplayTable, names: Sequence[str], seed: int, settings: Settings
) -> list[Trace]:
    """Every strategy on the table with the search items of `seed` (paired)."""
    with threadpool_limits(1):
        world = TableWorld(table, seed=seed, n_search=settings.search_items)
        rows = world.search_items
        per_evaluation = float(
            np.mean([sum(d.tokens_per_item()[i] for i in rows) for d in table.designs])
        )
        evaluations = min(settings.evaluations, len(table.designs))
        budget = per_evaluation * evaluations

        def stop(done: Sequence[Evaluated]) -> bool:
            spent = sum(e.tokens for e in done)
            return len(done) >= 2 * evaluations or (len(done) >= evaluations and spent >= budget)

        traces = []
        for name in names:
            base = name.removesuffix(RACED)
            designs = [d.spec for d in table.designs]
            strategy = (
                OWN[base](designs=designs, space=world.space, seed=seed)
                if base in OWN
                else make_strategy(base, space=world.space, seed=seed)
            )
            run = truth_search(
                world,
                strategy,
                name=name,
                stop=stop,
                schedule=raced(settings.racing) if name.endswith(RACED) else full_items,
            )
            reported = [world.row(h) if h is not None else -1 for h in run.reported()]
            traces.append(
                Trace(
                    name,
                    seed,
                    np.array(reported, dtype=int),
                    run.spent,
                    budget * (1 + 1e-9),
                    stopped=sum(not e.complete for e in run.evaluations),
                )
            )
        return traces


@dataclass(frozen=True)
class Settings:
    seeds: int
    search_items: int
    evaluations: int
    strategies: tuple[str, ...]
    boot: int
    value_reps: int
    racing: Racing


# -- the bootstrap -------------------------------------------------------------------------------


class Bootstrap:
    """Redraws of the table's items (so of every design's table accuracy) and resamples of the
    seeds, made once and shared by every figure, so that differences between strategies are
    paired. Draw 0 is the table itself with every seed."""

    def __init__(self, scores: np.ndarray, *, n_seeds: int, n_boot: int) -> None:
        rng = np.random.default_rng(0)
        n_items = scores.shape[1]
        counts = rng.multinomial(n_items, np.full(n_items, 1 / n_items), size=n_boot)
        self.accuracies = np.vstack([scores.mean(axis=1), counts @ scores.T / n_items])
        self._seeds = np.vstack([np.arange(n_seeds), rng.integers(n_seeds, size=(n_boot, n_seeds))])

    def values(self, fn: Callable[[np.ndarray], Sequence[float]]) -> np.ndarray:
        """`fn(accuracy)` (one value per seed) under every redraw of the items."""
        return np.array([fn(accuracy) for accuracy in self.accuracies], dtype=float)

    def estimate(
        self, stat: Callable[..., float], *values: np.ndarray
    ) -> tuple[float, float, float]:
        """`stat` of the per-seed values (each from `values`), on the table and its 95% interval."""
        draws = [stat(*(v[b][self._seeds[b]] for v in values)) for b in range(len(self._seeds))]
        # order statistics, so a bound may be inf (a median of seeds half of which never got there)
        known = np.sort([d for d in draws[1:] if not math.isnan(d)])
        if not len(known):
            return draws[0], math.nan, math.nan
        low, high = known[int(0.025 * (len(known) - 1))], known[int(0.975 * (len(known) - 1))]
        return draws[0], float(low), float(high)


def _cell(estimate: tuple[float, float, float], form: str = ".3f") -> str:
    point, low, high = estimate
    if math.isnan(point):
        return "-"
    return f"{point:{form}} [{low:{form}}, {high:{form}}]"


def _mean(v: np.ndarray) -> float:
    return float(np.nanmean(v)) if (~np.isnan(v)).any() else math.nan


def _median(v: np.ndarray) -> float:
    return float(np.median(v))


def _diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.nanmean(a - b))


def _saving(raced_tokens: np.ndarray, tokens: np.ndarray) -> float:
    base = _median(tokens)
    return 1 - _median(raced_tokens) / base if math.isfinite(base) and base > 0 else math.nan


# -- the table's own figures ---------------------------------------------------------------------


def item_counts(n_items: int) -> list[int]:
    """10, 30 and 100 items where the table has them, and all of its items."""
    return sorted({k for k in ITEMS if k < n_items} | {n_items})


def reliability(table: ReplayTable, reps: int) -> list[dict[str, str]]:
    """Split-half reliability and spread of the design means on random subsets of k items."""
    scores = np.array([d.scores for d in table.designs])
    full = scores.mean(axis=1)
    rng = np.random.default_rng(1)
    rows = []
    for k in item_counts(scores.shape[1]):
        draws = 1 if k == scores.shape[1] else reps
        found: dict[str, list[float]] = {"rel": [], "sd": [], "true": [], "rho": []}
        for rep in range(draws):
            items = [int(i) for i in rng.permutation(scores.shape[1])[:k]] if draws > 1 else []
            items = items or list(range(k))  # all of them, in the table's order
            means = scores[:, items].mean(axis=1)
            splits = 200 if draws == 1 else 50  # fewer per draw where many draws average
            found["rel"].append(
                split_half_reliability(table.subset(items), n_splits=splits, seed=rep)
                if k >= 2
                else math.nan
            )
            found["sd"].append(float(np.std(means, ddof=1)))
            noise = float(np.mean(means * (1 - means))) / max(k - 1, 1)
            found["true"].append(math.sqrt(max(0.0, float(np.var(means, ddof=1)) - noise)))
            found["rho"].append(rank_correlation(means, full))
        rows.append(
            {
                "items": f"{k}" + (" (all)" if k == scores.shape[1] else f" ({draws} draws)"),
                "split-half reliability": f"{np.mean(found['rel']):.3f}",
                "sd of design means": f"{np.mean(found['sd']):.3f}",
                "sd less binomial noise": f"{np.mean(found['true']):.3f}",
                "Spearman with the full table": f"{np.mean(found['rho']):.3f}",
            }
        )
    return rows


def components(table: ReplayTable) -> list[dict[str, str]]:
    """What each slot's choice explains of the design means, one slot at a time: the adjusted R^2
    of the means on the slot's component and a one-way ANOVA's p-value, with the slot's best and
    worst component (its designs' mean accuracy and how many designs it has)."""
    from scipy.stats import f_oneway

    means = np.array([d.mean for d in table.designs])
    total = float(np.sum((means - means.mean()) ** 2))
    rows = []
    for slot in SLOTS:
        groups: dict[str, list[float]] = {}
        for design, mean in zip(table.designs, means, strict=True):
            groups.setdefault(design.spec[slot].name, []).append(float(mean))
        if len(groups) < 2 or total == 0:
            continue
        within = sum(float(np.sum((np.array(g) - np.mean(g)) ** 2)) for g in groups.values())
        n, g = len(means), len(groups)
        adjusted = 1 - (within / total) * (n - 1) / max(n - g, 1)
        ordered = sorted(groups.items(), key=lambda kv: -float(np.mean(kv[1])))
        p = float(f_oneway(*groups.values()).pvalue) if n > g else math.nan
        rows.append(
            {
                "slot": slot,
                "components": str(g),
                "adjusted R^2": f"{adjusted:+.2f}",
                "ANOVA p": f"{p:.3f}",
                "best (mean, designs)": f"{ordered[0][0]} ({np.mean(ordered[0][1]):.3f}, "
                f"{len(ordered[0][1])})",
                "worst (mean, designs)": f"{ordered[-1][0]} ({np.mean(ordered[-1][1]):.3f}, "
                f"{len(ordered[-1][1])})",
            }
        )
    return rows


# The value model's table: every row has these columns, a row without a measurement too.
VALUE_COLUMNS = (
    "value model",
    "labelled designs",
    "label items",
    "held-out designs",
    "Spearman with table accuracy",
    "95% coverage of observed means",
    "labels' own Spearman",
)


def value_model(
    table: ReplayTable, reps: int, prior: ReplayTable | None = None
) -> list[dict[str, str]]:
    """The value model on designs it was not fit on, after labelling some with k-item means: with
    its component-pair features, first-order, and (given `prior`, another model's or benchmark's
    table) with the prior's designs as the archive's prior, all on the same draws, each against
    the first (paired)."""
    scores = np.array([d.scores for d in table.designs])
    full = scores.mean(axis=1)
    specs = [d.spec for d in table.designs]
    n_designs, n_items = scores.shape
    domain = Domain(description=table.description, model=table.model)
    # each variant: how to make its model (by draw) and the rows it gets beside the labels
    variants: dict[str, tuple[Callable[[int], ValueModel], list[Labelled]]] = {
        "with pairs": (lambda rep: ValueModel(seed=rep), []),
        "first-order": (lambda rep: ValueModel(seed=rep, interactions=False), []),
    }
    if prior is not None:
        variants[f"with pairs, {prior_name(prior)}"] = (
            lambda rep: ValueModel(seed=rep, domain=domain),
            prior_rows(prior),
        )
    rows = []

    def cell(values: Sequence[float], sign: str = "") -> str:
        low, high = np.nanpercentile(values, [2.5, 97.5])
        return f"{np.nanmean(values):{sign}.3f} ({low:{sign}.2f} to {high:{sign}.2f})"

    for n_labels in LABELS:
        if n_designs - n_labels < 5:
            row = dict.fromkeys(VALUE_COLUMNS, "")
            row["labelled designs"] = str(n_labels)
            row["held-out designs"] = str(max(n_designs - n_labels, 0))
            row["Spearman with table accuracy"] = "too few designs left out"
            rows.append(row)
            continue
        for k in sorted({min(k, n_items) for k in LABEL_ITEMS}):
            rhos: dict[str, np.ndarray] = {}
            for name, (make, extra) in variants.items():
                rho, coverage, ceiling = [], [], []
                rng = np.random.default_rng([n_labels, k])  # the same draws for every variant
                for rep in range(reps):
                    order = rng.permutation(n_designs)
                    labelled, held = order[:n_labels], order[n_labels:]
                    observed = scores[:, rng.permutation(n_items)[:k]].mean(axis=1)
                    own = [
                        Labelled(spec=specs[i], description=table.description, score=observed[i])
                        for i in labelled
                    ]
                    model = make(rep).fit(own + extra)
                    mean, std = model.predict(
                        [specs[i] for i in held], description=table.description
                    )
                    rho.append(rank_correlation(mean, full[held]))
                    coverage.append(float(np.mean(np.abs(observed[held] - mean) <= Z95 * std)))
                    ceiling.append(rank_correlation(observed[held], full[held]))
                rhos[name] = np.array(rho)
                values = (name, str(n_labels), str(k), str(n_designs - n_labels))
                values += (cell(rho), cell(coverage), cell(ceiling))
                rows.append(dict(zip(VALUE_COLUMNS, values, strict=True)))
            first, *others = rhos
            for name in others:
                row = dict.fromkeys(VALUE_COLUMNS, "")
                row["value model"] = f"{name} - {first}"
                row["labelled designs"], row["label items"] = str(n_labels), str(k)
                row["Spearman with table accuracy"] = cell(list(rhos[name] - rhos[first]), "+")
                rows.append(row)
    return rows


def expected_best(means: np.ndarray, n: int) -> float:
    """The mean best of n designs drawn uniformly without replacement from the table."""
    ordered = np.sort(means)
    total = math.comb(len(ordered), n)
    return float(
        sum(ordered[j - 1] * math.comb(j - 1, n - 1) for j in range(n, len(ordered) + 1)) / total
    )


# -- report --------------------------------------------------------------------------------------


def report(table: ReplayTable, traces: list[Trace], settings: Settings) -> None:
    names = list(settings.strategies)
    by = {
        name: sorted((t for t in traces if t.strategy == name), key=lambda t: t.seed)
        for name in names
    }
    scores = np.array([d.scores for d in table.designs])
    boot = Bootstrap(scores, n_seeds=settings.seeds, n_boot=settings.boot)
    n_designs = len(table.designs)
    evaluations = min(settings.evaluations, n_designs)
    checkpoints = [n for n in CHECKPOINTS if n <= evaluations]

    def at(name: str, n: int) -> np.ndarray:
        return boot.values(lambda acc: [t.at(acc, n) for t in by[name]])

    print(
        f"\n{settings.seeds} seeds, {settings.search_items} search items each, drawn from the "
        f"table's {scores.shape[1]}; at least {evaluations} evaluations per run; intervals: "
        f"{settings.boot} bootstrap draws of items and seeds, paired across strategies\n"
    )
    print("table accuracy of the reported design (mean [95% interval]):\n")
    rows = []
    for name in names:
        row = {"strategy": name}
        row.update({f"after {n}": _cell(boot.estimate(_mean, at(name, n))) for n in checkpoints})
        rows.append(row)
    print(markdown_table(rows))
    for baseline in (SHUFFLED, "random"):
        if baseline not in names:
            continue
        print(f"\npaired difference from {baseline}:\n")
        rows = []
        for name in names:
            if name == baseline:
                continue
            row = {"strategy": name}
            for n in checkpoints:
                row[f"after {n}"] = _cell(
                    boot.estimate(_diff, at(name, n), at(baseline, n)), "+.3f"
                )
            rows.append(row)
        print(markdown_table(rows))

    def to_best(name: str) -> np.ndarray:
        return boot.values(lambda acc: [t.tokens_to(acc, acc.max() - NEAR_BEST) for t in by[name]])

    print(
        f"\ntokens until the reported design is within {NEAR_BEST} of the table's best (median "
        "[95% interval]; never: not within the budget), and the share of seeds that got there:\n"
    )
    rows = []
    for name in names:
        tokens = to_best(name)
        reached = np.isfinite(tokens).astype(float)
        row = {"strategy": name, "median tokens": _tokens(boot.estimate(_median, tokens))}
        row["share reached"] = _cell(boot.estimate(_mean, reached), ".2f")
        for baseline in (SHUFFLED, "random"):
            if baseline not in names:
                continue
            if baseline == name:
                row[f"/ {baseline}"] = "1"
            else:
                ratio = boot.estimate(
                    lambda a, b: _median(a) / _median(b) if math.isfinite(_median(b)) else math.nan,
                    tokens,
                    to_best(baseline),
                )
                row[f"/ {baseline}"] = _cell(ratio, ".2f")
        rows.append(row)
    print(markdown_table(rows))
    rows = [
        {"strategy": name, **racing_figures(by[name], by[name + RACED], boot)}
        for name in names
        if not name.endswith(RACED) and name + RACED in names
    ]
    if rows:
        print(
            "\nracing: tokens until the raced variant reports a design as good as the unraced "
            "one's at the end of its budget, against the unraced one's tokens to it:\n"
        )
        print(markdown_table(rows))
    _limits(table, by, boot, checkpoints, settings)


def racing_figures(plain: list[Trace], race: list[Trace], boot: Bootstrap) -> dict[str, str]:
    """Racing's saving at equal winner accuracy, how often the raced runs matched the unraced
    ones' final design, how many designs racing stopped, and the paired difference of the final
    reported designs' table accuracies (raced - unraced, on the same budget): runs by seed."""
    raced_tokens = boot.values(
        lambda acc: [r.tokens_to(acc, p.final(acc)) for p, r in zip(plain, race, strict=True)]
    )
    plain_tokens = boot.values(lambda acc: [p.tokens_to(acc, p.final(acc)) for p in plain])
    final = [boot.values(lambda acc, ts=ts: [t.final(acc) for t in ts]) for ts in (race, plain)]
    return {
        "racing's token saving at equal winner accuracy": _cell(
            boot.estimate(_saving, raced_tokens, plain_tokens), "+.0%"
        ),
        "raced runs that matched": _cell(
            boot.estimate(_mean, np.isfinite(raced_tokens).astype(float)), ".2f"
        ),
        "designs stopped per run": f"{np.mean([t.stopped for t in race]):.1f} of "
        f"{np.mean([len(t.reported) for t in race]):.1f}",
        "final accuracy, raced - unraced": _cell(boot.estimate(_diff, *final), "+.3f"),
    }


def _tokens(estimate: tuple[float, float, float]) -> str:
    point, low, high = estimate
    if not math.isfinite(point):
        return "never in half the seeds"
    return f"{point / 1e3:.1f}k [{low / 1e3:.1f}, {high / 1e3:.1f}]"


def _limits(
    table: ReplayTable,
    by: dict[str, list[Trace]],
    boot: Bootstrap,
    checkpoints: list[int],
    settings: Settings,
) -> None:
    """Where this table is too small for the figures above to say much."""
    means = boot.accuracies[0]
    n_designs, n_items = len(means), len(table.task_ids)
    near = int(np.sum(means >= means.max() - NEAR_BEST))
    print(f"\nwhat {n_designs} designs can say:")
    print(
        f"- designs within {NEAR_BEST} of the best: {near} of {n_designs}; uniform sampling "
        f"finds one after {(n_designs + 1) / (near + 1):.1f} evaluations on average"
    )
    reliability = split_half_reliability(table)
    if reliability < 0.8:
        print(
            f"- the table ranks its own designs with a split-half reliability of "
            f"{reliability:.2f} (below 0.8): which design is its best is itself uncertain, "
            "and the intervals above carry that"
        )
    if settings.search_items == n_items:
        print(
            f"- the search items are all {n_items} of the table's: a run is judged on the very "
            "scores it searched on, so its reported accuracy is optimistic"
        )
    for n in checkpoints:
        gap = means.max() - expected_best(means, n)
        verdict = (
            "too little room for a strategy to show anything"
            if gap < NEAR_BEST or n / n_designs >= 0.5
            else "room for a strategy to show its worth"
        )
        print(
            f"- after {n} evaluations uniform sampling has seen {n / n_designs:.0%} of the table "
            f"and its best is on average {gap:.3f} below the table's best: {verdict}"
        )
    if SHUFFLED in by:
        for name, traces in by.items():
            if name == SHUFFLED:
                continue
            unresolved = []
            for n in checkpoints:
                values = [
                    boot.values(lambda acc, n=n, ts=ts: [t.at(acc, n) for t in ts])
                    for ts in (traces, by[SHUFFLED])
                ]
                _, low, high = boot.estimate(_diff, *values)
                if low <= 0 <= high:
                    unresolved.append(str(n))
            if unresolved:
                print(
                    f"- {name} and shuffled are indistinguishable after {', '.join(unresolved)} "
                    "evaluations (the paired interval holds 0)"
                )
    print(
        "- every strategy chooses among these designs only: what it would find in the whole "
        "space, a table of this size cannot say"
    )


def item_range(text: str, n_items: int) -> list[int]:
    """The table's positions of items FIRST to LAST (counted from 1, both included)."""
    first, _, last = text.partition(":")
    try:
        low, high = int(first), int(last)
    except ValueError:
        low, high = 0, -1
    if not 1 <= low < high <= n_items:
        raise AgentDesignError(
            f"--items takes FIRST:LAST with 1 <= FIRST < LAST <= {n_items}, got {text!r}"
        )
    return list(range(low - 1, high))


def add_table_file_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments every table bench takes: the table file, its model and its items."""
    parser.add_argument("table", type=Path)
    parser.add_argument("--model", help="the table's model, where the file holds several")
    parser.add_argument("--items", metavar="FIRST:LAST", help="only these of the table's items")


def add_table_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments the search benches share: the table, its items, and the runs' size."""
    add_table_file_arguments(parser)
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--search-items", type=int, help="default: 30, or the table's items")
    parser.add_argument("--evaluations", type=int, default=20)
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap draws")


def load_table(args: argparse.Namespace) -> ReplayTable:
    """The table file's table (of --model) on its --items; bad input ends the script with one
    error line."""
    try:
        table = ReplayTable.load(args.table, model=args.model)
        if args.items:
            table = table.subset(item_range(args.items, len(table.task_ids)))
    except AgentDesignError as exc:
        sys.exit(f"error: {exc}")
    return table


def read_table(args: argparse.Namespace) -> tuple[ReplayTable, Settings]:
    """The table on its --items, and the runs' settings (no value model draws, racing's defaults:
    a script replaces them); bad input ends the script with one error line."""
    table = load_table(args)
    n_items = len(table.task_ids)
    search_items = args.search_items or min(30, n_items)
    if not 2 <= search_items <= n_items or min(args.seeds, args.evaluations, args.boot) < 1:
        sys.exit(
            f"error: need 2 <= --search-items <= {n_items}, and --seeds, --evaluations, --boot >= 1"
        )
    settings = Settings(
        seeds=args.seeds,
        search_items=search_items,
        evaluations=args.evaluations,
        strategies=tuple(args.strategies),
        boot=args.boot,
        value_reps=0,
        racing=Racing(),
    )
    return table, settings


def add_prior_arguments(parser: argparse.ArgumentParser) -> None:
    """--prior: another model's or benchmark's table, its designs the value model's prior."""
    parser.add_argument("--prior", type=Path, help="another model's or benchmark's table")
    parser.add_argument("--prior-model", help="the prior table's model, where its file has several")


def load_prior(args: argparse.Namespace, table: ReplayTable) -> ReplayTable | None:
    """The --prior table, if any: another model's or benchmark's than `table` (the same one would
    be the labels again); bad input ends the script with one error line."""
    if not args.prior:
        return None
    try:
        prior = ReplayTable.load(args.prior, model=args.prior_model)
    except AgentDesignError as exc:
        sys.exit(f"error: {exc}")
    if (prior.model, prior.benchmark) == (table.model, table.benchmark):
        sys.exit(
            f"error: --prior holds {table.model} on {table.benchmark}, as the table does: a prior "
            "is another model's or benchmark's table"
        )
    return prior


def prior_rows(prior: ReplayTable) -> list[Labelled]:
    """The prior table's designs as labelled rows (each design's mean), described as its
    benchmark."""
    return [
        Labelled(spec=d.spec, description=prior.description, score=d.mean) for d in prior.designs
    ]


def prior_name(prior: ReplayTable) -> str:
    """How reports name a value model fit with `prior`."""
    return f"prior {prior.benchmark} on {prior.model}"


def heading(args: argparse.Namespace, table: ReplayTable) -> str:
    """What was read: the file, model, designs, items and benchmark (and whether it is made up)."""
    return (
        f"{args.table.name}: {table.model}, {len(table.designs)} designs x {len(table.task_ids)} "
        f"items ({args.items or 'all'}) of {table.benchmark}"
        f"{' (SYNTHETIC: made-up scores)' if table.synthetic else ''}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_table_arguments(parser)
    parser.add_argument(
        "--strategies",
        nargs="+",
        default=[SHUFFLED, "random", "tpe", "mcts", "random+race", "tpe+race", "mcts+race"],
    )
    parser.add_argument("--value-reps", type=int, default=100, help="value model draws (0: none)")
    add_prior_arguments(parser)
    parser.add_argument("--race-rule", default=Racing.rule, help="racing's rule (+race)")
    parser.add_argument("--race-alpha", type=float, default=Racing.alpha)
    parser.add_argument("--race-first-stage", type=int, default=Racing.first_stage)
    parser.add_argument("--save", type=Path, help="write every run's trace to this JSON")
    parser.add_argument("--quick", action="store_true", help="CI size: 3 seeds, 10 evaluations")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.evaluations, args.boot, args.value_reps = 3, 10, 200, 10
    table, settings = read_table(args)
    try:
        racing = Racing(
            alpha=args.race_alpha, first_stage=args.race_first_stage, rule=args.race_rule
        )
    except AgentDesignError as exc:
        sys.exit(f"error: {exc}")
    prior = load_prior(args, table)
    unknown = [s for s in args.strategies if s.removesuffix(RACED) not in (*STRATEGIES, *OWN)]
    if unknown:
        sys.exit(f"error: unknown strategies {', '.join(unknown)}")
    if args.value_reps < 0:
        sys.exit("error: need --value-reps >= 0")
    settings = replace(settings, value_reps=args.value_reps, racing=racing)
    started = time.perf_counter()
    means = np.array([d.mean for d in table.designs])
    print(
        f"{heading(args, table)}; design means {means.min():.2f}-{means.max():.2f} (sd "
        f"{means.std(ddof=1):.3f}); settings: {settings}\n"
    )
    with threadpool_limits(1):
        print("the table's own reliability (items drawn at random):\n")
        print(markdown_table(reliability(table, max(args.value_reps, 20))))
        print("\nwhat each slot's component explains of the design means (one slot at a time):\n")
        explained = components(table)
        print(markdown_table(explained) if explained else "(every slot has one component)")
        if args.value_reps:  # 0 skips it
            print("\nthe value model on designs it was not fit on (mean (middle 95% of draws)):\n")
            print(markdown_table(value_model(table, args.value_reps, prior)))
        traces = [
            trace
            for seed in range(settings.seeds)
            for trace in run_seed(table, settings.strategies, seed, settings)
        ]
    report(table, traces, settings)
    if args.save:
        args.save.write_text(
            json.dumps(
                [
                    {**asdict(t), "reported": t.reported.tolist(), "spent": t.spent.tolist()}
                    for t in traces
                ]
            )
            + "\n"
        )
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (usage.ru_utime + usage.ru_stime) / 60
    print(f"\n{time.perf_counter() - started:.0f} s wall, {cpu:.1f} CPU minutes")


if __name__ == "__main__":
    main()
