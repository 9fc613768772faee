"""A run's items in the archive it shares with other runs: the split it draws (search, holdout and
development items), the refusal of a split whose items another run on the same benchmark uses the
other way round, and the looks its holdout has had, from any run or command.

A holdout says how good a design is only while nothing chose on its items. Inside a run the split
guarantees it; across runs in one archive it is kept here: an item searched (or learnt from, as a
development item) by one run is never another's holdout item, and every design scored on holdout
items is recorded, so a verdict can say how many designs its holdout has scored, and how to draw a
fresh one (a split seed whose items no run here has used).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from agentdesign.archive import Archive, EvaluationRecord, RunRecord
from agentdesign.components import AgentDesignError
from agentdesign.evaluators import Benchmark, BenchmarkError, get_benchmark, make_split
from agentdesign.search.config._config import Budget, RunConfig, dev_task_ids
from agentdesign.search.config._models import reference_why
from agentdesign.search.strategies import Strategy

__all__ = [
    "RunItems",
    "check_split",
    "dev_items",
    "draw_items",
    "fresh_split_seed",
    "holdout_looker",
    "holdout_reuse",
    "run_header",
]

# Split seeds tried, from the run's own upwards, for one whose items no run in the archive uses.
_SEEDS_TRIED = 200


@dataclass(frozen=True)
class RunItems:
    """A run's items: `search` and `dev` (development items, which a prompt refiner or the meta
    agent learns from) are what its search sees; `holdout` is what it must never see."""

    search: tuple[str, ...]
    holdout: tuple[str, ...]
    dev: tuple[str, ...] = ()

    @classmethod
    def of(cls, run: RunRecord) -> RunItems:
        return cls(run.search_task_ids, run.holdout_task_ids, run.dev_task_ids)

    @property
    def seen(self) -> frozenset[str]:
        """The items the search sees."""
        return frozenset(self.search) | frozenset(self.dev)

    @property
    def used(self) -> frozenset[str]:
        return self.seen | frozenset(self.holdout)


def draw_items(benchmark: Benchmark, config: RunConfig) -> RunItems:
    """The items `config` draws from the benchmark's pool with its split seed."""
    split = make_split(
        [t.id for t in benchmark.tasks()],
        seed=config.split.seed,
        n_search=config.split.n_search,
        n_holdout=config.split.n_holdout,
    )
    items = RunItems(split.search_ids, split.holdout_ids, dev_task_ids(benchmark, config))
    _check_disjoint(items)
    return items


def dev_items(run: RunRecord, benchmark: Benchmark, config: RunConfig) -> tuple[str, ...]:
    """The run's development items: as stored with it, or, for a run stored before they were,
    drawn from its config as it drew them then; checked apart from its search and holdout."""
    dev = run.dev_task_ids or dev_task_ids(benchmark, config)
    _check_disjoint(RunItems(run.search_task_ids, run.holdout_task_ids, dev))
    return dev


def _check_disjoint(items: RunItems) -> None:
    """A development item that is also a search or holdout item would let the search learn from
    its own scores' items, or from the holdout: refused, whatever drew them."""
    shared = sorted(set(items.dev) & (set(items.search) | set(items.holdout)))
    if shared:
        raise AgentDesignError(
            f"development items are also search or holdout items: {', '.join(shared[:5])}"
        )


def check_split(
    archive: Archive, config: RunConfig, items: RunItems, *, pool: Sequence[str]
) -> None:
    """Refuses a new run whose search sees another run's holdout items, or whose holdout holds
    items another run's search saw, on the same benchmark in this archive (unless
    `config.split.allow_overlap`): either way one of the two holdouts is no longer unseen. Runs
    that share a split exactly collide in nothing; their shared holdout's looks are counted. A
    run of the same name is no other run: the archive refuses the name itself, and a worker that
    lost the race to start the run joins it."""
    if config.split.allow_overlap:
        return
    runs = [
        r for r in archive.list_runs() if r.benchmark == config.benchmark and r.name != config.name
    ]
    clashes = []
    for other in runs:
        theirs = RunItems.of(other)
        searched = items.seen & set(theirs.holdout)
        held = set(items.holdout) & theirs.seen
        if searched or held:
            clashes.append((other, theirs, searched, held))
    if not clashes:
        return
    other, theirs, searched, held = clashes[0]
    what = (
        f"{len(searched)} of its search items are run {other.name}'s holdout items"
        if searched
        else f"{len(held)} of its holdout items are items run {other.name}'s search saw"
    )
    more = f" (and {len(clashes) - 1} more runs)" if len(clashes) > 1 else ""
    seed = fresh_split_seed(
        pool,
        sizes=items,
        used=frozenset().union(*(RunItems.of(r).used for r in runs)),
        start=config.split.seed + 1,
    )
    fresh = (
        f"--split-seed {seed} draws items no run here has used"
        if seed is not None
        else f"no split seed up to {config.split.seed + _SEEDS_TRIED} draws items no run here "
        "has used"
    )
    raise AgentDesignError(
        f"run {config.name}'s split collides with run {other.name}'s{more} on "
        f"{config.benchmark}: {what} (run {other.name}: split seed {other.split_seed}, "
        f"{len(theirs.search)} search, {len(theirs.holdout)} holdout items); {fresh}, or "
        "--allow-split-overlap starts it anyway"
    )


def fresh_split_seed(
    pool: Sequence[str], *, sizes: RunItems, used: Collection[str], start: int
) -> int | None:
    """The first split seed from `start` that draws as many search, holdout and development
    items as `sizes` holds, none of them `used`; None if none of the next few hundred does (or
    the pool is too small)."""
    n_search, n_holdout = len(sizes.search), len(sizes.holdout) + len(sizes.dev)
    taken = frozenset(used)
    if n_search < 1 or n_search + n_holdout > len(pool) - len(taken):
        return None
    for seed in range(start, start + _SEEDS_TRIED):
        split = make_split(pool, seed=seed, n_search=n_search, n_holdout=n_holdout)
        if taken.isdisjoint(split.search_ids) and taken.isdisjoint(split.holdout_ids):
            return seed
    return None


def holdout_looker(
    archive: Archive, benchmark: str, task_ids: Collection[str], *, run_name: str | None
) -> Callable[[EvaluationRecord, int], None] | None:
    """What the evaluate command calls as its evaluation starts, when `task_ids` hold any run's
    holdout items on `benchmark` (a reference): it records the look, charged to the run it named
    (`run_name`), if any; None when the items are no run's holdout."""
    ids = frozenset(task_ids)
    runs = [r for r in archive.list_runs() if r.benchmark == benchmark]
    if all(ids.isdisjoint(r.holdout_task_ids) for r in runs):
        return None

    def record(evaluation: EvaluationRecord, n_done: int) -> None:
        archive.record_holdout_look(
            benchmark=benchmark, evaluation_id=evaluation.id, source="evaluate", run_name=run_name
        )

    return record


def holdout_reuse(archive: Archive, run_name: str) -> str | None:
    """ "this holdout has now scored N designs in M runs", when those are more designs than the
    run scored there itself, with a split seed that draws a fresh holdout; None otherwise.

    Designs count once each, whoever scored them on any of the run's holdout items: its own
    confirmation, other runs' and the evaluate command's."""
    run = archive.get_run(run_name)
    held = frozenset(run.holdout_task_ids)
    if not held:
        return None
    looks = [
        look
        for look in archive.holdout_looks(benchmark=run.benchmark)
        if not held.isdisjoint(look.task_ids)
    ]
    designs = {look.agent_hash for look in looks}
    own = {look.agent_hash for look in looks if look.source == "run" and look.run_name == run.name}
    if len(designs) <= len(own):
        return None
    runs = {look.run_name for look in looks if look.source == "run"}
    commands = {look.evaluation_id for look in looks if look.source == "evaluate"}
    scored = f"this holdout has now scored {len(designs)} designs in {_count(len(runs), 'run')}"
    if commands:
        scored += f" and {_count(len(commands), 'evaluate command')}"
    return (
        f"{scored} (this run's: {len(own)}): a choice among them made on it is no longer a "
        f"test; {_fresh_holdout(archive, run)}"
    )


def _fresh_holdout(archive: Archive, run: RunRecord) -> str:
    """How to draw a holdout no design has been scored on: a split seed, where one is free."""
    try:
        pool = [t.id for t in get_benchmark(run.benchmark).tasks()]
    except BenchmarkError:  # a benchmark this process cannot open: no seed can be checked
        return "a --split-seed that no run here has used draws a fresh one"
    runs = [r for r in archive.list_runs() if r.benchmark == run.benchmark]
    seed = fresh_split_seed(
        pool,
        sizes=RunItems.of(run),
        used=frozenset().union(*(RunItems.of(r).used for r in runs)),
        start=run.split_seed + 1,
    )
    if seed is None:
        return (
            "every split seed tried shares items with a run here: a fresh holdout needs more items"
        )
    return f"a new run with --split-seed {seed} draws a fresh holdout, none of its items used here"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def run_header(
    run: RunRecord,
    config: RunConfig,
    strategy: Strategy,
    items: RunItems,
    *,
    budget: Budget | None = None,
) -> list[str]:
    """The run's settings that decide what it sees and proposes, under its name: its split seed
    and items, its strategy and seed, and, for a budget (the config's, unless given) no larger
    than the strategy's start-up designs, that it never gets past them (the default run's tpe is
    a random search)."""
    dev = f", {len(items.dev)} dev" if items.dev else ""
    lines = [
        f"split seed {run.split_seed}: {len(items.search)} search, {len(items.holdout)} "
        f"holdout{dev} items; strategy {config.strategy}, seed {config.seed}"
    ]
    start_up, agents = strategy.start_up(), (budget or config.budget).max_agents
    if start_up is not None and agents is not None and agents <= start_up.n_designs:
        lines.append(
            f"{config.strategy} draws its first {start_up.n_designs} designs {start_up.drawn} "
            f"and the budget is {agents}: {start_up.so} (a budget above "
            f"{start_up.n_designs} designs gets past them)"
        )
    if config.models:
        lines.append(
            f"models searched: {', '.join(config.models)}; the baselines run on {config.model} "
            f"({reference_why(config.models, config.model)})"
        )
    return lines
