"""agentdesign: search for the best LLM agent design for a benchmark, honestly scored.

The Python face, as optuna's `create_study`:

    import agentdesign

    search = agentdesign.create_search("gsm8k", model="embedded/qwen2.5-coder-1.5b", n_search=10)
    for _ in range(4):
        candidate = search.ask()
        search.evaluate(candidate)  # or score it yourself: search.tell(candidate, scores)
    search.finalize()
    print(search.verdict())

The names here are what a user starts from: the search and its configuration, the verdict it
prints, the agent spec it scores, and the base classes a plugin extends (a component, a benchmark,
a strategy). The layers have the rest: `agentdesign.components`, `agentdesign.evaluators`,
`agentdesign.archive`, `agentdesign.search` (and `agentdesign.benchmarking`, which measures the
search itself). Names load on first use, so that `import agentdesign` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentdesign.components import AgentSpec, Component
    from agentdesign.evaluators import Benchmark
    from agentdesign.search import Search, create_search, load_search
    from agentdesign.search.config import Budget, RunConfig
    from agentdesign.search.strategies import Strategy
    from agentdesign.search.verdict import RunVerdict

__all__ = [
    "AgentSpec",
    "Benchmark",
    "Budget",
    "Component",
    "RunConfig",
    "RunVerdict",
    "Search",
    "Strategy",
    "create_search",
    "load_search",
]

_HOMES = {
    "AgentSpec": "agentdesign.components",
    "Component": "agentdesign.components",
    "Benchmark": "agentdesign.evaluators",
    "Strategy": "agentdesign.search.strategies",
    "Budget": "agentdesign.search.config",
    "RunConfig": "agentdesign.search.config",
    "Search": "agentdesign.search",
    "create_search": "agentdesign.search",
    "load_search": "agentdesign.search",
    "RunVerdict": "agentdesign.search.verdict",
}


def __getattr__(name: str) -> Any:
    """Loads a face name from its layer on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'agentdesign' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
