"""Components, their searchable parameters, and the registry that finds them by slot and name.

Standard library only, like every module export inlines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentdesign.components._plugins import NamedRegistry, PluginGroup

__all__ = [
    "REGISTRY",
    "SLOTS",
    "Component",
    "ParamInfo",
    "Registry",
    "param",
    "register",
]


def param(
    default: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    choices: Sequence[Any] | None = None,
    log: bool = False,
    searchable: bool = True,
    code: bool = False,
    doc: str = "",
) -> Any:
    """Declares a component parameter with the range a search may explore; `code` marks a text
    that is a program, not a prompt (prompt refinement leaves it alone)."""
    meta = {
        "code": code,
        "low": low,
        "high": high,
        "choices": tuple(choices) if choices is not None else None,
        "log": log,
        "searchable": searchable,
        "doc": doc,
    }
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ParamInfo:
    """A component parameter as a search space sees it."""

    name: str
    kind: str  # "int", "float", "bool", "choice" or "text"
    default: Any
    low: float | None
    high: float | None
    choices: tuple[Any, ...] | None
    log: bool
    searchable: bool
    doc: str
    code: bool = False  # a text that is a program (see `param`)

    def levels(self) -> tuple[Any, ...]:
        """Every value of a choice or boolean parameter; () for a number or a text."""
        if self.kind == "bool":
            return (False, True)
        return tuple(self.choices or ()) if self.kind == "choice" else ()


@dataclass(frozen=True, kw_only=True)
class Component:
    """Base of every pluggable part of an agent.

    Subclasses are frozen keyword-only dataclasses whose fields are their parameters (declared with
    `param`), so `get_params`, validation and cloning come for free.
    """

    slot: ClassVar[str]
    name: ClassVar[str]
    # An opt-in component is in a search space only where its choices name it (the `code`
    # workflow: a search cannot vary code by itself, the meta agent writes it).
    opt_in: ClassVar[bool] = False
    # A reviewer (a critic or a verifier): what it objects to is what an experience memory learns.
    reviews: ClassVar[bool] = False

    def __post_init__(self) -> None:
        for info in self.param_info():
            _check_param(self.slot, self.name, info, getattr(self, info.name))

    @classmethod
    def param_info(cls) -> tuple[ParamInfo, ...]:
        infos = []
        for f in dataclasses.fields(cls):
            meta = f.metadata
            kind = {int: "int", float: "float", bool: "bool", str: "text"}.get(
                type(f.default), "text"
            )
            if meta.get("choices") is not None:
                kind = "choice"
            infos.append(
                ParamInfo(
                    name=f.name,
                    kind=kind,
                    default=f.default,
                    low=meta.get("low"),
                    high=meta.get("high"),
                    choices=meta.get("choices"),
                    log=bool(meta.get("log", False)),
                    searchable=bool(meta.get("searchable", True)) and kind != "text",
                    doc=str(meta.get("doc", "")),
                    code=bool(meta.get("code", False)),
                )
            )
        return tuple(infos)

    def get_params(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def set_params(self, **params: Any) -> Component:
        """A copy with some parameters changed (components are immutable)."""
        unknown = sorted(set(params) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ValueError(f"{self.slot} '{self.name}' has no parameter(s) {', '.join(unknown)}")
        return dataclasses.replace(self, **params)


def _check_param(slot: str, name: str, info: ParamInfo, value: Any) -> None:
    where = f"{slot}__{info.name} (component '{name}')"
    if info.kind == "int" and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError(f"{where} must be an integer, got {value!r}")
    if info.kind == "float" and (not isinstance(value, (int, float)) or isinstance(value, bool)):
        raise ValueError(f"{where} must be a number, got {value!r}")
    if info.kind == "bool" and not isinstance(value, bool):
        raise ValueError(f"{where} must be true or false, got {value!r}")
    if info.kind == "text" and not isinstance(value, str):
        raise ValueError(f"{where} must be a string, got {value!r}")
    if info.kind == "choice" and info.choices is not None and value not in info.choices:
        raise ValueError(f"{where} must be one of {list(info.choices)}, got {value!r}")
    if info.low is not None and value < info.low:
        raise ValueError(f"{where} must be >= {info.low}, got {value!r}")
    if info.high is not None and value > info.high:
        raise ValueError(f"{where} must be <= {info.high}, got {value!r}")


class Registry:
    """Component classes by slot and name; refuses a second class under a taken name.

    Third-party components come from the `group` entry points (see `NamedRegistry`), loaded when a
    slot is first read.
    """

    def __init__(self, slots: Sequence[str], *, group: str | None = None) -> None:
        self._by_slot = {
            slot: NamedRegistry[type[Component]](kind=f"{slot} component") for slot in slots
        }
        self.plugins = PluginGroup(group)

    def register(self, cls: type[Component]) -> type[Component]:
        self._slot(cls.slot).register(cls.name, cls)
        return cls

    def slots(self) -> tuple[str, ...]:
        return tuple(self._by_slot)

    def names(self, slot: str, *, opt_in: bool = True) -> tuple[str, ...]:
        """The slot's component names; without `opt_in`, those a default space holds."""
        names = self._slot(slot, read=True)
        return tuple(n for n in names if opt_in or not names[n].opt_in)

    def get(self, slot: str, name: str) -> type[Component]:
        return self._slot(slot, read=True).lookup(name)

    def __iter__(self) -> Iterator[type[Component]]:
        self.plugins.load(self._adopt)
        for by_name in self._by_slot.values():
            yield from by_name.values()

    def _slot(self, slot: str, *, read: bool = False) -> NamedRegistry[type[Component]]:
        if slot not in self._by_slot:
            raise ValueError(f"unknown slot '{slot}' (slots: {', '.join(self._by_slot)})")
        if read:
            self.plugins.load(self._adopt)
        return self._by_slot[slot]

    def _adopt(self, name: str, cls: type[Component]) -> None:
        if not (isinstance(cls, type) and issubclass(cls, Component)):
            raise TypeError(f"entry point '{name}' names {cls!r}, not a Component subclass")
        self._slot(cls.slot).adopt(cls.name, cls)


SLOTS = ("workflow", "planning", "reasoning", "memory", "tool", "reflection")
REGISTRY = Registry(SLOTS, group="agentdesign.components")
register = REGISTRY.register
