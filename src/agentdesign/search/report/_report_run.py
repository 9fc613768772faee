"""What the report reads of a run, once: each complete evaluation with its task scores, the run's
roles, verdict, Pareto front and meta agent proposals; and how every view writes a design (its
components, its score with the interval's method and count), always escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from agentdesign.archive import Archive, LeaderboardRow, ProposalRecord, RunRecord
from agentdesign.components import AgentSpec
from agentdesign.evaluators import ScoreSummary, summarize
from agentdesign.search.verdict import RunVerdict, run_verdict

MOST_ROWS = 60  # designs shown in the table and the heat map (the best ones)


@dataclass(frozen=True)
class Design:
    """One complete evaluation in the run, with what every plot needs of it."""

    row: LeaderboardRow
    scores: Mapping[str, float]  # task id -> score
    summary: ScoreSummary
    spec: AgentSpec | None  # None: a component this version of agentdesign no longer has
    show_model: bool = False  # its run's designs run on several models: its own is named

    @property
    def short(self) -> str:
        return self.row.agent_hash[:10]

    @property
    def tokens_per_item(self) -> float:
        return (self.row.prompt_tokens + self.row.completion_tokens) / max(self.row.n_tasks, 1)

    def hover(self) -> str:
        """The design's hash, components (one slot a line), score and tokens, for plotly's hover."""
        return "<br>".join(
            [
                f"<b>{self.short}</b>",
                *([f"on {escape(self.spec.model)}"] if self.show_model and self.spec else []),
                *(escape(part) for part in components_of(self.spec)),
                f"score {interval(self.summary)}",
                f"{self.tokens_per_item:,.0f} tokens per item",
            ]
        )


@dataclass(frozen=True)
class Run:
    record: RunRecord
    order: Sequence[Design]  # search evaluations in the order the run took them up
    ranked: Sequence[Design]  # the same, best search mean first (the leaderboard's order)
    holdout: Mapping[str, Design]  # agent hash -> its holdout evaluation in this run
    roles: Mapping[int, str]  # evaluation id -> role in the run
    leader: str | None  # the recorded winner, else the best search mean so far
    leader_label: str  # "winner", or what the leader is while no winner is recorded
    verdict: RunVerdict
    front: frozenset[int]  # evaluation ids on the search Pareto front
    proposals: Sequence[ProposalRecord]  # the meta agent's, oldest first; empty without one
    many_models: bool  # the run searched several models, or its designs run on several


def load_run(archive: Archive, run_name: str) -> Run:
    """Reads everything the report shows, once: each evaluation's task scores feed four views."""
    record = archive.get_run(run_name)
    roles = archive.run_roles(run_name)
    searched = archive.leaderboard(run_name=run_name, limit=1_000_000)
    held = archive.leaderboard(run_name=run_name, split="holdout", limit=1_000_000)
    models = {row.spec.get("model") for row in (*searched, *held)}
    many = len(record.config.get("models") or ()) > 1 or len(models) > 1
    ranked = [_design(archive, row, show_model=many) for row in searched]
    by_id = {design.row.evaluation_id: design for design in ranked}
    taken = dict.fromkeys(e.id for e in archive.run_evaluations(run_name, split="search"))
    holdout = {row.agent_hash: _design(archive, row, show_model=many) for row in held}
    return Run(
        record=record,
        order=[by_id[i] for i in taken if i in by_id],
        ranked=ranked,
        holdout=holdout,
        roles=roles,
        leader=record.winner_hash or (ranked[0].row.agent_hash if ranked else None),
        leader_label="winner" if record.winner_hash else "leader (no winner recorded yet)",
        verdict=run_verdict(archive, run_name),
        front=frozenset(row.evaluation_id for row in archive.pareto(run_name=run_name)),
        proposals=archive.proposals(run_name),
        many_models=many,
    )


def _design(archive: Archive, row: LeaderboardRow, *, show_model: bool) -> Design:
    results = archive.task_results(row.evaluation_id)
    scores = {task: outcome.score for task, outcome in results.items()}
    summary = summarize(list(scores.values()))
    spec = parse_spec(row.spec)
    return Design(row=row, scores=scores, summary=summary, spec=spec, show_model=show_model)


def skip(reason: str) -> str:
    """Says why a view is empty, where a plot or table would be."""
    return f'<p class="skip">{escape(reason)}</p>'


def interval(summary: ScoreSummary, *, html_: bool = False) -> str:
    """e.g. `0.40 [0.17, 0.69] Wilson n=10`: the method and count say how far to trust it."""
    score = f"{summary.mean:.2f} [{summary.ci_low:.2f}, {summary.ci_high:.2f}]"
    how = f"{summary.method} n={summary.n}"
    if html_:
        return f'<span class="score">{score}</span> <span class="method">{escape(how)}</span>'
    return f"{score} {how}"


def parse_spec(spec: Mapping[str, Any]) -> AgentSpec | None:
    try:
        return AgentSpec.from_dict(spec)
    except ValueError:  # a component this version no longer has
        return None


def components_of(spec: AgentSpec | None) -> list[str]:
    if spec is None:
        return ["(a component this version of agentdesign lacks)"]
    return spec.describe().split(" + ")
