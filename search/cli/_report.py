"""`agentdesign report`: one self-contained HTML page per run that opens offline, anywhere.

The verdict comes first (the winner against the baselines on unseen items), then the leaderboard
and six interactive plotly figures, and, when the run had a meta agent, what it proposed. plotly.js
is inlined once, so the file needs no network and can be mailed or archived next to the database;
hovering a point shows the design behind it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from agentdesign.archive import (
    AgentRecord,
    Archive,
    ArchiveError,
    LeaderboardRow,
    ProposalRecord,
    RunRecord,
)
from agentdesign.components import AgentSpec
from agentdesign.evaluators import BenchmarkError, ScoreSummary, get_benchmark, summarize
from agentdesign.search._value import Labelled, held_out_predictions, value_report
from agentdesign.search._verdict import BaselineVerdict, RunVerdict, run_verdict

__all__ = ["write_report"]

# One colour per meaning, on every plot: designs, the winner, the best/front, the baselines' gains.
_DESIGN, _WINNER, _FRONT, _NEUTRAL = "#4c78a8", "#f58518", "#e45756", "#9d9d9d"
_GAIN, _LOSS = "#54a24b", "#e45756"
_META = "#b279a2"  # what the meta agent wrote
_FONT = "DejaVu Sans, Liberation Sans, Helvetica, Arial, sans-serif"
_Z95 = 1.959964
_MOST_ROWS = 60  # designs shown in the table and the heat map (the best ones)
_MOST_FOLDS = 5
_MIN_VALUE_DESIGNS = 5
_MOST_PROPOSALS = 200  # the meta agent's proposals listed (the newest ones)
_CLIP_CHARS = 4000  # of each proposal's prompt and response
_META_OPERATORS = ("meta", "meta-code")  # the operators the meta agent's designs are made by
_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"scale": 2}}


@dataclass(frozen=True)
class _Design:
    """One complete evaluation in the run, with what every plot needs of it."""

    row: LeaderboardRow
    scores: Mapping[str, float]  # task id -> score
    summary: ScoreSummary
    spec: AgentSpec | None  # None: a component this version of agentdesign no longer has

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
                *(_e(part) for part in _components(self.spec)),
                f"score {_interval(self.summary)}",
                f"{self.tokens_per_item:,.0f} tokens per item",
            ]
        )


@dataclass(frozen=True)
class _Run:
    record: RunRecord
    order: Sequence[_Design]  # search evaluations in the order the run took them up
    ranked: Sequence[_Design]  # the same, best search mean first (the leaderboard's order)
    holdout: Mapping[str, _Design]  # agent hash -> its holdout evaluation in this run
    roles: Mapping[int, str]  # evaluation id -> role in the run
    leader: str | None  # the recorded winner, else the best search mean so far
    leader_label: str  # "winner", or what the leader is while no winner is recorded
    verdict: RunVerdict
    front: frozenset[int]  # evaluation ids on the search Pareto front
    proposals: Sequence[ProposalRecord]  # the meta agent's, oldest first; empty without one


def write_report(archive: Archive, run_name: str, path: Path) -> None:
    """Writes the report of run `run_name` to `path`."""
    run = _load(archive, run_name)
    record = run.record
    totals = archive.run_totals(run_name)
    meta = (
        f"{_e(record.benchmark)} on <code>{_e(record.model)}</code>, strategy "
        f"{_e(record.strategy)}: {len(run.order)} designs scored on {len(record.search_task_ids)} "
        f"search items, {len(record.holdout_task_ids)} holdout items held back; "
        f"{totals.prompt_tokens + totals.completion_tokens:,} tokens, ${totals.cost:.4f}; "
        f"status {_e(record.status)}, {record.elapsed_s / 60:.1f} min."
    )
    sections = [
        _section(
            "verdict",
            "Verdict",
            "What the run can claim: the winner, chosen on the search items alone, against "
            "hand-designed baselines on the same unseen holdout items (paired 95% intervals).",
            "<ul>" + "".join(f"<li>{_e(line)}</li>" for line in run.verdict.headline()) + "</ul>",
        ),
        _section(
            "leaderboard",
            "Leaderboard",
            "Designs ranked by their mean on the search items, each score with its 95% interval, "
            "the interval's method and the number of items; gap is search minus holdout. Only "
            "the winner's holdout score is a pre-registered test; other holdout scores are "
            "marked exploratory.",
            _leaderboard(run),
        ),
        _section(
            "progress",
            "Search progress",
            "Each dot is one design's search score in the order the run evaluated it, with its "
            "95% interval; the line is the best score found so far. A line that stops rising "
            "early means more evaluations bought little.",
            _progress(run),
        ),
        _section(
            "pareto",
            "Score against tokens",
            "Every design's search score against the tokens it spent per item. The red line "
            "joins the Pareto front: designs that no other beats on both score and cost (cost "
            "first, tokens break ties). Up and to the left is better.",
            _pareto(run),
        ),
        _section(
            "items",
            "Designs against items",
            "Each cell is one design's score on one search item (blue solved, red failed). "
            "Rows are designs, best mean on top; columns are items, those that separate the "
            "designs most (highest variance across designs) on the left. Columns of one colour "
            "are items every design solves or fails: they cannot tell designs apart.",
            _items(run),
        ),
        _section(
            "baselines",
            "Paired gain over the baselines",
            "The winner's score minus each baseline's on the same holdout items, with the paired "
            "95% interval. An interval right of zero is a win, left of zero a loss, across zero "
            "no difference shown.",
            _gains(run.verdict),
        ),
        _section(
            "value-model",
            "Value model: predicted against real",
            "The value model screens designs before they are run. Each point is a design's "
            "predicted search score from a model fit without that design (k-fold), with the "
            "predicted 95% interval, against its real score; on the dashed line the prediction "
            "is exact.",
            _value(run),
        ),
        _section(
            "lineage",
            "Lineage of the winner",
            "How the winner (before one is recorded, the leader) was bred: each arrow goes from "
            "a parent to the design derived from it, labelled with the operator; grey arrows "
            "come from a crossover's second parent, grey nodes were not scored in this run. "
            "Hover a node for its components."
            + (
                " The operators meta and meta-code (in purple) mark designs the meta agent wrote, "
                "as settings or as a workflow in code; its prompts and responses are in the "
                "meta agent section."
                if run.proposals
                else ""
            ),
            _lineage(archive, run),
        ),
    ]
    if run.proposals:  # a run without a meta agent shows no empty section
        sections.append(
            _section(
                "meta-agent",
                "Meta agent",
                "The designs a model (the meta agent) wrote from a view of the run, newest last, "
                "and what became of each: accepted (evaluated), screened (valid, but another "
                "design of the same reply screened better), duplicate (a design already "
                "archived), invalid (did not parse or fit the design space) or failed (no usable "
                "reply), with the reason. Its model calls count in the run's tokens, cost and "
                "budget, never in a design's score. Open a row's prompt or response to read what "
                "the model was shown and what it wrote.",
                _meta_agent(archive, run),
            )
        )
    path.write_text(
        _PAGE.format(
            title=_e(record.name),
            plotly=get_plotlyjs(),
            meta=meta,
            body="\n".join(sections),
        ),
        encoding="utf-8",
    )


def _load(archive: Archive, run_name: str) -> _Run:
    """Reads everything the report shows, once: each evaluation's task scores feed four views."""
    record = archive.get_run(run_name)
    roles = archive.run_roles(run_name)
    ranked = [
        _design(archive, row) for row in archive.leaderboard(run_name=run_name, limit=1_000_000)
    ]
    by_id = {design.row.evaluation_id: design for design in ranked}
    taken = dict.fromkeys(e.id for e in archive.run_evaluations(run_name, split="search"))
    holdout = {
        row.agent_hash: _design(archive, row)
        for row in archive.leaderboard(run_name=run_name, split="holdout", limit=1_000_000)
    }
    return _Run(
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
    )


def _design(archive: Archive, row: LeaderboardRow) -> _Design:
    results = archive.task_results(row.evaluation_id)
    scores = {task: outcome.score for task, outcome in results.items()}
    summary = summarize(list(scores.values()))
    return _Design(row=row, scores=scores, summary=summary, spec=_spec(row.spec))


# -- the leaderboard --------------------------------------------------------------------------


def _leaderboard(run: _Run) -> str:
    if not run.ranked and not run.holdout:
        return _skip("No complete evaluation yet.")
    baselines = {b.baseline_hash: b.label for b in run.verdict.baselines}
    rows = []
    for design in run.ranked[:_MOST_ROWS]:
        held = run.holdout.get(design.row.agent_hash)
        gap = "" if held is None else f"{design.summary.mean - held.summary.mean:+.2f}"
        rows.append(
            _table_row(
                str(design.row.rank),
                _badged(design, run),
                design,
                _interval(design.summary, html_=True),
                _holdout_cell(held, run),
                gap,
            )
        )
    searched = {design.row.agent_hash for design in run.ranked}
    for agent_hash, held in run.holdout.items():
        if agent_hash not in searched:
            role = run.roles.get(held.row.evaluation_id, "holdout")
            label = f"baseline {baselines[agent_hash]}" if agent_hash in baselines else role
            badge = f'<span class="tag baseline">{_e(label)}</span>'
            rows.append(
                _table_row(
                    "&ndash;",
                    f"<code>{held.short}</code> {badge}",
                    held,
                    "&ndash;",
                    _holdout_cell(held, run),
                    "",
                )
            )
    more = len(run.ranked) - _MOST_ROWS
    note = f"<p class='note'>{more} lower-ranked designs not shown.</p>" if more > 0 else ""
    return (
        "<table><thead><tr><th>#</th><th>design</th><th>components</th>"
        "<th>search score</th><th>tokens / item</th><th>holdout score</th><th>gap</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>{note}"
    )


def _table_row(rank: str, name: str, design: _Design, search: str, holdout: str, gap: str) -> str:
    components = _e(" + ".join(_components(design.spec)))
    cells = [rank, name, components, search, f"{design.tokens_per_item:,.0f}", holdout, gap]
    anchor = _anchor(design.row.agent_hash)
    return f'<tr id="{anchor}">' + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def _anchor(agent_hash: str) -> str:
    """The id of a design's row in the leaderboard, which the meta agent's table links to."""
    return _e(f"design-{agent_hash}")


def _listed(run: _Run) -> set[str]:
    """The designs that have a row in the leaderboard table (as `_leaderboard` lists them)."""
    searched = {d.row.agent_hash for d in run.ranked}
    return {d.row.agent_hash for d in run.ranked[:_MOST_ROWS]} | (set(run.holdout) - searched)


def _badged(design: _Design, run: _Run) -> str:
    name = f"<code>{design.short}</code>"
    if design.row.agent_hash != run.leader:
        return name
    kind = "winner" if run.record.winner_hash else "leader"
    return f'{name} <span class="tag {kind}">{_e(run.leader_label)}</span>'


def _holdout_cell(held: _Design | None, run: _Run) -> str:
    if held is None:
        return "&ndash;"
    cell = _interval(held.summary, html_=True)
    if run.roles.get(held.row.evaluation_id) == "exploratory":
        cell += ' <span class="tag exploratory">exploratory</span>'
    return cell


# -- the meta agent ----------------------------------------------------------------------------


def _meta_agent(archive: Archive, run: _Run) -> str:
    """What the meta agent proposed: counts by status, what its calls cost, and each proposal
    (newest last) with its prompt and response folded away. Everything it wrote is escaped."""
    counts = archive.proposal_counts(run.record.name)
    total = sum(counts.values())
    tally = " &middot; ".join(
        f'<span class="tag {_e(status)}">{_e(status)}</span> {n:,}' for status, n in counts.items()
    )
    n_calls, prompt, completion, cost = archive.search_call_totals(run.record.name).get(
        "meta", (0, 0, 0, 0.0)
    )
    totals = archive.run_totals(run.record.name)
    spent = prompt + completion
    share = spent / max(totals.prompt_tokens + totals.completion_tokens, 1)
    summary = (
        f'<p class="counts"><b>{total:,}</b> proposals: {tally}</p>'
        f'<p class="spent">{n_calls:,} meta agent call{"" if n_calls == 1 else "s"} spent '
        f"<b>{spent:,}</b> tokens "
        f"({prompt:,} prompt + {completion:,} completion), ${cost:.4f}: {share:.0%} of the "
        f"run's {totals.prompt_tokens + totals.completion_tokens:,} tokens.</p>"
    )
    shown = run.proposals[-_MOST_PROPOSALS:]
    older = len(run.proposals) - len(shown)
    note = f"<p class='note'>{older:,} older proposals not listed.</p>" if older > 0 else ""
    scores = {d.row.agent_hash: d for d in run.ranked}
    listed = _listed(run)
    rows: list[str] = []
    call = older + 1  # the row showing the prompt and response the rows after it may share
    for n, proposal in enumerate(shown, start=older + 1):
        previous = shown[n - older - 2] if n > older + 1 else None
        if previous is None or (previous.prompt, previous.response) != (
            proposal.prompt,
            proposal.response,
        ):
            call = n  # a new reply (the designs of one reply share its texts)
        rows.append(_proposal_row(n, proposal, scores, listed, call))
    return (
        f'{summary}{note}<table class="proposals"><thead><tr><th>#</th><th>operator</th>'
        "<th>status</th><th>reason</th><th>design</th><th>parents</th><th>tokens</th>"
        f"<th>prompt and response</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _proposal_row(
    n: int, proposal: ProposalRecord, scores: Mapping[str, _Design], listed: set[str], call: int
) -> str:
    """Proposal `n`; when it came from the same reply as row `call` above, its prompt, response
    and tokens are that row's and are not repeated."""
    design = "&ndash;"
    if proposal.spec_hash is not None:
        design = _design_link(proposal.spec_hash, listed)
        scored = scores.get(proposal.spec_hash)
        if scored is not None:
            design += f' <span class="score" title="search score">{scored.summary.mean:.2f}</span>'
    parents = " ".join(_design_link(parent, listed) for parent in proposal.parents) or "none"
    texts = "".join(
        f"<details><summary>{what} ({len(text):,} characters)</summary>"
        f"<pre>{_e(_clipped(text))}</pre></details>"
        for what, text in (("prompt", proposal.prompt), ("response", proposal.response))
    )
    tokens = f"{proposal.prompt_tokens + proposal.completion_tokens:,}"
    if call != n:
        texts = f'<span class="note">the prompt and response of #{call}</span>'
        if proposal.prompt_tokens + proposal.completion_tokens == 0:
            tokens = f"in #{call}"
    cells = [
        str(n),
        f"<code>{_e(proposal.operator)}</code>",
        f'<span class="tag {_e(proposal.status)}">{_e(proposal.status)}</span>',
        _e(proposal.reason or ""),
        design,
        parents,
        tokens,
        texts,
    ]
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def _design_link(agent_hash: str, listed: set[str]) -> str:
    """A design's short hash, linked to its leaderboard row when the table has one."""
    short = f'<code title="{_e(agent_hash)}">{_e(agent_hash[:10])}</code>'
    if agent_hash not in listed:
        return short
    return f'<a href="#{_anchor(agent_hash)}">{short}</a>'


def _clipped(text: str) -> str:
    if len(text) <= _CLIP_CHARS:
        return text
    return f"{text[:_CLIP_CHARS]}\n... ({len(text) - _CLIP_CHARS:,} more characters cut)"


# -- the figures --------------------------------------------------------------------------


def _progress(run: _Run) -> go.Figure | str:
    if not run.order:
        return _skip("No complete search evaluation yet.")
    xs = list(range(1, len(run.order) + 1))
    best = np.maximum.accumulate([d.summary.mean for d in run.order]).tolist()
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=best,
            mode="lines",
            line={"shape": "hv", "color": _FRONT, "width": 2.5},
            name="best so far",
            hoverinfo="skip",
        )
    )
    fig.add_traces(_points(run, run.order, xs))
    _layout(fig, "evaluation (in the order the run took them)", "search score", score="y")
    if len(xs) <= 12:  # whole evaluations only; plotly would tick 1.5, 2.5 on a short run
        fig.update_xaxes(dtick=1)
    return fig


def _pareto(run: _Run) -> go.Figure | str:
    if not run.ranked:
        return _skip("No complete search evaluation yet.")
    fig = go.Figure()
    front = sorted(
        (d for d in run.ranked if d.row.evaluation_id in run.front),
        key=lambda d: d.tokens_per_item,
    )
    fig.add_trace(
        go.Scatter(
            x=[d.tokens_per_item for d in front],
            y=[d.summary.mean for d in front],
            mode="lines+text",
            line={"shape": "hv", "color": _FRONT, "width": 2},
            text=[d.short for d in front],
            textposition="top center",
            textfont={"color": _FRONT},
            name="Pareto front",
            hoverinfo="skip",
        )
    )
    xs = [d.tokens_per_item for d in run.ranked]
    fig.add_traces(_points(run, run.ranked, xs))
    _layout(fig, "tokens per item", "search score", score="y")
    if min(xs) > 0 and max(xs) / min(xs) >= 10:
        values, labels = _log_ticks(min(xs), max(xs))
        fig.update_xaxes(
            type="log", tickvals=values, ticktext=labels, title_text="tokens per item (log scale)"
        )
    return fig


def _items(run: _Run) -> go.Figure | str:
    designs = list(run.ranked[:_MOST_ROWS])
    if not designs:
        return _skip("No complete search evaluation yet.")
    tasks = sorted({task for d in designs for task in d.scores})
    matrix = np.array([[d.scores.get(t, np.nan) for t in tasks] for d in designs])
    spread = np.nan_to_num(np.nanvar(matrix, axis=0)) if len(designs) > 1 else np.zeros(len(tasks))
    columns = sorted(range(len(tasks)), key=lambda j: (-spread[j], tasks[j]))
    tasks = [tasks[j] for j in columns]
    matrix = matrix[:, columns]
    hover = [
        [
            f"item <b>{_e(task)}</b><br>design {d.short}: "
            + ("not scored" if np.isnan(score) else f"score {score:.2f}")
            + "<br>"
            + _e(" + ".join(_components(d.spec)))
            for task, score in zip(tasks, row, strict=True)
        ]
        for d, row in zip(designs, matrix, strict=True)
    ]
    fig = go.Figure(
        go.Heatmap(
            z=[[None if np.isnan(v) else float(v) for v in row] for row in matrix],
            x=tasks,
            y=[d.short for d in designs],
            text=hover,
            hoverinfo="text",
            zmin=0,
            zmax=1,
            colorscale=[[0.0, _FRONT], [0.5, "#f2f2f2"], [1.0, _DESIGN]],
            colorbar={"title": {"text": "score"}, "thickness": 14},
            xgap=1,
            ygap=1,
        )
    )
    _layout(
        fig,
        "item (most separating first)",
        "design (best on top)",
        height=min(900, 160 + 24 * len(designs)),
    )
    fig.update_yaxes(autorange="reversed", type="category", showgrid=False)
    fig.update_xaxes(
        type="category", tickangle=-45, showgrid=False, showticklabels=len(tasks) <= 60
    )
    return fig


def _gains(verdict: RunVerdict) -> go.Figure | str:
    if not verdict.baselines:
        return _skip(
            "No baseline scored on the holdout yet: the verdict needs the winner confirmed."
        )
    ordered: list[BaselineVerdict] = list(verdict.baselines)
    gains = [b.comparison for b in ordered]
    colours = [_GAIN if c.ci_low > 0 else _LOSS if c.ci_high < 0 else _NEUTRAL for c in gains]
    fig = go.Figure(
        go.Scatter(
            x=[c.mean_diff for c in gains],
            y=[
                f"vs {_e(b.label)}<br>{c.mean_diff:+.2f} [{c.ci_low:+.2f}, {c.ci_high:+.2f}]"
                for b, c in zip(ordered, gains, strict=True)
            ],
            mode="markers",
            marker={"size": 12, "color": colours, "symbol": "diamond"},
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [c.ci_high - c.mean_diff for c in gains],
                "arrayminus": [c.mean_diff - c.ci_low for c in gains],
                "thickness": 2,
                "width": 8,
                "color": "#555",
            },
            hovertext=[_e(b.sentence(verdict.winner_label)) for b in ordered],
            hoverinfo="text",
            showlegend=False,
        )
    )
    fig.add_vline(x=0, line={"color": "#333", "dash": "dash", "width": 1})
    _layout(
        fig, "winner minus baseline (holdout score, paired)", "", height=150 + 60 * len(ordered)
    )
    fig.update_yaxes(type="category", autorange="reversed", showgrid=False)
    return fig


def _value(run: _Run) -> go.Figure | str:
    designs = [(d, d.spec) for d in run.order if d.spec is not None]
    if len(designs) < _MIN_VALUE_DESIGNS:
        return _skip(
            f"Not enough designs to judge the value model: {len(designs)} scored, "
            f"{_MIN_VALUE_DESIGNS} needed."
        )
    try:
        description = get_benchmark(run.record.benchmark).description
    except BenchmarkError:  # archived by a plugin this process lacks: its name only, as the search
        description = run.record.benchmark
    rows = [
        Labelled(spec, description, d.summary.mean, tokens_per_task=d.tokens_per_item)
        for d, spec in designs
    ]
    means, stds = held_out_predictions(rows, folds=_MOST_FOLDS)
    real = np.array([r.score for r in rows])
    report = value_report(means, stds, real)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[0, 1],
            y=[0, 1],
            mode="lines",
            line={"color": "#333", "dash": "dash", "width": 1},
            hoverinfo="skip",
            showlegend=False,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=real,
            y=means,
            mode="markers",
            marker={"size": 9, "color": _DESIGN, "line": {"color": "white", "width": 1}},
            error_y={"type": "data", "array": _Z95 * stds, "thickness": 1.2, "color": _DESIGN},
            hovertext=[
                f"{d.hover()}<br>predicted {m:.2f} ± {_Z95 * s:.2f}"
                for (d, _), m, s in zip(designs, means, stds, strict=True)
            ],
            hoverinfo="text",
            showlegend=False,
        )
    )
    _layout(fig, "real search score", "predicted search score", score="xy")
    _title(
        fig,
        f"Spearman rho {report.spearman:.2f} · 95% coverage {report.coverage_95:.0%} "
        f"· mean abs. error {report.mean_abs_error:.3f} · {report.n_agents} designs",
    )
    return fig


def _lineage(archive: Archive, run: _Run) -> go.Figure | str:
    if run.leader is None:
        return _skip("No winner yet.")
    chain = archive.lineage(run.leader)[::-1]  # the oldest ancestor first
    scores = {d.row.agent_hash: d for d in run.ranked}
    nodes: dict[str, tuple[int, int, AgentRecord | None]] = {}  # hash -> x, y, record
    edges: list[tuple[str, str, str, bool]] = []  # parent, child, operator, from a co-parent
    for generation, agent in enumerate(chain):
        nodes[agent.spec_hash] = (generation, 0, agent)
        if agent.parent_hash is not None and agent.parent_hash in nodes:
            edges.append((agent.parent_hash, agent.spec_hash, agent.operator or "", False))
        if agent.co_parent_hash is not None and agent.co_parent_hash not in nodes:
            partner = _archived(archive, agent.co_parent_hash)
            nodes[agent.co_parent_hash] = (max(generation - 1, 0), 1, partner)
            edges.append((agent.co_parent_hash, agent.spec_hash, "", True))
    fig = go.Figure()
    for parent, child, operator, co_parent in edges:
        (x0, y0, _), (x1, y1, _) = nodes[parent], nodes[child]
        meta = operator in _META_OPERATORS  # the meta agent wrote the child
        fig.add_annotation(
            x=x1,
            y=y1,
            ax=x0,
            ay=y0,
            xref="x",
            yref="y",
            axref="x",
            ayref="y",
            showarrow=True,
            arrowhead=3,
            arrowsize=1.3,
            arrowwidth=1.5,
            standoff=14,
            startstandoff=14,
            arrowcolor=_NEUTRAL if co_parent else _META if meta else "#555",
            text="",
        )
        if operator:
            fig.add_annotation(
                x=(x0 + x1) / 2,
                y=(y0 + y1) / 2,
                text=_e(operator),
                showarrow=False,
                yshift=12,
                font={"size": 12, "color": _META if meta else "#555"},
                hovertext="written by the meta agent" if meta else None,
            )
    hashes = list(nodes)
    fig.add_trace(
        go.Scatter(
            x=[nodes[h][0] for h in hashes],
            y=[nodes[h][1] for h in hashes],
            mode="markers+text",
            text=[_node_label(h, scores) for h in hashes],
            textposition="bottom center",
            marker={
                "size": 22,
                "color": [
                    _WINNER if h == run.leader else _DESIGN if h in scores else _NEUTRAL
                    for h in hashes
                ],
                "symbol": ["star" if h == run.leader else "circle" for h in hashes],
                "line": {"color": "white", "width": 1.5},
            },
            hovertext=[_node_hover(h, nodes[h][2], scores) for h in hashes],
            hoverinfo="text",
            showlegend=False,
        )
    )
    _layout(fig, "generation (oldest ancestor left, the winner right)", "", height=300)
    if len(nodes) == 1:
        made = f" ({_e(chain[0].operator)})" if chain[0].operator else ""
        _title(
            fig,
            f"{chain[0].spec_hash[:10]} has no recorded parent: the search proposed it from "
            f"scratch{made}",
        )
    fig.update_xaxes(showgrid=False, zeroline=False, dtick=1, range=[-0.5, len(chain) - 0.5])
    fig.update_yaxes(visible=False, range=[-0.8, 1.5 if len(nodes) > len(chain) else 0.6])
    return fig


def _archived(archive: Archive, agent_hash: str) -> AgentRecord | None:
    try:
        return archive.get_agent(agent_hash)
    except ArchiveError:
        return None


def _node_label(agent_hash: str, scores: Mapping[str, _Design]) -> str:
    design = scores.get(agent_hash)
    score = "" if design is None else f"<br>{design.summary.mean:.2f}"
    return f"{agent_hash[:10]}{score}"


def _node_hover(agent_hash: str, agent: AgentRecord | None, scores: Mapping[str, _Design]) -> str:
    design = scores.get(agent_hash)
    if design is not None:
        lines = [design.hover()]
    elif agent is None:
        lines = [f"<b>{agent_hash[:10]}</b>", "not in the archive"]
    else:
        components = map(_e, _components(_spec(agent.spec)))
        lines = [f"<b>{agent_hash[:10]}</b>", *components, "not scored in this run"]
    if agent is not None and agent.operator:
        by = " (written by the meta agent)" if agent.operator in _META_OPERATORS else ""
        lines.append(f"made by {_e(agent.operator)}{by}")
    return "<br>".join(lines)


def _points(run: _Run, designs: Sequence[_Design], xs: Sequence[float]) -> list[go.Scatter]:
    """Designs as dots at `xs` with their 95% intervals, and the winner (or leader) as a star."""
    traces = []
    for leading in (False, True):
        picked = [i for i, d in enumerate(designs) if (d.row.agent_hash == run.leader) == leading]
        if not picked:
            continue
        chosen = [designs[i] for i in picked]
        traces.append(
            go.Scatter(
                x=[xs[i] for i in picked],
                y=[d.summary.mean for d in chosen],
                mode="markers",
                name=run.leader_label if leading else "design",
                marker={
                    "size": 17 if leading else 9,
                    "color": _WINNER if leading else _DESIGN,
                    "symbol": "star" if leading else "circle",
                    "line": {"color": "white", "width": 1},
                },
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [d.summary.ci_high - d.summary.mean for d in chosen],
                    "arrayminus": [d.summary.mean - d.summary.ci_low for d in chosen],
                    "thickness": 1.2,
                    "width": 3,
                    "color": _WINNER if leading else "rgba(76,120,168,0.45)",
                },
                hovertext=[
                    d.hover() + (f"<br><b>{run.leader_label}</b>" if leading else "")
                    for d in chosen
                ],
                hoverinfo="text",
            )
        )
    return traces


def _log_ticks(low: float, high: float) -> tuple[list[float], list[str]]:
    """1-2-5 ticks per decade from `low` to `high`, written out in full (plotly writes "2", "5"
    for 200, 500 on a log axis)."""
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    values = [m * 10.0**e for e in decades for m in (1, 2, 5) if low / 2 <= m * 10.0**e <= high * 2]
    return values, [f"{v:,.0f}" if v >= 1 else f"{v:g}" for v in values]


def _layout(
    fig: go.Figure, x_title: str, y_title: str, *, score: str = "", height: int = 420
) -> go.Figure:
    """The look every figure shares; `score` names the axes that hold a [0, 1] score."""
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 70, "r": 30, "t": 40, "b": 60},
        font={"family": _FONT, "size": 13, "color": "#222"},
        hoverlabel={"align": "left", "font": {"family": _FONT, "size": 12}},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    fig.update_xaxes(title_text=x_title, automargin=True, ticks="outside")
    fig.update_yaxes(title_text=y_title, automargin=True, ticks="outside")
    if "x" in score:
        fig.update_xaxes(range=[-0.05, 1.05], dtick=0.1)
    if "y" in score:
        fig.update_yaxes(range=[-0.05, 1.05], dtick=0.1)
    return fig


def _title(fig: go.Figure, text: str) -> None:
    """A figure's one-line finding, above its plot area."""
    fig.update_layout(title={"text": text, "font": {"size": 14}, "x": 0.01})


# -- HTML --------------------------------------------------------------------------------


def _section(anchor: str, title: str, how: str, content: go.Figure | str) -> str:
    """A titled section saying how to read its content: a figure, or HTML (a table, a skip)."""
    if isinstance(content, str):
        body = content
    else:
        body = str(
            content.to_html(
                full_html=False,
                include_plotlyjs=False,
                config=_CONFIG,
                div_id=f"plot-{anchor}",
            )
        )
    return (
        f'<section id="{anchor}"><h2>{_e(title)}</h2><p class="how">{_e(how)}</p>{body}</section>'
    )


def _skip(reason: str) -> str:
    """Says why a view is empty, where a plot or table would be."""
    return f'<p class="skip">{_e(reason)}</p>'


def _interval(summary: ScoreSummary, *, html_: bool = False) -> str:
    """e.g. `0.40 [0.17, 0.69] Wilson n=10`: the method and count say how far to trust it."""
    score = f"{summary.mean:.2f} [{summary.ci_low:.2f}, {summary.ci_high:.2f}]"
    how = f"{summary.method} n={summary.n}"
    if html_:
        return f'<span class="score">{score}</span> <span class="method">{_e(how)}</span>'
    return f"{score} {how}"


def _spec(spec: Mapping[str, Any]) -> AgentSpec | None:
    try:
        return AgentSpec.from_dict(spec)
    except ValueError:  # a component this version no longer has
        return None


def _components(spec: AgentSpec | None) -> list[str]:
    if spec is None:
        return ["(a component this version of agentdesign lacks)"]
    return spec.describe().split(" + ")


def _e(text: str) -> str:
    return html.escape(text)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentdesign: {title}</title>
<style>
body {{ font-family: "DejaVu Sans", "Liberation Sans", Helvetica, Arial, sans-serif;
  max-width: 1100px; margin: 0 auto; padding: 1.5em; color: #222; background: #f6f7f9; }}
h1 {{ margin-bottom: 0.2em; }}
section {{ background: #fff; border: 1px solid #e2e4e8; border-radius: 8px; padding: 0.6em 1.2em;
  margin: 1.2em 0; }}
h2 {{ margin: 0.4em 0 0.2em; font-size: 1.25em; }}
p.meta {{ color: #444; margin-top: 0; }}
p.how {{ color: #555; margin-top: 0; max-width: 60em; }}
p.skip {{ color: #777; font-style: italic; }}
p.note {{ color: #666; font-size: 0.9em; }}
#verdict ul {{ padding-left: 1.2em; }} #verdict li {{ margin: 0.3em 0; }}
table {{ border-collapse: collapse; font-size: 0.88em; width: 100%; }}
td, th {{ border-bottom: 1px solid #e6e6e6; padding: 4px 8px; text-align: left;
  vertical-align: top; }}
th {{ background: #f0f2f5; }}
#leaderboard td:nth-child(5), #leaderboard td:nth-child(7) {{ white-space: nowrap;
  text-align: right; }}
table.proposals td:nth-child(7) {{ white-space: nowrap; text-align: right; }}
table.proposals td:nth-child(8) {{ min-width: 16em; }}
details summary {{ cursor: pointer; color: #444; }}
details pre {{ white-space: pre-wrap; overflow-wrap: anywhere; max-height: 28em; overflow: auto;
  background: #f6f7f9; border: 1px solid #e2e4e8; padding: 6px; font-size: 0.9em; }}
.score, code {{ white-space: nowrap; }}
.method {{ color: #666; font-size: 0.9em; white-space: nowrap; }}
.tag {{ border-radius: 4px; padding: 0 5px; font-size: 0.85em; background: #e8e8e8;
  white-space: nowrap; }}
.tag.winner, .tag.leader {{ background: #f58518; color: #fff; }}
.tag.exploratory {{ background: #fde9c8; }}
.tag.baseline {{ background: #dbe6f1; }}
.tag.accepted {{ background: #d5ecd1; }}
.tag.screened, .tag.duplicate {{ background: #ececec; }}
.tag.invalid, .tag.failed {{ background: #f6d6d6; }}
</style>
<script type="text/javascript">{plotly}</script>
</head><body>
<h1>agentdesign run {title}</h1>
<p class="meta">{meta}</p>
{body}
</body></html>
"""
