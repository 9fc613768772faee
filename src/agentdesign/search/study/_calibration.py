"""What one item costs a design and the CoT baseline, as a cost estimate (`_estimate`) measures
it: read from the archive's evaluations of the benchmark on the run's model, or by a calibration,
real calls of the run's first designs and CoT through its model client, kept in no run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import optuna

from agentdesign.archive import Archive
from agentdesign.components import AgentSpec, ProviderError, build_agent
from agentdesign.evaluators import TaskOutcome, evaluate_tasks, examples_from_tasks
from agentdesign.search.config import ResolvedRun
from agentdesign.search.strategies import MetaAgent, ask_trial, history_from_study
from agentdesign.search.study._prior import labelled_from_archive

__all__ = ["ItemCost", "Measured", "calibrate", "drawn_designs", "from_history"]

# The history an estimate reads: at most this many of the archive's evaluations of designs.
_HISTORY_EVALUATIONS = 20


@dataclass(frozen=True)
class ItemCost:
    """What one item costs, on average: model calls, prompt and completion tokens, seconds."""

    calls: float
    prompt_tokens: float
    completion_tokens: float
    seconds: float = 0.0

    @property
    def tokens(self) -> float:
        return self.prompt_tokens + self.completion_tokens

    def times(self, n: float) -> ItemCost:
        return ItemCost(
            self.calls * n, self.prompt_tokens * n, self.completion_tokens * n, self.seconds * n
        )

    @classmethod
    def mean(cls, costs: Sequence[ItemCost]) -> ItemCost:
        n = max(len(costs), 1)
        return cls(
            sum(c.calls for c in costs) / n,
            sum(c.prompt_tokens for c in costs) / n,
            sum(c.completion_tokens for c in costs) / n,
            sum(c.seconds for c in costs) / n,
        )


# each design's item, CoT's, what they were measured from, what measuring them spent
Measured = tuple[list[ItemCost], ItemCost, str, ItemCost | None]


def drawn_designs(
    resolved: ResolvedRun, archive: Archive, n_designs: int
) -> tuple[list[AgentSpec], str]:
    """The run's first designs, as its strategy draws them from the space before any result (its
    start-up's draws, which a run makes in the same order), so that a calibration measures
    designs the run scores, and the run finds their calls in the response cache. A meta agent
    that writes designs from nothing would be called for them: its run's designs are drawn at
    random instead, seeded by the run's seed."""
    strategy, n = resolved.strategy, max(n_designs, 1)
    meta = getattr(strategy, "meta", None)
    if isinstance(meta, MetaAgent) and not meta.n_view:
        rng = np.random.default_rng(resolved.config.seed)
        return [resolved.space.sample(rng) for _ in range(n)], f"{n} designs drawn at random"
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # as the run has it: no study's notice
    study = optuna.create_study(sampler=strategy.sampler(), directions=strategy.directions())
    prior = (
        labelled_from_archive(
            archive, benchmark=resolved.benchmark.name, unseen=resolved.items.holdout
        )
        if strategy.reads_prior
        else ()
    )
    drawn = []
    for _ in range(n):
        history = history_from_study(study, description=resolved.benchmark.description, prior=prior)
        trial = ask_trial(study, strategy, history)
        spec = resolved.space.suggest(trial)
        trial.set_user_attr("spec", spec.to_json())  # left running: a design tried, no result
        drawn.append(spec)
    return drawn, f"first {n} designs, as its strategy ({resolved.config.strategy}) draws them,"


def _item_cost(outcomes: Sequence[TaskOutcome]) -> ItemCost:
    """The mean cost of an item over these tasks' results, calls counted from their traces."""
    return ItemCost.mean(
        [
            ItemCost(
                calls=sum(r.get("kind") == "llm" for r in o.details.get("trace", ())),
                prompt_tokens=o.prompt_tokens,
                completion_tokens=o.completion_tokens,
                seconds=o.latency_s,
            )
            for o in outcomes
        ]
    )


def from_history(archive: Archive, resolved: ResolvedRun, cot: AgentSpec) -> Measured | None:
    """One item's cost of a design and of CoT from the archive's complete evaluations on the
    benchmark and the run's model (those of designs the caller scored, at no tokens, left out);
    None unless it holds two designs' and CoT's."""
    name, model = resolved.benchmark.name, resolved.config.model
    rows = [
        row
        for split in ("search", "holdout")
        for row in archive.leaderboard(benchmark=name, model=model, split=split, limit=1000)
        if row.prompt_tokens + row.completion_tokens > 0
    ]
    designs = [r for r in rows if r.agent_hash != cot.spec_hash][:_HISTORY_EVALUATIONS]
    cots = [r for r in rows if r.agent_hash == cot.spec_hash]
    if len({r.agent_hash for r in designs}) < 2 or not cots:
        return None

    def cost(evaluation_id: int) -> ItemCost:
        return _item_cost(list(archive.task_results(evaluation_id).values()))

    basis = (
        f"this archive's evaluations of {name} on {model}: {len(designs)} evaluations of "
        f"{len({r.agent_hash for r in designs})} designs and {len(cots)} of CoT (no calibration)"
    )
    of_cot = ItemCost.mean([cost(r.evaluation_id) for r in cots])
    return [cost(r.evaluation_id) for r in designs], of_cot, basis, None


def calibrate(
    resolved: ResolvedRun, drawn: Sequence[AgentSpec], which: str, cot: AgentSpec, n_items: int
) -> Measured:
    """One item's cost of the drawn designs and of CoT, each run on the run's first `n_items`
    search items through the run's model client; nothing is archived."""
    config, benchmark = resolved.config, resolved.benchmark
    tasks = benchmark.tasks_by_ids(resolved.items.search[: max(n_items, 1)])
    examples = examples_from_tasks(benchmark.train_examples())

    def measure(spec: AgentSpec) -> list[TaskOutcome]:
        benchmark.check_ready(spec)
        outcomes: list[TaskOutcome] = []
        evaluate_tasks(
            build_agent(spec, llm=resolved.llm, train_examples=examples),
            benchmark,
            tasks,
            on_result=outcomes.append,
            concurrency=config.concurrency,
            timeout_s=config.task_timeout_s,
        )
        failed = [o for o in outcomes if o.error_kind == "provider"]
        if failed:
            raise ProviderError(
                f"the estimate's calibration calls failed: {failed[0].error}; nothing was run "
                "or stored"
            )
        return outcomes

    by_design = [measure(spec) for spec in drawn]
    of_cot = measure(cot)
    every = [o for outcomes in (*by_design, of_cot) for o in outcomes]
    basis = (
        f"a calibration: the run's {which} and CoT, each on "
        f"{len(tasks)} of the run's search items ({len(every)} tasks, kept in no run)"
    )
    designs = [_item_cost(outcomes) for outcomes in by_design]
    return designs, _item_cost(of_cot), basis, _item_cost(every).times(len(every))
