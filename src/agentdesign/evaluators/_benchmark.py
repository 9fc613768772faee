"""Benchmarks: a pool of tasks, a scorer, seeded search/holdout splits and a registry by name.

A benchmark is deliberately small (like optuna's BaseSampler): it lists its tasks and scores one
prediction. Everything else (running agents, caching, statistics) lives elsewhere, so that adding
a benchmark means writing one class.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from agentdesign.components import (
    MAX_DATA_BYTES,
    MAX_LINE_BYTES,
    AgentDesignError,
    AgentSpec,
    Environment,
    NamedRegistry,
    check_nesting,
    check_unicode,
    decode_text,
    output_key,
    read_regular_file,
)

__all__ = [
    "BENCHMARKS",
    "OPENERS",
    "Benchmark",
    "BenchmarkError",
    "Score",
    "Split",
    "Task",
    "available_benchmarks",
    "get_benchmark",
    "load_jsonl",
    "make_split",
    "parse_jsonl",
    "read_data_file",
    "register_benchmark",
]

# `get_benchmark("jsonl:PATH")` opens a user's data file: the opener for each such prefix is
# registered by the module that implements it (src/agentdesign/evaluators/_custom.py for "jsonl:").
FILE_PREFIX = "jsonl:"


# mypy run on files (not `-p agentdesign`) cannot resolve `agentdesign.*` under the package-dir
# mapping, sees Any, and strict mode refuses to subclass it; the ignore is inert when it resolves.
class BenchmarkError(AgentDesignError):  # type: ignore[misc, unused-ignore]
    """A benchmark, task id, split or data file is unknown or malformed."""


@dataclass(frozen=True)
class Task:
    """One problem: a stable id (recorded in the archive), the question and the gold answer."""

    id: str
    question: str
    answer: str
    # Excluded from the hash (a dict is unhashable) but not from equality.
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Score:
    """How good one prediction is, in [0, 1], with what the scorer saw, for the archive.

    `error_kind` says why a prediction could not be judged on its merits: "parse" (no answer in
    the expected form), "sandbox" (its code was killed by the sandbox) or "scorer_timeout" (the
    scorer gave up on it in time, as a regex that backtracks without end); the runner records it.
    """

    value: float
    details: Mapping[str, Any] = field(default_factory=dict, hash=False)
    error_kind: str | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.value <= 1.0:  # also rejects NaN
            raise ValueError(f"score value must be in [0, 1], got {self.value!r}")


@dataclass(frozen=True)
class Split:
    """Which tasks a search may look at, and which are kept back to report honest final scores."""

    seed: int
    search_ids: tuple[str, ...]
    holdout_ids: tuple[str, ...]


def make_split(task_ids: Sequence[str], *, seed: int, n_search: int, n_holdout: int) -> Split:
    """Draws disjoint search and holdout sets from `task_ids`, reproducibly.

    Each id is ranked by SHA-256 of (seed, id): unlike numpy's or `random`'s shuffles, whose streams
    may change between versions, this order is fixed forever on every platform, ignores the order
    the ids arrive in, and moves few ids when the pool grows. Both tuples keep that random order,
    so any prefix of `search_ids` is itself a random sample.
    """
    if n_search < 1:
        raise BenchmarkError(f"n_search must be at least 1, got {n_search}")
    if n_holdout < 0:
        raise BenchmarkError(f"n_holdout must be at least 0, got {n_holdout}")
    pool = sorted(set(task_ids))
    if len(pool) != len(task_ids):
        raise BenchmarkError("task ids for a split must be unique")
    if n_search + n_holdout > len(pool):
        raise BenchmarkError(
            f"a split needs {n_search} search + {n_holdout} holdout tasks "
            f"but the pool has only {len(pool)}"
        )
    ranked = sorted(pool, key=lambda task_id: _rank(seed, task_id))
    return Split(
        seed=seed,
        search_ids=tuple(ranked[:n_search]),
        holdout_ids=tuple(ranked[n_search : n_search + n_holdout]),
    )


def _rank(seed: int, task_id: str) -> bytes:
    return hashlib.sha256(f"{seed}\x00{task_id}".encode()).digest()


class Benchmark(abc.ABC):
    """A named pool of tasks and a way to score a prediction for one of them."""

    name: ClassVar[str]
    # Read by value models and shown to users: the domain, the answer format and the scoring rule.
    description: ClassVar[str]
    # Components that cannot produce this benchmark's kind of answer (a program's printed number
    # is no function call): the narrowed design spaces leave them out so a short run does not
    # spend its budget on them; the full space keeps them.
    unsuited_components: ClassVar[frozenset[str]] = frozenset()

    @abc.abstractmethod
    def tasks(self) -> Sequence[Task]:
        """The pool that search and holdout splits are drawn from."""

    def train_examples(self) -> Sequence[Task]:
        """Solved tasks outside the pool, for few-shot prompts; none unless a benchmark has them."""
        return ()

    @abc.abstractmethod
    def score(self, task: Task, prediction: str) -> Score:
        """Scores an agent's final output for `task`."""

    def answer_key(self, task: Task, output: str) -> str:
        """The key under which two outputs for `task` give the same answer, which a vote among an
        agent's attempts counts (self-consistency's majority): by default the normalized final
        answer, its last number where it has one; empty for no answer, which gets no vote. A
        benchmark whose answers are not numbers reads them as its scorer does."""
        return output_key(output)

    @property
    def reference(self) -> str:
        """What `get_benchmark` needs to open this benchmark again from anywhere (runs store it)."""
        return self.name

    def check_ready(self, spec: AgentSpec | None = None) -> None:
        """Raises BenchmarkError, before a run writes anything, if this benchmark cannot run here
        (or cannot run `spec`); single-turn benchmarks always can."""
        return None

    def environment(self, task: Task) -> AbstractContextManager[Environment | None]:
        """The environment `task` is played in, for interactive benchmarks; None otherwise."""
        return contextlib.nullcontext()

    def task(self, task_id: str) -> Task:
        """The pool task with this id."""
        found = self._tasks_by_id.get(task_id)
        if found is None:
            raise BenchmarkError(f"unknown task id {task_id!r} in benchmark {self.name!r}")
        return found

    def tasks_by_ids(self, ids: Iterable[str]) -> tuple[Task, ...]:
        """The pool tasks with these ids, in the given order (e.g. a split's)."""
        ids = tuple(ids)
        missing = [task_id for task_id in ids if task_id not in self._tasks_by_id]
        if missing:
            shown = ", ".join(repr(task_id) for task_id in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            raise BenchmarkError(f"unknown task ids in benchmark {self.name!r}: {shown}{more}")
        return tuple(self._tasks_by_id[task_id] for task_id in ids)

    @functools.cached_property
    def _tasks_by_id(self) -> dict[str, Task]:
        index: dict[str, Task] = {}
        for task in self.tasks():
            if task.id in index:
                raise BenchmarkError(f"benchmark {self.name!r} has duplicate task id {task.id!r}")
            index[task.id] = task
        return index


# The built-ins register when `agentdesign.evaluators` imports their modules, which it does before
# any of its modules can be used; third-party ones come from the `agentdesign.benchmarks` entry
# points, on the first read.
BENCHMARKS = NamedRegistry[type[Benchmark]](
    kind="benchmark", group="agentdesign.benchmarks", adopt=lambda name, cls: _adopt(name, cls)
)
# Openers of benchmark references with a prefix ("jsonl:PATH"), by prefix.
OPENERS = NamedRegistry[Callable[[str], Benchmark]](kind="benchmark reference prefix")
_INSTANCES: dict[str, Benchmark] = {}

B = TypeVar("B", bound=type[Benchmark])


def register_benchmark(cls: B) -> B:
    """Class decorator that makes a benchmark available to `get_benchmark` under `cls.name`."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{cls.__qualname__} needs a non-empty class attribute 'name'")
    if not isinstance(getattr(cls, "description", None), str):
        raise ValueError(f"benchmark {name!r} needs a class attribute 'description'")
    BENCHMARKS.register(name, cls)
    return cls


def get_benchmark(name: str) -> Benchmark:
    """The benchmark registered under `name`, or a user's data file as "jsonl:PATH".

    One instance per process, so data loads once.
    """
    instance = _INSTANCES.get(name)
    if instance is None:
        prefix, _, rest = name.partition(":")
        if rest and prefix in OPENERS:
            instance = OPENERS[prefix](rest)
        else:
            hint = f"; or {FILE_PREFIX}PATH for your own data"
            instance = BENCHMARKS.lookup(name, error=BenchmarkError, hint=hint)()
        _INSTANCES[name] = instance
    return instance


def available_benchmarks() -> dict[str, str]:
    """Registered benchmark names, sorted, each with its description."""
    return {name: BENCHMARKS[name].description for name in sorted(BENCHMARKS)}


def _adopt(name: str, cls: Any) -> None:
    """Registers a plugin's benchmark class under its own name (a decorator may have already)."""
    if not (isinstance(cls, type) and issubclass(cls, Benchmark)):
        raise TypeError(f"entry point '{name}' names {cls!r}, not a Benchmark subclass")
    if BENCHMARKS.get(cls.name) is not cls:
        register_benchmark(cls)


def load_jsonl(path: str | os.PathLike[str] | Traversable) -> list[dict[str, Any]]:
    """Reads a JSON Lines file of objects; a bad line raises BenchmarkError naming file and line.

    Accepts an `importlib.resources` Traversable so packaged data loads from a wheel or zip too.
    A path must be a regular file within `MAX_DATA_BYTES` (a device or a pipe would be read for
    ever), each line within `MAX_LINE_BYTES` and `MAX_NESTING`.
    """
    source: Traversable = Path(path) if isinstance(path, str | os.PathLike) else path
    if isinstance(source, Path):
        data = read_data_file(source, limit=MAX_DATA_BYTES)
    else:
        try:
            data = source.read_bytes()
        except OSError as error:
            raise BenchmarkError(f"cannot read {source}: {error}") from error
    return parse_jsonl(data, source=str(source))


def read_data_file(path: Path, *, limit: int) -> bytes:
    """The bytes of a user's data or settings file, a regular one of at most `limit` bytes (see
    `read_regular_file`); anything else is a BenchmarkError naming it."""
    try:
        return read_regular_file(path, limit=limit)
    except OSError as error:
        raise BenchmarkError(f"cannot read {path}: {error.strerror or error}") from error
    except ValueError as error:
        raise BenchmarkError(f"cannot read {path}: {error}") from error


def parse_jsonl(data: bytes, *, source: str) -> list[dict[str, Any]]:
    """The objects of JSON Lines `data`, one a line; a bad line raises BenchmarkError naming
    `source` and the line.

    Lines end at "\\n" alone, as JSON Lines defines them: `str.splitlines` would also end one at a
    U+2028 inside a string, which JSON allows raw. A line is refused past `MAX_LINE_BYTES`, nested
    past `MAX_NESTING`, or holding a lone surrogate (see `check_unicode`).
    """
    lines = data.split(b"\n")
    if lines and not lines[-1]:  # the newline that ends the last line
        lines.pop()
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        where = f"{source}:{number}"
        if len(line) > MAX_LINE_BYTES:
            raise BenchmarkError(
                f"{where}: a line of {len(line):,} bytes, more than the {MAX_LINE_BYTES:,} allowed"
            )
        try:
            text = decode_text(line)
            check_nesting(text)
            record = json.loads(text)
        except json.JSONDecodeError as error:
            raise BenchmarkError(f"{where}: invalid JSON ({error.msg})") from error
        except ValueError as error:
            raise BenchmarkError(f"{where}: {error}") from error
        if not isinstance(record, dict):
            raise BenchmarkError(f"{where}: expected a JSON object")
        if "\\u" in text:  # only an escape can make a lone surrogate
            try:
                check_unicode(json.dumps(record, ensure_ascii=False))
            except ValueError as error:
                raise BenchmarkError(f"{where}: {error}") from error
        records.append(record)
    return records
