"""Variation operators: one design made from others, within the space (mutation, crossover,
GEPA's prompt merge) and a small covering set of designs for a strategy's start."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from agentdesign.components import REGISTRY, SLOTS, AgentSpec, unused_slots
from agentdesign.search.space._space import SearchSpace

__all__ = ["crossover", "merge_prompts", "mutate", "pairwise_design"]

_MODEL = "model"  # the model, where the space searches models, beside the slots


def mutate(spec: AgentSpec, space: SearchSpace, rng: np.random.Generator) -> AgentSpec:
    """One change: another component in one slot, or another model where the space searches
    models (half the time, where the slot has another), or one searchable parameter redrawn."""
    slots = [s for s in SLOTS if len(space.components(s)) > 1]
    if space.searches_models:
        slots.append(_MODEL)
    if slots and rng.random() < 0.5:
        slot = slots[int(rng.integers(len(slots)))]
        if slot == _MODEL:
            models = [m for m in space.model_choices if m != spec.model]
            model = models[int(rng.integers(len(models)))]
            return AgentSpec(model=model, components=spec.components)
        others = [n for n in space.components(slot) if n != spec[slot].name]
        name = others[int(rng.integers(len(others)))]
        fixed = {s: spec[s].name for s in SLOTS}
        fresh = space.sample(rng, components={**fixed, slot: name}, model=spec.model)
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
    or each slot with even odds when `n_slots` is None (uniform crossover); where the two run on
    different models, `b`'s with even odds."""
    if n_slots is None:
        taken = [slot for slot in SLOTS if rng.random() < 0.5]
    else:
        taken = list(rng.choice(list(SLOTS), size=n_slots, replace=False))
    model = b.model if a.model != b.model and rng.random() < 0.5 else a.model
    return AgentSpec(model=model, components={s: (b if s in taken else a)[s] for s in SLOTS})


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
    """A small set of designs in which every pair of components (of two slots, or a slot and the
    model where the space searches models) that a design can hold appears at least once, beside
    the `given` designs: a greedy covering array (AETG), each row completed with random
    parameters. Rows take the space's form (`SearchSpace.form`): where that is canonical, a pair
    no design holds (a program of thought with a tool) is not asked for."""
    factors = (*SLOTS, _MODEL) if space.searches_models else SLOTS
    levels = [space.model_choices if f == _MODEL else space.components(f) for f in factors]
    n = len(factors)
    witness = _possible_pairs(factors, levels, canonical=space.canonical)
    uncovered = set(witness)
    for spec in given:
        formed = space.form(spec)
        uncovered -= _pairs(
            dict(enumerate(formed.model if f == _MODEL else formed[f].name for f in factors))
        )

    def gain(row: dict[int, str]) -> int:
        return sum((i, row[i], j, row[j]) in uncovered for i in row for j in row if i < j)

    rows: list[dict[int, str]] = []
    while uncovered:
        best: dict[int, str] = {}
        for _ in range(20):
            i, a, j, b = sorted(uncovered)[int(rng.integers(len(uncovered)))]
            row = {i: a, j: b}
            for k in rng.permutation(n):
                if int(k) not in row:
                    options = list(levels[int(k)])
                    rng.shuffle(options)
                    row[int(k)] = max(options, key=lambda name: gain({**row, int(k): name}))
            if not best or gain(row) > gain(best):
                best = row
        if space.canonical:
            best = _canonical_row(factors, best)
        if not _pairs(best) & uncovered:  # the completion emptied the slots of its pairs
            best = witness[min(uncovered)]
        rows.append(best)
        uncovered -= _pairs(best)
    designs = []
    for row in rows:
        named = {factors[i]: name for i, name in row.items()}
        model = named.pop(_MODEL, None)
        designs.append(space.sample(rng, components=named, model=model))
    return designs


def _pairs(row: dict[int, str]) -> set[tuple[int, str, int, str]]:
    return {(i, row[i], j, row[j]) for i in row for j in row if i < j}


def _canonical_row(factors: Sequence[str], row: dict[int, str]) -> dict[int, str]:
    """`row` with "none" in the slots its components cannot use (`unused_slots`)."""
    kinds = {f: REGISTRY.get(f, row[i]) for i, f in enumerate(factors) if f != _MODEL}
    unused = unused_slots(kinds)
    return {i: "none" if factors[i] in unused else name for i, name in row.items()}


def _possible_pairs(
    factors: Sequence[str], levels: Sequence[Sequence[str]], *, canonical: bool
) -> dict[tuple[int, str, int, str], dict[int, str]]:
    """Every pair some row of these levels holds (in canonical form, where `canonical`), with one
    such row: every pair of levels, each its own row, where rows are taken as drawn."""
    n = len(levels)
    if not canonical:
        return {
            (i, a, j, b): {i: a, j: b}
            for i in range(n)
            for j in range(i + 1, n)
            for a in levels[i]
            for b in levels[j]
        }
    found: dict[tuple[int, str, int, str], dict[int, str]] = {}
    for names in itertools.product(*levels):
        row = _canonical_row(factors, dict(enumerate(names)))
        for pair in _pairs(row):
            found.setdefault(pair, row)
    return found
