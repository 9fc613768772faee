"""TextWorldExpress (Jansen and Cote, 2022; Apache-2.0): fast simulated text games, one benchmark
per game, each a seeded pool of small games from the package's test fold.

The games come with the `textworld-express` package (nothing is copied here). Each game has fixed,
small generation parameters, and a step limit of about twice the longest gold path seen on its
first 30 test seeds, so a competent agent has room to explore but a lost one stops.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from agentdesign.components import EnvState
from agentdesign.evaluators._benchmark import Task, register_benchmark
from agentdesign.evaluators.environments._environments import InteractiveBenchmark, TextEpisode

__all__ = [
    "TWX_GAMES",
    "TWXArithmetic",
    "TWXCoin",
    "TWXCooking",
    "TWXGame",
    "TWXSorting",
    "TextWorldExpress",
]

# The package's test fold is seeds 20000-20999; the pool is its first N_SEEDS.
TEST_FOLD_FIRST_SEED = 20_000
N_SEEDS = 100


@dataclass(frozen=True)
class TWXGame:
    """One TextWorldExpress game as a benchmark: its generation parameters and step limit."""

    game: str  # the package's game name
    params: str  # the package's comma-separated generation parameters
    max_steps: int
    goal: str  # what the agent must do, for the benchmark's description


TWX_GAMES: Mapping[str, TWXGame] = {
    "arithmetic": TWXGame(
        game="arithmetic",
        params="",
        max_steps=10,
        goal="read a math problem, solve it, and put the item whose quantity is the answer "
        "in a box",
    ),
    "coin": TWXGame(
        game="coin",
        params="numLocations=3,numDistractorItems=0,includeDoors=0,limitInventorySize=0",
        max_steps=20,
        goal="explore three rooms to find a coin and take it",
    ),
    "sorting": TWXGame(
        game="sorting",
        params="",
        max_steps=20,
        goal="put objects in a box in order of quantity, smallest first (units differ: g, kg)",
    ),
    "cooking": TWXGame(
        game="cookingworld",
        params=(
            "numLocations=1,numIngredients=2,numDistractorItems=3,includeDoors=0,"
            "limitInventorySize=0"
        ),
        max_steps=28,
        goal="read a recipe, find and prepare two ingredients (slice, cook), then make and eat "
        "the meal",
    ),
}


class _TWXEpisode(TextEpisode):
    def __init__(self, *, simulator: Any, task: Task, max_steps: int, game: TWXGame) -> None:
        super().__init__(simulator=simulator, task=task, max_steps=max_steps)
        self.game = game

    def _reset(self) -> EnvState:
        observation, infos = self.simulator.reset(
            seed=int(self.task.metadata["seed"]),
            gameFold="test",
            gameName=self.game.game,
            gameParams=self.game.params,
            generateGoldPath=False,
        )
        return _state(f"{infos['taskDescription']}\n\n{observation}", infos, done=False)

    def _step(self, action: str) -> EnvState:
        observation, _, done, infos = self.simulator.step(action)
        return _state(observation, infos, done=bool(done))


def _state(observation: str, infos: Mapping[str, Any], *, done: bool) -> EnvState:
    # Sorted: the simulator's order is not stable, and prompts (and so cached answers) must be.
    return EnvState(
        observation=observation.strip(),
        valid_actions=tuple(sorted(infos["validActions"])),
        done=done,
        score=min(max(float(infos["score"]), 0.0), 1.0),  # a failed game can score below 0
    )


class TextWorldExpress(InteractiveBenchmark):
    """A TextWorldExpress game: one task per seed of its test fold."""

    package: ClassVar[str] = "textworld_express"
    game: ClassVar[TWXGame]

    def __init__(self, *, max_steps: int | None = None) -> None:
        self.max_steps = self.game.max_steps if max_steps is None else max_steps

    def tasks(self) -> Sequence[Task]:
        key = self.name.removeprefix("twx-")
        return [
            Task(
                id=f"twx/{key}/{seed}",
                question=f"TextWorldExpress {key} game, seed {seed}: {self.game.goal}.",
                answer="",
                metadata={"game": self.game.game, "seed": seed, "max_steps": self.max_steps},
            )
            for seed in range(TEST_FOLD_FIRST_SEED, TEST_FOLD_FIRST_SEED + N_SEEDS)
        ]

    def _start_simulator(self) -> Any:
        from textworld_express import TextWorldExpressEnv

        # The runtime enforces each task's step limit; the simulator's own is set out of the way.
        return TextWorldExpressEnv(envStepLimit=1_000_000)

    def _episode(self, simulator: Any, task: Task) -> TextEpisode:
        return _TWXEpisode(
            simulator=simulator,
            task=task,
            max_steps=int(task.metadata["max_steps"]),
            game=self.game,
        )

    def gold_actions(self, task: Task) -> Sequence[str]:
        with self.environment(task) as episode:
            episode.simulator.reset(
                seed=int(task.metadata["seed"]),
                gameFold="test",
                gameName=self.game.game,
                gameParams=self.game.params,
                generateGoldPath=True,
            )
            return tuple(episode.simulator.getGoldActionSequence())


def _describe(key: str) -> str:
    game = TWX_GAMES[key]
    return (
        f"TextWorldExpress '{key}' (interactive text game, Apache-2.0): {game.goal}. The agent "
        "plays an episode: it reads observations and sends text commands (e.g. 'take coin') "
        "from the valid actions listed; the task scores the game's score in [0, 1] (1 = solved), "
        f"with a limit of {game.max_steps} steps."
    )


@register_benchmark
class TWXArithmetic(TextWorldExpress):
    name = "twx-arithmetic"
    game = TWX_GAMES["arithmetic"]
    description = _describe("arithmetic")


@register_benchmark
class TWXCoin(TextWorldExpress):
    name = "twx-coin"
    game = TWX_GAMES["coin"]
    description = _describe("coin")


@register_benchmark
class TWXSorting(TextWorldExpress):
    name = "twx-sorting"
    game = TWX_GAMES["sorting"]
    description = _describe("sorting")


@register_benchmark
class TWXCooking(TextWorldExpress):
    name = "twx-cooking"
    game = TWX_GAMES["cooking"]
    description = _describe("cooking")
