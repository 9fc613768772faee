"""What `show` prints: a run's verdict, then its leaderboard (search scores, the holdout check and
the gap between them) as tables or JSON; and an agent's lineage, with the meta agent's prompt and
response for a design it proposed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentdesign.archive import Archive, LeaderboardRow, ProposalRecord, RunRecord
from agentdesign.components import AgentDesignError, AgentSpec
from agentdesign.evaluators import ScoreSummary
from agentdesign.search.cli._estimate import print_spend, spend
from agentdesign.search.cli._format import ci_text, interval_caption, row_summary
from agentdesign.search.config import holdout_reuse
from agentdesign.search.study import RunSummary
from agentdesign.search.verdict import run_verdict

__all__ = ["latest_run", "leaderboard_json", "print_leaderboard", "print_lineage", "print_summary"]


def print_summary(console: Console, archive: Archive, summary: RunSummary) -> None:
    """What a run spent and why it stopped, then its verdict and leaderboard."""
    run = summary.run
    console.print(
        f"\nrun [bold]{run.name}[/]: {summary.agents_done} agents, {summary.tokens:,} tokens, "
        f"${summary.cost:.4f}, {summary.elapsed_s / 60:.1f} min; stopped: {summary.stop_reason}"
    )
    print_leaderboard(console, archive, run.name, limit=20)


@dataclass(frozen=True)
class _Placing:
    """A leaderboard row as `show` reports it: its search score, its holdout check if any, and
    its role in the run ("winner", "exploratory" when scored on the holdout after the winner was
    fixed, else "candidate")."""

    row: LeaderboardRow
    search: ScoreSummary
    holdout: ScoreSummary | None
    role: str

    @property
    def gap(self) -> float | None:
        return None if self.holdout is None else self.search.mean - self.holdout.mean

    @property
    def tokens_per_item(self) -> float:
        return (self.row.prompt_tokens + self.row.completion_tokens) / max(self.row.n_tasks, 1)

    @property
    def s_per_item(self) -> float:
        return self.row.wall_s / max(self.row.n_tasks, 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.row.rank,
            "agent": self.row.agent_hash,
            "role": self.role,
            "design": AgentSpec.from_dict(self.row.spec).describe(),
            "search": asdict(self.search),
            "holdout": None if self.holdout is None else asdict(self.holdout),
            "gap": self.gap,
            "tokens_per_item": self.tokens_per_item,
            "s_per_item": self.s_per_item,
            "cost": self.row.cost,
            "spec": self.row.spec,
        }


def _placings(
    archive: Archive,
    run: RunRecord | None,
    *,
    limit: int,
    benchmark: str | None,
    model: str | None,
) -> list[_Placing]:
    """The leaderboard on search scores (a run's, or across runs) with the holdout scores beside.

    The winner was recorded on search scores before the holdout was touched; a holdout score of
    any other design is exploratory and can never replace it.
    """
    run_name = None if run is None else run.name
    rows = archive.leaderboard(run_name=run_name, benchmark=benchmark, model=model, limit=limit)
    holdout = {
        row.agent_hash: row
        for row in archive.leaderboard(
            run_name=run_name, benchmark=benchmark, model=model, split="holdout", limit=10_000
        )
    }
    roles = {} if run is None else archive.run_roles(run.name)
    placings = []
    for row in rows:
        check = holdout.get(row.agent_hash)
        if run is not None and row.agent_hash == run.winner_hash:
            role = "winner"
        elif check is not None and roles.get(check.evaluation_id) == "exploratory":
            role = "exploratory"
        else:
            role = "candidate"
        confirmed = None if check is None else row_summary(archive, check)
        placings.append(_Placing(row, row_summary(archive, row), confirmed, role))
    return placings


def print_leaderboard(
    console: Console,
    archive: Archive,
    run_name: str | None,
    *,
    limit: int,
    benchmark: str | None = None,
    model: str | None = None,
) -> None:
    """A run's verdict, then its leaderboard in two tables that fit 80 columns: the scores, then
    what each design is and costs."""
    run = None if run_name is None else archive.get_run(run_name)
    placings = _placings(archive, run, limit=limit, benchmark=benchmark, model=model)
    if run is not None:
        title = (
            f"{run.name}: {run.benchmark}, ranked on the search split "
            f"({len(run.search_task_ids)} items); holdout: {len(run.holdout_task_ids)} unseen items"
        )
        for line in run_verdict(archive, run.name).headline():
            console.print(escape(line))
        reuse = holdout_reuse(archive, run.name)
        if reuse is not None:
            console.print(escape(reuse))
        meta = _meta_agent_line(archive, run.name)
        if meta is not None:
            console.print(meta)
        console.print()
    else:
        title = "all runs" + "".join(
            f", {what} {value}"
            for what, value in (("benchmark", benchmark), ("model", model))
            if value is not None
        )
    summaries = [p.search for p in placings] + [p.holdout for p in placings if p.holdout]
    model_column = ("model",) if _many_models(run, placings) else ()
    # Borderless, so that the scores fit 80 columns whole and the designs get half of them.
    style: dict[str, Any] = {"show_edge": False, "pad_edge": False, "collapse_padding": True}
    scores = Table(caption=interval_caption(summaries), box=box.SIMPLE_HEAD, **style)
    designs = Table(box=box.SIMPLE_HEAD, **style)
    for table, columns in (
        (scores, ("#", "agent", "search (95% CI)", "n", "holdout (95% CI)", "n", "gap")),
        (designs, ("agent", "tokens/item", "s/item", "cost $", *model_column, "design")),
    ):
        for column in columns:
            left = column in ("agent", "model", "design")
            table.add_column(
                column,
                justify="left" if left else "right",
                no_wrap=column not in ("model", "design"),
                overflow="fold",  # a long design breaks across lines, never cut short
            )
    for p in placings:
        rank, agent = str(p.row.rank), p.row.agent_hash[:10]
        mark = "*" if p.role == "exploratory" else ""
        held = "-" if p.holdout is None else ci_text(p.holdout) + mark
        scores.add_row(
            f"{rank} winner" if p.role == "winner" else rank,
            agent,
            ci_text(p.search),
            str(p.search.n),
            held,
            "-" if p.holdout is None else str(p.holdout.n),
            "-" if p.gap is None else f"{p.gap:+.3f}",
        )
        spec = AgentSpec.from_dict(p.row.spec)
        cells = [agent, f"{p.tokens_per_item:,.0f}", f"{p.s_per_item:.1f}", f"{p.row.cost:.4f}"]
        if model_column:
            cells.append(escape(spec.model))
        designs.add_row(*cells, escape(spec.describe()))
    console.print(f"[bold]{escape(title)}[/]")  # not the table's title: that wraps at its width
    console.print(scores)
    if any(p.holdout for p in placings):
        console.print("gap = search - holdout; a large positive gap means the search overfit.")
    if any(p.role == "exploratory" for p in placings):
        console.print("* exploratory: scored on the holdout after the winner was fixed, no verdict")
    console.print("\n[bold]the designs: cost and components[/]")
    console.print(designs)
    if run is not None:
        print_spend(console, archive, run)


def _many_models(run: RunRecord | None, placings: Sequence[_Placing]) -> bool:
    """Whether the designs listed run on several models, or their run searched several: each
    design's model is then listed beside it."""
    searched = () if run is None else run.config.get("models") or ()
    models = {str(p.row.spec.get("model")) for p in placings}
    return len(searched) > 1 or len(models) > 1


def leaderboard_json(
    archive: Archive,
    run_name: str | None,
    *,
    limit: int,
    benchmark: str | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """What `show` prints, for scripts: the verdict and the leaderboard with every interval's
    method and n."""
    run = None if run_name is None else archive.get_run(run_name)
    verdict = None if run is None else run_verdict(archive, run.name)
    return {
        "run": None if run is None else run.name,
        "benchmark": benchmark if run is None else run.benchmark,
        "model": model if run is None else run.model,
        "winner": None if run is None else run.winner_hash,
        "verdict": [] if verdict is None else verdict.headline(),
        "baselines": [
            {
                "label": b.label,
                "agent": b.baseline_hash,
                "comparison": asdict(b.comparison),
                "winner_tokens_per_item": b.winner_tokens,
                "baseline_tokens_per_item": b.baseline_tokens,
            }
            for b in (() if verdict is None else verdict.baselines)
        ],
        "overfit": None if verdict is None or verdict.overfit is None else asdict(verdict.overfit),
        "holdout_reuse": None if run is None else holdout_reuse(archive, run.name),
        "leaderboard": [
            p.to_json()
            for p in _placings(archive, run, limit=limit, benchmark=benchmark, model=model)
        ],
        "spend": None if run is None else spend(archive, run),
    }


def print_lineage(console: Console, archive: Archive, target: str | None) -> None:
    """The ancestry of an agent (a hash prefix), or of a run's winner (a run name)."""
    runs = {run.name for run in archive.list_runs()}
    if target is None or target in runs:
        run_name = target or latest_run(archive)
        winner = archive.get_run(run_name).winner_hash
        top = archive.leaderboard(run_name=run_name, limit=1)
        if winner is None and not top:
            raise AgentDesignError(f"run {run_name} has no finished agent yet")
        agent = archive.get_agent(winner or top[0].agent_hash)
    else:
        agent = archive.find_agent(target)
    table = Table(title=f"lineage of {agent.spec_hash[:10]}")
    for column in ("generation", "agent", "operator", "second parent", "design"):
        table.add_column(column)
    chain = archive.lineage(agent.spec_hash)
    for depth, ancestor in enumerate(chain):
        table.add_row(
            str(-depth),
            ancestor.spec_hash[:10],
            ancestor.operator or "-",
            (ancestor.co_parent_hash or "-")[:10],
            escape(AgentSpec.from_dict(ancestor.spec).describe()),
        )
    console.print(table)
    missing = chain[-1].parent_hash
    if missing is not None:
        console.print(f"(its parent {missing[:10]} is not in this archive)")
    made = [
        proposal
        for run_name in sorted(runs)
        for proposal in archive.proposals(run_name, status="accepted", spec_hash=agent.spec_hash)
    ]
    if made:
        _print_proposal(console, min(made, key=lambda p: p.created_at), n_more=len(made) - 1)


# How much of the meta agent's prompt and response `show --lineage` prints, each.
_CLIP_CHARS = 600


def _meta_agent_line(archive: Archive, run_name: str) -> str | None:
    """What the run's meta agent proposed and what became of it, if it proposed anything: every
    status but "accepted" counts as refused, each named with its count."""
    counts = archive.proposal_counts(run_name)
    total = sum(counts.values())
    if total == 0:
        return None
    refused = ", ".join(f"{status} {n}" for status, n in counts.items() if status != "accepted")
    return (
        f"meta agent: {total} proposals, {counts['accepted']} accepted, "
        f"{total - counts['accepted']} refused ({refused})"
    )


def _print_proposal(console: Console, proposal: ProposalRecord, *, n_more: int) -> None:
    """How the meta agent made the design: operator, parents, and its prompt and response."""
    parents = ", ".join(parent[:10] for parent in proposal.parents) or "none"
    console.print(
        f"\n[bold]made by the meta agent[/] in run {escape(proposal.run_name)}: operator "
        f"{escape(proposal.operator)}, parents {escape(parents)}, "
        f"{proposal.prompt_tokens:,} + {proposal.completion_tokens:,} tokens"
    )
    if n_more:
        console.print(f"({n_more} more accepted proposals of this design in other runs)")
    for what, content in (("prompt", proposal.prompt), ("response", proposal.response)):
        console.print(f"[bold]{what}[/] ({len(content):,} characters):")
        console.print(_clipped(content), markup=False, highlight=False, soft_wrap=True)


def _clipped(content: str, limit: int = _CLIP_CHARS) -> str:
    if len(content) <= limit:
        return content
    return f"{content[:limit]}\n... ({len(content) - limit:,} more characters cut)"


def latest_run(archive: Archive) -> str:
    """The run made last: what a command that takes a run name works on without one."""
    runs = archive.list_runs()
    if not runs:
        raise AgentDesignError(f"the archive {archive.url} holds no runs yet")
    return max(runs, key=lambda r: r.created_at).name
