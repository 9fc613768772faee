"""What bench/strategies_truth.py shares with its printout: strategy variants by name, what a
world's run records (`Outcome`), the benchmark's settings, and the statistics and tables it
prints (95% bootstrap intervals over seeds, paired by seed)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _common import markdown_table

from agentdesign.benchmarking import (
    Calibration,
    ReplayTable,
    Schedule,
    TruthWorld,
    full_items,
    raced,
    split_half_reliability,
)
from agentdesign.components import AgentDesignError
from agentdesign.search import (
    SPACE_PRESETS,
    STRATEGIES,
    GuidedStrategy,
    Racing,
    SearchSpace,
    Strategy,
    make_strategy,
    supports_refinement,
)

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
# A strategy variant whose designs race (`agentdesign.search.racing`, the loop's defaults): what
# racing saves.
RACED = "+race"
# Tokens until the reported design is as good as the one the unraced strategy reports at the end.
MATCH = "to match"


@dataclass(frozen=True)
class Variant:
    """A strategy variant by name: `mcts`, `mcts-unscreened` (its value model screens one
    candidate), `mcts:n_initial=16` (settings of the strategy), and any of them with `+race`
    (racing with the loop's defaults) or `+race:first_stage=8,alpha=0.05` (Racing's settings)."""

    base: str
    unscreened: bool
    settings: Mapping[str, Any]
    racing: Mapping[str, Any] | None

    @classmethod
    def parse(cls, name: str) -> Variant:
        strategy, sep, race = name.partition(RACED)
        strategy, _, given = strategy.partition(":")
        base = strategy.removesuffix(UNSCREENED)
        if base not in STRATEGIES:
            raise AgentDesignError(f"unknown strategy {base!r} in {name!r}")
        racing = _settings(race.removeprefix(":"), name) if sep else None
        return cls(base, base != strategy, _settings(given, name), racing)

    def build(self, space: SearchSpace, seed: int) -> Strategy:
        strategy = make_strategy(self.base, space=space, seed=seed)
        if self.unscreened:
            if not isinstance(strategy, GuidedStrategy):
                raise AgentDesignError(
                    f"{self.base} screens nothing: it has no {UNSCREENED} variant"
                )
            strategy.n_offspring = 1
        for key, value in self.settings.items():
            if not hasattr(strategy, key):
                raise AgentDesignError(f"{self.base} has no setting {key!r}")
            setattr(strategy, key, value)
        return strategy

    def schedule(self) -> Schedule:
        return full_items if self.racing is None else raced(Racing(**self.racing))


def raced_of(name: str) -> str:
    """The name of a raced variant's unraced twin (`mcts:n_initial=16+race:alpha=0.05` ->
    `mcts:n_initial=16`)."""
    return name.partition(RACED)[0]


def _settings(text: str, name: str) -> dict[str, Any]:
    """`key=value,key=value` with values read as None, int, float or text."""
    found: dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        key, sep, raw = part.partition("=")
        if not sep:
            raise AgentDesignError(f"{name!r}: settings are key=value, not {part!r}")
        value: Any = raw
        for kind in (int, float):
            try:
                value = kind(raw)
                break
            except ValueError:
                continue
        found[key] = None if raw == "None" else value
    return found


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
    """The benchmark's settings; the world's knobs at their defaults are the first benchmark."""

    seeds: int
    designs: int
    items: int
    search_items: int
    evaluations: int
    strategies: tuple[str, ...]
    value_seeds: int
    first_seed: int = 0
    space: str = "full"
    redraw: bool = False
    item_interaction: float = 0.0
    outside: float = 0.0

    def world(
        self, calibration: Calibration, seed: int, *, n_search: int | None = None
    ) -> TruthWorld:
        return TruthWorld(
            calibration,
            seed=seed,
            n_items=self.items,
            n_search=self.search_items if n_search is None else n_search,
            space=space_of(self.space, calibration.model),
            redraw=self.redraw,
            item_interaction=self.item_interaction,
            outside=self.outside,
        )

    @property
    def seed_range(self) -> range:
        return range(self.first_seed, self.first_seed + self.seeds)


def space_of(name: str, model: str) -> SearchSpace:
    """The space a preset names (`full`, `quick`), for `model`; its designs as drawn, since a
    truth world scores a design by its features as written (see `SearchSpace`)."""
    preset = SPACE_PRESETS[name]
    return SearchSpace(
        model=model,
        choices=preset.get("choices", {}),
        limits=preset.get("limits", {}),
        canonical=False,
    )


def checkpoints(evaluations: int) -> tuple[int, ...]:
    """The evaluation counts figures are reported at: 10, 20, 40, 80 up to the run's length,
    and the run's length itself."""
    return tuple(dict.fromkeys([*(n for n in CHECKPOINTS if n < evaluations), evaluations]))


def budget_evals(evaluations: int) -> tuple[int, ...]:
    """The token budgets, as numbers of random search's evaluations: T10, T20, ... up to the
    run's length, whose budget every run is given."""
    return checkpoints(evaluations)


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


def calibration_check(calibration: Calibration, settings: Settings, table: ReplayTable) -> None:
    """What the calibration fitted, and the recorded table beside its simulations in worlds of
    these settings: they must spread and rank designs alike."""
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
    print(
        f"features {calibration.features}; designs' disagreement on which items are hard (the "
        f"variance over items of the gap between designs with and without a component, on "
        f"{facts['designs']:.0f} designs): {facts['item_disagreement']:.4f} recorded, "
        f"{facts['item_disagreement_without']:.4f} simulated without a design x item effect, "
        f"matched by one of sd {facts['item_interaction_sd']:.2f} logits; world: "
        f"{settings.space} space, main effects "
        f"{'redrawn per world' if settings.redraw else 'as fitted'}, design x item sd "
        f"{settings.item_interaction:.2f}, {settings.outside:.0%} of the main effects outside "
        "the value model's features"
    )
    specs = [d.spec for d in table.designs]
    spreads, reliabilities = [], []
    for seed in range(min(settings.seeds, CHECK_WORLDS)):
        world = settings.world(calibration, seed)
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


def report(outcomes: list[Outcome], settings: Settings) -> None:
    names = list(settings.strategies)
    n = len(outcomes)
    best = np.array([o.best for o in outcomes])
    top = np.array([o.top for o in outcomes])
    budgets = np.array([o.budgets for o in outcomes]).mean(axis=0)
    evals = budget_evals(settings.evaluations)
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

    accuracy_keys = [f"@{c}" for c in checkpoints(settings.evaluations)]
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
        variant = Variant.parse(name)
        if variant.unscreened or variant.racing is not None:
            continue
        unscreened = variant.base + UNSCREENED + name.removeprefix(variant.base)
        if unscreened in names:
            screening = _saved_cell(column(name, "to top"), column(unscreened, "to top"))
        elif supports_refinement(variant.base):  # the value-guided strategies: they screen
            screening = f"n/a: run {unscreened} too"
        else:
            screening = "n/a: no value model"
        raced_names = [
            r for r in names if Variant.parse(r).racing is not None and raced_of(r) == name
        ]
        for racing in raced_names or [name + RACED]:
            row = {"strategy": name, "by screening": screening, "raced as": racing}
            if racing in names:
                row["by racing (top 1%)"] = _saved_cell(
                    column(racing, "to top"), column(name, "to top")
                )
                row["by racing (equal accuracy)"] = _saved_cell(
                    column(racing, MATCH), column(name, MATCH)
                )
            else:
                row["by racing (top 1%)"] = row["by racing (equal accuracy)"] = (
                    f"n/a: run {racing} too"
                )
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
