"""Does the value model learn what a rewritten prompt does? A semi-synthetic measurement (issue 18).

    .venv/bin/python bench/prompt_features.py [--seeds 20] [--labels 30 100 300] [--space full]
        [--rewritten-share 0.5] [--advice-scales 1 3] [--items 10] [--groups 40] [--variants 4]
        [--workers 1] [--save bench/results/prompt_features.json]

No recorded data holds many rewritten prompts, so the prompts' effects are planted: this shows
whether the value model's prompt features (hashed words and word pairs that each rewritten text
parameter adds to its component's default, `_rewritten_text` in the value model) can carry a
prompt's effect, not that real prompt rewrites are predictable.

Each seed is one world of the truth benchmark (`agentdesign.benchmarking`, calibrated on the
recorded GSM8K evaluations as in bench/strategies_truth.py): a design's ability (logit) comes from
its components and parameters. On top of it, K = 12 advice sentences ("Check every sum twice.", ...)
get one effect each, drawn per world from a normal whose sd is `--advice-scales` times the sd of the
calibrated component effects (at 1, one sentence moves a design about as much as swapping one
component; every scale reuses the same draws, designs and outcomes, so scales are paired too).
Designs are drawn from the space (`--space`, on its coarse grid, no design twice);
`--rewritten-share` of them get one of their prompts (`prompt_params(spec, code=False)`, one chosen
at random) rewritten as the original text, unchanged (its quoted output format kept), followed on a
new line by one advice sentence. A design's true accuracy is its mean chance of solving the world's
500 items with ability + the advice's effect (a logit, so it stays in [0, 1]); its label is its mean
on `--items` search items (outcomes drawn per design and item), as a real search scores it.

Measured per world, at each number of labelled designs (the first N of one drawn list):
- the held-out Spearman (`held_out_predictions`, 5 folds) of the value model against the designs'
  true accuracies and against their observed labels, with the prompt features as they are
  ("prompts") and ablated ("ablated": the same rows with every prompt reset to its component's
  default, `spec.set_params(...)`, which gives the features the model had before it read prompts;
  the same folds, so the pair is paired);
- screening rewrites: `--groups` fresh designs, each in `--variants` versions that share
  components and parameters and differ only in the prompt (the default, and rewrites with
  distinct advice), scored by a model fit on the N labelled designs: the Spearman within each
  group against true accuracy, averaged over groups, and the true accuracy of the version the
  model ranks first minus the group's mean (what picking by the model gains over picking at
  random). The ablated model sees a group's versions as one design, so both are 0 for it by
  construction.

Printed: means over worlds with 95% bootstrap intervals (over worlds; differences paired by world),
and, for reference, the Spearman of the observed labels themselves with the true accuracies (the
label noise no model can see through), the gain a perfect pick would make, the screening figures
of a model fit on true accuracies instead of labels (what the features carry without label noise),
and how similar the prompt features of two rewrites of one prompt with different advice are.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from _common import markdown_table
from scipy import special
from threadpoolctl import threadpool_limits

from agentdesign.benchmarking import Calibration, TruthWorld, calibrate, load_records
from agentdesign.components import REGISTRY, SLOTS, AgentSpec
from agentdesign.search import (
    SPACE_PRESETS,
    Labelled,
    SearchSpace,
    ValueModel,
    prompt_params,
    rank_correlation,
)
from agentdesign.search.valuemodel import held_out_predictions
from agentdesign.search.valuemodel._value import _PROMPT_FEATURES, _rewritten_text, _text_hasher

RESULTS = Path(__file__).parent / "results"
RECORDED = (RESULTS / "replay.sqlite", RESULTS / "workflows.sqlite")
BANK_ITEMS = 500
FOLDS = 5
ADVICE = (
    "Check every sum twice.",
    "Write each step on its own line.",
    "Keep every number with its unit.",
    "Read the question again before you answer.",
    "Round only at the very end.",
    "List the given quantities first.",
    "Estimate the answer before you compute it.",
    "Do not skip any arithmetic step.",
    "Name the quantity the question asks for.",
    "Count objects in whole numbers.",
    "Be as brief as you can.",
    "Restate the problem in your own words.",
)
VARIANTS = ("prompts", "ablated")
# A diagnostic fit on true accuracies instead of labels: what the features carry without noise.
NOISE_FREE = "prompts, noise-free labels"
# Streams of one world's random draws, kept apart.
_ADVICE, _LABELLED, _GROUPS, _OUTCOMES = 11, 12, 13, 14


@dataclass(frozen=True)
class Settings:
    seeds: int
    labels: tuple[int, ...]
    space: str
    rewritten_share: float
    advice_scales: tuple[float, ...]
    items: int
    groups: int
    variants: int


@dataclass(frozen=True)
class Design:
    """A design, the same design with its prompts reset to the defaults, its advice (-1: none)."""

    spec: AgentSpec
    reset: AgentSpec
    advice: int


@dataclass
class Outcome:
    """One world's measures, keyed by variant then by number of labelled designs."""

    seed: int
    advice_scale: float
    advice_sd: float
    design_sd: float  # sd of the labelled designs' abilities without advice (logits)
    label_spearman: float  # observed labels against true accuracy, all labelled designs
    rewritten: int  # labelled designs with a rewritten prompt
    best_gain: float  # the best version's true accuracy minus its group's mean (a perfect pick)
    true: dict[str, dict[int, float]] = field(default_factory=dict)
    observed: dict[str, dict[int, float]] = field(default_factory=dict)
    within: dict[str, dict[int, float]] = field(default_factory=dict)
    pick_gain: dict[str, dict[int, float]] = field(default_factory=dict)


def component_effect_sd(calibration: Calibration) -> float:
    """The sd of the calibrated effects of the components (one-hot columns, not parameters)."""
    n_components = sum(len(REGISTRY.names(slot, opt_in=False)) for slot in SLOTS)
    return float(np.std(calibration.effects[:n_components]))


def advice_similarity(space: SearchSpace, designs: int = 30) -> float:
    """The mean cosine between the hashed prompt features (the value model's prompt block) of two
    rewrites of the same prompt with different advice: how much of that block the advice moves."""
    hasher = _text_hasher(_PROMPT_FEATURES, ngrams=2)
    rng = np.random.default_rng(0)
    found = []
    for _ in range(designs):
        base, seed = space.sample(rng), int(rng.integers(2**31))
        texts = [_rewritten_text(rewrite(base, a, np.random.default_rng(seed))) for a in range(12)]
        vectors = hasher.transform(texts).toarray()
        found.append(float((vectors @ vectors.T)[np.triu_indices(len(texts), 1)].mean()))
    return float(np.mean(found))


def reset_prompts(spec: AgentSpec) -> AgentSpec:
    """`spec` with every text parameter at its component's default: what the value model saw of
    it before it read prompts."""
    defaults = {
        f"{slot}__{info.name}": info.default
        for slot in SLOTS
        for info in spec[slot].param_info()
        if info.kind == "text"
    }
    return spec.set_params(**defaults)


def rewrite(spec: AgentSpec, advice: int, rng: np.random.Generator) -> AgentSpec:
    """One of the spec's prompts, chosen at random, with advice sentence `advice` appended on a
    line of its own (the original text, its output format included, kept whole)."""
    prompts = prompt_params(spec, code=False)
    key = sorted(prompts)[int(rng.integers(len(prompts)))]
    return spec.set_params(**{key: f"{prompts[key]}\n{ADVICE[advice]}"})


def draw_designs(
    space: SearchSpace, n: int, share: float, rng: np.random.Generator
) -> list[Design]:
    """`n` distinct designs, each rewritten with chance `share` (one random advice)."""
    designs: list[Design] = []
    seen: set[str] = set()
    for _ in range(100 * n):
        base = space.sample(rng)
        advice = int(rng.integers(len(ADVICE))) if rng.random() < share else -1
        spec = base if advice < 0 else rewrite(base, advice, rng)
        if spec.spec_hash in seen:
            continue
        seen.add(spec.spec_hash)
        designs.append(Design(spec=spec, reset=reset_prompts(spec), advice=advice))
        if len(designs) == n:
            return designs
    raise SystemExit(f"error: the space holds fewer than {n} distinct designs as drawn")


def draw_groups(
    space: SearchSpace, groups: int, variants: int, rng: np.random.Generator
) -> list[list[Design]]:
    """`groups` designs, each as its default and `variants - 1` rewrites with distinct advice."""
    found = []
    for _ in range(groups):
        base = space.sample(rng)
        advices = rng.permutation(len(ADVICE))[: variants - 1]
        group = [Design(spec=base, reset=base, advice=-1)]
        group += [_version(base, int(a), rng) for a in advices]
        found.append(group)
    return found


def _version(base: AgentSpec, advice: int, rng: np.random.Generator) -> Design:
    spec = rewrite(base, advice, rng)
    return Design(spec=spec, reset=reset_prompts(spec), advice=advice)


class PromptWorld:
    """A truth-benchmark world plus planted advice effects."""

    def __init__(self, truth: TruthWorld, advice_sd: float) -> None:
        self.truth = truth
        self.advice_sd = advice_sd
        # the same standard normal draws at every scale, so scales are paired too
        rng = np.random.default_rng([truth.seed, _ADVICE])
        self.effects = advice_sd * rng.normal(0.0, 1.0, len(ADVICE))
        self.seed = truth.seed

    def ability(self, designs: Sequence[Design]) -> np.ndarray:
        advice = np.array([self.effects[d.advice] if d.advice >= 0 else 0.0 for d in designs])
        return np.asarray(self.truth.ability([d.spec for d in designs]) + advice, dtype=float)

    def accuracy(self, designs: Sequence[Design]) -> np.ndarray:
        chance = special.expit(self.ability(designs)[:, None] - self.truth.difficulty[None, :])
        return np.asarray(chance.mean(axis=1), dtype=float)

    def observe(self, designs: Sequence[Design]) -> np.ndarray:
        """Each design's mean on the search items: one Bernoulli outcome per design and item."""
        difficulty = self.truth.difficulty[list(self.truth.search_items)]
        chance = special.expit(self.ability(designs)[:, None] - difficulty[None, :])
        rng = np.random.default_rng([self.seed, _OUTCOMES])
        return np.asarray((rng.random(chance.shape) < chance).mean(axis=1), dtype=float)


def _rows(designs: Sequence[Design], labels: np.ndarray, description: str, variant: str) -> list:
    return [
        Labelled(spec=d.reset if variant == "ablated" else d.spec, description=description, score=s)
        for d, s in zip(designs, labels, strict=True)
    ]


def run_world(calibration: Calibration, settings: Settings, seed: int) -> list[Outcome]:
    """Every advice scale in world `seed`: the same designs, items and outcome draws."""
    with threadpool_limits(1):  # small matrices: BLAS threads only contend on a shared machine
        truth_world = TruthWorld(
            calibration, seed=seed, n_items=BANK_ITEMS, n_search=settings.items
        )
        space = SearchSpace(
            model=calibration.model, grid=True, canonical=False, **SPACE_PRESETS[settings.space]
        )
        designs = draw_designs(
            space,
            max(settings.labels),
            settings.rewritten_share,
            np.random.default_rng([seed, _LABELLED]),
        )
        groups = draw_groups(
            space, settings.groups, settings.variants, np.random.default_rng([seed, _GROUPS])
        )
        design_sd = float(np.std(truth_world.ability([d.reset for d in designs])))
        return [
            _measure(
                PromptWorld(truth_world, scale * component_effect_sd(calibration)),
                designs,
                groups,
                settings,
                scale=scale,
                design_sd=design_sd,
            )
            for scale in settings.advice_scales
        ]


def _measure(
    world: PromptWorld,
    designs: Sequence[Design],
    groups: Sequence[Sequence[Design]],
    settings: Settings,
    *,
    scale: float,
    design_sd: float,
) -> Outcome:
    description = world.truth.description
    truth, labels = world.accuracy(designs), world.observe(designs)
    group_truth = [world.accuracy(g) for g in groups]
    outcome = Outcome(
        seed=world.seed,
        advice_scale=scale,
        advice_sd=world.advice_sd,
        design_sd=design_sd,
        label_spearman=rank_correlation(labels, truth),
        rewritten=sum(d.advice >= 0 for d in designs),
        best_gain=float(np.mean([a.max() - a.mean() for a in group_truth])),
    )
    for variant in (*VARIANTS, NOISE_FREE):
        for n in settings.labels:
            scores = truth[:n] if variant == NOISE_FREE else labels[:n]
            rows = _rows(designs[:n], scores, description, variant)
            if variant != NOISE_FREE:
                means, _ = held_out_predictions(rows, folds=FOLDS, seed=world.seed)
                outcome.true.setdefault(variant, {})[n] = rank_correlation(means, truth[:n])
                outcome.observed.setdefault(variant, {})[n] = rank_correlation(means, labels[:n])
            model = ValueModel(seed=world.seed).fit(rows)
            within, gains = [], []
            for group, accuracy in zip(groups, group_truth, strict=True):
                specs = [d.reset if variant == "ablated" else d.spec for d in group]
                predicted, _ = model.predict(specs, description=description)
                within.append(rank_correlation(predicted, accuracy))
                # ties (the ablated model's whole group) are a random pick: the group's mean
                top = np.flatnonzero(predicted == predicted.max())
                gains.append(float(accuracy[top].mean() - accuracy.mean()))
            outcome.within.setdefault(variant, {})[n] = float(np.mean(within))
            outcome.pick_gain.setdefault(variant, {})[n] = float(np.mean(gains))
    return outcome


# -- statistics and printing ---------------------------------------------------------------------


def _interval(values: np.ndarray, stat: Callable[[np.ndarray], float]) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of `stat` over worlds."""
    rng = np.random.default_rng(0)
    draws = np.sort(
        [stat(values[rng.integers(len(values), size=len(values))]) for _ in range(2000)]
    )
    return float(draws[49]), float(draws[1949])


def _cell(values: np.ndarray, signed: bool = False) -> str:
    low, high = _interval(values, lambda v: float(v.mean()))
    form = "+.3f" if signed else ".3f"
    return f"{values.mean():{form}} [{low:{form}}, {high:{form}}]"


def _summary(values: np.ndarray) -> dict[str, float]:
    low, high = _interval(values, lambda v: float(v.mean()))
    return {"mean": float(values.mean()), "low": low, "high": high}


def report(outcomes: Sequence[Outcome], settings: Settings) -> dict[str, object]:
    """Prints the tables; returns their figures for the JSON."""

    def column(scale: float, measure: str, variant: str, n: int) -> np.ndarray:
        return np.array(
            [getattr(o, measure)[variant][n] for o in outcomes if o.advice_scale == scale]
        )

    worlds = len({o.seed for o in outcomes})
    first = [o for o in outcomes if o.advice_scale == settings.advice_scales[0]]
    unit = first[0].advice_sd / settings.advice_scales[0] if settings.advice_scales[0] else 0.0
    print(
        f"\n{worlds} worlds; the components' calibrated effects have sd {unit:.3f} logits, the "
        f"labelled designs' abilities (without advice) sd "
        f"{np.mean([o.design_sd for o in first]):.3f}; "
        f"{np.mean([o.rewritten for o in first]):.0f} of {max(settings.labels)} labelled designs "
        f"rewritten on average; their observed {settings.items}-item labels against their true "
        f"accuracy: Spearman {_cell(np.array([o.label_spearman for o in first]))} (label noise)."
    )
    figures: dict[str, object] = {}
    for measure, title in (
        ("true", "held-out Spearman with TRUE accuracy"),
        ("observed", f"held-out Spearman with observed {settings.items}-item labels"),
    ):
        print(
            f"\n{title} ({FOLDS}-fold, the labelled designs; mean [95% interval] over worlds, "
            "difference paired by world):\n"
        )
        rows = []
        for scale in settings.advice_scales:
            for n in settings.labels:
                prompts = column(scale, measure, "prompts", n)
                ablated = column(scale, measure, "ablated", n)
                rows.append(
                    {
                        "advice sd": f"{scale:g} x components'",
                        "labelled": str(n),
                        "prompts": _cell(prompts),
                        "ablated": _cell(ablated),
                        "prompts - ablated": _cell(prompts - ablated, signed=True),
                    }
                )
                figures[f"{measure} scale={scale:g} n={n}"] = {
                    "prompts": _summary(prompts),
                    "ablated": _summary(ablated),
                    "difference": _summary(prompts - ablated),
                }
        print(markdown_table(rows))
    print(
        f"\nscreening rewrites: {settings.groups} fresh designs x {settings.variants} versions "
        "that differ only in the prompt; Spearman within each version group with true accuracy "
        "(averaged over groups), and the true accuracy of the version ranked first minus the "
        "group's mean; the ablated model ties every group (0 and 0 by construction); "
        "noise-free: the same model fit on true accuracies instead of labels (a diagnostic); "
        "perfect: the best version's gain (the most a pick can gain):\n"
    )
    rows = []
    for scale in settings.advice_scales:
        for n in settings.labels:
            best = np.array([o.best_gain for o in outcomes if o.advice_scale == scale])
            row = {
                "advice sd": f"{scale:g} x components'",
                "labelled": str(n),
                "pick gain, perfect": _cell(best, signed=True),
            }
            for variant, name in (("prompts", "prompts"), (NOISE_FREE, "noise-free")):
                within = column(scale, "within", variant, n)
                gain = column(scale, "pick_gain", variant, n)
                row[f"within rho, {name}"] = _cell(within)
                row[f"pick gain, {name}"] = _cell(gain, signed=True)
                figures[f"within scale={scale:g} n={n} {name}"] = _summary(within)
                figures[f"pick_gain scale={scale:g} n={n} {name}"] = _summary(gain)
            rows.append(row)
    print(markdown_table(rows))
    figures["label_spearman"] = _summary(np.array([o.label_spearman for o in first]))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="worlds")
    parser.add_argument("--labels", type=int, nargs="+", default=[30, 100, 300])
    parser.add_argument("--space", choices=sorted(SPACE_PRESETS), default="full")
    parser.add_argument("--rewritten-share", type=float, default=0.5)
    parser.add_argument(
        "--advice-scales",
        type=float,
        nargs="+",
        default=[1.0, 3.0],
        help="advice effects' sd over the components' effects' sd",
    )
    parser.add_argument("--items", type=int, default=10, help="search items per label")
    parser.add_argument("--groups", type=int, default=40, help="designs screened in versions")
    parser.add_argument("--variants", type=int, default=4, help="versions per screened design")
    parser.add_argument("--workers", type=int, default=1, help="processes over the worlds")
    parser.add_argument("--save", type=Path, help="write the settings, figures, worlds as JSON")
    args = parser.parse_args()
    if not 2 <= args.variants <= len(ADVICE) + 1:
        parser.error(f"--variants must be in 2..{len(ADVICE) + 1}")
    if min(args.labels) < FOLDS:
        parser.error(f"--labels must be at least {FOLDS}")
    settings = Settings(
        seeds=args.seeds,
        labels=tuple(sorted(args.labels)),
        space=args.space,
        rewritten_share=args.rewritten_share,
        advice_scales=tuple(args.advice_scales),
        items=args.items,
        groups=args.groups,
        variants=args.variants,
    )
    started = time.perf_counter()
    print(f"settings: {settings}, {args.workers} worker(s)")
    with threadpool_limits(1):
        calibration = calibrate(load_records(RECORDED, benchmark="gsm8k"), benchmark="gsm8k")
        space = SearchSpace(
            model=calibration.model, grid=True, canonical=False, **SPACE_PRESETS[settings.space]
        )
        similarity = advice_similarity(space)
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        per_world = list(
            pool.map(
                run_world,
                [calibration] * settings.seeds,
                [settings] * settings.seeds,
                range(settings.seeds),
            )
        )
    outcomes = [o for found in per_world for o in found]
    figures = report(outcomes, settings)
    print(
        "\nthe prompt block of two rewrites of one prompt with different advice: cosine "
        f"{similarity:.3f} on average (30 designs x 12 advice sentences; the block hashes what "
        f"each rewrite adds to its default into {_PROMPT_FEATURES} columns)"
    )
    usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    wall = time.perf_counter() - started
    print(f"\n{wall:.0f} s wall, {cpu / 60:.1f} CPU minutes")
    if args.save:
        data = {
            "semi_synthetic": "planted advice-sentence effects on a calibrated truth world",
            "settings": asdict(settings),
            "advice": list(ADVICE),
            "figures": figures,
            "advice_cosine": similarity,
            "worlds": [asdict(o) for o in outcomes],
            "wall_s": round(wall),
            "cpu_min": round(cpu / 60, 1),
        }
        args.save.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n")
        assert all(math.isfinite(o.label_spearman) for o in outcomes)


if __name__ == "__main__":
    main()
