"""The design space as optuna sees it: conditional distributions built from the registry."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from agentdesign.components import (
    MAX_SETTINGS_BYTES,
    REGISTRY,
    SLOTS,
    AgentSpec,
    ParamInfo,
    SpecError,
    Workflow,
    check_nesting,
    read_text_file,
    unused_slots,
)
from agentdesign.evaluators import Benchmark

__all__ = [
    "PROMPTS_ATTR",
    "SPACE_PRESETS",
    "SearchSpace",
    "prompt_params",
    "space_from_option",
    "unsuited_components",
]

# Values a numeric parameter takes on the coarse grid (see SearchSpace).
_GRID_POINTS = 5

# The trial user attribute holding a design's rewritten prompts (see `prompt_params`).
PROMPTS_ATTR = "prompts"

# The parameter memory is asked under where no slot the design uses reviews (see `_asked`).
_UNREVIEWED_MEMORY = "memory_without_reviewer"


@dataclass(frozen=True)
class SearchSpace:
    """Which components and parameters a search may choose, and on which models.

    Each slot's component is a categorical choice; each searchable parameter of the chosen component
    is suggested under its nested name (`workflow__n_samples`), so the space is conditional and
    TPE with `group=True` models each branch on its own. `limits` narrows a parameter's range
    (`{"workflow__n_samples": (2, 5)}`), `choices` narrows a slot's components.

    With `grid`, a numeric parameter takes at most five evenly spaced values from its low end:
    designs that differ by 137 versus 140 tokens only make noise, and would spend the budget on
    the same design twice.

    Every design runs on `model`, unless `models` names several: the model is then one more
    categorical choice ("model"), asked after the slots, so that a space of one model asks, and
    draws, exactly what it always did.

    Designs come out canonical (`AgentSpec.canonical`): a slot the design cannot use holds
    "none", even where the slot's choices do not name it, and the sampler is not asked for it.
    Where a memory choice needs a reviewer, memory is asked last: where no used slot reviews, under
    a name of its own ("memory_without_reviewer"), among the memories that learn without one and
    "none" standing for the rest. With `canonical=False` designs come out as drawn: for a
    simulator that scores a design by its features as written (the truth benchmark), where a part
    no agent would use still moves the score.
    """

    model: str
    choices: Mapping[str, Sequence[str]] = field(default_factory=dict)
    limits: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    grid: bool = False
    models: Sequence[str] = ()
    canonical: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(self.models))
        if self.models and self.model not in self.models:
            raise SpecError(f"the space's model {self.model!r} is not one of its models")
        for slot, names in self.choices.items():
            if slot not in SLOTS:
                raise SpecError(f"unknown slot '{slot}' in the search space (slots: {SLOTS})")
            for name in names:
                try:
                    REGISTRY.get(slot, name)
                except ValueError as exc:
                    raise SpecError(str(exc)) from None
        for key, (low, high) in self.limits.items():
            slot, _, name = key.partition("__")
            known = {
                info.name
                for comp in (REGISTRY.names(slot) if slot in SLOTS else ())
                for info in REGISTRY.get(slot, comp).param_info()
            }
            if name not in known:
                raise SpecError(f"unknown parameter '{key}' in the search space limits")
            if low > high:
                raise SpecError(f"limits for '{key}' are empty: {low} > {high}")

    @property
    def model_choices(self) -> tuple[str, ...]:
        """The models a design of this space may run on: `models`, else `model` alone."""
        return tuple(self.models) or (self.model,)

    @property
    def searches_models(self) -> bool:
        """Whether the model is a choice of this space (it names more than one)."""
        return len(self.model_choices) > 1

    def components(self, slot: str) -> tuple[str, ...]:
        """The slot's choices: as narrowed, else every registered component but opt-in ones."""
        if slot in self.choices:
            return tuple(self.choices[slot])
        return REGISTRY.names(slot, opt_in=False)

    def param_range(self, slot: str, info: ParamInfo) -> tuple[float, float]:
        """The range a numeric parameter takes in this space (its own, narrowed by `limits`)."""
        return self._range(slot, info)

    def snap(self, slot: str, info: ParamInfo, value: float) -> Any:
        """The value of this space nearest to `value`: clipped to the range, onto the grid, and
        an integer for an integer parameter (a value written by a model may be any number)."""
        low, high = self._range(slot, info)
        value = min(max(float(value), low), high)
        if (step := self.grid_step(slot, info)) is not None:
            top = low + step * math.floor((high - low) / step + 1e-9)
            value = min(low + step * round((value - low) / step), top)
        return round(value) if info.kind == "int" else round(value, 6)

    def _range(self, slot: str, info: ParamInfo) -> tuple[float, float]:
        assert info.low is not None and info.high is not None
        low, high = self.limits.get(f"{slot}__{info.name}", (info.low, info.high))
        # A limit is shared by every component of the slot with that parameter; where it misses a
        # component's own range, the nearest value that component allows is used.
        low = min(max(low, info.low), info.high)
        return low, max(min(high, info.high), low)

    def suggest(self, trial: optuna.Trial) -> AgentSpec:
        """The spec for `trial`, asking optuna for each choice in turn (define-by-run), with any
        rewritten prompts the trial carries. Where designs are canonical, a choice the design
        cannot use is not asked for (a slot the drawn workflow never calls, a memory no reviewer
        feeds): the trial holds only parameters the agent uses, so a sampler learns nothing from
        a part that did not run, and a trial shows no such part."""
        names: dict[str, str] = {}
        components: dict[str, Any] = {}
        for slot in self._order():
            key, options = self._asked(slot, names)
            name = options[0] if key is None else trial.suggest_categorical(key, list(options))
            assert isinstance(name, str)
            names[slot] = name
            params: dict[str, Any] = {}
            if key is not None:
                for info in REGISTRY.get(slot, name).param_info():
                    if info.searchable:
                        params[info.name] = self._suggest_param(trial, slot, info)
            components[slot] = {"name": name, "params": params}
        model = self.model
        if self.searches_models:
            model = trial.suggest_categorical("model", list(self.model_choices))
        assert isinstance(model, str)
        spec = AgentSpec.create(model=model, **components)
        prompts = trial.user_attrs.get(PROMPTS_ATTR) or {}
        known = prompt_params(spec)
        return self.form(spec.set_params(**{k: v for k, v in prompts.items() if k in known}))

    def _order(self) -> tuple[str, ...]:
        """The slots in the order they are asked: `SLOTS`, with memory last where a memory
        choice needs a reviewer (whether it can learn depends on every other slot). A space with
        no such memory asks, and draws, in slot order, exactly as it always did."""
        if self._defers_memory():
            return (*(slot for slot in SLOTS if slot != "memory"), "memory")
        return SLOTS

    def _defers_memory(self) -> bool:
        return self.canonical and any(
            getattr(REGISTRY.get("memory", name), "needs_reviewer", False)
            for name in self.components("memory")
        )

    def _asked(self, slot: str, names: Mapping[str, str]) -> tuple[str | None, tuple[str, ...]]:
        """The parameter `slot` is asked under and its choices, given the components chosen
        before it in `_order` (`names`); None where there is nothing to ask (the one choice is
        "none": the workflow never calls the slot, or no memory offered can learn). Where no used
        slot reviews, memory is asked among the memories that learn without a reviewer, "none"
        standing for the rest, under a name of its own: optuna keeps one choice list per name."""
        options = self.components(slot)
        if "workflow" in names and slot in self._idle_under(names["workflow"]):
            return None, ("none",)
        if slot != "memory" or not self._defers_memory():
            return slot, options
        unusable = self._unusable(names, slot)
        usable = tuple(name for name in options if name not in unusable)
        if usable == options:
            return slot, options
        if "none" not in usable:
            usable = (*usable, "none")
        return (_UNREVIEWED_MEMORY, usable) if len(usable) > 1 else (None, usable)

    def _suggest_param(self, trial: optuna.Trial, slot: str, info: ParamInfo) -> Any:
        key = f"{slot}__{info.name}"
        if info.kind == "bool":
            return trial.suggest_categorical(key, [False, True])
        if info.kind == "choice":
            assert info.choices is not None
            return trial.suggest_categorical(key, list(info.choices))
        if (step := self.grid_step(slot, info)) is not None:
            low, high = self._range(slot, info)
            top = round(low + step * math.floor((high - low) / step + 1e-9), 6)  # last value
            if info.kind == "int":
                return trial.suggest_int(key, int(low), int(top), step=int(step))
            return trial.suggest_float(key, float(low), float(top), step=step)
        low, high = self._range(slot, info)
        if info.kind == "int":
            return trial.suggest_int(key, int(low), int(high), log=info.log)
        return trial.suggest_float(key, float(low), float(high), log=info.log)

    def grid_step(self, slot: str, info: ParamInfo) -> float | None:
        """The step of a numeric parameter on the coarse grid (five values from its low end);
        None without a grid. Steps, not value lists: optuna lets components that share a
        parameter name (`reasoning__max_tokens`) keep their own ranges only for numeric kinds."""
        if not self.grid or info.kind not in ("int", "float"):
            return None
        low, high = self._range(slot, info)
        if info.kind == "int":
            return float(max(1, math.ceil((high - low) / (_GRID_POINTS - 1))))
        return round((high - low) / (_GRID_POINTS - 1), 6) or None

    def trial_params(self, spec: AgentSpec) -> dict[str, Any]:
        """The parameters a trial would hold for `spec` (in this space's form), for
        `study.enqueue_trial`: those `suggest` asks for, so that it makes the same design."""
        spec = self.form(spec)
        names = {slot: spec[slot].name for slot in SLOTS}
        params: dict[str, Any] = {}
        for slot in self._order():
            key, options = self._asked(slot, names)
            component = spec[slot]
            if component.name not in options:
                raise ValueError(f"{spec.describe()} is not a design of this space ({slot})")
            if key is None:
                continue
            params[key] = component.name
            for info in component.param_info():
                if info.searchable:
                    params[f"{slot}__{info.name}"] = getattr(component, info.name)
        if self.searches_models:
            params["model"] = spec.model
        return params

    def sample(
        self,
        rng: np.random.Generator,
        components: Mapping[str, str] | None = None,
        *,
        model: str | None = None,
    ) -> AgentSpec:
        """A random spec, uniform per choice as `suggest` asks (log-uniform for log ranges), with
        `components` (and the `model`) fixed where given; strategies draw from it without an
        optuna trial."""
        chosen = dict(components or {})
        names: dict[str, str] = {}
        slots: dict[str, Any] = {}
        for slot in self._order():
            options = self.components(slot)
            if slot == "memory" and self._defers_memory():
                options = self._asked(slot, names)[1]  # drawn among those that can learn
            name = chosen.get(slot) or options[int(rng.integers(len(options)))]
            names[slot] = name
            params = {
                info.name: self.sample_param(slot, info, rng)
                for info in REGISTRY.get(slot, name).param_info()
                if info.searchable
            }
            slots[slot] = {"name": name, "params": params}
        if model is None:
            options = self.model_choices
            model = options[int(rng.integers(len(options)))] if len(options) > 1 else self.model
        return self.form(AgentSpec.create(model=model, **slots))

    def sample_param(self, slot: str, info: ParamInfo, rng: np.random.Generator) -> Any:
        """One value of a searchable parameter, drawn as `_suggest_param` would ask optuna."""
        if info.kind == "bool":
            return bool(rng.integers(2))
        if info.kind == "choice":
            assert info.choices is not None
            return info.choices[int(rng.integers(len(info.choices)))]
        low, high = self._range(slot, info)
        if (step := self.grid_step(slot, info)) is not None:
            value = low + step * int(rng.integers(int((high - low) / step + 1e-9) + 1))
            return round(value) if info.kind == "int" else round(value, 6)
        if info.log:
            value = float(np.exp(rng.uniform(np.log(low), np.log(high))))
        else:
            value = float(rng.uniform(low, high))
        if info.kind == "int":
            return int(min(max(round(value), int(low)), int(high)))
        return value

    def contains(self, spec: AgentSpec) -> bool:
        """Whether `spec` is a design of this space (its model, components and ranges)."""
        if spec.model not in self.model_choices:
            return False
        for slot in SLOTS:
            component = spec[slot]
            if not self.offers(spec, slot):
                return False
            for info in component.param_info():
                if info.searchable and info.low is not None and info.kind in ("int", "float"):
                    low, high = self._range(slot, info)
                    if not low <= getattr(component, info.name) <= high:
                        return False
        return True

    def complete(self, spec: AgentSpec, rng: np.random.Generator) -> AgentSpec:
        """`spec` as a design of this space: canonical, and where it holds a "none" the slot's
        choices do not name in a slot it uses (a canonical design's, after a mutation or a
        crossover changed its workflow or reviewer), a component drawn from the choices. Drawn
        again while a drawn reviewer brings a memory into use. As it is where `canonical` is off."""
        if not self.canonical:
            return spec
        spec = spec.canonical()
        for _ in SLOTS:
            drawn = [
                slot
                for slot in SLOTS
                if spec[slot].name == "none"
                and "none" not in self.components(slot)
                and not self.idle(spec, slot)
            ]
            if not drawn:
                break
            kept = {slot: spec[slot].name for slot in SLOTS if slot not in drawn}
            fresh = self.sample(rng, components=kept, model=spec.model)
            parts = {**spec.components, **{slot: fresh[slot] for slot in drawn}}
            spec = AgentSpec(model=spec.model, components=parts).canonical()
        return spec

    def form(self, spec: AgentSpec) -> AgentSpec:
        """`spec` in the form this space's designs take: canonical, unless `canonical` is off."""
        return spec.canonical() if self.canonical else spec

    def _idle_under(self, workflow_name: str) -> frozenset[str]:
        """The slots this workflow never calls, where designs are canonical (none otherwise)."""
        if not self.canonical:
            return frozenset()
        workflow = REGISTRY.get("workflow", workflow_name)
        return workflow.unused_slots if issubclass(workflow, Workflow) else frozenset()

    def offers(self, spec: AgentSpec, slot: str) -> bool:
        """Whether `spec`'s component in `slot` is one of this space's: among the slot's choices,
        or the "none" of a canonical design that cannot use the slot (`idle`)."""
        return spec[slot].name in self.components(slot) or self.idle(spec, slot)

    def idle(self, spec: AgentSpec, slot: str) -> bool:
        """Whether `slot` holds the "none" of a canonical design that cannot use the slot: a
        design of this space, though the slot's choices may not name "none"."""
        names = {other: spec[other].name for other in SLOTS}
        return spec[slot].name == "none" and bool(self._unusable(names, slot))

    def _unusable(self, names: Mapping[str, str], slot: str) -> tuple[str, ...]:
        """The slot's choices that a design of the other slots' components (`names`, by slot)
        could not use (its canonical form holds "none")."""
        kinds = {other: REGISTRY.get(other, name) for other, name in names.items()}
        return tuple(
            name
            for name in self.components(slot)
            if slot in unused_slots({**kinds, slot: REGISTRY.get(slot, name)})
        )

    def size_hint(self) -> int:
        """The number of distinct component and model combinations (parameters not counted)."""
        total = len(self.model_choices)
        for slot in SLOTS:
            total *= len(self.components(slot))
        return total


# Named narrowings of the full space. "quick" is the default run's: on 2 CPU cores the embedded
# 1.5B model decodes about 10 tokens/s, so every extra call (samples, debaters, critics, planners)
# costs tens of seconds per item. It keeps the one- and two-call workflows (a single answer, or a
# program the sandbox runs where the benchmark can use one) over the cheap components, with token
# caps that let a chain of thought finish (a cut-off answer scores 0 whatever the design): caps
# are not searched there, since a cap the model does not reach changes nothing. `--space full`
# searches everything.
SPACE_PRESETS: dict[str, dict[str, Any]] = {
    "full": {},
    "quick": {
        "choices": {
            "workflow": ("single", "program_of_thought"),
            "planning": ("none",),
            "reasoning": ("direct", "cot", "scratchpad"),
            "memory": ("none", "few_shot"),
            "tool": ("none", "calculator"),
            "reflection": ("none",),
        },
        "limits": {
            "workflow__timeout_s": (10, 10),
            "reasoning__max_tokens": (512, 512),
            "memory__k": (1, 2),
            "tool__max_uses": (2, 2),
        },
    },
    "tiny": {  # smoke tests on the 135M model: short answers, the fewest calls each design allows
        "limits": {
            "workflow__n_samples": (2, 2),
            "workflow__n_agents": (2, 2),
            "workflow__rounds": (2, 2),
            "workflow__max_rounds": (1, 1),
            "workflow__max_steps": (2, 2),
            "workflow__judge_max_tokens": (64, 64),
            "workflow__verifier_max_tokens": (64, 64),
            "planning__max_tokens": (32, 64),
            "reasoning__max_tokens": (16, 64),
            "memory__k": (1, 1),
            "tool__max_uses": (1, 1),
            "reflection__max_rounds": (1, 1),
            "reflection__max_tokens": (64, 64),
        },
    },
}


def unsuited_components(benchmark: Benchmark) -> frozenset[str]:
    """Components that cannot help on `benchmark`: those it names itself and, where it has no
    training examples, the memories that only show examples (the same design as no memory)."""
    unsuited = set(benchmark.unsuited_components)
    if not benchmark.train_examples():
        for name in REGISTRY.names("memory"):
            if getattr(REGISTRY.get("memory", name), "shows_examples", False):
                unsuited.add(name)
    return frozenset(unsuited)


def space_from_option(option: str, *, unsuited: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The choices and limits named by `--space`: a preset name or a JSON file of the same shape.

    A narrowed preset leaves out the `unsuited` components (the benchmark's
    `unsuited_components`); "full" and a user's file are taken as given.
    """
    if option in SPACE_PRESETS:
        preset = SPACE_PRESETS[option]
        choices = {
            slot: tuple(name for name in names if name not in unsuited)
            for slot, names in preset.get("choices", {}).items()
        }
        return {**preset, "choices": choices} if choices else preset
    path = Path(option)
    if not path.is_file():
        presets = ", ".join(SPACE_PRESETS)
        raise SpecError(f"--space must be a preset ({presets}) or a JSON file; got {option!r}")
    try:
        text = read_text_file(path, limit=MAX_SETTINGS_BYTES)
        check_nesting(text)  # json's recursive parser would end in a RecursionError
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{path}: not valid JSON ({exc})") from None
    except ValueError as exc:
        raise SpecError(f"{path}: {exc}") from None
    if not isinstance(data, dict) or set(data) - {"choices", "limits"}:
        raise SpecError(f"{path}: expected an object with 'choices' and/or 'limits'")
    limits = data.get("limits", {})
    if not isinstance(limits, dict) or not all(
        isinstance(v, list) and len(v) == 2 for v in limits.values()
    ):
        raise SpecError(f"{path}: 'limits' maps slot__param to [low, high]")
    return {"choices": data.get("choices", {}), "limits": {k: tuple(v) for k, v in limits.items()}}


def prompt_params(
    spec: AgentSpec, *, changed_only: bool = False, code: bool = True
) -> dict[str, str]:
    """The spec's prompt texts by nested name; with `changed_only`, those that differ from their
    component's default (optuna's distributions hold no free text, so trials carry these); with
    `code` false, prompts alone, not a code workflow's program."""
    prompts = {}
    for slot in SLOTS:
        component = spec[slot]
        for info in component.param_info():
            value = getattr(component, info.name)
            if info.code and not code:
                continue
            if info.kind == "text" and not (changed_only and value == info.default):
                prompts[f"{slot}__{info.name}"] = value
    return prompts
