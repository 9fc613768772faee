"""The design space: which components, parameters and prompt texts a run may search, its presets,
and the variation operators that make one design from others."""

from __future__ import annotations

from agentdesign.search.space._space import (
    PROMPTS_ATTR,
    SPACE_PRESETS,
    SearchSpace,
    prompt_params,
    space_from_option,
    unsuited_components,
)
from agentdesign.search.space._variation import crossover, merge_prompts, mutate, pairwise_design

__all__ = [
    "PROMPTS_ATTR",
    "SPACE_PRESETS",
    "SearchSpace",
    "crossover",
    "merge_prompts",
    "mutate",
    "pairwise_design",
    "prompt_params",
    "space_from_option",
    "unsuited_components",
]
