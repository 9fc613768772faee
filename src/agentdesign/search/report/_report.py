"""`agentdesign report`: one self-contained HTML page per run that opens offline, anywhere.

The verdict comes first (the winner against the baselines on unseen items), then the leaderboard
and six interactive plotly figures, and, when the run had a meta agent, what it proposed. plotly.js
is inlined once, so the file needs no network and can be mailed or archived next to the database;
hovering a point shows the design behind it.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from agentdesign.archive import Archive
from agentdesign.search.report._report_figures import (
    gains_figure,
    items_figure,
    lineage_figure,
    pareto_figure,
    progress_figure,
    value_figure,
)
from agentdesign.search.report._report_run import load_run
from agentdesign.search.report._report_tables import leaderboard_table, meta_agent_table

__all__ = ["write_report"]

_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"scale": 2}}


def write_report(archive: Archive, run_name: str, path: Path) -> None:
    """Writes the report of run `run_name` to `path`."""
    run = load_run(archive, run_name)
    record = run.record
    totals = archive.run_totals(run_name)
    models = record.config.get("models") or ()
    on = (
        f"<code>{escape(record.model)}</code>"
        if len(models) < 2
        else ", ".join(f"<code>{escape(m)}</code>" for m in models)
        + f" (the baselines on <code>{escape(record.model)}</code>)"
    )
    meta = (
        f"{escape(record.benchmark)} on {on}, strategy "
        f"{escape(record.strategy)}: {len(run.order)} designs scored on "
        f"{len(record.search_task_ids)} search items, {len(record.holdout_task_ids)} holdout "
        "items held back; "
        f"{totals.prompt_tokens + totals.completion_tokens:,} tokens, ${totals.cost:.4f}; "
        f"status {escape(record.status)}, {record.elapsed_s / 60:.1f} min."
    )
    sections = [
        _section(
            "verdict",
            "Verdict",
            "What the run can claim: the winner, chosen on the search items alone, against "
            "hand-designed baselines on the same unseen holdout items (paired 95% intervals).",
            "<ul>"
            + "".join(f"<li>{escape(line)}</li>" for line in run.verdict.headline())
            + "</ul>",
        ),
        _section(
            "leaderboard",
            "Leaderboard",
            "Designs ranked by their mean on the search items, each score with its 95% interval, "
            "the interval's method and the number of items; gap is search minus holdout. Only "
            "the winner's holdout score is a pre-registered test; other holdout scores are "
            "marked exploratory.",
            leaderboard_table(run),
        ),
        _section(
            "progress",
            "Search progress",
            "Each dot is one design's search score in the order the run evaluated it, with its "
            "95% interval; the line is the best score found so far. A line that stops rising "
            "early means more evaluations bought little.",
            progress_figure(run),
        ),
        _section(
            "pareto",
            "Score against tokens",
            "Every design's search score against the tokens it spent per item. The red line "
            "joins the Pareto front: designs that no other beats on both score and cost (cost "
            "first, tokens break ties). Up and to the left is better.",
            pareto_figure(run),
        ),
        _section(
            "items",
            "Designs against items",
            "Each cell is one design's score on one search item (blue solved, red failed). "
            "Rows are designs, best mean on top; columns are items, those that separate the "
            "designs most (highest variance across designs) on the left. Columns of one colour "
            "are items every design solves or fails: they cannot tell designs apart.",
            items_figure(run),
        ),
        _section(
            "baselines",
            "Paired gain over the baselines",
            "The winner's score minus each baseline's on the same holdout items, with the paired "
            "95% interval. An interval right of zero is a win, left of zero a loss, across zero "
            "no difference shown.",
            gains_figure(run.verdict),
        ),
        _section(
            "value-model",
            "Value model: predicted against real",
            "The value model screens designs before they are run. Each point is a design's "
            "predicted search score from a model fit without that design (k-fold), with the "
            "predicted 95% interval, against its real score; on the dashed line the prediction "
            "is exact.",
            value_figure(run),
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
            lineage_figure(archive, run),
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
                meta_agent_table(archive, run),
            )
        )
    path.write_text(
        _PAGE.format(
            title=escape(record.name),
            plotly=get_plotlyjs(),
            meta=meta,
            body="\n".join(sections),
        ),
        encoding="utf-8",
    )


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
        f'<section id="{anchor}"><h2>{escape(title)}</h2>'
        f'<p class="how">{escape(how)}</p>{body}</section>'
    )


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
