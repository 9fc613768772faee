"""How the command line writes scores and data: one interval format in every table and progress
line, and JSON that scripts can parse whatever the terminal."""

from __future__ import annotations

import json
from collections.abc import Sequence

import typer

from agentdesign.archive import Archive, LeaderboardRow
from agentdesign.evaluators import ScoreSummary, summarize

__all__ = ["ci_text", "interval_caption", "interval_text", "print_json", "row_summary"]


def row_summary(archive: Archive, row: LeaderboardRow) -> ScoreSummary:
    """The row's interval, recomputed from its task scores, so that archives written before the
    intervals were mended show honest ones too."""
    return summarize([r.score for r in archive.task_results(row.evaluation_id).values()])


def ci_text(summary: ScoreSummary) -> str:
    return f"{summary.mean:.3f} [{summary.ci_low:.2f}, {summary.ci_high:.2f}]"


def interval_text(summary: ScoreSummary) -> str:
    return f"{ci_text(summary)} n={summary.n}"


def interval_caption(summaries: Sequence[ScoreSummary]) -> str:
    methods = sorted({s.method for s in summaries})
    return f"95% intervals: {', '.join(methods) or '-'}; n = items scored"


def print_json(data: object) -> None:
    """Plain JSON on stdout: never wrapped or coloured by rich, whatever the terminal."""
    typer.echo(json.dumps(data, indent=2, default=str))
