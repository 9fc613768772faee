"""Replay tables: recorded real evaluations of many designs on one task set, kept as a JSON file.

Comparing search strategies over many seeds with real evaluations is too slow on a CPU; a table
answers each evaluation from what was recorded, so a whole search replays in seconds.

Two file formats. The first (`REPLAY_FORMAT`) keeps one table: each design's scores and its total
tokens. The second (`CELLS_FORMAT`) keeps one row per cell (design, model, item: score, tokens,
cost, seconds), the designs' specs and where the cells came from, and may hold a table per model:
racing on a table needs what each item cost, and a recording measured in seconds per cell says
what extending it costs. A table loaded from either is a `ReplayTable`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentdesign.archive import Archive, LeaderboardRow
from agentdesign.components import SLOTS, AgentDesignError, AgentSpec
from agentdesign.evaluators import TaskOutcome, get_benchmark
from agentdesign.search.space import SearchSpace

__all__ = [
    "CELLS_FORMAT",
    "CELL_COLUMNS",
    "REPLAY_FORMAT",
    "ReplayDesign",
    "ReplayTable",
    "Usage",
    "load_tables",
    "save_cells",
]

REPLAY_FORMAT = "agentdesign-replay/1"
CELLS_FORMAT = "agentdesign-replay/2"
CELL_COLUMNS = (
    "design",
    "model",
    "item",
    "score",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "seconds",
)


@dataclass(frozen=True)
class Usage:
    """What one design used on one item: its tokens, cost and seconds."""

    prompt_tokens: int
    completion_tokens: int
    cost: float
    seconds: float

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ReplayDesign:
    """One design's recorded evaluation: its score on each task of the table and what it used.

    `usage` is per task, in the table's task order, where the table recorded it (the cells
    format); empty otherwise.
    """

    spec: AgentSpec
    scores: tuple[float, ...]
    prompt_tokens: int
    completion_tokens: int
    cost: float
    usage: tuple[Usage, ...] = ()

    def __post_init__(self) -> None:
        if self.usage and len(self.usage) != len(self.scores):
            raise AgentDesignError(
                f"design {self.spec.spec_hash} has the usage of {len(self.usage)} items for "
                f"{len(self.scores)} scores"
            )

    @classmethod
    def of(cls, spec: AgentSpec, scores: Sequence[float], usage: Sequence[Usage]) -> ReplayDesign:
        """The design recorded cell by cell: its totals are its cells' sums."""
        return cls(
            spec=spec,
            scores=tuple(scores),
            prompt_tokens=sum(u.prompt_tokens for u in usage),
            completion_tokens=sum(u.completion_tokens for u in usage),
            cost=sum(u.cost for u in usage),
            usage=tuple(usage),
        )

    @property
    def mean(self) -> float:
        return sum(self.scores) / len(self.scores)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def tokens_per_item(self) -> tuple[float, ...]:
        """Tokens per task: as recorded, else the design's tokens spread evenly (a table of the
        first format kept only totals)."""
        if self.usage:
            return tuple(float(u.tokens) for u in self.usage)
        return (self.tokens / len(self.scores),) * len(self.scores)


@dataclass(frozen=True)
class ReplayTable:
    """Designs evaluated on the same tasks of one benchmark with one model.

    `synthetic` marks tables made up for tests: they must never be reported as measurements.
    """

    benchmark: str
    description: str
    model: str
    task_ids: tuple[str, ...]
    designs: tuple[ReplayDesign, ...]
    synthetic: bool = False
    note: str = ""

    def __post_init__(self) -> None:
        if not self.designs:
            raise AgentDesignError("a replay table needs at least one design")
        hashes = [d.spec.spec_hash for d in self.designs]
        if len(set(hashes)) != len(hashes):
            raise AgentDesignError("a replay table lists a design twice")
        for design in self.designs:
            if len(design.scores) != len(self.task_ids):
                raise AgentDesignError(
                    f"design {design.spec.spec_hash} has {len(design.scores)} scores for "
                    f"{len(self.task_ids)} tasks"
                )

    def by_hash(self) -> dict[str, ReplayDesign]:
        return {d.spec.spec_hash: d for d in self.designs}

    def ranked(self) -> list[ReplayDesign]:
        """Best mean first; ties go to the design that used fewer tokens."""
        return sorted(self.designs, key=lambda d: (-d.mean, d.tokens, d.spec.spec_hash))

    def top(self, fraction: float) -> frozenset[str]:
        """Hashes of the designs scoring at least as well as the top `fraction` (at least one)."""
        ranked = self.ranked()
        cutoff = ranked[max(1, round(fraction * len(ranked))) - 1].mean
        return frozenset(d.spec.spec_hash for d in ranked if d.mean >= cutoff)

    def subset(self, columns: Sequence[int]) -> ReplayTable:
        """The table on some of its tasks (by position; a task may repeat, as a bootstrap draws
        them), each design's totals those tasks' (their share of its own where the table kept
        only totals)."""
        if not columns:
            raise AgentDesignError("a replay table needs at least one task")
        designs = []
        for design in self.designs:
            scores = [design.scores[c] for c in columns]
            if design.usage:
                designs.append(
                    ReplayDesign.of(design.spec, scores, [design.usage[c] for c in columns])
                )
                continue
            share = len(columns) / len(design.scores)
            designs.append(
                ReplayDesign(
                    spec=design.spec,
                    scores=tuple(scores),
                    prompt_tokens=round(design.prompt_tokens * share),
                    completion_tokens=round(design.completion_tokens * share),
                    cost=design.cost * share,
                )
            )
        return ReplayTable(
            benchmark=self.benchmark,
            description=self.description,
            model=self.model,
            task_ids=tuple(self.task_ids[c] for c in columns),
            designs=tuple(designs),
            synthetic=self.synthetic,
            note=self.note,
        )

    def space(self) -> SearchSpace:
        """The smallest space holding every design of the table: its components and ranges."""
        choices: dict[str, list[str]] = {slot: [] for slot in SLOTS}
        limits: dict[str, tuple[float, float]] = {}
        for design in self.designs:
            for key, value in design.spec.to_flat().items():
                slot = key.partition("__")[0]
                if key in SLOTS and value not in choices[slot]:
                    choices[slot].append(value)
                elif "__" in key and isinstance(value, int | float) and not isinstance(value, bool):
                    low, high = limits.get(key, (value, value))
                    limits[key] = (min(low, value), max(high, value))
        return SearchSpace(model=self.model, choices=choices, limits=limits)

    # -- files --

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": REPLAY_FORMAT,
            "benchmark": self.benchmark,
            "description": self.description,
            "model": self.model,
            "synthetic": self.synthetic,
            "note": self.note,
            "task_ids": list(self.task_ids),
            "designs": [
                {
                    "spec_hash": d.spec.spec_hash,
                    "describe": d.spec.describe(),
                    "flat": {k: v for k, v in d.spec.to_flat().items() if k != "model"},
                    "spec": d.spec.to_dict(),
                    "scores": list(d.scores),
                    "prompt_tokens": d.prompt_tokens,
                    "completion_tokens": d.completion_tokens,
                    "cost": d.cost,
                }
                for d in self.ranked()
            ],
        }

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: Path, *, model: str | None = None) -> ReplayTable:
        """The table of `model` in the file (either format); None: its only one."""
        tables = load_tables(path)
        if model is None and len(tables) == 1:
            return tables[0]
        for table in tables:
            if table.model == model:
                return table
        models = ", ".join(t.model for t in tables)
        wanted = "a model" if model is None else f"model {model}"
        raise AgentDesignError(f"{path} holds tables of {models}: name {wanted} among them")

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any], path: Path) -> ReplayTable:
        try:
            designs = []
            for entry in data["designs"]:
                spec = AgentSpec.from_dict(entry["spec"])
                if spec.spec_hash != entry["spec_hash"]:
                    raise AgentDesignError(f"{path}: spec hash {entry['spec_hash']} does not match")
                designs.append(
                    ReplayDesign(
                        spec=spec,
                        scores=tuple(float(s) for s in entry["scores"]),
                        prompt_tokens=int(entry["prompt_tokens"]),
                        completion_tokens=int(entry["completion_tokens"]),
                        cost=float(entry["cost"]),
                    )
                )
            return cls(
                benchmark=data["benchmark"],
                description=data["description"],
                model=data["model"],
                task_ids=tuple(data["task_ids"]),
                designs=tuple(designs),
                synthetic=bool(data.get("synthetic", False)),
                note=str(data.get("note", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise AgentDesignError(f"{path}: malformed replay table ({exc})") from None

    @classmethod
    def from_archive(
        cls, archive: Archive, *, benchmark: str, model: str | None = None, note: str = ""
    ) -> ReplayTable:
        """The complete evaluations on the benchmark's most used task set (one model only)."""
        rows = _complete(archive, benchmark=benchmark, model=model)
        if not rows:
            raise AgentDesignError(f"the archive has no complete evaluation on {benchmark}")
        evaluations = {row.evaluation_id: archive.get_evaluation(row.evaluation_id) for row in rows}

        def key(row: LeaderboardRow) -> tuple[str, str]:
            return evaluations[row.evaluation_id].task_set, str(row.spec.get("model"))

        chosen, _ = Counter(key(row) for row in rows).most_common(1)[0]
        designs = []
        task_ids: tuple[str, ...] = ()
        for row in rows:
            if key(row) != chosen:
                continue
            evaluation = evaluations[row.evaluation_id]
            task_ids = evaluation.task_ids
            results = archive.task_results(evaluation.id)
            designs.append(
                ReplayDesign(
                    spec=AgentSpec.from_dict(row.spec),
                    scores=tuple(results[t].score for t in task_ids),
                    prompt_tokens=row.prompt_tokens,
                    completion_tokens=row.completion_tokens,
                    cost=row.cost,
                )
            )
        return cls(
            benchmark=benchmark,
            description=get_benchmark(benchmark).description,
            model=chosen[1],
            task_ids=task_ids,
            designs=tuple(designs),
            note=note,
        )

    @classmethod
    def from_layers(
        cls, archive: Archive, *, benchmark: str, model: str, note: str = ""
    ) -> ReplayTable:
        """The recording of `model`'s designs on `benchmark`, each scored on its items in layers
        (one evaluation per layer of items): every design with a complete layer, on the items
        that all of them have, in the order they were recorded. A recording stopped part-way
        through a layer is so a rectangle on the layers before it."""
        rows = sorted(_complete(archive, benchmark=benchmark, model=model), key=_evaluation_id)
        if not rows:
            raise AgentDesignError(
                f"the archive has no complete evaluation of {model} on {benchmark}"
            )
        layers: dict[str, list[LeaderboardRow]] = {}
        for row in rows:
            layers.setdefault(row.agent_hash, []).append(row)
        items = {h: [t for row in found for t in row.task_ids] for h, found in layers.items()}
        shared = set.intersection(*(set(found) for found in items.values()))
        order = [t for t in dict.fromkeys(items[rows[0].agent_hash]) if t in shared]
        if not order:
            raise AgentDesignError(
                f"the designs of {model} on {benchmark} share no item: the archive holds "
                "evaluations of more than one recording"
            )
        designs = []
        for found in layers.values():
            outcomes: dict[str, TaskOutcome] = {}
            for row in found:
                for task_id, outcome in archive.task_results(row.evaluation_id).items():
                    outcomes.setdefault(task_id, outcome)
            cells = [outcomes[t] for t in order]
            usage = [
                Usage(
                    prompt_tokens=c.prompt_tokens,
                    completion_tokens=c.completion_tokens,
                    cost=c.cost,
                    seconds=c.latency_s,
                )
                for c in cells
            ]
            spec = AgentSpec.from_dict(found[0].spec)
            designs.append(ReplayDesign.of(spec, [c.score for c in cells], usage))
        return cls(
            benchmark=benchmark,
            description=get_benchmark(benchmark).description,
            model=model,
            task_ids=tuple(order),
            designs=tuple(designs),
            note=note,
        )


def _evaluation_id(row: LeaderboardRow) -> int:
    return row.evaluation_id


def _complete(archive: Archive, *, benchmark: str, model: str | None) -> list[LeaderboardRow]:
    """The archive's complete search evaluations on `benchmark` (of `model`'s designs)."""
    return archive.leaderboard(benchmark=benchmark, model=model, limit=1_000_000)


def load_tables(path: Path) -> tuple[ReplayTable, ...]:
    """The tables a file holds: one of the first format, one per model of the cells format."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise AgentDesignError(f"cannot read replay table {path}: {exc}") from None
    kind = data.get("format") if isinstance(data, dict) else None
    if kind == REPLAY_FORMAT:
        return (ReplayTable._from_dict(data, path),)
    if kind == CELLS_FORMAT:
        return _tables_from_cells(data, path)
    raise AgentDesignError(f"{path} is not a replay table ({REPLAY_FORMAT} or {CELLS_FORMAT})")


def _tables_from_cells(data: Mapping[str, Any], path: Path) -> tuple[ReplayTable, ...]:
    try:
        if tuple(data["columns"]) != CELL_COLUMNS:
            raise AgentDesignError(f"{path}: cells must have the columns {', '.join(CELL_COLUMNS)}")
        specs = {}
        for spec_hash, raw in data["designs"].items():
            specs[spec_hash] = AgentSpec.from_dict(raw)
            if specs[spec_hash].spec_hash != spec_hash:
                raise AgentDesignError(f"{path}: spec hash {spec_hash} does not match")
        grid: dict[str, dict[str, dict[str, list[Any]]]] = {}
        for cell in data["cells"]:
            design, model, item = str(cell[0]), str(cell[1]), str(cell[2])
            if specs[design].model != model:
                raise AgentDesignError(f"{path}: design {design} is not of model {model}")
            grid.setdefault(model, {}).setdefault(design, {})[item] = cell
        tables = []
        for model, by_design in grid.items():
            order = list(dict.fromkeys(item for cells in by_design.values() for item in cells))
            designs = []
            for design, by_item in by_design.items():
                if len(by_item) != len(order):
                    raise AgentDesignError(
                        f"{path}: design {design} of {model} has {len(by_item)} of the "
                        f"{len(order)} items: a table must be rectangular"
                    )
                cells = [by_item[t] for t in order]
                usage = [
                    Usage(
                        prompt_tokens=int(c[4]),
                        completion_tokens=int(c[5]),
                        cost=float(c[6]),
                        seconds=float(c[7]),
                    )
                    for c in cells
                ]
                scores = [float(c[3]) for c in cells]
                designs.append(ReplayDesign.of(specs[design], scores, usage))
            tables.append(
                ReplayTable(
                    benchmark=data["benchmark"],
                    description=data["description"],
                    model=model,
                    task_ids=tuple(order),
                    designs=tuple(designs),
                    synthetic=bool(data.get("synthetic", False)),
                    note=str(data.get("note", "")),
                )
            )
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise AgentDesignError(f"{path}: malformed replay table ({exc!r})") from None
    if not tables:
        raise AgentDesignError(f"{path}: the table has no cells")
    return tuple(tables)


def save_cells(tables: Sequence[ReplayTable], path: Path, *, provenance: Mapping[str, Any]) -> None:
    """Writes `tables` (one benchmark, any models) in the cells format, one cell a line, with
    `provenance` (where the cells came from, the data's license) kept beside them."""
    if not tables or len({(t.benchmark, t.description, t.synthetic) for t in tables}) != 1:
        raise AgentDesignError("a cells file holds tables of one benchmark")
    first = tables[0]
    head = {
        "format": CELLS_FORMAT,
        "benchmark": first.benchmark,
        "description": first.description,
        "synthetic": first.synthetic,
        "note": first.note,
        "provenance": dict(provenance),
        "columns": list(CELL_COLUMNS),
    }
    specs = {d.spec.spec_hash: d.spec.to_json() for t in tables for d in t.designs}
    lines = []
    for table in tables:
        for design in table.designs:
            if not design.usage:
                raise AgentDesignError(
                    f"design {design.spec.spec_hash} has no usage per item: a cells file needs it"
                )
            for task_id, score, usage in zip(
                table.task_ids, design.scores, design.usage, strict=True
            ):
                cell = [
                    design.spec.spec_hash,
                    table.model,
                    task_id,
                    score,
                    usage.prompt_tokens,
                    usage.completion_tokens,
                    usage.cost,
                    round(usage.seconds, 3),
                ]
                lines.append(json.dumps(cell))
    # the head indented, then one design and one cell a line
    designs = ",\n  ".join(f"{json.dumps(h)}: {spec}" for h, spec in specs.items())
    cells = ",\n  ".join(lines)
    text = json.dumps(head, indent=1)[:-2]
    path.write_text(f'{text},\n "designs": {{\n  {designs}\n }},\n "cells": [\n  {cells}\n ]\n}}\n')
