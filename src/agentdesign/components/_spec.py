"""Agent specs: a model and one configured component per slot, canonical so equal designs hash
equal.

Standard library only, like every module export inlines.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentdesign.components._registry import REGISTRY, SLOTS, Component
from agentdesign.components._slots import Memory, Workflow

__all__ = [
    "AgentSpec",
    "unused_slots",
]


@dataclass(frozen=True)
class AgentSpec:
    """A complete agent design: the model and one configured component per slot.

    Frozen, every slot present and every parameter filled in, so two specs that name the same
    parts have the same JSON and the same hash. Parts a design never uses are kept as written
    (an archived spec keeps its hash); `canonical` is the form a search evaluates.
    """

    model: str
    components: Mapping[str, Component]

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("model must be a non-empty model string, e.g. 'openai/gpt-4o-mini'")
        missing = [slot for slot in SLOTS if slot not in self.components]
        extra = sorted(set(self.components) - set(SLOTS))
        if missing or extra:
            raise ValueError(f"spec must have exactly the slots {list(SLOTS)}")
        for slot, component in self.components.items():
            if component.slot != slot:
                raise ValueError(f"slot '{slot}' holds a {component.slot} component")
        object.__setattr__(self, "components", dict(self.components))

    def __hash__(self) -> int:
        return hash(self.spec_hash)

    def __getitem__(self, slot: str) -> Component:
        return self.components[slot]

    @classmethod
    def create(cls, *, model: str, **slots: str | Mapping[str, Any] | Component) -> AgentSpec:
        """Builds a spec from names or {name, params} per slot; omitted slots take their default."""
        return cls.from_dict({"model": model, "components": slots})

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "components": {
                slot: {"name": comp.name, "params": comp.get_params()}
                for slot, comp in self.components.items()
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @functools.cached_property  # a frozen spec's hash never changes; searches hash thousands
    def spec_hash(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:20]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentSpec:
        if not isinstance(data, Mapping):
            raise ValueError("an agent spec must be a JSON object")
        unknown = sorted(set(data) - {"model", "components"})
        if unknown:
            raise ValueError(f"unknown spec field(s): {', '.join(unknown)}")
        raw = data.get("components", {})
        if not isinstance(raw, Mapping):
            raise ValueError("'components' must be an object of slot -> component")
        unknown_slots = sorted(set(raw) - set(SLOTS))
        if unknown_slots:
            raise ValueError(
                f"unknown slot(s) {', '.join(unknown_slots)} (slots: {', '.join(SLOTS)})"
            )
        components = {slot: _component_from(slot, raw.get(slot)) for slot in SLOTS}
        return cls(model=data.get("model", ""), components=components)

    @classmethod
    def from_json(cls, text: str) -> AgentSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"spec is not valid JSON: {exc}") from None
        return cls.from_dict(data)

    def to_flat(self) -> dict[str, Any]:
        """The spec as `slot`, `slot__param` pairs: the form optuna trials and set_params use."""
        flat: dict[str, Any] = {"model": self.model}
        for slot, comp in self.components.items():
            flat[slot] = comp.name
            flat.update({f"{slot}__{k}": v for k, v in comp.get_params().items()})
        return flat

    @classmethod
    def from_flat(cls, flat: Mapping[str, Any]) -> AgentSpec:
        components: dict[str, dict[str, Any]] = {}
        for key, value in flat.items():
            if key == "model":
                continue
            slot, sep, name = key.partition("__")
            entry = components.setdefault(slot, {"params": {}})
            if sep:
                entry["params"][name] = value
            else:
                entry["name"] = value
        return cls.from_dict({"model": flat.get("model", ""), "components": components})

    def set_params(self, **params: Any) -> AgentSpec:
        """A copy with `model`, `slot` (a component name) or `slot__param` values changed."""
        flat = self.to_flat()
        for key, value in params.items():
            slot = key.partition("__")[0]
            if key in SLOTS and value != flat[key]:
                # A new component starts from its own defaults, not the old one's parameters.
                flat = {k: v for k, v in flat.items() if not k.startswith(f"{slot}__")}
            elif key not in flat and key != "model":
                raise ValueError(f"unknown parameter '{key}'")
        flat.update(params)
        return AgentSpec.from_flat(flat)

    def unused_slots(self) -> frozenset[str]:
        """The slots whose component cannot change what this agent does (see `unused_slots`)."""
        return unused_slots({slot: type(part) for slot, part in self.components.items()})

    def canonical(self) -> AgentSpec:
        """The same agent with "none" in every unused slot: designs that differ only there are
        one agent under one hash, so a search never pays for it twice."""
        idle = {slot: "none" for slot in self.unused_slots() if self[slot].name != "none"}
        return self.set_params(**idle) if idle else self

    def describe(self) -> str:
        """A short human-readable summary, e.g. 'self_consistency(n_samples=5) + cot + ...'."""
        parts = []
        for slot in SLOTS:
            comp = self.components[slot]
            changed = [  # prompt texts are left out: too long for a summary
                f"{info.name}={getattr(comp, info.name)}"
                for info in comp.param_info()
                if info.kind != "text" and getattr(comp, info.name) != info.default
            ]
            args = ", ".join(changed)
            parts.append(f"{comp.name}({args})" if args else comp.name)
        return " + ".join(parts)


def unused_slots(kinds: Mapping[str, type[Component]]) -> frozenset[str]:
    """The slots whose component, of these kinds (one per slot), cannot change what the agent
    does: those its workflow never calls, and a memory that learns only from reviewers where no
    slot that is used holds one. A function of the kinds alone, so a space can reason about
    combinations of components without building them."""
    workflow, memory = kinds["workflow"], kinds["memory"]
    unused = set(workflow.unused_slots) if issubclass(workflow, Workflow) else set()
    reviewed = any(kind.reviews for slot, kind in kinds.items() if slot not in unused)
    if issubclass(memory, Memory) and memory.needs_reviewer and not reviewed:
        unused.add("memory")
    return frozenset(unused)


_DEFAULTS = {
    "workflow": "single",
    "planning": "none",
    "reasoning": "cot",
    "memory": "none",
    "tool": "none",
    "reflection": "none",
}


def _component_from(slot: str, raw: Any) -> Component:
    if raw is None:
        raw = _DEFAULTS[slot]
    if isinstance(raw, Component):
        return raw
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise ValueError(f"slot '{slot}' needs a component name, got {raw!r}")
    cls = REGISTRY.get(slot, raw["name"])
    params = raw.get("params", {})
    if not isinstance(params, Mapping):
        raise ValueError(f"{slot} params must be an object, got {params!r}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - known)
    if unknown:
        names = ", ".join(f"{slot}__{p}" for p in unknown)
        raise ValueError(f"unknown parameter(s) {names} for {slot} '{raw['name']}'")
    return cls(**params)
