"""Compares search strategies where the truth is known: semi-synthetic worlds calibrated on the
recorded GSM8K evaluations, every design's true accuracy known.

    .venv/bin/python bench/strategies_truth.py [--seeds 200] [--designs 2000] [--items 500]
        [--search-items 30] [--evaluations 80] [--strategies random tpe mcts mcts+race ...]
        [--value-seeds 50] [--interaction-share 0.5 ...] [--workers 1] [--save FILE.json]
        [--calibrate-on FILE ... [--model M]] [--features linear|extended] [--redraw]
        [--item-interaction SD|measured] [--outside SHARE] [--space full|quick]
        [--first-seed N] [--quick]

Without the options of the last two lines the benchmark is the one first published, and prints
the same figures. The honest variant, calibrated on a recorded table file:

    .venv/bin/python bench/strategies_truth.py --calibrate-on bench/results/table_gsm8k.json \
        --model embedded/qwen2.5-coder-0.5b --features extended --redraw \
        --item-interaction measured --interaction-share 0 0.5 1 --first-seed 1000

`--calibrate-on` takes archives (.sqlite) and replay table files (.json; `--model` picks the
table of a file that holds several); the check below then simulates its first table.
`--features extended` fits effects for choice and boolean parameters and a square per numeric
parameter (non-monotone effects, where the records show them); `--redraw` draws each world's
main effects from bootstrap refits of the records (`--draws` of them); `--item-interaction`
gives every world a design x item effect of that sd in logits (`measured`: the one that makes
the records' designs disagree on which items are hard as much as they do); `--outside` moves
that share of the main effects' variance to structure outside the value model's features
(three-way interactions, parameter effects that rise and fall); `--interaction-share` may list
several shares, each reported in turn; `--space quick` searches the default run's space (with
`--search-items 4 --evaluations 4`, the default run's setting); `--first-seed` starts the worlds
there, so settings tuned on seeds 0-199 are confirmed on seeds never used for tuning. A
strategy may carry settings (`mcts:n_initial=16`) and racing its own (`mcts+race:first_stage=8`).

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
ask-and-tell loop (`agentdesign.benchmarking._replay.drive`), each design evaluated on every search
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
`agentdesign.search.racing`, docs/racing.md: after 4, 8 and 16 of 30 items, the design's upper
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
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from _truth_bench import (
    CEILINGS,
    LABELS,
    MATCH,
    NEAR_BEST,
    RECORDED,
    REPLAY_TABLE,
    TOP,
    Z95,
    Outcome,
    Settings,
    Variant,
    budget_evals,
    calibration_check,
    checkpoints,
    raced_of,
    report,
    space_of,
)
from threadpoolctl import threadpool_limits

from agentdesign.benchmarking import (
    Calibration,
    ReplayTable,
    TruthRun,
    TruthWorld,
    calibrate,
    load_records,
    truth_search,
)
from agentdesign.components import AgentDesignError, AgentSpec
from agentdesign.search import SPACE_PRESETS, STRATEGIES, Labelled, ValueModel, rank_correlation
from agentdesign.search.strategies import Evaluated


def run_world(calibration: Calibration, settings: Settings, seed: int) -> Outcome:
    """Every strategy in world `seed`, and the value model there."""
    with threadpool_limits(1):  # small matrices: BLAS threads only contend on a shared machine
        world = settings.world(calibration, seed)
        reference = _reference(settings.space, world.space.model, settings.designs)
        accuracy = world.accuracy(reference)
        per_evaluation = float(world.tokens_per_item(reference).mean()) * settings.search_items
        outcome = Outcome(
            seed=seed,
            best=world.best_accuracy,
            top=float(np.quantile(accuracy, 1 - TOP)),
            budgets=tuple(per_evaluation * n for n in budget_evals(settings.evaluations)),
        )
        runs = {}
        for name in settings.strategies:
            variant = Variant.parse(name)
            started = time.process_time()
            run = runs[name] = truth_search(
                world,
                variant.build(world.space, seed),
                name=name,
                stop=_stop(settings.evaluations, outcome.budgets[-1]),
                schedule=variant.schedule(),
            )
            outcome.seconds[name] = time.process_time() - started
            outcome.runs[name] = _measures(run, outcome, settings.evaluations)
        for name, raced_run in runs.items():  # racing's saving at equal true accuracy
            run = runs.get(raced_of(name)) if Variant.parse(name).racing is not None else None
            if run is not None:
                target = run.accuracy_within(outcome.budgets[-1])
                outcome.runs[raced_of(name)][MATCH] = run.tokens_to(target)
                outcome.runs[name][MATCH] = raced_run.tokens_to(target)
        if seed - settings.first_seed < settings.value_seeds:
            _value_model(world, reference, accuracy, outcome)
        return outcome


@functools.cache
def _reference(space: str, model: str, n: int) -> list[AgentSpec]:
    """`n` random designs of the space, the same in every world (their true accuracies differ),
    drawn once per process."""
    rng = np.random.default_rng(0)
    searched = space_of(space, model)
    return [searched.sample(rng) for _ in range(n)]


def _stop(evaluations: int, tokens: float) -> Callable[[Sequence[Evaluated]], bool]:
    def stop(done: Sequence[Evaluated]) -> bool:
        spent = sum(e.tokens for e in done)
        return len(done) >= 2 * evaluations or (len(done) >= evaluations and spent >= tokens)

    return stop


def _measures(run: TruthRun, outcome: Outcome, evaluations: int) -> dict[str, float]:
    measures = {f"@{n}": run.accuracy_after(n) for n in checkpoints(evaluations)}
    measures.update(
        {
            f"T{n}": run.accuracy_within(t)
            for n, t in zip(budget_evals(evaluations), outcome.budgets, strict=True)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--designs", type=int, default=2000, help="random designs per world")
    parser.add_argument("--items", type=int, default=500, help="items per world")
    parser.add_argument("--search-items", type=int, default=30)
    parser.add_argument("--evaluations", type=int, default=80)
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES))
    parser.add_argument("--value-seeds", type=int, default=50, help="worlds for the value model")
    parser.add_argument("--interaction-share", type=float, nargs="+", default=[0.5])
    parser.add_argument("--workers", type=int, default=1, help="processes over the seeds")
    parser.add_argument("--save", type=Path, help="write every world's measures to this JSON")
    parser.add_argument("--calibrate-on", type=Path, nargs="+", default=list(RECORDED))
    parser.add_argument("--model", help="the table's model, where a table file holds several")
    parser.add_argument("--features", choices=("linear", "extended"), default="linear")
    parser.add_argument("--redraw", action="store_true", help="main effects redrawn per world")
    parser.add_argument("--draws", type=int, default=50, help="bootstrap refits for --redraw")
    parser.add_argument("--item-interaction", default="0", help="sd in logits, or 'measured'")
    parser.add_argument("--outside", type=float, default=0.0)
    parser.add_argument("--space", choices=sorted(SPACE_PRESETS), default="full")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument(
        "--quick", action="store_true", help="CI size: 4 seeds, 200 designs, 20 evaluations"
    )
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.designs, args.items, args.evaluations = 4, 200, 200, 20
        args.value_seeds = 2
    try:
        wrong = [s for s in args.interaction_share if not 0.0 <= s <= 1.0]
        if wrong:
            raise AgentDesignError(f"--interaction-share must be in [0, 1], not {wrong[0]}")
        for name in args.strategies:  # a bad name or setting, refused before any world runs
            variant = Variant.parse(name)
            variant.build(space_of(args.space, "model/check"), 0)
            variant.schedule()
        with threadpool_limits(1):
            fitted = calibrate(
                load_records(args.calibrate_on, benchmark="gsm8k", model=args.model),
                benchmark="gsm8k",
                features=args.features,
                n_draws=args.draws if args.redraw else 0,
            )
        tables = [p for p in args.calibrate_on if p.suffix == ".json"]
        check = ReplayTable.load(tables[0] if tables else REPLAY_TABLE, model=args.model)
        measured = fitted.facts["item_interaction_sd"]
        item_sd = measured if args.item_interaction == "measured" else float(args.item_interaction)
        settings = Settings(
            seeds=args.seeds,
            designs=args.designs,
            items=args.items,
            search_items=args.search_items,
            evaluations=args.evaluations,
            strategies=tuple(args.strategies),
            value_seeds=min(args.value_seeds, args.seeds),
            first_seed=args.first_seed,
            space=args.space,
            redraw=args.redraw,
            item_interaction=item_sd,
            outside=args.outside,
        )
        settings.world(fitted, args.first_seed)  # refuses bad knobs before any world runs
    except (AgentDesignError, ValueError, TypeError) as exc:
        sys.exit(f"error: {exc}")
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    for share in args.interaction_share:
        calibration = dataclasses.replace(fitted, interaction_share=share)
        print(f"settings: {settings}, interaction share {share}, {args.workers} worker(s)\n")
        with threadpool_limits(1):
            calibration_check(calibration, settings, check)
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            found = list(
                pool.map(
                    run_world,
                    [calibration] * settings.seeds,
                    [settings] * settings.seeds,
                    settings.seed_range,
                )
            )
        report(found, settings)
        outcomes += found
    if args.save:  # per-seed measures, to read again without rerunning (inf: never got there)
        args.save.write_text(json.dumps([dataclasses.asdict(o) for o in outcomes]) + "\n")
    usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    print(f"\n{time.perf_counter() - started:.0f} s wall, {cpu / 60:.1f} CPU minutes")


if __name__ == "__main__":
    main()
