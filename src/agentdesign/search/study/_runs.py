"""A run's entry points: start one, resume one, join one as another worker, finalize one; each
hands its configuration, new or stored, to the run's `Engine` (`_loop`), which resolves it once
(`resolve`) and, for a new run, stores it.
"""

from __future__ import annotations

import zlib
from dataclasses import replace

from agentdesign.archive import (
    Archive,
    ArchiveError,
    ArchiveUnreachableError,
    EvaluationRecord,
    RunRecord,
    worker_id,
)
from agentdesign.components import AgentDesignError, ChatModel
from agentdesign.search.config import MAX_SEED, Budget, RunConfig
from agentdesign.search.study._loop import Engine
from agentdesign.search.study._reporting import Reporter, RunSummary
from agentdesign.search.study._workers import DEFAULT_HEARTBEAT_S

__all__ = [
    "check_searchable",
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
    """Starts a new run named `config.name` and searches until its budget is spent. Nothing is
    written when a check of the config fails, or its split collides with another run's (see
    `check_split`)."""
    return _drive(Engine(archive, config, llm=llm, reporter=reporter, heartbeat_s=heartbeat_s))


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


def resume_search(
    archive: Archive,
    name: str,
    *,
    budget: Budget | None = None,
    llm_timeout_s: float | None = None,
    llm: ChatModel | None = None,
    reporter: Reporter | None = None,
    heartbeat_s: int = DEFAULT_HEARTBEAT_S,
) -> RunSummary:
    """Continues run `name` from what the archive holds, optionally with a new budget, or model
    calls that wait `llm_timeout_s` (neither is stored: the run keeps its own).

    A run whose winner is recorded has been scored on its holdout, so it cannot search on: a
    design found after that would be chosen by someone who has seen the holdout.
    """
    run = archive.get_run(name)
    config = RunConfig.from_dict(run.config)
    if budget is not None and budget != config.budget:
        check_searchable(run)
    if llm_timeout_s is not None:
        config = replace(config, llm_timeout_s=llm_timeout_s)
    return _drive(_stored(archive, run, config, budget, llm, reporter, heartbeat_s))


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
    # Each worker seeds its strategy apart, or all would propose the same designs in the same order
    # and queue behind one another's leases (bench/workers.py measured exactly that); wrapped
    # round, since the samplers take no seed past MAX_SEED.
    strategy_seed = (config.seed + zlib.crc32(worker_id().encode())) % (MAX_SEED + 1)
    try:
        run = archive.get_run(config.name)
    except ArchiveError:
        try:
            engine = Engine(
                archive,
                config,
                llm=llm,
                reporter=reporter,
                heartbeat_s=heartbeat_s,
                strategy_seed=strategy_seed,
            )
        except ArchiveError:
            # another worker created it meanwhile (else re-raise): this one joins it, resolving
            # the stored config instead of its own
            run = archive.get_run(config.name)
        else:
            return _drive(engine)
    stored = RunConfig.from_dict(run.config)
    return _drive(
        _stored(archive, run, stored, None, llm, reporter, heartbeat_s, strategy_seed=strategy_seed)
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
    if top is not None and top < 1:
        raise AgentDesignError(f"top must be at least 1, got {top}")
    return search.finalize(top=top)


def stored_engine(
    archive: Archive,
    name: str,
    budget: Budget | None,
    llm: ChatModel | None,
    reporter: Reporter | None,
    heartbeat_s: int,
) -> Engine:
    """The engine of stored run `name`, rebuilt from its stored configuration (what `resume`,
    `worker` and `finalize` drive), with `budget` for this process if given."""
    run = archive.get_run(name)
    config = RunConfig.from_dict(run.config)
    return _stored(archive, run, config, budget, llm, reporter, heartbeat_s)


def _stored(
    archive: Archive,
    run: RunRecord,
    config: RunConfig,
    budget: Budget | None,
    llm: ChatModel | None,
    reporter: Reporter | None,
    heartbeat_s: int,
    *,
    strategy_seed: int | None = None,
) -> Engine:
    return Engine(
        archive,
        config if budget is None else replace(config, budget=budget),
        run=run,
        llm=llm,
        reporter=reporter,
        heartbeat_s=heartbeat_s,
        strategy_seed=strategy_seed,
    )
