"""Racing: a design earns more search items only while it is not clearly worse than the incumbent.

Every design starts on a few search items; at each stage boundary its scores on the first items of
the run's stored item order are tested against the incumbent (the run's best fully scored
design), and a design that is clearly worse stops there, archived as "pruned" and never ranked.
Designs that keep up end with every search item, so the winner is always chosen among fully
scored designs and its search score rests on all of them. GEPA and the Darwin Gödel Machine stage
their evaluations the same way; it spends the budget on contenders instead of on designs that
lose from the start.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from agentdesign.components import AgentDesignError
from agentdesign.evaluators import paired_difference, summarize

__all__ = ["RACE_RULES", "Racing"]

# "bounds": the error rate is spent over the stages and the incumbent is taken at its lower
# confidence bound (see Racing); "paired": the rule of runs stored before it, a paired test at the
# full alpha at every stage, which stops equal designs far more often than alpha.
RACE_RULES = ("bounds", "paired")


@dataclass(frozen=True)
class Racing:
    """When a design is tested against the incumbent, and how sure the test must be to drop it.

    Stages double from `first_stage` items (or an eighth of the search items, if more) while they
    stay below the full count: 10 items race at 4 and 8, 30 at 4, 8 and 16, 40 at 5, 10 and 20;
    never more than 4 stages. Stage k is tested on the first k items of the run's order, a random
    sample of the search items, once all k have a result.

    The "bounds" rule drops a design when its upper confidence bound, on its first k items, is
    below the incumbent's lower bound, on all of the incumbent's items; both one-sided, from
    `summarize` (Clopper-Pearson for 0/1 scores). `alpha` is the chance a design as good as the
    incumbent is ever dropped, split by Bonferroni: half over the planned stages (alpha / 2K at
    each of K), half to the incumbent's bound. Bonferroni because it needs nothing the tests here
    lack: Pocock and O'Brien-Fleming boundaries are derived for a normal statistic at equally
    spaced looks, where these looks double and fall at 4 to 16 items, with discrete exact tests;
    O'Brien-Fleming would also spend almost nothing at the first stage, where racing saves most;
    over at most 4 nested looks Bonferroni only ignores their correlation. The incumbent's lower
    bound, not its scores, because it was chosen as the best of the run on these very items: its
    scores overstate it (the winner's curse), and a paired test against them stopped designs as
    good up to 28% of the time at alpha 0.1. The bound gives up the pairing, so a design must
    trail further to be dropped; `bench/honesty.py` measures both rules (docs/racing.md).

    The "paired" rule (runs stored before the bounds) drops a design that trails the incumbent
    on their shared items with a one-sided paired p-value (exact McNemar for 0/1 scores, a
    sign-flip permutation otherwise) below `alpha`, at every stage.
    """

    alpha: float = 0.1
    first_stage: int = 4
    rule: str = "bounds"

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise AgentDesignError(f"racing alpha must be between 0 and 1, got {self.alpha}")
        if self.first_stage < 2:
            raise AgentDesignError(
                f"racing needs a first stage of 2+ items, got {self.first_stage}"
            )
        if self.rule not in RACE_RULES:
            raise AgentDesignError(
                f"unknown racing rule {self.rule!r}: one of {', '.join(RACE_RULES)}"
            )

    def stages(self, n_items: int) -> tuple[int, ...]:
        """The item counts, below `n_items`, after which a design is tested."""
        sizes = []
        size = max(self.first_stage, n_items // 8)
        while size < n_items:
            sizes.append(size)
            size *= 2
        return tuple(sizes)

    def due(self, order: Sequence[str], done: Collection[str], *, after: int = 0) -> int:
        """The largest stage past `after` whose items, the first of `order`, are all in `done`
        (0: none). Tasks run at once finish out of order; a stage waits for its slow items
        rather than test whichever finished first, which would favour the quick answers."""
        complete = next((n for n, task_id in enumerate(order) if task_id not in done), len(order))
        return max((s for s in self.stages(len(order)) if after < s <= complete), default=0)

    def clearly_worse(
        self, mine: Mapping[str, float], incumbent: Mapping[str, float], *, n_items: int
    ) -> bool:
        """Whether a design's scores at a stage (by task id) are clearly worse than the
        incumbent's, in a race over `n_items` search items."""
        if self.rule == "paired":
            return self._trails_paired(mine, incumbent)
        if len(mine) < 2 or len(incumbent) < 2:
            return False
        looks = max(len(self.stages(n_items)), 1)
        # A two-sided interval at confidence 1 - 2a has a one-sided bound at level a.
        upper = summarize(list(mine.values()), confidence=1 - self.alpha / looks).ci_high
        lower = summarize(list(incumbent.values()), confidence=1 - self.alpha).ci_low
        return upper < lower

    def _trails_paired(self, mine: Mapping[str, float], incumbent: Mapping[str, float]) -> bool:
        shared = sorted(set(mine) & set(incumbent))
        if len(shared) < 2:
            return False
        comparison = paired_difference([mine[t] for t in shared], [incumbent[t] for t in shared])
        return comparison.mean_diff < 0 and comparison.p_value / 2 < self.alpha
