"""What a meta agent's reply becomes: designs of the run's space, each accepted (repaired where a
small model slipped, with a note), refused with a one-line reason, or found a duplicate.

Kept apart from the meta agent (`_meta.py`), which decides what to ask and what to do with the
designs, because the rules here are the space's: its components and ranges, its grid, the output
contract of each prompt, and that no shown task's content may enter a prompt.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentdesign.components import (
    REGISTRY,
    SLOTS,
    AgentSpec,
    CodeWorkflow,
    Component,
    ParamInfo,
    check_workflow_source,
)
from agentdesign.search.space import SearchSpace
from agentdesign.search.strategies._refine import Failure, acceptable_rewrite, clip, leaks_failures

__all__ = ["DesignReader", "ReadDesign", "parse_designs"]

_KEEP = object()  # a parameter's value that is refused but repairable: the default stays
_FENCED_CODE = re.compile(r"```python\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class ReadDesign:
    """One design of a reply as read: "accepted" (`reason` notes any repair), "invalid" or
    "duplicate" (`reason` says why), or "failed" (the reply held no design); `spec` where it is
    one."""

    status: str
    reason: str | None = None
    spec: AgentSpec | None = None


class DesignReader:
    """Reads replies as designs of `space`: at most `max_designs` per reply, rewritten prompts up
    to `max_prompt_chars`."""

    def __init__(self, *, space: SearchSpace, max_designs: int, max_prompt_chars: int) -> None:
        self.space = space
        self.max_designs = max_designs
        self.max_prompt_chars = max_prompt_chars

    def read(
        self,
        text: str,
        *,
        parent: AgentSpec | None,
        failed: Sequence[Failure],
        seen: Collection[str],
    ) -> list[ReadDesign]:
        """The reply's designs: slots they leave out are `parent`'s (the space's defaults
        without one); a shown task (`failed`) may not enter a prompt; a design whose hash is in
        `seen` (the run's), or that the reply repeats, is a duplicate."""
        try:
            designs = parse_designs(text)
        except ValueError as exc:
            return [ReadDesign("failed", str(exc))]
        code = _FENCED_CODE.search(text)
        read: list[ReadDesign] = []
        mine: set[str] = set()
        for design in designs[: self.max_designs]:
            notes: list[str] = []
            try:
                spec = self._build(design, parent, failed, code.group(1) if code else None, notes)
            except ValueError as exc:
                read.append(ReadDesign("invalid", str(exc)))
                continue
            if spec.spec_hash in seen or spec.spec_hash in mine:
                where = "this reply" if spec.spec_hash in mine else "the run"
                read.append(ReadDesign("duplicate", f"{where} has this design already", spec))
                continue
            mine.add(spec.spec_hash)
            read.append(
                ReadDesign("accepted", f"repaired: {'; '.join(notes)}" if notes else None, spec)
            )
        if len(designs) > self.max_designs:
            extra = len(designs) - self.max_designs
            read.append(
                ReadDesign(
                    "invalid",
                    f"{extra} design(s) beyond the {self.max_designs} asked for were ignored",
                )
            )
        return read

    def _build(
        self,
        design: Mapping[str, Any],
        parent: AgentSpec | None,
        failed: Sequence[Failure],
        source: str | None,
        notes: list[str],
    ) -> AgentSpec:
        """The design as a spec of the space; ValueError (a one-line reason) if it is not one.

        What a small model commonly gets wrong but does not change what it asked for is repaired
        and noted in `notes`: a parameter the component does not have is left out, a new prompt
        that drops its output format or copies a shown task keeps its original text, a name's
        case is corrected. A component the space does not hold, or a value of the wrong kind, is
        refused. Where the space searches models, the design may name its "model" too (else
        it keeps the parent's)."""
        keys = (*SLOTS, "model") if self.space.searches_models else SLOTS
        unknown = sorted(set(design) - set(keys))
        if unknown:
            raise ValueError(f"unknown slot(s) {', '.join(unknown)} (slots: {', '.join(keys)})")
        base = parent if parent is not None else AgentSpec.create(model=self.space.model)
        model = design.get("model", base.model)
        if model not in self.space.model_choices:
            raise ValueError(
                f"model {clip(repr(model), 80)} is not in the run's space "
                f"(models: {', '.join(self.space.model_choices)})"
            )
        components: dict[str, Any] = {}
        for slot in SLOTS:
            raw = design.get(slot)
            if raw is None:
                components[slot] = base[slot]
                continue
            components[slot] = self._component(slot, raw, failed, source, notes, base[slot])
        spec = self._on_grid(AgentSpec(model=model, components=components))
        for slot in SLOTS:  # the parent's "none" stays only where this design cannot use it
            if slot not in design and not self.space.offers(spec, slot):
                raise ValueError(f"{slot} must be set: '{spec[slot].name}' is not in the space")
        if not self.space.contains(spec):
            raise ValueError("the design is outside the run's space")
        return spec

    def _on_grid(self, spec: AgentSpec) -> AgentSpec:
        """`spec` with every numeric parameter a value of the space (defaults may lie between
        its grid's points), so that the trial optuna records is exactly this design."""
        snapped = {
            f"{slot}__{info.name}": self.space.snap(slot, info, getattr(spec[slot], info.name))
            for slot in SLOTS
            for info in spec[slot].param_info()
            if info.searchable and info.kind in ("int", "float")
        }
        return spec.set_params(**snapped) if snapped else spec

    def _component(
        self,
        slot: str,
        raw: Any,
        failed: Sequence[Failure],
        source: str | None,
        notes: list[str],
        inherited: Component | None = None,
    ) -> Any:
        """The slot's component as the design gives it; `inherited` is the parent's."""
        if isinstance(raw, str):
            raw = {"name": raw}
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            raise ValueError(f"{slot} needs a component name, got {clip(repr(raw), 80)}")
        name = raw["name"]
        by_case = {n.lower(): n for n in self.space.components(slot)}
        if name not in by_case.values() and name.lower() in by_case:
            name = by_case[name.lower()]
        if name not in self.space.components(slot):
            raise ValueError(
                f"{slot} '{name}' is not in the run's space "
                f"(choices: {', '.join(self.space.components(slot))})"
            )
        given = dict(raw.get("params") or {}) if isinstance(raw.get("params"), Mapping) else {}
        given.update({k: v for k, v in raw.items() if k not in ("name", "params")})
        cls = REGISTRY.get(slot, name)
        infos = {info.name: info for info in cls.param_info()}
        unknown = sorted(set(given) - set(infos))
        if unknown:
            notes.append(f"{slot} '{name}' has no parameter(s) {', '.join(unknown)}: left out")
        params: dict[str, Any] = {}
        for key, value in given.items():
            if key in infos:
                params[key] = self._value(slot, name, infos[key], value, failed, notes)
        params = {k: v for k, v in params.items() if v is not _KEEP}
        if name == CodeWorkflow.name and "source" not in params:
            if source is not None:  # the reply's ```python block
                params["source"] = check_workflow_source(source)
            elif inherited is not None and inherited.name == name:  # the parent's code
                params["source"] = inherited.get_params()["source"]
            else:
                raise ValueError("the code workflow needs a ```python block defining run")
        try:
            return cls(**params)
        except (TypeError, ValueError) as exc:
            raise ValueError(str(exc)) from None

    def _value(
        self,
        slot: str,
        name: str,
        info: ParamInfo,
        value: Any,
        failed: Sequence[Failure],
        notes: list[str],
    ) -> Any:
        """The value the design gets, or _KEEP for the component's default (noted)."""
        where = f"{slot}__{info.name} ({name})"
        if info.kind == "text":
            if info.code:  # code in the JSON: taken if it is a workflow, else the block's
                try:
                    return check_workflow_source(str(value))
                except ValueError:
                    notes.append(f"{where}: not a workflow's code: left out")
                    return _KEEP
            if not isinstance(value, str):
                raise ValueError(f"{where} must be a text")
            if value != info.default and not acceptable_rewrite(
                info.default, value, self.max_prompt_chars
            ):
                notes.append(
                    f"{where}: the new prompt dropped the original's quoted output format, was "
                    f"empty or was over {self.max_prompt_chars} characters: original kept"
                )
                return _KEEP
            if leaks_failures(info.default, value, failed):
                notes.append(f"{where}: the new prompt copied a shown task: original kept")
                return _KEEP
            return value
        if info.kind in ("int", "float") and info.searchable:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{where} must be a number, got {clip(repr(value), 40)}")
            if not math.isfinite(value):
                raise ValueError(f"{where} must be finite")
            return self.space.snap(slot, info, value)
        return value  # the component's own checks refuse a wrong choice, bool or type


def parse_designs(text: str) -> list[dict[str, Any]]:
    """The designs in a reply: the first JSON object, or list of objects, it holds (small models
    wrap JSON in prose or fences). ValueError if there is none."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        designs = value if isinstance(value, list) else [value]
        if designs and all(isinstance(d, dict) for d in designs):
            return designs
    raise ValueError("the reply holds no JSON design")
