"""How one process scores designs for its run (`RunScoring`): every evaluation through the archive
(`evaluate_agent`), within the run's budget, a candidate raced against the incumbent, its progress
reported; the search loop, the holdout confirmation and the model operators all score through it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import optuna

from agentdesign.archive import EvaluationRecord, RunTotals
from agentdesign.components import AgentSpec, token_price
from agentdesign.evaluators import TaskOutcome, score_interval
from agentdesign.search.study._context import RunContext
from agentdesign.search.study._evaluation import evaluate_agent
from agentdesign.search.study._workers import GRACE_BEATS
from agentdesign.search.tracking import NoTracking, RunTracking

__all__ = ["RunScoring"]

# Seconds that budget totals read from the archive, and elapsed time not yet written to it, may
# lag within an evaluation: a read and a write per task cost more than the task itself at 64 tasks
# at once (bench/concurrency.py). This worker's own tokens and dollars always count at once.
_TOTALS_LAG_S = 1.0
# The shares of the dollar budget past which a run says how much it has spent, once each.
_SPEND_WARNINGS = (0.5, 0.8)


class RunScoring:
    """Scores designs for the run of `context`, and keeps its budget: the time this process has
    run is charged to the run, and the totals are read back (or this worker's tokens counted).
    Each evaluation that finishes is told to the run's `tracking` (a record outside the archive,
    such as MLflow's), the one place every evaluation of the run passes."""

    def __init__(self, context: RunContext, tracking: RunTracking | None = None) -> None:
        self.context = context
        self.tracking: RunTracking = tracking or NoTracking()
        self._clock = time.monotonic()
        self._totals: tuple[float, RunTotals] | None = None  # when read, what was read
        self._tokens_since = 0  # this worker's, since then
        self._cost_since = 0.0
        # The dollar budget and the largest share of it this process has seen spent: a share
        # passed before this process looked first was said by the process that passed it.
        self._spent_share: tuple[float, float] | None = None

    # -- budget --

    def charge_time(self, *, lag_s: float = 0.0) -> None:
        """Adds the time since the last charge to the run's, unless under `lag_s` have passed."""
        now = time.monotonic()
        if now - self._clock < lag_s:
            return
        ctx = self.context
        ctx.run = ctx.archive.update_run(ctx.run.name, add_elapsed_s=now - self._clock)
        self._clock = now

    def stop_reason(self, *, lag_s: float = 0.0) -> str | None:
        """Why the budget stops the run now, if it does; totals read up to `lag_s` ago will do."""
        ctx = self.context
        budget = ctx.budget
        if self._totals is None or time.monotonic() - self._totals[0] >= lag_s:
            self._totals = (time.monotonic(), ctx.archive.run_totals(ctx.run.name))
            self._tokens_since, self._cost_since = 0, 0.0
        totals = self._totals[1]
        if budget.max_agents is not None and totals.n_finished >= budget.max_agents:
            return f"evaluated {totals.n_finished} agents"
        tokens = totals.prompt_tokens + totals.completion_tokens + self._tokens_since
        if budget.max_tokens is not None and tokens >= budget.max_tokens:
            return f"used {tokens} tokens"
        cost = totals.cost + self._cost_since
        if budget.max_cost is not None:
            self._warn_of_spend(cost, budget.max_cost)
            if cost >= budget.max_cost:
                return (
                    f"the dollar budget ended the search: spent ${cost:.4f} of "
                    f"${budget.max_cost:g}"
                )
        elapsed = ctx.run.elapsed_s + time.monotonic() - self._clock
        if budget.max_minutes is not None and elapsed >= budget.max_minutes * 60:
            return f"ran {elapsed / 60:.1f} minutes"
        return None

    def unpriced_warning(self) -> str | None:
        """Why the dollar budget cannot stop this run, if it cannot: a model of the run that
        litellm has no price for, whose calls count $0."""
        ctx = self.context
        if ctx.budget.max_cost is None:
            return None
        config = ctx.config
        # every model the search may run a design on, the baselines' and the meta agent's
        meta = [config.meta.model] if config.meta_period else []
        models = [config.model, *config.models, *meta]
        unpriced = [m for m in dict.fromkeys(filter(None, models)) if token_price(m) is None]
        if not unpriced:
            return None
        return (
            f"warning: the dollar budget (--max-cost) cannot stop this run: litellm has no "
            f"price for {', '.join(unpriced)}, whose calls count $0"
        )

    def _warn_of_spend(self, cost: float, max_cost: float) -> None:
        """Says once each that the spend passed half and 80% of the dollar budget."""
        share = cost / max_cost
        budget, seen = self._spent_share or (max_cost, share)
        if budget != max_cost:  # a new budget: what this process saw is a share of the old one
            seen = share
        for mark in _SPEND_WARNINGS:
            if seen < mark <= share:
                self.context.reporter.warning(
                    f"warning: run {self.context.run.name} has spent ${cost:.4f}, past "
                    f"{mark:.0%} of its ${max_cost:g} dollar budget"
                )
        self._spent_share = (max_cost, max(seen, share))

    # -- scoring --

    def evaluate(
        self,
        spec: AgentSpec,
        tasks: Sequence[Any],
        split: str,
        trial: optuna.Trial | optuna.trial.FrozenTrial | None,
        *,
        role: str = "candidate",
    ) -> EvaluationRecord | None:
        """Evaluates `spec` on `tasks`, reusing every result already archived; the run notes it
        under `role` (see `Archive.add_run_entry`).

        Returns None when the budget ran out part-way; the partial evaluation stays in the archive,
        marked running, and a resume completes it. With racing, a candidate clearly worse than the
        incumbent at a stage stops there, archived as "pruned" (see `Racing`).
        """
        ctx = self.context
        ran = False
        trial_number = None if trial is None else trial.number
        racing = ctx.resolved.racing if role == "candidate" else None
        order = [t.id for t in tasks]
        opened: list[EvaluationRecord] = []
        pruned = False
        tested = 0  # the last stage tested
        done: set[str] = set()  # kept here, so that a check between tasks reads nothing

        def should_prune() -> bool:
            nonlocal pruned, tested
            # A stage is tested once its items, the first of the run's order, all have a result.
            if pruned or not racing or not opened:
                return pruned
            stage = racing.due(order, done, after=tested)
            if not stage:
                return False
            tested = stage
            results = self._scores(opened[0].id)
            pruned = self._trails_incumbent(
                spec, {t: results[t] for t in order[:stage]}, n_items=len(order)
            )
            return pruned

        def started(evaluation: EvaluationRecord, n_done: int) -> None:
            nonlocal ran
            if n_done and racing:
                done.update(self._scores(evaluation.id))
            ctx.archive.add_run_entry(
                run_name=ctx.run.name,
                agent_hash=spec.spec_hash,
                evaluation_id=evaluation.id,
                trial_number=trial_number,
                role=role,
            )
            opened.append(evaluation)
            if split == "holdout":  # every look at the holdout is kept, reused scores too
                ctx.archive.record_holdout_look(
                    benchmark=ctx.run.benchmark,
                    evaluation_id=evaluation.id,
                    source="run",
                    run_name=ctx.run.name,
                )
            if evaluation.status != "complete":
                ran = True
                ctx.reporter.agent_started(spec, len(tasks), n_done, split)

        def recorded(outcome: TaskOutcome) -> None:
            done.add(outcome.task_id)
            self._tokens_since += outcome.prompt_tokens + outcome.completion_tokens
            self._cost_since += outcome.cost
            self.charge_time(lag_s=_TOTALS_LAG_S)
            ctx.reporter.task_finished(outcome)

        # Token and time budgets may stop a search evaluation part-way; the holdout confirmation
        # of the chosen winner always runs to the end.
        config = ctx.config
        evaluation = evaluate_agent(
            ctx.archive,
            spec,
            ctx.benchmark,
            tasks,
            llm=ctx.llm,
            split=split,
            train_examples=ctx.examples,
            concurrency=config.concurrency,
            timeout_s=config.task_timeout_s,
            seed=config.seed,
            on_start=started,
            on_result=recorded,
            should_stop=lambda: (
                split == "search"
                and (self.stop_reason(lag_s=_TOTALS_LAG_S) is not None or should_prune())
            ),
            lease_s=ctx.heartbeat_s * GRACE_BEATS,
        )
        if evaluation is None and pruned:
            evaluation = self._record_pruned(opened[0].id)
        if evaluation is not None:
            if ran:
                ctx.reporter.agent_finished(spec, evaluation, split)
            self.tracking.evaluated()
        return evaluation

    def record_scores(self, spec: AgentSpec, scores: Mapping[str, float]) -> EvaluationRecord:
        """Records the caller's scores of `spec`, one per search item, as its search evaluation.
        A result the archive holds already stands: the archive never rewrites one."""
        ctx = self.context
        evaluation = ctx.archive.get_or_create_evaluation(
            agent_hash=spec.spec_hash,
            benchmark=ctx.benchmark.name,
            task_ids=[t.id for t in ctx.search_tasks],
            split="search",
        )
        if evaluation.status != "complete":
            for task in ctx.search_tasks:
                outcome = TaskOutcome(
                    task_id=task.id,
                    output="",
                    answer=task.answer,
                    score=scores[task.id],
                    prompt_tokens=0,
                    completion_tokens=0,
                    cost=0.0,
                    latency_s=0.0,
                    details={"scored_by": "caller"},
                )
                ctx.archive.add_task_result(evaluation.id, outcome)
            results = ctx.archive.task_results(evaluation.id)
            final = [results[t.id].score for t in ctx.search_tasks]
            low, high, _ = score_interval(final, seed=ctx.config.seed)
            evaluation = ctx.archive.finish_evaluation(
                evaluation.id,
                status="complete",
                mean=sum(final) / len(final),
                ci_low=low,
                ci_high=high,
            )
        self.tracking.evaluated()
        return evaluation

    def _scores(self, evaluation_id: int) -> dict[str, float]:
        """An evaluation's scores by task id, in the order they were recorded: a racing check
        reads only these, not each result's output and trace."""
        return self.context.archive.task_scores([evaluation_id])[evaluation_id]

    def _trails_incumbent(
        self, spec: AgentSpec, stage: Mapping[str, float], *, n_items: int
    ) -> bool:
        """Whether `spec`, with these results at a stage, is clearly worse than the run's best
        fully scored design."""
        ctx = self.context
        racing = ctx.resolved.racing
        assert racing is not None
        top = ctx.archive.leaderboard(run_name=ctx.run.name, limit=1)
        if not top or top[0].agent_hash == spec.spec_hash:
            return False
        incumbent = self._scores(top[0].evaluation_id)
        return racing.clearly_worse(stage, incumbent, n_items=n_items)

    def _record_pruned(self, evaluation_id: int) -> EvaluationRecord:
        """Closes a pruned evaluation with the mean of its tasks so far: never ranked complete."""
        archive = self.context.archive
        scores = list(self._scores(evaluation_id).values())
        low, high, _ = score_interval(scores, seed=self.context.config.seed)
        return archive.finish_evaluation(
            evaluation_id, status="pruned", mean=sum(scores) / len(scores), ci_low=low, ci_high=high
        )
