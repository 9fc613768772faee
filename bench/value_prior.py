"""What the value model's prior is worth to a new run: Spearman after 10 and 30 labels of the
run's own, with no prior, with a prior from another world pooled as one benchmark (as the value
model took it before), and with the prior apart (`ValueModel(domain=...)`).

    .venv/bin/python bench/value_prior.py [--seeds 8] [--prior 300] [--designs 300] [--items 300]
        [--search-items 30] [--scales 2] [--workers 1]

Each seed is one world of the truth benchmark (agentdesign/search/_truth.py, calibrated on the
recorded GSM8K evaluations as bench/strategies_truth.py is): its true accuracies say how well a
value model ranks `--designs` random designs. The run labels 10, then 30, random designs with
their observed scores on the world's `--search-items` items. The prior is a large archive on
another benchmark: `--prior` random designs scored in a different world, under another
benchmark's description (HumanEval's), on the same model. Three kinds of other world:

- related: another seed of the same calibration, so the same component and parameter effects
  but its own interactions, per-combination effects and items (a benchmark much like this one);
- unrelated: the effects permuted among the features (a benchmark on which other components
  help);
- opposite: the effects negated (what helps here hurts there: the worst case).

The fits, per seed and label count: none (the run's labels alone), pooled (the run's labels and
the prior as rows of one model at weight 1, the uncertainty scaled on all of them), apart (the
run's `Domain`: a hierarchical ridge whose domain-only features are scaled by `--scales`, trees
that weigh the prior's rows together as much as the run's, the uncertainty scaled on the run's
rows; one fit per scale).

Printed, over the seeds: the mean Spearman of each fit with the true accuracies, with a 95%
bootstrap interval over seeds, its paired difference from none, and the share of the designs'
observed scores inside the 95% intervals (coverage; 0.95 is calibrated).
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from _common import markdown_table
from strategies_truth import RECORDED, Z95
from threadpoolctl import threadpool_limits

from agentdesign.benchmarking import Calibration, TruthWorld, calibrate, load_records
from agentdesign.components import AgentSpec
from agentdesign.evaluators import get_benchmark
from agentdesign.search import Domain, Labelled, SearchSpace, ValueModel, rank_correlation

LABELS = (10, 30)
PRIORS = ("related", "unrelated", "opposite")
# The prior's benchmark: any other description, so that its rows are another benchmark's.
PRIOR_BENCHMARK = "humaneval"
# Keeps the streams of the prior's worlds apart from the run's for the same seed.
_OTHER_WORLDS, _PERMUTATION = 1_000, 7


@dataclass(frozen=True)
class Settings:
    prior: int
    designs: int
    items: int
    search_items: int
    scales: tuple[float, ...]

    @property
    def fits(self) -> tuple[str, ...]:
        return ("pooled", *(f"apart x{scale:g}" for scale in self.scales))


def _labelled(world: TruthWorld, specs: Sequence[AgentSpec], description: str) -> list[Labelled]:
    return [
        Labelled(spec=s, description=description, score=world.evaluate(s, world.search_items).mean)
        for s in specs
    ]


def run_world(
    calibration: Calibration, settings: Settings, seed: int
) -> dict[tuple[str, str, int], tuple[float, float]]:
    """(prior, fit, labels) -> (Spearman with the true accuracies, coverage) in world `seed`
    (prior "-" for the fit without one)."""
    with threadpool_limits(1):
        world = TruthWorld(
            calibration, seed=seed, n_items=settings.items, n_search=settings.search_items
        )
        space = SearchSpace(model=calibration.model, canonical=False)  # as the truth world scores
        rng = np.random.default_rng([seed, 1])
        reference = [space.sample(rng) for _ in range(settings.designs)]
        accuracy = world.accuracy(reference)
        observed = np.array([world.evaluate(s, world.search_items).mean for s in reference])
        own = _labelled(world, [space.sample(rng) for _ in range(max(LABELS))], world.description)
        prior_designs = [space.sample(rng) for _ in range(settings.prior)]
        permuted = np.random.default_rng([seed, _PERMUTATION]).permutation(calibration.effects)
        effects = {"related": calibration.effects, "unrelated": permuted}
        effects["opposite"] = -calibration.effects
        description = get_benchmark(PRIOR_BENCHMARK).description
        found = {}
        for n in LABELS:
            alone = ValueModel(seed=seed).fit(own[:n])
            found["-", "none", n] = _measured(alone, reference, world, accuracy, observed)
            for k, kind in enumerate(PRIORS):
                other = TruthWorld(
                    dataclasses.replace(calibration, effects=effects[kind]),
                    seed=seed + _OTHER_WORLDS * (k + 1),
                    n_items=settings.items,
                    n_search=settings.search_items,
                )
                rows = own[:n] + _labelled(other, prior_designs, description)
                fits = {"pooled": ValueModel(seed=seed)}
                for scale in settings.scales:
                    domain = Domain(description=world.description, model=space.model, scale=scale)
                    fits[f"apart x{scale:g}"] = ValueModel(seed=seed, domain=domain)
                for name, model in fits.items():
                    found[kind, name, n] = _measured(
                        model.fit(rows), reference, world, accuracy, observed
                    )
        return found


def _measured(
    model: ValueModel,
    reference: Sequence[AgentSpec],
    world: TruthWorld,
    accuracy: np.ndarray,
    observed: np.ndarray,
) -> tuple[float, float]:
    """The model's Spearman with the true accuracies, and its 95% intervals' coverage of the
    observed scores."""
    mean, std = model.predict(reference, description=world.description)
    covered = float(np.mean(np.abs(observed - mean) <= Z95 * std))
    return rank_correlation(mean, accuracy), covered


def _interval(values: np.ndarray) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of the mean over seeds."""
    rng = np.random.default_rng(0)
    draws = np.sort(
        [values[rng.integers(len(values), size=len(values))].mean() for _ in range(2000)]
    )
    return float(draws[49]), float(draws[1949])


def _cell(values: np.ndarray, *, signed: bool = False) -> str:
    low, high = _interval(values)
    sign = "+" if signed else ""
    return f"{values.mean():{sign}.3f} [{low:{sign}.3f}, {high:{sign}.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--prior", type=int, default=300, help="designs in the prior's archive")
    parser.add_argument("--designs", type=int, default=300, help="designs ranked per world")
    parser.add_argument("--items", type=int, default=300, help="items per world")
    parser.add_argument("--search-items", type=int, default=30)
    parser.add_argument(
        "--scales", nargs="+", type=float, default=[Domain("", "").scale], help="Domain scales"
    )
    parser.add_argument("--workers", type=int, default=1, help="processes over the seeds")
    args = parser.parse_args()
    settings = Settings(
        prior=args.prior,
        designs=args.designs,
        items=args.items,
        search_items=args.search_items,
        scales=tuple(args.scales),
    )
    started = time.perf_counter()
    print(f"settings: {settings}, {args.seeds} seeds, {args.workers} worker(s)\n")
    with threadpool_limits(1):
        calibration = calibrate(load_records(RECORDED, benchmark="gsm8k"), benchmark="gsm8k")
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        worlds = list(
            pool.map(
                run_world, [calibration] * args.seeds, [settings] * args.seeds, range(args.seeds)
            )
        )
    table = []
    for n in LABELS:
        alone = np.array([w["-", "none", n][0] for w in worlds])
        for kind, name in (("-", "none"), *((k, f) for k in PRIORS for f in settings.fits)):
            measured = np.array([w[kind, name, n] for w in worlds])
            spearman, coverage = measured[:, 0], measured[:, 1]
            table.append(
                {
                    "labels": str(n),
                    "prior": kind,
                    "fit": name,
                    "Spearman": _cell(spearman),
                    "minus none": "-" if name == "none" else _cell(spearman - alone, signed=True),
                    "coverage 95%": f"{coverage.mean():.3f}",
                }
            )
    print(markdown_table(table, right=("labels", "Spearman", "minus none", "coverage 95%")))
    usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    print(f"\n{time.perf_counter() - started:.0f} s wall, {cpu / 60:.1f} CPU minutes")


if __name__ == "__main__":
    main()
