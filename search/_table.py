"""Replay tables: recorded real evaluations of many designs on one task set, kept as a JSON file.

Comparing search strategies over many seeds with real evaluations is too slow on a CPU; a table
answers each evaluation from what was recorded, so a whole search replays in seconds.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentdesign.archive import Archive, LeaderboardRow
from agentdesign.components import SLOTS, AgentDesignError, AgentSpec
from agentdesign.evaluators import get_benchmark
from agentdesign.search._space import SearchSpace

__all__ = ["REPLAY_FORMAT", "ReplayDesign", "ReplayTable"]

REPLAY_FORMAT = "agentdesign-replay/1"


@dataclass(frozen=True)
class ReplayDesign:
    """One design's recorded evaluation: its score on each task of the table and what it used."""

    spec: AgentSpec
    scores: tuple[float, ...]
    prompt_tokens: int
    completion_tokens: int
    cost: float

    @property
    def mean(self) -> float:
        return sum(self.scores) / len(self.scores)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


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
    def load(cls, path: Path) -> ReplayTable:
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise AgentDesignError(f"cannot read replay table {path}: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != REPLAY_FORMAT:
            raise AgentDesignError(f"{path} is not a replay table ({REPLAY_FORMAT})")
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
        rows = [
            row
            for row in archive.leaderboard(benchmark=benchmark, limit=1_000_000)
            if model is None or row.spec.get("model") == model
        ]
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
