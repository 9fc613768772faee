"""Meta agent search (ADAS) as a strategy: mcts with a short cold start, whose proposals the meta
agent writes (the `MetaAgent` of `_meta.py`, which calls the model and reads its replies)."""

from __future__ import annotations

from typing import Any, ClassVar

from agentdesign.search.strategies._mcts import MctsStrategy

__all__ = ["MetaStrategy"]


class MetaStrategy(MctsStrategy):
    """Meta agent search (ADAS): after `n_initial` covering designs, every proposal is written by
    the meta agent from what the run has learnt, screened by the value model; when a reply holds
    no valid new design, the proposal is mcts's. Without a `meta` agent it is mcts with a short
    start (the run loop always hands it one)."""

    # mcts's operators, and GEPA's merge of the prompts two designs rewrote apart
    operators: ClassVar[tuple[tuple[str, float], ...]] = (
        ("mutation", 0.35),
        ("recombination", 0.35),
        ("merge", 0.1),
        ("sample", 0.2),
    )

    def __init__(self, *, n_initial: int | None = 2, **kwargs: Any) -> None:
        super().__init__(n_initial=n_initial, **kwargs)
