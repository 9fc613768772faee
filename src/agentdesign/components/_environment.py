"""Interactive environments: the tasks an agent plays one action at a time.

Standard library only, like every module export inlines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "EnvState",
    "Environment",
    "EnvironmentFailed",
    "Episode",
]


@dataclass(frozen=True)
class EnvState:
    """What an environment shows after a reset or a step: the observation, the actions it offers
    now, whether the episode is over, and the episode's score so far, in [0, 1]."""

    observation: str
    valid_actions: tuple[str, ...] = ()
    done: bool = False
    score: float = 0.0


class Environment(Protocol):
    """An interactive task (a text game, a simulated lab) that an agent plays one action at a time.

    The benchmark that owns the task builds it; the runtime only resets it and steps it.
    `max_steps` is the task's step limit: an episode not done after that many steps is stopped and
    recorded as a budget stop.
    """

    max_steps: int

    def reset(self) -> EnvState: ...

    def step(self, action: str) -> EnvState: ...


class EnvironmentFailed(Exception):
    """The environment itself broke (e.g. its simulator died): the task fails, the run goes on."""


@dataclass(frozen=True)
class Episode:
    """How an episode ended: the environment's score, the steps taken, and whether it finished.

    An episode cut short (step limit, call budget, a failed model call) keeps the score it reached:
    the environment measured it, not a parse of the agent's output.
    """

    score: float
    steps: int
    done: bool
