"""The value model: a design's predicted score with an interval, learnt from the designs scored so
far, that screens proposals before anything is paid for."""

from __future__ import annotations

from agentdesign.search.valuemodel._value import (
    Domain,
    Labelled,
    ValueModel,
    ValueReport,
    assess_value_model,
    design_features,
    held_out_predictions,
    rank_correlation,
    value_report,
)

__all__ = [
    "Domain",
    "Labelled",
    "ValueModel",
    "ValueReport",
    "assess_value_model",
    "design_features",
    "held_out_predictions",
    "rank_correlation",
    "value_report",
]
