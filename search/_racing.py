"""Racing: a design earns more search items only while it is not clearly worse than the incumbent.

Every design starts on a few search items; at each stage boundary its scores on the items it
shares with the incumbent (the run's best fully scored design) go through a paired test, and a
design that is clearly worse stops there, archived as "pruned" and never ranked. Designs that
keep up end with every search item, so the winner is always chosen among fully scored designs and
its search score rests on all of them. GEPA and the Darwin Gödel Machine stage their evaluations
the same way; it spends the budget on contenders instead of on designs that lose from the start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agentdesign.components import AgentDesignError
from agentdesign.evaluators import paired_difference

__all__ = ["Racing"]


@dataclass(frozen=True)
class Racing:
    """When a design is tested against the incumbent, and how sure the test must be to drop it.

    Stages double from `first_stage` items (or an eighth of the search items, if more) while they
    stay below the full count: 10 items race at 4 and 8, 40 items at 5, 10 and 20 (with 0/1
    scores, 4 items lost in a row is the least evidence that passes a one-sided 0.1 test). A
    design is dropped when it trails the incumbent on the shared items and the paired test's
    one-sided p-value (exact McNemar for 0/1 scores, a sign-flip permutation otherwise) is below
    `alpha`.
    """

    alpha: float = 0.1
    first_stage: int = 4

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise AgentDesignError(f"racing alpha must be between 0 and 1, got {self.alpha}")
        if self.first_stage < 2:
            raise AgentDesignError(
                f"racing needs a first stage of 2+ items, got {self.first_stage}"
            )

    def stages(self, n_items: int) -> tuple[int, ...]:
        """The item counts, below `n_items`, after which a design is tested."""
        sizes = []
        size = max(self.first_stage, n_items // 8)
        while size < n_items:
            sizes.append(size)
            size *= 2
        return tuple(sizes)

    def clearly_worse(self, mine: Mapping[str, float], incumbent: Mapping[str, float]) -> bool:
        """Whether scores by task id trail the incumbent's on their shared tasks beyond chance."""
        shared = sorted(set(mine) & set(incumbent))
        if len(shared) < 2:
            return False
        comparison = paired_difference([mine[t] for t in shared], [incumbent[t] for t in shared])
        return comparison.mean_diff < 0 and comparison.p_value / 2 < self.alpha
