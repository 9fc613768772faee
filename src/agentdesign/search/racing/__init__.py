"""Racing: stopping a design early, on a prefix of the search items, once it is shown worse than
the incumbent."""

from __future__ import annotations

from agentdesign.search.racing._racing import RACE_RULES, Racing

__all__ = [
    "RACE_RULES",
    "Racing",
]
