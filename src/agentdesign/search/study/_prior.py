"""The value model's prior: the archive's real results, read as in-memory `Labelled` rows.

The value model and the strategies never read the database; the search reads the prior here,
through the archive's public queries, and hands the rows to the strategy in its history.
"""

from __future__ import annotations

from collections.abc import Collection

from agentdesign.archive import Archive
from agentdesign.components import AgentSpec
from agentdesign.evaluators import BenchmarkError, get_benchmark
from agentdesign.search.valuemodel import Labelled

__all__ = ["labelled_from_archive"]


def labelled_from_archive(
    archive: Archive, *, benchmark: str | None = None, unseen: Collection[str] = ()
) -> list[Labelled]:
    """Every complete search-split evaluation in the archive, on every benchmark, except those on
    `benchmark` that scored any of the `unseen` task ids (a run's holdout): another run's search
    items may be this run's holdout, and a prior fitted on them would leak it into the search."""
    rows = []
    descriptions: dict[str, str] = {}
    hidden = frozenset(unseen)
    for row in archive.leaderboard(limit=1_000_000):
        if row.benchmark == benchmark and not hidden.isdisjoint(row.task_ids):
            continue
        if row.benchmark not in descriptions:
            try:
                descriptions[row.benchmark] = get_benchmark(row.benchmark).description
            except BenchmarkError:  # archived by a plugin this process lacks: its name only
                descriptions[row.benchmark] = row.benchmark
        try:
            spec = AgentSpec.from_dict(row.spec)
        except ValueError:  # a component this version no longer has
            continue
        rows.append(
            Labelled(
                spec=spec,
                description=descriptions[row.benchmark],
                score=row.mean,
                tokens_per_item=(row.prompt_tokens + row.completion_tokens) / max(row.n_tasks, 1),
            )
        )
    return rows
