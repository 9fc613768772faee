"""A run's entry points: start one, resume one, join one as another worker, finalize one; each
checks what it is given, then hands the stored run to the search (`_loop.Engine`).
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, replace

from agentdesign.archive import (
    Archive,
    ArchiveError,
    ArchiveUnreachableError,
    EvaluationRecord,
    RunRecord,
    worker_id,
)
from agentdesign.components import AgentDesignError, ChatModel, check_model
from agentdesign.evaluators import Benchmark, get_benchmark
from agentdesign.search.strategies import Strategy, make_strategy
from agentdesign.search.study._config import MAX_SEED, Budget, RunConfig
from agentdesign.search.study._loop import Engine
from agentdesign.search.study._reporting import Reporter, RunSummary
from agentdesign.search.study._splits import check_split, draw_items
from agentdesign.search.study._workers import DEFAULT_HEARTBEAT_S

__all__ = [
    "check_searchable",
    "create_run",
    "finalize_run",
    "resume_search",
    "run_search",
    "run_worker",
    "stored_engine",
]


def run_search(
    archive: Archive,
    config: RunConfig,
    *,
    llm: ChatModel | None = None,
    reporter: Reporter | None = None,
    heartbeat_s: int = DEFAULT_HEARTBEAT_S,
) -> RunSummary:
    """Starts a new run named `config.name` and searches until its budget is spent."""
    run = create_run(archive, config, llm=llm)
    config = RunConfig.from_dict(run.config)  # as stored: the benchmark's reference
    benchmark = get_benchmark(config.benchmark)
    return _drive(
        Engine(archive, run, config, config.space(), benchmark, llm, reporter, heartbeat_s)
    )


def _drive(search: Engine) -> RunSummary:
    """Drives the search; a database lost for good (see `Archive`) stops this process in one
    line that says what becomes of its work."""
    try:
        return search.drive()
    except ArchiveUnreachableError as exc:
        name = search.run.name
        raise ArchiveUnreachableError(
            f"{exc}; this process stopped and what it recorded is kept: another worker takes "
            f"its trial over, or `agentdesign resume {name}` goes on once the database answers"
        ) from None


def create_run(
    archive: Archive,
    config: RunConfig,
    *,
    llm: ChatModel | None,
    benchmark: Benchmark | None = None,
    strategy: Strategy | None = None,
) -> RunRecord:
    """Checks the config, then stores the run with its seeded split (nothing, if a check fails,
    or if the split collides with another run's: see `check_split`).

    A `benchmark` or `strategy` object (the Python API's) stands in for the config's name of it."""
    benchmark = benchmark if benchmark is not None else get_benchmark(config.benchmark)
    # Stored as the benchmark's reference (a data file's absolute path), so resume and export
    # reopen the same benchmark from any directory.
    config = replace(config, benchmark=benchmark.reference)
    benchmark.check_ready()  # e.g. Java for an interactive benchmark, before anything is written
    config.space()  # validates the space before anything is written
    if strategy is None:  # likewise the strategy name and objective
        make_strategy(
            config.strategy, space=config.space(), seed=config.seed, objective=config.objective
        )
    if llm is None:
        check_model(config.model, api_base=config.api_base)
        if config.meta_model and config.meta_period:
            check_model(config.meta_model, api_base=config.api_base)
    items = draw_items(benchmark, config)  # refused here, before writing, if the pool is too small
    check_split(archive, config, items, pool=[t.id for t in benchmark.tasks()])
    run = archive.create_run(
        name=config.name,
        benchmark=config.benchmark,
        model=config.model,
        strategy=config.strategy,
        budget=asdict(config.budget),
        config=config.to_dict(),
        split_seed=config.split_seed,
        search_task_ids=items.search,
        holdout_task_ids=items.holdout,
        dev_task_ids=items.dev,
    )
    return run


def resume_search(
    archive: Archive,
    name: str,
    *,
    budget: Budget | None = None,
    llm: ChatModel | None = None,
    reporter: Reporter | None = None,
    heartbeat_s: int = DEFAULT_HEARTBEAT_S,
) -> RunSummary:
    """Continues run `name` from what the archive holds, optionally with a new budget.

    A run whose winner is recorded has been scored on its holdout, so it cannot search on: a
    design found after that would be chosen by someone who has seen the holdout.
    """
    run = archive.get_run(name)
    if budget is not None and budget != RunConfig.from_dict(run.config).budget:
        check_searchable(run)
    return _drive(stored_engine(archive, name, budget, llm, reporter, heartbeat_s))


def run_worker(
    archive: Archive,
    config: RunConfig,
    *,
    llm: ChatModel | None = None,
    reporter: Reporter | None = None,
    heartbeat_s: int = DEFAULT_HEARTBEAT_S,
) -> RunSummary:
    """Joins run `config.name` as one more worker, starting the run if it does not exist yet.

    A run that exists keeps its stored config (its split, space and budget); `config` only
    starts a new one. Workers stop when the run's budget is spent; the last one to stop confirms
    the winners on holdout.
    """
    try:
        archive.get_run(config.name)
    except ArchiveError:
        try:
            create_run(archive, config, llm=llm)
        except ArchiveError:
            archive.get_run(config.name)  # another worker created it meanwhile; else re-raise
    # Each worker seeds its strategy apart, or all would propose the same designs in the same order
    # and queue behind one another's leases (bench/workers.py measured exactly that); wrapped
    # round, since the samplers take no seed past MAX_SEED.
    strategy_seed = (config.seed + zlib.crc32(worker_id().encode())) % (MAX_SEED + 1)
    return _drive(
        stored_engine(
            archive, config.name, None, llm, reporter, heartbeat_s, strategy_seed=strategy_seed
        )
    )


def check_searchable(run: RunRecord) -> None:
    """Refuses to search on in a run whose winner is recorded: it has been scored on the holdout,
    so a design found after that would be chosen by someone who has seen the holdout."""
    if run.winner_hash is not None:
        raise AgentDesignError(
            f"run {run.name} has fixed its winner and scored it on the holdout, so it cannot "
            "search on; start a new run instead (it reuses every evaluation archived here)"
        )


def finalize_run(
    archive: Archive,
    name: str,
    *,
    top: int | None = None,
    llm: ChatModel | None = None,
    reporter: Reporter | None = None,
) -> tuple[EvaluationRecord, ...]:
    """Confirms a run's `top` agents (default: its `confirm_top`), chosen on search scores, on
    holdout. Idempotent and resumable: confirmations already archived are reused, not paid again.
    """
    search = stored_engine(archive, name, None, llm, reporter, DEFAULT_HEARTBEAT_S)
    if top is not None:
        if top < 1:
            raise AgentDesignError(f"top must be at least 1, got {top}")
        search.config = replace(search.config, confirm_top=top)
    return search.finalize()


def stored_engine(
    archive: Archive,
    name: str,
    budget: Budget | None,
    llm: ChatModel | None,
    reporter: Reporter | None,
    heartbeat_s: int,
    *,
    strategy_seed: int | None = None,
    benchmark: Benchmark | None = None,
    strategy: Strategy | None = None,
) -> Engine:
    """The engine of stored run `name`, rebuilt from its stored configuration (what `resume`,
    `worker`, `finalize` and the Python API's `load_search` drive)."""
    run = archive.get_run(name)
    config = RunConfig.from_dict(run.config)
    if budget is not None:
        config = RunConfig.from_dict({**config.to_dict(), "budget": asdict(budget)})
    benchmark = benchmark if benchmark is not None else get_benchmark(config.benchmark)
    benchmark.check_ready()
    return Engine(
        archive,
        run,
        config,
        config.space(),
        benchmark,
        llm,
        reporter,
        heartbeat_s,
        strategy_seed=config.seed if strategy_seed is None else strategy_seed,
        strategy=strategy,
    )
