"""Compares search strategies where the truth is known: semi-synthetic worlds calibrated on the
recorded GSM8K evaluations, every design's true accuracy known.

    .venv/bin/python bench/strategies_truth.py [--seeds 200] [--designs 2000] [--items 500]
        [--search-items 30] [--evaluations 80] [--strategies random tpe mcts mcts+race ...]
        [--value-seeds 50] [--interaction-share 0.5] [--workers 1] [--save FILE.json] [--quick]

Calibration (the model is in agentdesign/search/_truth.py). The fit uses every recorded GSM8K
evaluation of the embedded Qwen2.5-Coder-1.5B in bench/results: replay.sqlite (60 designs of the
full space x 10 items, the table bench/results/replay_gsm8k.json was exported from) and
workflows.sqlite (the 7 workflows with cot x 20 items, a superset of the replay's 10): 67 designs,
20 items, 740 per-item outcomes, and their per-task tokens. benchmarks.sqlite holds one design per
benchmark, so it says nothing about how designs differ and is not used. A Rasch model, ability =
intercept + component and parameter effects (L2-regularised logistic regression with item
difficulties, the penalty chosen by log loss on held-out designs) + pairwise interactions + one
effect per combination of components; the last two are drawn per world with a total variance
that makes the recorded designs, simulated on their own items, spread as much as the real ones
(sd of design means), `--interaction-share` of it on the pairs (the records cannot split it).
Item difficulties are drawn from the fitted ones' normal; token costs are multiplicative per
component and parameter (ridge regression on log tokens per item) with residual, item and
design x item noise of the recorded spread. The printout checks the fit: the 60 replay designs
simulated on 10 items drawn from each world must spread as much as the real table (sd of design
means) and be as reliable (split-half reliability, `split_half_reliability`).

Each seed is one world: hundreds of items (`--items`), `--search-items` of them drawn as the
run's search items; every strategy searches the same world (paired), through the replay's
ask-and-tell loop (`agentdesign.search._replay.drive`), each design evaluated on every search
item with a Bernoulli outcome per item (fixed per world, design and item). Every run gets the
same token budget, T<--evaluations> (what random search spends on average in that many
evaluations), and at least `--evaluations` evaluations (at most twice as many): a strategy that
spends less per evaluation, as a racing one does, evaluates more designs with the same tokens.
`shuffled` is not run: it existed because a finite table maps proposals to its designs; here
every proposal is evaluated as proposed, so `random` is the no-information baseline.

Printed, over the seeds, means with 95% bootstrap intervals (over seeds; differences paired by
seed): the true accuracy of the design each strategy reports (its best observed design; equal
scores: fewer tokens) after 10, 20, 40 and 80 evaluations and at token budgets T10, T20, T40 and
T80 (the tokens random search spends on average in so many evaluations); the tokens until the
reported design is within 0.02 of the space's best true accuracy, and until it is in the space's
top 1%, within the largest budget for every strategy (medians, and their paired ratios to random
and tpe), and the share of seeds that got there (with its paired difference from random and tpe,
which still compares where the medians are censored); the tokens saved on the way to the top 1%
by screening (a strategy's `-unscreened` variant screens one candidate, so the value model picks
nothing) and by racing (its `+race` variant races its designs with the live loop's defaults,
`search/_racing.py`, docs/racing.md: after 4, 8 and 16 of 30 items, the design's upper
confidence bound against the incumbent's lower bound, the alpha spent over the stages; a design
stopped early counts as an evaluation, spends its items' tokens and is never reported); and the
value model's Spearman correlation with the true accuracies of `--designs` random designs after
10, 30 and 100 labelled random designs (labels: their observed search-item scores), over
`--value-seeds` worlds, the share of those designs' observed search-item scores inside its 95%
intervals, and the time it takes to predict 100 designs.

Read the value model's figures knowing the truth's form: additive effects and pairwise
interactions are what its ridge member models (the per-combination effects are not). Two rows say
what is reachable at all: the same model fit on the labelled designs' true accuracies (no label
noise), and the ceilings, the Spearman of the truth's additive part (and additive part plus
pairwise interactions), known exactly, with the true accuracies.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from _common import markdown_table
from threadpoolctl import threadpool_limits

from agentdesign.components import AgentDesignError, AgentSpec
from agentdesign.search import (
    STRATEGIES,
    GuidedStrategy,
    Labelled,
    Racing,
    ReplayTable,
    SearchSpace,
    Strategy,
    ValueModel,
    make_strategy,
    rank_correlation,
    split_half_reliability,
    supports_refinement,
)
from agentdesign.search._replay import Evaluated
from agentdesign.search._truth import Calibration, TruthWorld, calibrate, load_records
from agentdesign.search._truth_search import TruthRun, full_items, raced, truth_search

RESULTS = Path(__file__).parent / "results"
RECORDED = (RESULTS / "replay.sqlite", RESULTS / "workflows.sqlite")
REPLAY_TABLE = RESULTS / "replay_gsm8k.json"
CHECKPOINTS = (10, 20, 40, 80)
LABELS = (10, 30, 100)
# What a model that knew part of the truth exactly would reach: its additive effects alone, or
# with the pairwise interactions (the per-combination effects stay unknown to any model).
CEILINGS = {"additive effects": False, "additive effects + pairwise interactions": True}
NEAR_BEST = 0.02
TOP = 0.01
CHECK_WORLDS = 100
Z95 = 1.959964  # a two-sided 95% interval's half-width in standard deviations
# A strategy variant whose value model screens one candidate only: what screening saves.
UNSCREENED = "-unscreened"
# A strategy variant whose designs race (search/_racing.py, the loop's defaults): what racing saves.
RACED = "+race"
# Tokens until the reported design is as good as the one the unraced strategy reports at the end.
MATCH = "to match"


def base_name(name: str) -> str:
    """The strategy a variant name (`mcts-unscreened+race`) is built from."""
    return name.removesuffix(RACED).removesuffix(UNSCREENED)


def build(name: str, space: SearchSpace, seed: int) -> Strategy:
    """The strategy called `name`, or its unscreened variant (`mcts-unscreened`)."""
    base = base_name(name)
    name = name.removesuffix(RACED)
    strategy = make_strategy(base, space=space, seed=seed)
    if name != base:
        if not isinstance(strategy, GuidedStrategy):
            raise AgentDesignError(f"{base} screens nothing: it has no {UNSCREENED} variant")
        strategy.n_candidates = 1
    return strategy


@dataclass
class Outcome:
    """What one world says about each strategy and the value model."""

    seed: int
    best: float
    top: float
    budgets: tuple[float, ...]
    runs: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    spearman: dict[int, float] = field(default_factory=dict)
    coverage: dict[int, float] = field(default_factory=dict)
    # the same model fit on the labelled designs' true accuracies: what label noise costs
    spearman_noiseless: dict[int, float] = field(default_factory=dict)
    # Spearman of the truth's own additive part (and additive + pairs) with the truth: a ceiling
    ceilings: dict[str, float] = field(default_factory=dict)
    predict_s: float = math.nan


@dataclass(frozen=True)
class Settings:
    seeds: int
    designs: int
    items: int
    search_items: int
    evaluations: int
    strategies: tuple[str, ...]
    value_seeds: int


def run_world(calibration: Calibration, settings: Settings, seed: int) -> Outcome:
    """Every strategy in world `seed`, and the value model there."""
    with threadpool_limits(1):  # small matrices: BLAS threads only contend on a shared machine
        world = TruthWorld(
            calibration, seed=seed, n_items=settings.items, n_search=settings.search_items
        )
        reference = _reference(world.space.model, settings.designs)
        accuracy = world.accuracy(reference)
        per_evaluation = float(world.tokens_per_item(reference).mean()) * settings.search_items
        outcome = Outcome(
            seed=seed,
            best=world.best_accuracy,
            top=float(np.quantile(accuracy, 1 - TOP)),
            budgets=tuple(per_evaluation * n for n in _budget_evals(settings.evaluations)),
        )
        runs = {}
        for name in settings.strategies:
            started = time.process_time()
            run = runs[name] = truth_search(
                world,
                build(name, world.space, seed),
                name=name,
                stop=_stop(settings.evaluations, outcome.budgets[-1]),
                schedule=raced(Racing()) if name.endswith(RACED) else full_items,
            )
            outcome.seconds[name] = time.process_time() - started
            outcome.runs[name] = _measures(run, outcome, settings.evaluations)
        for name, run in runs.items():  # racing's saving at equal true accuracy
            raced_run = runs.get(name + RACED)
            if raced_run is not None:
                target = run.accuracy_within(outcome.budgets[-1])
                outcome.runs[name][MATCH] = run.tokens_to(target)
                outcome.runs[name + RACED][MATCH] = raced_run.tokens_to(target)
        if seed < settings.value_seeds:
            _value_model(world, reference, accuracy, outcome)
        return outcome


@functools.cache
def _reference(model: str, n: int) -> list[AgentSpec]:
    """`n` random designs of the full space, the same in every world (their true accuracies
    differ), drawn once per process."""
    space, rng = SearchSpace(model=model), np.random.default_rng(0)
    return [space.sample(rng) for _ in range(n)]


def _budget_evals(evaluations: int) -> tuple[int, ...]:
    """The token budgets, as numbers of random search's evaluations: T10, T20, ... up to the
    run's length, whose budget every run is given."""
    return tuple(n for n in CHECKPOINTS if n <= evaluations)


def _stop(evaluations: int, tokens: float) -> Callable[[Sequence[Evaluated]], bool]:
    def stop(done: Sequence[Evaluated]) -> bool:
        spent = sum(e.tokens for e in done)
        return len(done) >= 2 * evaluations or (len(done) >= evaluations and spent >= tokens)

    return stop


def _measures(run: TruthRun, outcome: Outcome, evaluations: int) -> dict[str, float]:
    measures = {f"@{n}": run.accuracy_after(n) for n in CHECKPOINTS if n <= evaluations}
    measures.update(
        {
            f"T{n}": run.accuracy_within(t)
            for n, t in zip(_budget_evals(evaluations), outcome.budgets, strict=True)
        }
    )
    # Beyond the largest budget counts as never: every run spends at least that much, so every
    # strategy is given the same tokens to get there.
    for key, target in (("to best", outcome.best - NEAR_BEST), ("to top", outcome.top)):
        spent = run.tokens_to(target)
        measures[key] = spent if spent <= outcome.budgets[-1] else math.inf
    measures["tokens"] = float(sum(e.tokens for e in run.evaluations[:evaluations]))
    return measures


def _value_model(
    world: TruthWorld,
    reference: list[AgentSpec],
    accuracy: np.ndarray,
    outcome: Outcome,
) -> None:
    """Spearman of the value model's predictions with the reference designs' true accuracies,
    after labelling random designs with their observed search-item scores."""
    rng = np.random.default_rng([world.seed, 1])
    labelled = [world.space.sample(rng) for _ in range(max(LABELS))]
    rows = [
        Labelled(
            spec=spec,
            description=world.description,
            score=world.evaluate(spec, world.search_items).mean,
        )
        for spec in labelled
    ]
    noiseless = [
        dataclasses.replace(row, score=float(true))
        for row, true in zip(rows, world.accuracy(labelled), strict=True)
    ]
    observed = np.array([world.evaluate(spec, world.search_items).mean for spec in reference])
    for n in LABELS:
        model = ValueModel(seed=world.seed).fit(rows[:n])
        predicted, spread = model.predict(reference, description=world.description)
        outcome.spearman[n] = rank_correlation(predicted, accuracy)
        outcome.coverage[n] = float(np.mean(np.abs(observed - predicted) <= Z95 * spread))
        perfect, _ = (
            ValueModel(seed=world.seed)
            .fit(noiseless[:n])
            .predict(reference, description=world.description)
        )
        outcome.spearman_noiseless[n] = rank_correlation(perfect, accuracy)
    for name, pairs in CEILINGS.items():
        modelled = world.modelled_accuracy(reference, pairs=pairs)
        outcome.ceilings[name] = rank_correlation(modelled, accuracy)
    started = time.perf_counter()
    model.predict(reference[:100], description=world.description)
    outcome.predict_s = time.perf_counter() - started


# -- statistics ----------------------------------------------------------------------------------


def _interval(values: np.ndarray, stat: Callable[[np.ndarray], float]) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of `stat` over seeds (order statistics, so a bound
    may be inf: a median of seeds half of which never got there)."""
    rng = np.random.default_rng(0)
    draws = np.sort(
        [stat(values[rng.integers(len(values), size=len(values))]) for _ in range(2000)]
    )
    return float(draws[49]), float(draws[1949])


def _mean_cell(values: np.ndarray, signed: bool = False) -> str:
    """Mean [interval] over the seeds that have a value (a run reports nothing before its first
    evaluation ends: the cell says in how many seeds that happened)."""
    known = values[~np.isnan(values)]
    if not len(known):
        return "-"
    low, high = _interval(known, lambda v: float(v.mean()))
    form = "+.3f" if signed else ".3f"
    missing = f" ({len(values) - len(known)} seeds: none yet)" if len(known) < len(values) else ""
    return f"{known.mean():{form}} [{low:{form}}, {high:{form}}]{missing}"


def _median(values: np.ndarray) -> float:
    return float(np.median(values))  # inf where half the seeds never got there


def _tokens_cell(values: np.ndarray) -> str:
    share = f"({int(np.isfinite(values).sum())}/{len(values)})"
    if not math.isfinite(_median(values)):
        return f"never in half the seeds {share}"
    low, high = _interval(values, _median)
    return f"{_median(values) / 1e6:.2f}M [{low / 1e6:.2f}, {high / 1e6:.2f}] {share}"


def _ratio(values: np.ndarray, baseline: np.ndarray) -> tuple[float, float, float] | None:
    """The ratio of medians (strategy over baseline) with its interval over paired seeds; None
    where the baseline's median is not finite."""
    pairs = np.stack([values, baseline], axis=1)

    def ratio(p: np.ndarray) -> float:
        low = _median(p[:, 1])
        return _median(p[:, 0]) / low if math.isfinite(low) else math.inf

    point = ratio(pairs)
    return None if not math.isfinite(_median(baseline)) else (point, *_interval(pairs, ratio))


def _ratio_cell(values: np.ndarray, baseline: np.ndarray) -> str:
    ratio = _ratio(values, baseline)
    return "-" if ratio is None else f"{ratio[0]:.2f} [{ratio[1]:.2f}, {ratio[2]:.2f}]"


def _saved_cell(values: np.ndarray, baseline: np.ndarray) -> str:
    ratio = _ratio(values, baseline)
    if ratio is None:
        return "- (the variant without it never got there in half the seeds)"
    point, low, high = ratio
    return f"{1 - point:.0%} [{1 - high:.0%}, {1 - low:.0%}]"


# -- printing ------------------------------------------------------------------------------------


def _calibration_check(calibration: Calibration, settings: Settings) -> None:
    facts = calibration.facts
    print(
        f"calibration: {facts['designs']:.0f} recorded designs x {facts['items']:.0f} GSM8K items "
        f"({facts['outcomes']:.0f} outcomes), {calibration.model}; L2 penalty C="
        f"{facts['penalty']:g}; held-out log loss {facts['held_out_log_loss']:.3f} "
        f"(items alone: {facts['items_only_log_loss']:.3f}); ability (logits): intercept "
        f"{calibration.intercept:+.2f}, held-out main-effect sd {facts['main_effect_sd']:.2f}, "
        f"residual sd {calibration.residual_sd:.2f} ({calibration.interaction_share:.0%} on "
        f"pairs); item difficulty sd {calibration.difficulty_sd:.2f}; log tokens per item: "
        f"residual sd {calibration.costs.residual_sd:.2f}, item sd {calibration.costs.item_sd:.2f},"
        f" design x item sd {calibration.costs.cell_sd:.2f}"
    )
    table = ReplayTable.load(REPLAY_TABLE)
    specs = [d.spec for d in table.designs]
    spreads, reliabilities = [], []
    for seed in range(min(settings.seeds, CHECK_WORLDS)):
        world = TruthWorld(calibration, seed=seed, n_items=settings.items)
        simulated = world.table(specs, len(table.task_ids))
        spreads.append(float(np.std([d.mean for d in simulated.designs], ddof=1)))
        reliabilities.append(split_half_reliability(simulated))
    real_spread = float(np.std([d.mean for d in table.designs], ddof=1))

    def cell(values: list[float]) -> str:
        low, high = np.percentile(values, [2.5, 97.5])
        return f"{statistics.mean(values):.3f} (95% of worlds: {low:.3f}-{high:.3f})"

    print(f"\ncheck: the {len(specs)} replay designs x {len(table.task_ids)} items, real and ")
    print(f"simulated ({len(spreads)} worlds, items drawn from each world's bank):\n")
    print(
        markdown_table(
            [
                {
                    "figure": "sd of design means",
                    "real": f"{real_spread:.3f}",
                    "simulated": cell(spreads),
                },
                {
                    "figure": "split-half reliability",
                    "real": f"{split_half_reliability(table):.3f}",
                    "simulated": cell(reliabilities),
                },
            ]
        )
    )


def _report(outcomes: list[Outcome], settings: Settings) -> None:
    names = list(settings.strategies)
    n = len(outcomes)
    best = np.array([o.best for o in outcomes])
    top = np.array([o.top for o in outcomes])
    budgets = np.array([o.budgets for o in outcomes]).mean(axis=0)
    evals = _budget_evals(settings.evaluations)
    print(
        f"\n{n} worlds of {settings.items} items, {settings.search_items} search items each; "
        f"the space's best true accuracy {best.mean():.3f} (range {best.min():.3f}-"
        f"{best.max():.3f}), its top 1% from {top.mean():.3f} ({settings.designs} random designs "
        "per world); token budgets (random's mean in "
        + ", ".join(f"{b} evals: {t / 1e6:.2f}M" for b, t in zip(evals, budgets, strict=True))
        + ")\n"
    )

    def column(name: str, key: str) -> np.ndarray:
        return np.array([o.runs[name].get(key, math.nan) for o in outcomes])

    accuracy_keys = [f"@{c}" for c in CHECKPOINTS if c <= settings.evaluations]
    accuracy_keys += [f"T{b}" for b in evals]

    def label(key: str) -> str:
        return f"after {key[1:]} evals" if key[0] == "@" else f"at T{key[1:]} tokens"

    print("true accuracy of the reported design (mean [95% interval]):\n")
    rows = []
    for name in names:
        row = {"strategy": name}
        row.update({label(k): _mean_cell(column(name, k)) for k in accuracy_keys})
        row["tokens at the last"] = f"{np.mean(column(name, 'tokens')) / 1e6:.2f}M"
        row["CPU s/seed"] = f"{statistics.mean(o.seconds[name] for o in outcomes):.1f}"
        rows.append(row)
    print(markdown_table(rows))
    for baseline in ("random", "tpe"):
        if baseline not in names:
            continue
        print(f"\npaired difference from {baseline} (same worlds):\n")
        rows = []
        for name in names:
            if name == baseline:
                continue
            row = {"strategy": name}
            row.update(
                {
                    label(k): _mean_cell(column(name, k) - column(baseline, k), signed=True)
                    for k in accuracy_keys
                }
            )
            rows.append(row)
        if rows:
            print(markdown_table(rows))
    print(
        f"\ntokens until the reported design is within {NEAR_BEST} of the space's best, and in "
        f"its top 1%, within the largest budget, T{evals[-1]} (median [95% interval] (seeds "
        "that got there)); ratios are of medians, paired by seed:\n"
    )
    rows = []
    for name in names:
        row = {"strategy": name}
        for key, title in (("to best", f"best-{NEAR_BEST}"), ("to top", "top 1%")):
            row[f"to {title}"] = _tokens_cell(column(name, key))
            for baseline in ("random", "tpe"):
                if baseline in names and baseline != name:
                    row[f"{title}: / {baseline}"] = _ratio_cell(
                        column(name, key), column(baseline, key)
                    )
                elif baseline in names:
                    row[f"{title}: / {baseline}"] = "1"
        rows.append(row)
    print(markdown_table(rows))
    print(
        f"\nshare of seeds that got there within T{evals[-1]} (mean [95% interval]), and its "
        "paired difference from random and tpe:\n"
    )
    rows = []
    for name in names:
        row = {"strategy": name}
        for key, title in (("to best", f"best-{NEAR_BEST}"), ("to top", "top 1%")):
            reached = np.isfinite(column(name, key)).astype(float)
            row[title] = _mean_cell(reached)
            for baseline in ("random", "tpe"):
                if baseline in names and baseline != name:
                    other = np.isfinite(column(baseline, key)).astype(float)
                    row[f"{title}: - {baseline}"] = _mean_cell(reached - other, signed=True)
                elif baseline in names:
                    row[f"{title}: - {baseline}"] = "0"
        rows.append(row)
    print(markdown_table(rows))
    print(
        "\ntokens saved (1 - ratio of medians [95% interval], paired by seed): on the way to the "
        "top 1%; and by racing at equal true accuracy, until the raced variant reports a design as "
        f"good as the unraced one's at the budget, T{settings.evaluations}:\n"
    )
    rows = []
    for name in names:
        if name.endswith((UNSCREENED, RACED)):
            continue
        unscreened, racing = name + UNSCREENED, name + RACED
        if unscreened in names:
            screening = _saved_cell(column(name, "to top"), column(unscreened, "to top"))
        elif supports_refinement(name):  # the value-guided strategies: they screen
            screening = f"n/a: run {unscreened} too"
        else:
            screening = "n/a: no value model"
        row = {"strategy": name, "by screening": screening}
        if racing in names:
            row["by racing (top 1%)"] = _saved_cell(
                column(racing, "to top"), column(name, "to top")
            )
            row["by racing (equal accuracy)"] = _saved_cell(
                column(racing, MATCH), column(name, MATCH)
            )
        else:
            row["by racing (top 1%)"] = row["by racing (equal accuracy)"] = f"n/a: run {racing} too"
        rows.append(row)
    print(markdown_table(rows))
    value = [o for o in outcomes if o.spearman]
    if value:
        print(
            f"\nvalue model: Spearman with the true accuracies of {settings.designs} random "
            f"designs, after N random designs labelled with their {settings.search_items}-item "
            f"scores ({len(value)} worlds):\n"
        )
        rows = [
            {
                "labelled designs": str(k),
                "Spearman rho": _mean_cell(np.array([o.spearman[k] for o in value])),
                "95% coverage of observed scores": _mean_cell(
                    np.array([o.coverage[k] for o in value])
                ),
                "Spearman, fit on true accuracies": _mean_cell(
                    np.array([o.spearman_noiseless[k] for o in value])
                ),
            }
            for k in LABELS
        ]
        print(markdown_table(rows))
        print("\nceilings: Spearman of the truth's own parts, known exactly, with the truth")
        for name in CEILINGS:
            print(f"- {name}: {_mean_cell(np.array([o.ceilings[name] for o in value]))}")
        predict_ms = statistics.median(o.predict_s for o in value) * 1000
        print(f"\nprediction of 100 designs: {predict_ms:.1f} ms (median)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--designs", type=int, default=2000, help="random designs per world")
    parser.add_argument("--items", type=int, default=500, help="items per world")
    parser.add_argument("--search-items", type=int, default=30)
    parser.add_argument("--evaluations", type=int, default=80)
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES))
    parser.add_argument("--value-seeds", type=int, default=50, help="worlds for the value model")
    parser.add_argument("--interaction-share", type=float, default=0.5)
    parser.add_argument("--workers", type=int, default=1, help="processes over the seeds")
    parser.add_argument("--save", type=Path, help="write every world's measures to this JSON")
    parser.add_argument(
        "--quick", action="store_true", help="CI size: 4 seeds, 200 designs, 20 evaluations"
    )
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.designs, args.items, args.evaluations = 4, 200, 200, 20
        args.value_seeds = 2
    unknown = [s for s in args.strategies if base_name(s) not in STRATEGIES]
    if unknown:
        sys.exit(f"error: unknown strategies {', '.join(unknown)}")
    settings = Settings(
        seeds=args.seeds,
        designs=args.designs,
        items=args.items,
        search_items=args.search_items,
        evaluations=args.evaluations,
        strategies=tuple(args.strategies),
        value_seeds=min(args.value_seeds, args.seeds),
    )
    started = time.perf_counter()
    print(
        f"settings: {settings}, interaction share {args.interaction_share}, "
        f"{args.workers} worker(s)\n"
    )
    with threadpool_limits(1):
        try:
            calibration = calibrate(
                load_records(RECORDED, benchmark="gsm8k"),
                benchmark="gsm8k",
                interaction_share=args.interaction_share,
            )
        except AgentDesignError as exc:
            sys.exit(f"error: {exc}")
        _calibration_check(calibration, settings)
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        outcomes = list(
            pool.map(
                run_world,
                [calibration] * settings.seeds,
                [settings] * settings.seeds,
                range(settings.seeds),
            )
        )
    _report(outcomes, settings)
    if args.save:  # per-seed measures, to read again without rerunning (inf: never got there)
        args.save.write_text(json.dumps([dataclasses.asdict(o) for o in outcomes]) + "\n")
    usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    print(f"\n{time.perf_counter() - started:.0f} s wall, {cpu / 60:.1f} CPU minutes")


if __name__ == "__main__":
    main()
