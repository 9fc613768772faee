"""Recording a replay table through the product: designs chosen to cover the space, each scored
through `evaluate_agent` into an archive, item layer by item layer.

Every design is scored on the first layer of items (one evaluation per design and layer), then
every design on the next, and so on: a recording stopped at any point is a rectangle on an item
prefix (`ReplayTable.from_layers`), and rerunning the same command resumes it, since the archive
holds every finished item and no item is paid twice. More items later are more layers.

The items are a seeded sample of the benchmark's pool that leaves out the items of a named run
(its search, holdout and dev items), so a table never scores what that run selects or confirms
on. The designs (`table_designs`) start with hand-picked anchors, so a smaller model's or a
costlier model's table can be their prefix, then a pairwise covering design of the components,
then designs that put every parameter at each of its grid points, then random grid designs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentdesign.archive import Archive, LeaderboardRow
from agentdesign.components import REGISTRY, SLOTS, AgentSpec, ChatModel, Example, ParamInfo
from agentdesign.evaluators import Benchmark, Task, make_split
from agentdesign.search.config import RunConfig, dev_task_ids
from agentdesign.search.space import SearchSpace, pairwise_design
from agentdesign.search.study import evaluate_agent

__all__ = [
    "ANCHORS",
    "CHEAP_LIMITS",
    "GUESS_S_PER_CELL",
    "Estimate",
    "LayerDone",
    "estimate",
    "grid_values",
    "record_layers",
    "resume_designs",
    "run_items",
    "table_designs",
    "table_items",
]

# Cheap limits, so a cell costs seconds, not minutes: token caps 128-384, at most 3 samples or
# agents, one refinement round.
CHEAP_LIMITS: dict[str, tuple[float, float]] = {
    "planning__max_tokens": (128, 384),
    "reasoning__max_tokens": (128, 384),
    "reflection__max_tokens": (128, 384),
    "reflection__max_rounds": (1, 1),
    "workflow__judge_max_tokens": (128, 384),
    "workflow__verifier_max_tokens": (128, 384),
    "workflow__n_samples": (2, 3),
    "workflow__n_agents": (2, 3),
    "workflow__rounds": (2, 2),
    "workflow__max_rounds": (1, 1),
    "workflow__max_steps": (2, 3),
    "memory__k": (1, 3),
    "tool__max_uses": (1, 2),
}

# The designs every table starts with (components and the parameters that differ from their
# defaults): the engine's two baselines (chain of thought, and self-consistency over it), the
# quick space's two kinds of design, the cheapest design, and the strongest designs at 220-670
# tokens an item of the first replay table (60 random designs x 10 GSM8K items, Qwen2.5-Coder-1.5B;
# 10 items rank them only roughly). A costlier model records them alone (`--designs 10`).
ANCHORS: tuple[Mapping[str, Any], ...] = (
    {"workflow": "single", "reasoning": "cot"},
    {"workflow": "single", "reasoning": "direct"},
    {
        "workflow": {"name": "self_consistency", "params": {"n_samples": 3}},
        "reasoning": {"name": "cot", "params": {"max_tokens": 256}},
    },
    {"workflow": "program_of_thought", "reasoning": "cot"},
    {
        "reasoning": "scratchpad",
        "memory": {"name": "few_shot", "params": {"k": 2}},
        "tool": {"name": "calculator", "params": {"max_uses": 2}},
    },
    {
        "workflow": "program_of_thought",
        "reasoning": {"name": "scratchpad", "params": {"max_tokens": 372}},
        "memory": {"name": "few_shot", "params": {"k": 1}},
        "tool": {"name": "python", "params": {"max_uses": 1}},
        "reflection": {"name": "self_critique", "params": {"max_rounds": 1, "max_tokens": 139}},
    },
    {
        "workflow": "program_of_thought",
        "reasoning": {"name": "direct", "params": {"max_tokens": 152}},
        "tool": {"name": "calculator", "params": {"max_uses": 2}},
    },
    {
        "workflow": "program_of_thought",
        "reasoning": {"name": "scratchpad", "params": {"max_tokens": 224}},
        "memory": {"name": "experience", "params": {"k": 2}},
        "reflection": {"name": "self_critique", "params": {"max_rounds": 1, "max_tokens": 152}},
    },
    {
        "workflow": {
            "name": "react",
            "params": {"max_steps": 3, "history_turns": 15, "give_up_after": 14},
        },
        "reasoning": {"name": "cot", "params": {"max_tokens": 375}},
        "memory": {"name": "retrieval", "params": {"k": 2}},
        "tool": {"name": "calculator", "params": {"max_uses": 2}},
        "reflection": {"name": "self_critique", "params": {"max_rounds": 1, "max_tokens": 213}},
    },
    {
        "reasoning": {"name": "cot", "params": {"max_tokens": 256}},
        "memory": {"name": "few_shot", "params": {"k": 2}},
    },
)

# Seconds per cell before the archive holds any of the model's: the embedded 1.5B model's mean
# over the 605 cells of bench/results/replay.sqlite (random designs under cheap limits, 2 cores).
GUESS_S_PER_CELL = 40.0


def run_items(benchmark: Benchmark, *, seed: int, n_search: int, n_holdout: int) -> frozenset[str]:
    """The items a run with these settings may look at, drawn as the engine draws them: its
    search and holdout items, and the dev items prompt refinement or a meta agent learns from."""
    ids = [t.id for t in benchmark.tasks()]
    split = make_split(ids, seed=seed, n_search=n_search, n_holdout=n_holdout)
    config = RunConfig.of(
        "excluded",
        benchmark=benchmark.name,
        strategy="mcts",
        n_search=n_search,
        n_holdout=n_holdout,
        split_seed=seed,
        refine_every=1,
    )
    return frozenset((*split.search_ids, *split.holdout_ids, *dev_task_ids(benchmark, config)))


def table_items(
    benchmark: Benchmark, *, n_items: int, seed: int, exclude: frozenset[str]
) -> tuple[Task, ...]:
    """`n_items` items of the pool outside `exclude`, in a seeded order whose every prefix is a
    random sample (`make_split`): asking for more items later only adds items."""
    pool = [t.id for t in benchmark.tasks() if t.id not in exclude]
    split = make_split(pool, seed=seed, n_search=n_items, n_holdout=0)
    return tuple(benchmark.tasks_by_ids(split.search_ids))


# -- designs -------------------------------------------------------------------------------------


def grid_values(space: SearchSpace, slot: str, info: ParamInfo) -> tuple[Any, ...]:
    """The values a searchable parameter takes in `space`: its grid points, choices or both
    booleans; () for a free text, a numeric parameter off the grid or one never searched."""
    if not info.searchable:
        return ()
    if info.kind in ("bool", "choice"):
        return info.levels()
    step = space.grid_step(slot, info)
    if info.kind not in ("int", "float") or step is None:
        return ()
    low, high = space.param_range(slot, info)
    points = int((high - low) / step + 1e-9) + 1
    return tuple(dict.fromkeys(space.snap(slot, info, low + k * step) for k in range(points)))


def _gridded(space: SearchSpace, slot: str, name: str) -> list[tuple[ParamInfo, tuple[Any, ...]]]:
    params = REGISTRY.get(slot, name).param_info()
    return [(i, v) for i in params if (v := grid_values(space, slot, i))]


def table_designs(
    model: str, n: int, *, seed: int = 0, unsuited: frozenset[str] = frozenset()
) -> list[AgentSpec]:
    """`n` designs of the cheap grid space for `model`: the anchors, a pairwise covering design
    of the components (every component beside every other of another slot that a design can
    hold), then designs that put the parameters at their grid points not yet used, then random
    grid designs; no repeats (each canonical: a design that differs from another only in parts it
    never uses repeats it).

    The covering rows take each parameter's least used grid value, so a component that appears
    in as many rows as its parameter has values shows every one of them. Components named in
    `unsuited` (a benchmark's `unsuited_components`) are left out of the space, and so are the
    anchors that hold one: on such a benchmark they only repeat a design without them.
    """
    choices = {
        slot: tuple(n for n in REGISTRY.names(slot, opt_in=False) if n not in unsuited)
        for slot in SLOTS
    }
    space = SearchSpace(
        model=model, choices=choices if unsuited else {}, limits=CHEAP_LIMITS, grid=True
    )
    rng = np.random.default_rng(seed)
    chosen: dict[str, AgentSpec] = {}
    used: Counter[tuple[str, str, str, Any]] = Counter()

    def add(spec: AgentSpec) -> None:
        spec = spec.canonical()
        if spec.spec_hash not in chosen:
            chosen[spec.spec_hash] = spec
            for slot in SLOTS:
                for info in spec[slot].param_info():
                    used[slot, spec[slot].name, info.name, getattr(spec[slot], info.name)] += 1

    def balanced(components: Mapping[str, str]) -> AgentSpec:
        """The design of these components with each parameter at its least used grid value."""
        spec = space.sample(rng, components=components)
        values: dict[str, Any] = {}
        for slot, name in components.items():
            if spec[slot].name != name:  # "none" in a slot the design cannot use
                continue
            for info, points in _gridded(space, slot, name):
                order = rng.permutation(len(points))
                least = min(order, key=lambda k: used[slot, name, info.name, points[k]])
                values[f"{slot}__{info.name}"] = points[int(least)]
        return spec.set_params(**values)

    for anchor in ANCHORS:
        spec = AgentSpec.create(model=model, **anchor)
        if not {spec[slot].name for slot in SLOTS} & unsuited:
            add(spec)
    for row in pairwise_design(space, rng, given=list(chosen.values())):
        add(balanced({slot: row[slot].name for slot in SLOTS}))
    while len(chosen) < n and (missing := _unused(space, used)):
        components = {}
        for slot in SLOTS:
            options = space.components(slot)
            gaps = [sum(1 for key in missing if key[:2] == (slot, name)) for name in options]
            best = [name for name, gap in zip(options, gaps, strict=True) if gap == max(gaps)]
            components[slot] = best[int(rng.integers(len(best)))]
        add(balanced(components))
    while len(chosen) < n:
        add(space.sample(rng))
    return list(chosen.values())[:n]


def resume_designs(
    archive: Archive, designs: Sequence[AgentSpec], *, benchmark: str
) -> list[AgentSpec]:
    """The designs of `designs`' model that the recording in `archive` has begun, in the order it
    recorded them, then those of `designs` it has not, as many as `designs` in all: a resumed
    recording finishes what it began even where the search space's draws have changed since."""
    rows = _recorded(archive, designs, benchmark=benchmark)
    begun = {
        row.agent_hash: AgentSpec.from_dict(row.spec)
        for row in sorted(rows, key=lambda row: row.evaluation_id)
    }
    fresh = [spec for spec in designs if spec.spec_hash not in begun]
    return [*begun.values(), *fresh][: len(designs)]


def _recorded(
    archive: Archive, designs: Sequence[AgentSpec], *, benchmark: str
) -> list[LeaderboardRow]:
    """The archive's complete evaluations on `benchmark` of any design of `designs`' models."""
    return [
        row
        for model in {spec.model for spec in designs}
        for row in archive.leaderboard(benchmark=benchmark, model=model, limit=1_000_000)
    ]


def _unused(
    space: SearchSpace, used: Counter[tuple[str, str, str, Any]]
) -> list[tuple[str, str, str, Any]]:
    """Every (slot, component, parameter, grid value) of `space` that no design has yet."""
    return [
        (slot, name, info.name, value)
        for slot in SLOTS
        for name in space.components(slot)
        for info, points in _gridded(space, slot, name)
        for value in points
        if not used[slot, name, info.name, value]
    ]


# -- recording -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerDone:
    """One design finished on one layer of items: its mean there, tokens and recorded seconds,
    and how many of its items this call ran (0: the archive held them all)."""

    design: int
    layer: int
    spec: AgentSpec
    mean: float
    tokens: int
    seconds: float
    new_items: int


def record_layers(
    archive: Archive,
    designs: Sequence[AgentSpec],
    benchmark: Benchmark,
    items: Sequence[Task],
    *,
    layer: int,
    llm: ChatModel,
    train_examples: Sequence[Example] = (),
    on_layer: Callable[[LayerDone], None] = lambda done: None,
) -> None:
    """Scores every design on the first `layer` items, then every design on the next, and so on
    (the last layer may be shorter), each as its own evaluation through `evaluate_agent`."""
    if layer < 1:
        raise ValueError(f"a layer needs at least one item, not {layer}")
    held: list[int] = []  # how many of its items the archive held when an evaluation started
    for number, start in enumerate(range(0, len(items), layer)):
        tasks = items[start : start + layer]
        for index, spec in enumerate(designs):
            held.clear()
            evaluation = evaluate_agent(
                archive,
                spec,
                benchmark,
                tasks,
                llm=llm,
                split="search",
                train_examples=train_examples,
                on_start=lambda _, done: held.append(done),
            )
            assert evaluation is not None and evaluation.mean is not None  # nothing stops it
            on_layer(
                LayerDone(
                    design=index,
                    layer=number,
                    spec=spec,
                    mean=evaluation.mean,
                    tokens=evaluation.prompt_tokens + evaluation.completion_tokens,
                    seconds=evaluation.wall_s,
                    new_items=len(tasks) - (held[-1] if held else len(tasks)),
                )
            )


@dataclass(frozen=True)
class Estimate:
    """What is left of a recording: cells, and seconds at the measured (or guessed) pace."""

    cells_left: int
    cells_done: int
    seconds: float
    measured_designs: int
    seconds_per_cell: float

    @property
    def measured(self) -> bool:
        return self.measured_designs > 0


def estimate(
    archive: Archive,
    designs: Sequence[AgentSpec],
    items: Sequence[Task],
    *,
    layer: int,
    benchmark: str,
) -> Estimate:
    """The cells of the recording without a complete evaluation yet, each at its design's own
    seconds per cell so far, else the mean of the measured designs, else `GUESS_S_PER_CELL`."""
    # as the archive keeps an evaluation's items: sorted
    layers = [
        tuple(sorted(t.id for t in items[s : s + layer])) for s in range(0, len(items), layer)
    ]
    rows = _recorded(archive, designs, benchmark=benchmark)
    done = {(row.agent_hash, row.task_ids) for row in rows}
    pace: dict[str, tuple[float, int]] = {}
    for row in rows:
        seconds, cells = pace.get(row.agent_hash, (0.0, 0))
        pace[row.agent_hash] = (seconds + row.wall_s, cells + row.n_tasks)
    own = {h: s / c for h, (s, c) in pace.items() if c and h in {d.spec_hash for d in designs}}
    mean = sum(own.values()) / len(own) if own else GUESS_S_PER_CELL
    left, cells_done, seconds = 0, 0, 0.0
    for spec in designs:
        for ids in layers:
            if (spec.spec_hash, ids) in done:
                cells_done += len(ids)
                continue
            left += len(ids)
            seconds += len(ids) * own.get(spec.spec_hash, mean)
    return Estimate(
        cells_left=left,
        cells_done=cells_done,
        seconds=seconds,
        measured_designs=len(own),
        seconds_per_cell=seconds / left if left else mean,
    )
