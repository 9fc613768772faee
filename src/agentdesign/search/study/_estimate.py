"""What a run would cost before it runs (`estimate_run`): its model calls, tokens and dollars, part
by part (the candidates on the search items, the development items, the holdout winner and the
baselines, the meta agent's and the refiner's calls), from what one item costs a design and the
CoT baseline. That is measured by a short calibration, real calls through the run's model client
kept in no run, or read from the evaluations the archive holds for the benchmark and model.

It is an upper bound on what the run's rules decide only as it goes: racing, which stops a design
early, is ignored, and the model operators' calls are counted at their longest. Which designs the
strategy picks is not known ahead: they are taken to cost what the measured designs cost on
average, and the estimate says how far apart those were.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentdesign.archive import Archive
from agentdesign.components import (
    AgentDesignError,
    AgentSpec,
    ChatModel,
    Completion,
    TokenPrice,
    token_price,
)
from agentdesign.evaluators import Benchmark, InteractiveBenchmark
from agentdesign.search.config import ResolvedRun, RunConfig, resolve
from agentdesign.search.strategies import Failure, MetaAgent, MetaOutcome, PromptRefiner
from agentdesign.search.study._calibration import ItemCost, calibrate, drawn_designs, from_history
from agentdesign.search.verdict import cot_baseline, cot_sc_baseline

__all__ = ["EstimatePart", "ItemCost", "RunEstimate", "estimate_run"]


@dataclass(frozen=True)
class EstimatePart:
    """One part of a run's cost: its `role` ("candidates", "dev", "holdout winner",
    "exploratory", "baselines", "meta agent", "refiner"), what it counts in words, its calls and
    tokens, and its dollars (None: the model has no price)."""

    role: str
    what: str
    calls: float
    prompt_tokens: float
    completion_tokens: float
    dollars: float | None

    @property
    def tokens(self) -> float:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class RunEstimate:
    """A run's cost before it runs: its parts, what they were measured from (`basis`), what
    measuring spent (`calibration`, None when read from the archive; counted in no part), and
    what to read them by (`notes`: the bound, the prices)."""

    run: str
    benchmark: str
    model: str
    price: TokenPrice | None
    parts: tuple[EstimatePart, ...]
    basis: str
    calibration: EstimatePart | None
    notes: tuple[str, ...]

    @property
    def calls(self) -> float:
        return sum(p.calls for p in self.parts)

    @property
    def tokens(self) -> float:
        return sum(p.tokens for p in self.parts)

    @property
    def dollars(self) -> float | None:
        """The whole run's dollars; None when a part's model has no price."""
        parts = [p.dollars for p in self.parts]
        return None if any(d is None for d in parts) else sum(d or 0.0 for d in parts)


def estimate_run(
    config: RunConfig,
    archive: Archive,
    *,
    llm: ChatModel | None = None,
    benchmark: Benchmark | None = None,
    n_items: int = 2,
    n_designs: int = 2,
    history: bool = True,
) -> RunEstimate:
    """What run `config` would cost in calls, tokens and dollars, without running it or writing
    anything to `archive`. One item's cost of a design and of CoT is read from the archive's
    evaluations of the benchmark on the run's model when it holds two designs' and CoT's (and
    `history`); else measured: the run's first `n_designs` designs, as its strategy draws them
    from its space, and CoT, each on
    `n_items` of its search items, real calls kept in no run (the response cache keeps them, so
    that a run that asks the same pays nothing twice). Refused as `run` would refuse it."""
    resolved = resolve(config, archive, view=_NoRun(), llm=llm, benchmark=benchmark)
    resolved.open_model()
    config = resolved.config
    interactive = isinstance(resolved.benchmark, InteractiveBenchmark)
    cot = cot_baseline(config.model, interactive=interactive)
    drawn, which = drawn_designs(resolved, archive, n_designs)
    measured = from_history(archive, resolved, cot) if history else None
    if measured is None:
        measured = calibrate(resolved, drawn, which, cot, n_items)
    designs, cot_item, basis, spent = measured
    design = ItemCost.mean(designs)
    price = token_price(config.model)
    count, bound = _designs(config, design.times(len(resolved.items.search)), price)
    parts = _parts(resolved, drawn, design, cot_item, count, bound, price, interactive)
    notes = [
        f"per item: a design {_item_words(design)}; CoT {_item_words(cot_item)}",
        *_spread_note(designs),
        *_bound_notes(config),
        _price_note(config.model, price),
    ]
    return RunEstimate(
        run=config.name,
        benchmark=resolved.benchmark.name,
        model=config.model,
        price=price,
        parts=tuple(p for p in parts if p.calls),
        basis=basis,
        calibration=None if spent is None else _priced("calibration", "", spent, price),
        notes=tuple(notes),
    )


class _NoRun:
    """The run an estimate resolves for, which its strategy never reads: nothing is proposed."""

    def failures(self, spec: AgentSpec) -> Sequence[Failure]:
        return []

    def tokens_per_item(self) -> Mapping[str, float]:
        return {}

    def front(self) -> Mapping[str, int]:
        return {}

    def call_started(self, purpose: str) -> None:
        pass

    def call_finished(self, completion: Completion, purpose: str, model: str) -> None:
        pass

    def record(self, outcomes: Sequence[MetaOutcome]) -> None:
        pass


def _designs(config: RunConfig, per_design: ItemCost, price: TokenPrice | None) -> tuple[int, str]:
    """How many designs the budget lets the run score, and which of its bounds ends it first."""
    budget = config.budget
    bounds: list[tuple[int, str]] = []
    if budget.max_agents is not None:
        bounds.append((budget.max_agents, "--max-agents"))
    if budget.max_tokens is not None and per_design.tokens > 0:
        bounds.append((math.ceil(budget.max_tokens / per_design.tokens), "--max-tokens"))
    if budget.max_cost is not None and price is not None:
        dollars = price.dollars(per_design.prompt_tokens, per_design.completion_tokens)
        if dollars > 0:
            bounds.append((math.ceil(budget.max_cost / dollars), "--max-cost"))
    if budget.max_minutes is not None and per_design.seconds > 0:
        seconds = per_design.seconds / config.concurrency
        bounds.append((math.ceil(budget.max_minutes * 60 / seconds), "--max-minutes"))
    if not bounds:
        raise AgentDesignError(
            "cannot estimate the run: its budget bounds no number of designs (a dollar budget "
            "cannot stop a model with no price, nor tokens and minutes designs that spend "
            "none); give --max-agents"
        )
    return min(bounds)


def _parts(
    resolved: ResolvedRun,
    drawn: Sequence[AgentSpec],
    design: ItemCost,
    cot: ItemCost,
    count: int,
    bound: str,
    price: TokenPrice | None,
    interactive: bool,
) -> list[EstimatePart]:
    """Each part of the run, priced: the candidates, the development items, the holdout."""
    config, items = resolved.config, resolved.items
    n_search, n_holdout, n_dev = len(items.search), len(items.holdout), len(items.dev)
    meta = getattr(resolved.strategy, "meta", None)
    refiner = getattr(resolved.strategy, "refiner", None)
    meta_calls = refinements = 0
    if isinstance(meta, MetaAgent):  # every `every`-th proposal, once it has a design to show
        meta_calls = sum(1 for i in range(count) if i % meta.every == 0 and (i or not meta.n_view))
    if isinstance(refiner, PromptRefiner):
        refinements = sum(1 for i in range(1, count) if i % refiner.every == 0)
    # each call of either learns from a design's failures on the dev items, scored first
    learning = refinements + (meta_calls if isinstance(meta, MetaAgent) and meta.n_view else 0)
    dev_evaluations = learning if n_dev else 0
    parts = [
        _priced(
            "candidates",
            f"{count} designs ({bound}) x {n_search} search items",
            design.times(count * n_search),
            price,
        ),
        _priced(
            "dev",
            f"{dev_evaluations} designs x {n_dev} dev items",
            design.times(dev_evaluations * n_dev),
            price,
        ),
    ]
    if n_holdout and config.confirm_top:
        more = config.confirm_top - 1
        parts += [
            _priced(
                "holdout winner",
                f"1 design x {n_holdout} holdout items",
                design.times(n_holdout),
                price,
            ),
            _priced(
                "exploratory",
                f"{more} designs x {n_holdout} holdout items",
                design.times(more * n_holdout),
                price,
            ),
            _baselines(config, design, cot, n_holdout, price, interactive),
        ]
    if isinstance(meta, MetaAgent):
        prompt, reply = meta.request_bound(resolved.benchmark.description, drawn)
        calls = ItemCost(meta_calls, meta_calls * prompt, meta_calls * reply)
        what = f"{meta_calls} calls of {meta.model}, each at most {prompt + reply:,} tokens"
        parts.append(_priced("meta agent", what, calls, token_price(meta.model)))
    if isinstance(refiner, PromptRefiner):
        prompt, reply = refiner.request_bound()
        calls = ItemCost(refinements, refinements * prompt, refinements * reply)
        what = f"{refinements} calls, each at most {prompt + reply:,} tokens"
        parts.append(_priced("refiner", what, calls, price))
    return parts


def _baselines(
    config: RunConfig,
    design: ItemCost,
    cot: ItemCost,
    n_holdout: int,
    price: TokenPrice | None,
    interactive: bool,
) -> EstimatePart:
    """The baselines on the holdout items: CoT; CoT-SC at as many samples as a design's tokens
    buy at CoT's (none under 3: then CoT alone is the cost-matched baseline); a spec of the
    user's at a design's cost."""
    total = ItemCost(0.0, 0.0, 0.0)
    said: list[str] = []
    unscored = ""
    scored_cot = False

    def add(cost: ItemCost, words: str) -> None:
        nonlocal total
        total = ItemCost(
            total.calls + cost.calls * n_holdout,
            total.prompt_tokens + cost.prompt_tokens * n_holdout,
            total.completion_tokens + cost.completion_tokens * n_holdout,
        )
        said.append(words)

    for baseline in sorted(config.baselines, key=lambda b: b["label"] != "cot"):
        label = baseline["label"]
        if baseline.get("spec") is not None:
            add(design, f"{label} (as a design)")
        elif label == "cot" or not interactive:
            if not scored_cot:
                add(cot, "cot")
                scored_cot = True
            if label == "cot-sc":
                matched = cot_sc_baseline(
                    config.model, winner_tokens=design.tokens, cot_tokens=max(cot.tokens, 1e-9)
                )
                if matched is None:
                    unscored = "; cot-sc not scored: a design buys fewer than 3 CoT samples"
                else:
                    samples = int(matched.to_flat()["workflow__n_samples"])
                    add(cot.times(samples), f"cot-sc ({samples} samples)")
    what = f"{' + '.join(said)} x {n_holdout} holdout items{unscored}" if said else "none"
    return _priced("baselines", what, total, price)


def _priced(role: str, what: str, cost: ItemCost, price: TokenPrice | None) -> EstimatePart:
    dollars = None if price is None else price.dollars(cost.prompt_tokens, cost.completion_tokens)
    return EstimatePart(role, what, cost.calls, cost.prompt_tokens, cost.completion_tokens, dollars)


def _item_words(cost: ItemCost) -> str:
    calls = "1 call" if cost.calls == 1 else f"{cost.calls:.3g} calls"
    return f"{calls}, {cost.tokens:,.0f} tokens, {cost.seconds:.3g} s an item"


def _spread_note(designs: Sequence[ItemCost]) -> list[str]:
    """How far apart the measured designs were: the designs the strategy picks may cost anywhere
    in that range, or past it, so the mean is a guess where they differ."""
    low, high = min(d.tokens for d in designs), max(d.tokens for d in designs)
    if len(designs) < 2 or high <= 1.25 * low:
        return []
    return [
        f"the measured designs ranged from {low:,.0f} to {high:,.0f} tokens an item: the "
        "designs the strategy picks may cost more or less than their mean"
    ]


def _bound_notes(config: RunConfig) -> list[str]:
    notes = []
    if config.race.enabled and config.objective == "score":
        notes.append(
            "racing ignored, an upper bound on that count: it stops a design early once it is "
            "shown worse than the best, and every design is counted on every search item"
        )
    if config.refine_every or config.meta_period:
        notes.append("the meta agent's and the refiner's calls counted at their longest")
    return notes


def _price_note(model: str, price: TokenPrice | None) -> str:
    if price is None:
        return (
            f"price unknown: litellm's table has no price for {model}; calls and tokens are "
            "estimated, dollars are not, and --max-cost cannot stop its run"
        )
    return (
        f"prices: litellm's table, ${price.prompt * 1e6:.4g} per million prompt tokens, "
        f"${price.completion * 1e6:.4g} per million completion tokens"
    )
