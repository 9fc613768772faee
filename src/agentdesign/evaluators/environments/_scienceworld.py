"""ScienceWorld (Wang et al., 2022; Apache-2.0): elementary-science tasks in a simulated world, the
hard interactive tier. A small fixed subset: six tasks with short gold paths, five variations each
from the package's test fold, with its "easy" simplifications (teleporting, open doors and
containers, self-watering pots).

The tasks come with the `scienceworld` package (nothing is copied here). The simulator scores 0-100
(negative when the agent does something that fails the task); a task scores that / 100, at least 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from agentdesign.components import EnvState
from agentdesign.evaluators._benchmark import Task, register_benchmark
from agentdesign.evaluators.environments._environments import InteractiveBenchmark, TextEpisode

__all__ = ["SCIENCEWORLD_TASKS", "ScienceWorld"]

# Task name -> the first variation of its test fold (the package's get_variations_test()).
SCIENCEWORLD_TASKS: Mapping[str, int] = {
    "find-living-thing": 225,
    "find-non-living-thing": 225,
    "find-plant": 225,
    "lifespan-longest-lived": 93,
    "lifespan-shortest-lived": 93,
    "power-component": 15,
}
VARIATIONS_PER_TASK = 5
SIMPLIFICATIONS = "easy"
MAX_STEPS = 30  # about twice the longest gold path of these variations (16 steps)


class _ScienceWorldEpisode(TextEpisode):
    def _reset(self) -> EnvState:
        self._load(gold=False)
        observation, infos = self.simulator.reset()
        return self._state(f"{infos['taskDesc']}\n\n{observation}", infos, done=False)

    def _step(self, action: str) -> EnvState:
        observation, _, done, infos = self.simulator.step(action)
        return self._state(observation, infos, done=bool(done))

    def _load(self, *, gold: bool) -> None:
        meta = self.task.metadata
        self.simulator.load(
            meta["task_name"], int(meta["variation"]), SIMPLIFICATIONS, generateGoldPath=gold
        )

    def _state(self, observation: str, infos: Mapping[str, Any], *, done: bool) -> EnvState:
        # Every object-action combination would be hundreds of lines: the templates are listed.
        return EnvState(
            observation=observation.strip(),
            valid_actions=tuple(self.simulator.get_possible_actions()),
            done=done,
            score=max(float(infos["score"]), 0.0) / 100.0,
        )


@register_benchmark
class ScienceWorld(InteractiveBenchmark):
    """A fixed subset of ScienceWorld's test variations, one task per (task, variation)."""

    name = "scienceworld"
    description = (
        "ScienceWorld (interactive elementary-science simulation, Apache-2.0), a small subset: "
        "find a living or non-living thing or a plant and move it to a box, pick the longest- or "
        "shortest-lived animal, or power a component with a circuit. The agent plays an episode "
        "with text commands built from action templates (e.g. 'look at OBJ', 'focus on OBJ'); "
        f"the task scores the simulator's 0-100 score / 100, with a limit of {MAX_STEPS} steps."
    )
    package: ClassVar[str] = "scienceworld"

    def __init__(self, *, max_steps: int = MAX_STEPS) -> None:
        self.max_steps = max_steps

    def tasks(self) -> Sequence[Task]:
        return [
            Task(
                id=f"sciworld/{task_name}/{variation}",
                question=f"ScienceWorld task {task_name}, variation {variation}.",
                answer="",
                metadata={
                    "task_name": task_name,
                    "variation": variation,
                    "max_steps": self.max_steps,
                },
            )
            for task_name, first in SCIENCEWORLD_TASKS.items()
            for variation in range(first, first + VARIATIONS_PER_TASK)
        ]

    def _start_simulator(self) -> Any:
        from scienceworld import ScienceWorldEnv

        # The runtime enforces each task's step limit; the simulator's own is set out of the way.
        return ScienceWorldEnv("", envStepLimit=1_000_000)

    def _episode(self, simulator: Any, task: Task) -> TextEpisode:
        return _ScienceWorldEpisode(
            simulator=simulator, task=task, max_steps=int(task.metadata["max_steps"])
        )

    def gold_actions(self, task: Task) -> Sequence[str]:
        with self.environment(task) as episode:
            assert isinstance(episode, _ScienceWorldEpisode)
            episode._load(gold=True)
            return tuple(episode.simulator.get_gold_action_sequence())
