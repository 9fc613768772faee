"""What the search's model-driven operators, prompt refinement and the meta agent, see of the run
(`ModelOperators`): what they learn from comes from the archive, and every call they make and
every design the meta agent writes are recorded there, their tokens in the run's totals (so
against its budget), never in an agent's score.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentdesign.components import AgentSpec, Completion
from agentdesign.search.strategies import Failure, MetaOutcome, item_front
from agentdesign.search.study._context import RunContext
from agentdesign.search.study._scoring import RunScoring

__all__ = ["ModelOperators"]


class ModelOperators:
    """What the run's prompt refiner and meta agent read of the run and tell it (`RunView`, which
    the engine offers them through this part): failures scored through the run's scoring, the
    run's leaderboard read from the archive, and every call and proposal recorded there."""

    def __init__(self, context: RunContext, scoring: RunScoring) -> None:
        self.context = context
        self.scoring = scoring

    def call_started(self, purpose: str) -> None:
        self.context.reporter.search_call_started(purpose)

    def call_finished(self, completion: Completion, purpose: str, model: str) -> None:
        self._record_search_call(completion, purpose, model=model)
        tokens = completion.prompt_tokens + completion.completion_tokens
        self.context.reporter.search_call_finished(purpose, tokens)

    def failures(self, spec: AgentSpec) -> list[Failure]:
        """The development tasks `spec` scored below 1 on, with what it answered (none when the
        run has no development items).

        The development items are the run's own (see `dev_task_ids`): apart from the search items
        every design is scored on and from the holdout, so a rewrite is never scored on the tasks
        it learnt from. `spec` is scored on them first (archived, counted in the run's tokens,
        never ranked).
        """
        dev_tasks = self.context.dev_tasks
        if not dev_tasks:
            return []
        evaluation = self.scoring.evaluate(spec, dev_tasks, "search", None, role="dev")
        if evaluation is None:  # the budget ran out meanwhile
            return []
        tasks = {t.id: t for t in dev_tasks}
        return [
            Failure(question=tasks[i].question, output=r.output, expected=tasks[i].answer)
            for i, r in self.context.archive.task_results(evaluation.id).items()
            if r.score < 1.0
        ]

    def front(self) -> dict[str, int]:
        """The per-item Pareto front of the run's fully scored designs (see `item_front`)."""
        archive = self.context.archive
        rows = archive.leaderboard(run_name=self.context.run.name, limit=1000)
        scores = archive.task_scores([row.evaluation_id for row in rows])
        return item_front({row.agent_hash: scores[row.evaluation_id] for row in rows})

    def tokens_per_item(self) -> dict[str, float]:
        """The run's fully scored designs' tokens per search item by hash, read at once."""
        return {
            row.agent_hash: (row.prompt_tokens + row.completion_tokens) / max(row.n_tasks, 1)
            for row in self.context.archive.leaderboard(run_name=self.context.run.name, limit=1000)
        }

    def _record_search_call(self, completion: Completion, purpose: str, *, model: str) -> None:
        """A cached answer was paid for, and recorded, when this run first asked for it."""
        if completion.cached:
            return
        self.context.archive.add_search_call(
            run_name=self.context.run.name,
            purpose=purpose,
            model=model,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            cost=completion.cost,
            latency_s=completion.latency_s,
        )

    def record(self, outcomes: Sequence[MetaOutcome]) -> None:
        """The outcomes of one meta agent call, but those the run holds already: a run resumed
        before its proposal became a trial asks again and gets the cached reply, whose outcomes
        were recorded in order up to where it stopped."""
        if not outcomes:
            return
        call = (outcomes[0].prompt, outcomes[0].response)
        proposals = self.context.archive.proposals(self.context.run.name)
        held = sum((p.prompt, p.response) == call for p in proposals)
        for outcome in outcomes[held:]:
            self._record_proposal(outcome)

    def _record_proposal(self, outcome: MetaOutcome) -> None:
        """Every design the meta agent wrote, with its fate; a valid one's spec is archived too,
        so that a refused duplicate or a screened-out design can be looked at later."""
        archive = self.context.archive
        if outcome.spec is not None:  # with its lineage, which the trial's own add keeps
            archive.add_agent(
                spec=outcome.spec.to_dict(),
                spec_hash=outcome.spec.spec_hash,
                parent_hash=outcome.parents[0] if outcome.parents else None,
                operator=outcome.operator,
            )
        archive.add_proposal(
            run_name=self.context.run.name,
            operator=outcome.operator,
            parents=outcome.parents,
            prompt=outcome.prompt,
            response=outcome.response,
            status=outcome.status,
            reason=outcome.reason,
            spec_hash=None if outcome.spec is None else outcome.spec.spec_hash,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
        )
