"""Variation operators: one design made from others, within the space (mutation, crossover,
GEPA's prompt merge) and a small covering set of designs for a strategy's start."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agentdesign.components import SLOTS, AgentSpec
from agentdesign.search.space._space import SearchSpace

__all__ = ["crossover", "merge_prompts", "mutate", "pairwise_design"]


def mutate(spec: AgentSpec, space: SearchSpace, rng: np.random.Generator) -> AgentSpec:
    """One change: another component in one slot (half the time, where the slot has another), or
    one searchable parameter redrawn."""
    slots = [s for s in SLOTS if len(space.components(s)) > 1]
    if slots and rng.random() < 0.5:
        slot = slots[int(rng.integers(len(slots)))]
        others = [n for n in space.components(slot) if n != spec[slot].name]
        name = others[int(rng.integers(len(others)))]
        fixed = {s: spec[s].name for s in SLOTS}
        fresh = space.sample(rng, components={**fixed, slot: name})
        return AgentSpec(model=spec.model, components={**spec.components, slot: fresh[slot]})
    tunable = [
        (slot, info) for slot in SLOTS for info in spec[slot].param_info() if info.searchable
    ]
    if not tunable:
        return spec
    slot, info = tunable[int(rng.integers(len(tunable)))]
    return spec.set_params(**{f"{slot}__{info.name}": space.sample_param(slot, info, rng)})


def crossover(
    a: AgentSpec, b: AgentSpec, rng: np.random.Generator, *, n_slots: int | None = None
) -> AgentSpec:
    """`a` with whole components (and their parameters) taken from `b`: in `n_slots` random slots,
    or each slot with even odds when `n_slots` is None (uniform crossover)."""
    if n_slots is None:
        taken = [slot for slot in SLOTS if rng.random() < 0.5]
    else:
        taken = list(rng.choice(list(SLOTS), size=n_slots, replace=False))
    return AgentSpec(model=a.model, components={s: (b if s in taken else a)[s] for s in SLOTS})


def merge_prompts(a: AgentSpec, b: AgentSpec) -> AgentSpec:
    """`a` with the prompts (and workflow code) `b` rewrote, wherever `a` has the same component
    with that text still at its default: GEPA's merge, which joins the modules two lines of
    descent improved apart. `a` itself when there is nothing to take."""
    taken = {
        f"{slot}__{info.name}": theirs
        for slot in SLOTS
        if a[slot].name == b[slot].name
        for info in a[slot].param_info()
        if info.kind == "text"
        and (theirs := getattr(b[slot], info.name)) != info.default
        and getattr(a[slot], info.name) == info.default
    }
    return a.set_params(**taken) if taken else a


def pairwise_design(
    space: SearchSpace, rng: np.random.Generator, *, given: Sequence[AgentSpec] = ()
) -> list[AgentSpec]:
    """A small set of designs in which every pair of components (of two slots) appears at least
    once, beside the `given` designs: a greedy covering array (AETG), each row completed with
    random parameters."""
    levels = [space.components(slot) for slot in SLOTS]
    uncovered = {
        (i, a, j, b)
        for i in range(len(SLOTS))
        for j in range(i + 1, len(SLOTS))
        for a in levels[i]
        for b in levels[j]
    }
    for spec in given:
        names = [spec[slot].name for slot in SLOTS]
        uncovered -= {
            (i, names[i], j, names[j]) for i in range(len(SLOTS)) for j in range(i + 1, len(SLOTS))
        }

    def gain(row: dict[int, str]) -> int:
        return sum((i, row[i], j, row[j]) in uncovered for i in row for j in row if i < j)

    rows: list[dict[int, str]] = []
    while uncovered:
        best: dict[int, str] = {}
        for _ in range(20):
            i, a, j, b = sorted(uncovered)[int(rng.integers(len(uncovered)))]
            row = {i: a, j: b}
            for k in rng.permutation(len(SLOTS)):
                if int(k) not in row:
                    options = list(levels[int(k)])
                    rng.shuffle(options)
                    row[int(k)] = max(options, key=lambda name: gain({**row, int(k): name}))
            if not best or gain(row) > gain(best):
                best = row
        rows.append(best)
        uncovered -= {(i, best[i], j, best[j]) for i in best for j in best if i < j}
    return [space.sample(rng, components={SLOTS[i]: n for i, n in row.items()}) for row in rows]
