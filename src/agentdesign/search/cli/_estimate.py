"""What `agentdesign run --estimate` prints: the run's estimated calls, tokens and dollars, part by
part, and what the estimate rests on; and what a run spent, role by role, as `show` prints it."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentdesign.archive import Archive, RunRecord
from agentdesign.components import token_price
from agentdesign.search.study import RunEstimate

__all__ = ["estimate_archive", "print_estimate", "print_spend", "spend"]

UNKNOWN = "price unknown"


@contextlib.contextmanager
def estimate_archive(storage: str) -> Iterator[Archive]:
    """The archive an estimate reads its history from, or, where there is none yet, an empty one
    that is gone after: an estimate leaves nothing behind."""
    if "://" in storage or Path(storage).is_file():
        with Archive(storage, create=False) as archive:
            yield archive
        return
    with tempfile.TemporaryDirectory() as folder, Archive(str(Path(folder) / "e.db")) as archive:
        yield archive


def _dollars(value: float | None) -> str:
    return UNKNOWN if value is None else f"${value:,.4f}"


def _table(*columns: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for column in columns:
        left = column in ("part", "what")
        table.add_column(column, justify="left" if left else "right", overflow="fold")
    return table


def print_estimate(console: Console, estimate: RunEstimate) -> None:
    """The estimate as a table, then its basis and how to read it."""
    console.print(
        f"[bold]estimate of run {escape(estimate.run)}[/] ({escape(estimate.benchmark)}, "
        f"{escape(estimate.model)}; nothing run, nothing stored)"
    )
    table = _table("part", "what", "calls", "tokens", "dollars")
    for part in estimate.parts:
        table.add_row(
            part.role,
            escape(part.what),
            f"{part.calls:,.0f}",
            f"{part.tokens:,.0f}",
            _dollars(part.dollars),
        )
    table.add_section()
    table.add_row(
        "total",
        "",
        f"{estimate.calls:,.0f}",
        f"{estimate.tokens:,.0f}",
        _dollars(estimate.dollars),
    )
    console.print(table)
    console.print(escape(f"from {estimate.basis}"), highlight=False)
    spent = estimate.calibration
    if spent is not None:
        console.print(
            f"the calibration spent {spent.calls:,.0f} calls, {spent.tokens:,.0f} tokens, "
            f"{_dollars(spent.dollars)} (not in the total)",
            highlight=False,
        )
    for note in estimate.notes:
        console.print(escape(note), highlight=False)


# What each role a run holds an evaluation in, or a search call's purpose, is called in `show`.
_ROLES = {
    "candidate": "candidates",
    "dev": "dev",
    "winner": "holdout winner",
    "baseline": "baselines",
    "exploratory": "exploratory",
    "meta": "meta agent",
    "refinement": "refiner",
}


def spend(archive: Archive, run: RunRecord) -> list[dict[str, Any]]:
    """What the run spent, part by part: its evaluations by the role it holds them in, then the
    search's own calls by purpose; `cost` None for a model litellm has no price for (its calls
    count $0)."""
    models = {"meta": run.config.get("meta_model") or run.model}
    totals = {**archive.role_totals(run.name), **archive.search_call_totals(run.name)}
    return [
        {
            "part": _ROLES.get(role, role),
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "cost": cost if token_price(models.get(role, run.model)) is not None else None,
        }
        for role, (_, prompt, completion, cost) in totals.items()
    ]


def print_spend(console: Console, archive: Archive, run: RunRecord) -> None:
    """The run's spend (`spend`) as a table, tokens and dollars by part."""
    parts = spend(archive, run)
    if not parts:
        return
    table = _table("part", "tokens", "dollars")
    for part in parts:
        tokens = part["prompt_tokens"] + part["completion_tokens"]
        table.add_row(part["part"], f"{tokens:,}", _dollars(part["cost"]))
    console.print("\n[bold]the run's spend by part[/]")
    console.print(table)
