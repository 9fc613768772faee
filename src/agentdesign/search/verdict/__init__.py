"""The verdict: the winner against the baselines on the unseen holdout items, paired, with the
statistics that say how sure it is."""

from __future__ import annotations

from agentdesign.search.verdict._verdict import (
    BASELINES,
    BaselineVerdict,
    HoldoutChoice,
    RunVerdict,
    check_selection,
    cot_baseline,
    cot_sc_baseline,
    holdout_choice,
    run_verdict,
)

__all__ = [
    "BASELINES",
    "BaselineVerdict",
    "HoldoutChoice",
    "RunVerdict",
    "check_selection",
    "cot_baseline",
    "cot_sc_baseline",
    "holdout_choice",
    "run_verdict",
]
