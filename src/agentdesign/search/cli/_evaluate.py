"""What `agentdesign evaluate` scores: the split it names, checked, and the items of that split
(a run's stored split, a fresh seeded draw of search items, or the benchmark's first items)."""

from __future__ import annotations

from agentdesign.archive import Archive
from agentdesign.components import AgentDesignError
from agentdesign.evaluators import Benchmark, get_benchmark, make_split

__all__ = ["evaluation_items", "evaluation_split"]


def evaluation_split(split: str | None, *, run_name: str | None) -> str:
    """The split `evaluate` scores (default: a run's holdout, else a draw of search items);
    refuses a combination that names no items."""
    split = split or ("holdout" if run_name is not None else "search")
    if split not in ("search", "holdout", "all"):
        raise AgentDesignError(f"--split must be search, holdout or all, not {split!r}")
    if run_name is None and split == "holdout":
        raise AgentDesignError(
            "--split holdout needs --run NAME: a holdout is a run's stored, unseen items"
        )
    if run_name is not None and split == "all":
        raise AgentDesignError("--run takes --split search or holdout, not all")
    return split


def evaluation_items(
    archive: Archive,
    run_name: str | None,
    benchmark: str,
    split: str,
    items: int | None,
    seed: int,
) -> tuple[Benchmark, list[str]]:
    """The benchmark and task ids `evaluate` scores: a run's stored split, or a fresh draw of
    search items, or the benchmark's first items. (A holdout exists only as a run's: a fresh draw
    of "holdout" items could overlap the search items of any run.)"""
    if run_name is not None:
        run_record = archive.get_run(run_name)
        ids = list(
            run_record.holdout_task_ids if split == "holdout" else run_record.search_task_ids
        )
        if not ids:
            raise AgentDesignError(f"run {run_name} has no {split} items")
        return get_benchmark(run_record.benchmark), ids[:items]
    bench = get_benchmark(benchmark)
    ids = [t.id for t in bench.tasks()]
    count = items or 10
    if split == "all":
        return bench, ids[:count]
    return bench, list(make_split(ids, seed=seed, n_search=count, n_holdout=0).search_ids)
