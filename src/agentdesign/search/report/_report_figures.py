"""The report's six plotly figures: search progress, score against tokens (the Pareto front),
designs against items, the winner's paired gains over the baselines, the value model's held-out
predictions, and the winner's lineage. Each returns a figure, or a sentence saying why there is
none yet; hovering a point shows the design behind it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

import numpy as np
import plotly.graph_objects as go

from agentdesign.archive import AgentRecord, Archive, ArchiveError
from agentdesign.evaluators import BenchmarkError, get_benchmark
from agentdesign.search.report._report_run import (
    MOST_ROWS,
    Design,
    Run,
    components_of,
    parse_spec,
    skip,
)
from agentdesign.search.valuemodel import Labelled, held_out_predictions, value_report
from agentdesign.search.verdict import BaselineVerdict, RunVerdict

# One colour per meaning, on every plot: designs, the winner, the best/front, the baselines' gains.
_DESIGN, _WINNER, _FRONT, _NEUTRAL = "#4c78a8", "#f58518", "#e45756", "#9d9d9d"
_GAIN, _LOSS = "#54a24b", "#e45756"
_META = "#b279a2"  # what the meta agent wrote
_FONT = "DejaVu Sans, Liberation Sans, Helvetica, Arial, sans-serif"
_Z95 = 1.959964
_MOST_FOLDS = 5
_MIN_VALUE_DESIGNS = 5
_META_OPERATORS = ("meta", "meta-code")  # the operators the meta agent's designs are made by


def progress_figure(run: Run) -> go.Figure | str:
    if not run.order:
        return skip("No complete search evaluation yet.")
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


def pareto_figure(run: Run) -> go.Figure | str:
    if not run.ranked:
        return skip("No complete search evaluation yet.")
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


def items_figure(run: Run) -> go.Figure | str:
    designs = list(run.ranked[:MOST_ROWS])
    if not designs:
        return skip("No complete search evaluation yet.")
    tasks = sorted({task for d in designs for task in d.scores})
    matrix = np.array([[d.scores.get(t, np.nan) for t in tasks] for d in designs])
    spread = np.nan_to_num(np.nanvar(matrix, axis=0)) if len(designs) > 1 else np.zeros(len(tasks))
    columns = sorted(range(len(tasks)), key=lambda j: (-spread[j], tasks[j]))
    tasks = [tasks[j] for j in columns]
    matrix = matrix[:, columns]
    hover = [
        [
            f"item <b>{escape(task)}</b><br>design {d.short}: "
            + ("not scored" if np.isnan(score) else f"score {score:.2f}")
            + "<br>"
            + escape(" + ".join(components_of(d.spec)))
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


def gains_figure(verdict: RunVerdict) -> go.Figure | str:
    if not verdict.baselines:
        return skip(
            "No baseline scored on the holdout yet: the verdict needs the winner confirmed."
        )
    ordered: list[BaselineVerdict] = list(verdict.baselines)
    gains = [b.comparison for b in ordered]
    colours = [_GAIN if c.ci_low > 0 else _LOSS if c.ci_high < 0 else _NEUTRAL for c in gains]
    fig = go.Figure(
        go.Scatter(
            x=[c.mean_diff for c in gains],
            y=[
                f"vs {escape(b.label)}<br>{c.mean_diff:+.2f} [{c.ci_low:+.2f}, {c.ci_high:+.2f}]"
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
            hovertext=[escape(b.sentence(verdict.winner_label)) for b in ordered],
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


def value_figure(run: Run) -> go.Figure | str:
    designs = [(d, d.spec) for d in run.order if d.spec is not None]
    if len(designs) < _MIN_VALUE_DESIGNS:
        return skip(
            f"Not enough designs to judge the value model: {len(designs)} scored, "
            f"{_MIN_VALUE_DESIGNS} needed."
        )
    try:
        description = get_benchmark(run.record.benchmark).description
    except BenchmarkError:  # archived by a plugin this process lacks: its name only, as the search
        description = run.record.benchmark
    rows = [
        Labelled(spec, description, d.summary.mean, tokens_per_item=d.tokens_per_item)
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


def lineage_figure(archive: Archive, run: Run) -> go.Figure | str:
    if run.leader is None:
        return skip("No winner yet.")
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
                text=escape(operator),
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
        made = f" ({escape(chain[0].operator)})" if chain[0].operator else ""
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


def _node_label(agent_hash: str, scores: Mapping[str, Design]) -> str:
    design = scores.get(agent_hash)
    score = "" if design is None else f"<br>{design.summary.mean:.2f}"
    return f"{agent_hash[:10]}{score}"


def _node_hover(agent_hash: str, agent: AgentRecord | None, scores: Mapping[str, Design]) -> str:
    design = scores.get(agent_hash)
    if design is not None:
        lines = [design.hover()]
    elif agent is None:
        lines = [f"<b>{agent_hash[:10]}</b>", "not in the archive"]
    else:
        components = map(escape, components_of(parse_spec(agent.spec)))
        lines = [f"<b>{agent_hash[:10]}</b>", *components, "not scored in this run"]
    if agent is not None and agent.operator:
        by = " (written by the meta agent)" if agent.operator in _META_OPERATORS else ""
        lines.append(f"made by {escape(agent.operator)}{by}")
    return "<br>".join(lines)


def _points(run: Run, designs: Sequence[Design], xs: Sequence[float]) -> list[go.Scatter]:
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
