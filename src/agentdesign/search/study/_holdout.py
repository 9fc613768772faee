"""The end of a run: its winner, chosen on search scores alone, recorded before any holdout item
runs, then scored on the untouched holdout split with the run's baselines and any exploratory
designs, so the verdict compares them on the same items.
"""

from __future__ import annotations

from agentdesign.archive import ArchiveError, EvaluationRecord
from agentdesign.components import AgentSpec
from agentdesign.evaluators import InteractiveBenchmark
from agentdesign.search.study._context import RunContext
from agentdesign.search.study._scoring import RunScoring
from agentdesign.search.verdict import cot_baseline, cot_sc_baseline

__all__ = ["HoldoutConfirmation"]


class HoldoutConfirmation:
    """The run's holdout steps, scored through the run's scoring (`RunScoring`)."""

    def __init__(self, context: RunContext, scoring: RunScoring) -> None:
        self.context = context
        self.scoring = scoring

    def confirm(self, top: int) -> tuple[EvaluationRecord, ...]:
        """Records the winner, chosen on search scores alone, then scores it, the baselines and
        the next `top - 1` designs as exploratory ones on the untouched holdout split, in that
        order (nothing when `top` is 0)."""
        ctx = self.context
        if not ctx.holdout_tasks or top < 1:
            return ()
        winner = self._record_winner()
        if winner is None:
            return ()
        confirmed = self._evaluate(winner, role="winner")
        if confirmed is None:
            return ()
        scored = [confirmed, *self._score_baselines(winner, confirmed)]
        for row in ctx.archive.leaderboard(run_name=ctx.run.name, limit=top):
            if row.agent_hash != winner.spec_hash:
                spec = AgentSpec.from_dict(row.spec)
                evaluation = self._evaluate(spec, role="exploratory")
                if evaluation is not None:
                    scored.append(evaluation)
        return tuple(scored)

    def _record_winner(self) -> AgentSpec | None:
        """The run's winner: the best complete search evaluation, recorded in the archive before
        any holdout task runs, or the one recorded already (a winner is never replaced)."""
        ctx = self.context
        if ctx.run.winner_hash is None:
            top = ctx.archive.leaderboard(run_name=ctx.run.name, limit=1)
            if not top:
                return None
            try:
                ctx.run = ctx.archive.record_winner(ctx.run.name, top[0].agent_hash)
            except ArchiveError:  # another worker recorded its winner first: that one stands
                ctx.run = ctx.archive.get_run(ctx.run.name)
        assert ctx.run.winner_hash is not None
        return AgentSpec.from_dict(ctx.archive.get_agent(ctx.run.winner_hash).spec)

    def _score_baselines(
        self, winner: AgentSpec, confirmed: EvaluationRecord
    ) -> list[EvaluationRecord]:
        """Scores the run's baselines on the winner's holdout items; CoT first, since CoT-SC takes
        as many samples as the winner's tokens per item buy at CoT's."""
        config = self.context.config
        interactive = isinstance(self.context.benchmark, InteractiveBenchmark)
        cot = cot_baseline(config.model, interactive=interactive)
        cot_evaluation: EvaluationRecord | None = None
        scored = []
        for baseline in sorted(config.baselines, key=lambda b: b["label"] != "cot"):
            if baseline.get("spec") is not None:
                spec = AgentSpec.from_dict(baseline["spec"])
            elif baseline["label"] == "cot":
                spec = cot
            elif interactive:  # self-consistency cannot play an environment's episodes
                continue
            else:
                cot_evaluation = cot_evaluation or self._evaluate(cot, role="baseline")
                if cot_evaluation is None:
                    continue
                matched = cot_sc_baseline(
                    config.model,
                    winner_tokens=confirmed.tokens_per_item,
                    cot_tokens=cot_evaluation.tokens_per_item,
                )
                if matched is None:  # CoT is already the cost-matched baseline; the verdict says so
                    continue
                spec = matched
            if spec.spec_hash == winner.spec_hash:
                continue  # the winner is this baseline: no comparison to make
            evaluation = self._evaluate(spec, role="baseline")
            if evaluation is not None:
                scored.append(evaluation)
                if spec.spec_hash == cot.spec_hash:
                    cot_evaluation = evaluation
        return scored

    def _evaluate(self, spec: AgentSpec, *, role: str) -> EvaluationRecord | None:
        return self.scoring.evaluate(spec, self.context.holdout_tasks, "holdout", None, role=role)
