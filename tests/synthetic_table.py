"""A SYNTHETIC replay table for tests and for developing the bench: made-up scores, no model ran.

Its scores have structure a search can find (some components help, one pair of components helps
more together, longer token caps help a little), plus per-task noise. Never report numbers from it.
"""

from __future__ import annotations

import math

import numpy as np

from agentdesign.benchmarking import ReplayDesign, ReplayTable
from agentdesign.components import AgentSpec
from agentdesign.search import SearchSpace

EFFECTS = {
    ("workflow", "self_consistency"): 0.15,
    ("workflow", "debate"): 0.05,
    ("workflow", "program_of_thought"): 0.1,
    ("reasoning", "cot"): 0.15,
    ("reasoning", "scratchpad"): 0.1,
    ("memory", "few_shot"): 0.05,
    ("memory", "retrieval"): 0.1,
    ("tool", "none"): -0.05,
    ("planning", "step_back"): -0.1,
}
# A pair worth more together than apart: what pairwise features and recombination should find.
SYNERGY = ((("reasoning", "cot"), ("tool", "calculator")), 0.2)

CHEAP_LIMITS = {
    "workflow__n_samples": (2, 3),
    "workflow__n_agents": (2, 3),
    "workflow__rounds": (2, 2),
    "workflow__max_rounds": (1, 1),
    "workflow__max_steps": (2, 3),
    "reasoning__max_tokens": (128, 384),
}


def true_score(spec: AgentSpec) -> float:
    chosen = {(slot, spec[slot].name) for slot in spec.components}
    value = 0.2 + sum(v for k, v in EFFECTS.items() if k in chosen)
    (a, b), bonus = SYNERGY
    if a in chosen and b in chosen:
        value += bonus
    caps = spec["reasoning"].get_params().get("max_tokens", 256)
    value += 0.05 * math.log2(caps / 128)
    return min(max(value, 0.02), 0.98)


def make_synthetic_table(n_designs: int = 80, n_tasks: int = 20, seed: int = 0) -> ReplayTable:
    rng = np.random.default_rng(seed)
    space = SearchSpace(model="fake/model", limits=CHEAP_LIMITS)
    designs: dict[str, ReplayDesign] = {}
    while len(designs) < n_designs:
        spec = space.sample(rng)
        p = true_score(spec)
        scores = tuple(float(s) for s in (rng.random(n_tasks) < p))
        tokens = int(spec["reasoning"].get_params().get("max_tokens", 128) * n_tasks)
        designs[spec.spec_hash] = ReplayDesign(
            spec=spec, scores=scores, prompt_tokens=tokens, completion_tokens=tokens, cost=0.0
        )
    return ReplayTable(
        benchmark="gsm8k",
        description="SYNTHETIC grade-school math word problems; answer a number",
        model="fake/model",
        task_ids=tuple(f"t{i}" for i in range(n_tasks)),
        designs=tuple(designs.values()),
        synthetic=True,
        note="synthetic: made-up scores for tests, not a measurement",
    )
