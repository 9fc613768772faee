"""Search over agent designs: the design space, strategies, and the resumable search loop."""

from __future__ import annotations

from agentdesign.search._loop import (
    Budget,
    Reporter,
    RunConfig,
    RunSummary,
    resume_search,
    run_search,
)
from agentdesign.search._space import SearchSpace
from agentdesign.search._strategies import STRATEGIES, make_sampler

__all__ = [
    "STRATEGIES",
    "Budget",
    "Reporter",
    "RunConfig",
    "RunSummary",
    "SearchSpace",
    "make_sampler",
    "resume_search",
    "run_search",
]
