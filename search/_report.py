"""`agentdesign report`: one self-contained HTML page per run, viewable offline.

Plots are inline SVG drawn here (no JavaScript, no CDN): best search score against real
evaluations, the Pareto front of score against cost (tokens for free local models), optuna's
parameter importances, the holdout confirmation table and the winner's lineage.
"""

from __future__ import annotations

import html
import warnings
from collections.abc import Sequence
from pathlib import Path

import optuna

from agentdesign.archive import Archive, LeaderboardRow
from agentdesign.components import AgentSpec
from agentdesign.search._loop import study_name

__all__ = ["write_report"]

_WIDTH, _HEIGHT, _PAD = 560, 300, 48

Point = tuple[float, float]


def write_report(archive: Archive, run_name: str, path: Path) -> None:
    """Writes the report of run `run_name` to `path`."""
    run = archive.get_run(run_name)
    search = archive.leaderboard(run_name=run_name, limit=10_000)
    holdout = {
        row.agent_hash: row
        for row in archive.leaderboard(run_name=run_name, split="holdout", limit=10_000)
    }
    sections = [
        f"<h1>agentdesign run {_e(run.name)}</h1>",
        f"<p>{_e(run.benchmark)} on {_e(run.model)}, strategy {_e(run.strategy)}; "
        f"{len(run.search_task_ids)} search items, {len(run.holdout_task_ids)} holdout items; "
        f"status {_e(run.status)}, {run.elapsed_s / 60:.1f} min.</p>",
        "<h2>Best search score against real evaluations</h2>",
        _progress_plot(archive, run_name),
        "<h2>Pareto front: score against cost</h2>",
        _pareto_plot(search, archive.pareto(run_name=run_name)),
        "<h2>Component importance</h2>",
        _importance(archive, run_name),
        "<h2>Holdout confirmation</h2>",
        "<p>The winner is chosen on search scores only; holdout items confirm it. "
        "gap = search - holdout.</p>",
        _confirmation_table(search, holdout),
        "<h2>Lineage of the winner</h2>",
        _lineage(archive, search),
    ]
    path.write_text(_PAGE.format(title=_e(run.name), body="\n".join(sections)))


def _progress_plot(archive: Archive, run_name: str) -> str:
    means = [e.mean for e in archive.run_evaluations(run_name) if e.mean is not None]
    if not means:
        return "<p>No complete evaluation yet.</p>"
    best: list[Point] = []
    for i, mean in enumerate(means, start=1):
        best.append((i, max(mean, best[-1][1]) if best else mean))
    scores = [(float(i), m) for i, m in enumerate(means, start=1)]
    return _svg(
        [(scores, "dots", "#999"), (best, "steps", "#1f77b4")], "evaluations", "search score"
    )


def _pareto_plot(rows: Sequence[LeaderboardRow], front: Sequence[LeaderboardRow]) -> str:
    if not rows:
        return "<p>No complete evaluation yet.</p>"
    by_cost = any(row.cost > 0 for row in rows)

    def x(row: LeaderboardRow) -> float:
        return row.cost if by_cost else float(row.prompt_tokens + row.completion_tokens)

    points = [(x(row), row.mean) for row in rows]
    line = [(x(row), row.mean) for row in front]
    label = "cost $" if by_cost else "tokens (all costs are 0)"
    plot = _svg([(points, "dots", "#999"), (line, "steps", "#d62728")], label, "search score")
    listed = ", ".join(f"{row.agent_hash[:10]} ({row.mean:.3f})" for row in front)
    return f"{plot}<p>On the front: {_e(listed)}</p>"


def _importance(archive: Archive, run_name: str) -> str:
    study = optuna.load_study(study_name=study_name(run_name), storage=archive.url)
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len({t.value for t in complete}) < 2:
        return (
            f"<p>Not enough to say: {len(complete)} complete trials, and importance needs "
            "at least two with different scores.</p>"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            importances = optuna.importance.get_param_importances(study)
        except (ValueError, RuntimeError) as err:
            return f"<p>optuna could not compute importances: {_e(str(err))}</p>"
    rows = "".join(
        f"<tr><td>{_e(name)}</td><td>{value:.3f}</td>"
        f'<td><div style="background:#1f77b4;height:10px;width:{300 * value:.0f}px"></div></td>'
        "</tr>"
        for name, value in importances.items()
    )
    return (
        f"<p>optuna's default importance evaluator (PED-ANOVA) over {len(complete)} complete "
        "trials.</p>"
        "<table><tr><th>parameter</th><th>importance</th>"
        f"<th></th></tr>{rows}</table>"
    )


def _confirmation_table(
    search: Sequence[LeaderboardRow], holdout: dict[str, LeaderboardRow]
) -> str:
    confirmed = [row for row in search if row.agent_hash in holdout]
    if not confirmed:
        return "<p>No agent confirmed yet: run <code>agentdesign finalize</code>.</p>"
    cells = []
    for row in confirmed:
        held = holdout[row.agent_hash]
        cells.append(
            f"<tr><td>{row.rank}</td><td><code>{row.agent_hash[:10]}</code></td>"
            f"<td>{_e(AgentSpec.from_dict(row.spec).describe())}</td><td>{_ci(row)}</td>"
            f"<td>{_ci(held)}</td><td>{row.mean - held.mean:+.3f}</td></tr>"
        )
    return (
        "<table><tr><th>#</th><th>agent</th><th>design</th><th>search (95% CI)</th>"
        f"<th>holdout (95% CI)</th><th>gap</th></tr>{''.join(cells)}</table>"
    )


def _lineage(archive: Archive, search: Sequence[LeaderboardRow]) -> str:
    if not search:
        return "<p>No winner yet.</p>"
    chain = archive.lineage(search[0].agent_hash)
    cells = "".join(
        f"<tr><td>{-depth}</td><td><code>{a.spec_hash[:10]}</code></td>"
        f"<td>{_e(a.operator or '-')}</td>"
        f"<td>{_e(AgentSpec.from_dict(a.spec).describe())}</td></tr>"
        for depth, a in enumerate(chain)
    )
    return (
        "<table><tr><th>generation</th><th>agent</th><th>operator</th><th>design</th></tr>"
        f"{cells}</table>"
    )


def _svg(series: Sequence[tuple[Sequence[Point], str, str]], x_label: str, y_label: str) -> str:
    """A scatter ("dots") or step line ("steps") plot of each series, on shared linear axes."""
    xs = [x for points, _, _ in series for x, _ in points]
    ys = [y for points, _, _ in series for _, y in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(min(ys), 0.0), max(max(ys), 1.0)
    x1 = x1 if x1 > x0 else x0 + 1

    def at(point: Point) -> tuple[float, float]:
        px = _PAD + (point[0] - x0) / (x1 - x0) * (_WIDTH - 2 * _PAD)
        py = _HEIGHT - _PAD - (point[1] - y0) / (y1 - y0) * (_HEIGHT - 2 * _PAD)
        return px, py

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}">',
        f'<rect x="{_PAD}" y="{_PAD}" width="{_WIDTH - 2 * _PAD}" '
        f'height="{_HEIGHT - 2 * _PAD}" fill="none" stroke="#ccc"/>',
        f'<text x="{_WIDTH / 2}" y="{_HEIGHT - 10}" text-anchor="middle">{_e(x_label)}</text>',
        f'<text x="14" y="{_HEIGHT / 2}" transform="rotate(-90 14 {_HEIGHT / 2})" '
        f'text-anchor="middle">{_e(y_label)}</text>',
        f'<text x="{_PAD}" y="{_HEIGHT - _PAD + 16}">{x0:g}</text>',
        f'<text x="{_WIDTH - _PAD}" y="{_HEIGHT - _PAD + 16}" text-anchor="end">{x1:g}</text>',
        f'<text x="{_PAD - 4}" y="{_HEIGHT - _PAD}" text-anchor="end">{y0:g}</text>',
        f'<text x="{_PAD - 4}" y="{_PAD + 4}" text-anchor="end">{y1:g}</text>',
    ]
    for points, kind, colour in series:
        if kind == "dots":
            parts.extend(
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"/>'
                for px, py in map(at, points)
            )
            continue
        steps = [at(point) for point in sorted(points)]
        path = f"M{steps[0][0]:.1f},{steps[0][1]:.1f}" + "".join(
            f" H{px:.1f} V{py:.1f}" for px, py in steps[1:]
        )
        parts.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts.extend(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{colour}"/>'
            for px, py in map(at, points)
        )
    parts.append("</svg>")
    return "".join(parts)


def _ci(row: LeaderboardRow) -> str:
    return f"{row.mean:.3f} [{row.ci_low:.2f}, {row.ci_high:.2f}]"


def _e(text: str) -> str:
    return html.escape(text)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>agentdesign: {title}</title>
<style>
body {{ font-family: sans-serif; max-width: 60em; margin: 2em auto; color: #222; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ddd; padding: 2px 8px; }}
svg text {{ font-size: 11px; }}
</style></head><body>
{body}
</body></html>
"""
