"""Interactive benchmarks: each task is an episode in a simulated environment, scored by it.

TextWorldExpress and ScienceWorld ship their games inside their Python packages and simulate them
in Java (through py4j). Starting a simulator costs a JVM (about 1-3 s), so simulators are pooled
and reused from one task to the next; a task borrows one for its episode, alone.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import importlib.util
import queue
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from agentdesign.components import REGISTRY, AgentSpec, EnvironmentFailed, EnvState, Workflow
from agentdesign.evaluators._benchmark import Benchmark, BenchmarkError, Score, Task

__all__ = ["InteractiveBenchmark", "episode_workflows"]

JAVA_HINT = (
    "install a Java runtime (tested with 17) and put `java` on PATH, e.g. "
    "`apt-get install openjdk-17-jre-headless` (Debian/Ubuntu) or `brew install openjdk@17` (macOS)"
)


def episode_workflows() -> tuple[str, ...]:
    """The registered workflows that can play an environment's episode."""
    names = REGISTRY.names("workflow")
    return tuple(n for n in names if _plays(REGISTRY.get("workflow", n)))


def _plays(cls: type[Any]) -> bool:
    return issubclass(cls, Workflow) and cls.plays_episodes


class TextEpisode(abc.ABC):
    """One task's episode on a borrowed simulator: the `Environment` the runtime plays.

    Subclasses translate the simulator's reset and step; a simulator error marks the episode
    `failed` (its simulator is then closed, not reused) and reaches the agent as EnvironmentFailed.
    """

    def __init__(self, *, simulator: Any, task: Task, max_steps: int) -> None:
        self.simulator = simulator
        self.task = task
        self.max_steps = max_steps
        self.failed = False

    def reset(self) -> EnvState:
        return self._guarded(self._reset)

    def step(self, action: str) -> EnvState:
        return self._guarded(lambda: self._step(action))

    @abc.abstractmethod
    def _reset(self) -> EnvState: ...

    @abc.abstractmethod
    def _step(self, action: str) -> EnvState: ...

    def _guarded(self, call: Callable[[], EnvState]) -> EnvState:
        from py4j.protocol import Py4JError

        try:
            return call()
        except Py4JError as exc:
            self.failed = True
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise EnvironmentFailed(f"{self.task.id}: the simulator failed: {first_line}") from exc


class InteractiveBenchmark(Benchmark):
    """A benchmark whose tasks are episodes: the agent acts, the environment scores.

    Subclasses name the Python package that carries the simulator, start a simulator, and open a
    task's episode on one. Tasks are listed without Java, so listing and splitting work anywhere;
    Java is checked (`check_ready`) before a run writes anything.
    """

    package: ClassVar[str]  # the module that carries the simulator, e.g. "textworld_express"
    # Idle simulators by package, shared by the benchmarks of one package (a simulator plays any
    # of its games); they live until the process exits.
    _idle: ClassVar[dict[str, queue.SimpleQueue[Any]]] = {}

    @abc.abstractmethod
    def _start_simulator(self) -> Any:
        """A new simulator (a JVM); it is reused for many tasks, one at a time."""

    @abc.abstractmethod
    def _episode(self, simulator: Any, task: Task) -> TextEpisode:
        """`task`'s episode on `simulator` (the agent resets it)."""

    def score(self, task: Task, prediction: str) -> Score:
        raise BenchmarkError(
            f"{self.name} tasks are episodes, scored by their environment, not from an answer"
        )

    def check_ready(self, spec: AgentSpec | None = None) -> None:
        _check_simulator(self.package)
        if spec is not None and not _plays(type(spec["workflow"])):
            playable = ", ".join(episode_workflows())
            raise BenchmarkError(
                f"benchmark {self.name!r} is interactive: workflow "
                f"'{spec['workflow'].name}' cannot play it (use one of: {playable})"
            )

    @contextmanager
    def environment(self, task: Task) -> Iterator[TextEpisode]:
        pool = self._idle.setdefault(self.package, queue.SimpleQueue())
        try:
            simulator = pool.get_nowait()
        except queue.Empty:
            self.check_ready()
            simulator = self._start_simulator()
        episode = self._episode(simulator, task)
        try:
            yield episode
        finally:
            if episode.failed:
                _close(simulator)
            else:
                pool.put(simulator)

    @abc.abstractmethod
    def gold_actions(self, task: Task) -> Sequence[str]:
        """The simulator's own solution of `task`, for tests and sanity checks."""


def _close(simulator: Any) -> None:
    with contextlib.suppress(Exception):  # a simulator that died has nothing left to close
        simulator.close()


@functools.cache
def _check_simulator(package: str) -> None:
    """Raises BenchmarkError naming the fix when the simulator's package or Java is missing.

    Cached: checked once per process (a run checks before it writes anything, then per task).
    """
    if importlib.util.find_spec(package) is None:
        raise BenchmarkError(
            f"the Python package {package!r} is not installed: "
            "pip install 'agentdesign[envs]' (or run bash .ci/setup)"
        )
    if shutil.which("java") is None:
        raise BenchmarkError(f"{package} needs Java, which is not on PATH: {JAVA_HINT}")
