"""The search's model-driven operators, prompt refinement and the meta agent, as a part of the
search (`_loop.Engine`): what they learn from comes from the archive, and every call they make
and every design the meta agent writes are recorded there, their tokens in the run's totals (so
against its budget), never in an agent's score.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentdesign.components import AgentSpec, ChatModel, Completion
from agentdesign.evaluators import Task
from agentdesign.search.space import SearchSpace
from agentdesign.search.strategies import Failure, MetaAgent, MetaOutcome, PromptRefiner, item_front
from agentdesign.search.study._part import SearchPart
from agentdesign.search.study._reporting import Reporter

__all__ = ["ModelOperators"]


class ModelOperators(SearchPart):
    """Builds the run's refiner and meta agent, and records what they do."""

    llm: ChatModel
    reporter: Reporter
    space: SearchSpace
    dev_tasks: tuple[Task, ...]

    def _refiner(self, *, every: int) -> PromptRefiner:
        return PromptRefiner(
            llm=self.llm,
            model=self.config.model,
            failures=self._failures,
            on_start=lambda: self.reporter.search_call_started("refinement"),
            on_call=lambda completion: self._search_call_done(completion, "refinement"),
            every=every,
        )

    def _meta_agent(self) -> MetaAgent:
        model = self.config.meta_model or self.config.model
        return MetaAgent(
            llm=self.llm,
            model=model,
            space=self.space,
            failures=self._failures if self.dev_tasks else None,
            tokens_per_item=self._tokens_per_item,
            front=self._item_front,
            on_start=lambda: self.reporter.search_call_started("meta"),
            on_call=lambda completion: self._search_call_done(completion, "meta", model=model),
            record=self._record_proposals,
            every=self.config.meta_period,
            n_view=self.config.meta_view,
            code=self.config.meta_code,
        )

    def _search_call_done(
        self, completion: Completion, purpose: str, *, model: str | None = None
    ) -> None:
        self._record_search_call(completion, purpose, model=model)
        tokens = completion.prompt_tokens + completion.completion_tokens
        self.reporter.search_call_finished(purpose, tokens)

    def _failures(self, spec: AgentSpec) -> list[Failure]:
        """The development tasks `spec` scored below 1 on, with what it answered.

        The development items are the run's own (see `dev_task_ids`): apart from the search items
        every design is scored on and from the holdout, so a rewrite is never scored on the tasks
        it learnt from. `spec` is scored on them first (archived, counted in the run's tokens,
        never ranked).
        """
        evaluation = self._evaluate(spec, self.dev_tasks, "search", None, role="dev")
        if evaluation is None:  # the budget ran out meanwhile
            return []
        tasks = {t.id: t for t in self.dev_tasks}
        return [
            Failure(question=tasks[i].question, output=r.output, expected=tasks[i].answer)
            for i, r in self.archive.task_results(evaluation.id).items()
            if r.score < 1.0
        ]

    def _item_front(self) -> dict[str, int]:
        """The per-item Pareto front of the run's fully scored designs (see `item_front`)."""
        rows = self.archive.leaderboard(run_name=self.run.name, limit=1000)
        scores = self.archive.task_scores([row.evaluation_id for row in rows])
        return item_front({row.agent_hash: scores[row.evaluation_id] for row in rows})

    def _tokens_per_item(self) -> dict[str, float]:
        """The run's fully scored designs' tokens per search item by hash, read at once."""
        return {
            row.agent_hash: (row.prompt_tokens + row.completion_tokens) / max(row.n_tasks, 1)
            for row in self.archive.leaderboard(run_name=self.run.name, limit=1000)
        }

    def _record_search_call(
        self, completion: Completion, purpose: str, *, model: str | None = None
    ) -> None:
        """A cached answer was paid for, and recorded, when this run first asked for it."""
        if completion.cached:
            return
        self.archive.add_search_call(
            run_name=self.run.name,
            purpose=purpose,
            model=model or self.config.model,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            cost=completion.cost,
            latency_s=completion.latency_s,
        )

    def _record_proposals(self, outcomes: Sequence[MetaOutcome]) -> None:
        """The outcomes of one meta agent call, but those the run holds already: a run resumed
        before its proposal became a trial asks again and gets the cached reply, whose outcomes
        were recorded in order up to where it stopped."""
        if not outcomes:
            return
        call = (outcomes[0].prompt, outcomes[0].response)
        held = sum((p.prompt, p.response) == call for p in self.archive.proposals(self.run.name))
        for outcome in outcomes[held:]:
            self._record_proposal(outcome)

    def _record_proposal(self, outcome: MetaOutcome) -> None:
        """Every design the meta agent wrote, with its fate; a valid one's spec is archived too,
        so that a refused duplicate or a screened-out design can be looked at later."""
        if outcome.spec is not None:  # with its lineage, which the trial's own add keeps
            self.archive.add_agent(
                spec=outcome.spec.to_dict(),
                spec_hash=outcome.spec.spec_hash,
                parent_hash=outcome.parents[0] if outcome.parents else None,
                operator=outcome.operator,
            )
        self.archive.add_proposal(
            run_name=self.run.name,
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
