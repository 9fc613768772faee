"""The component half of the conformance kit (as scikit-learn's `check_estimator`): what every
component, built-in or third-party, must satisfy for a search to use it and export to ship it.

The benchmark and strategy checks live in their own layers (`agentdesign.evaluators`,
`agentdesign.search`); `agentdesign.search.checks` gathers all three.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from agentdesign.components._errors import AgentDesignError
from agentdesign.components._registry import REGISTRY, SLOTS, Component, ParamInfo
from agentdesign.components._spec import AgentSpec
from agentdesign.components.export._export import load_exported_agent, write_export

__all__ = ["ConformanceError", "check_component"]


class ConformanceError(AgentDesignError, AssertionError):
    """A component, benchmark or strategy breaks a rule every one of its kind must keep."""


def check_component(cls: type[Component], *, model: str = "fake/model") -> None:
    """Raises ConformanceError naming the first rule `cls` breaks.

    The rules: it is registered under its slot and name; every parameter's default lies in its
    range and every searchable one has a range to search; the default, the ends of each range and
    every choice make valid components; a spec holding any of them survives to_dict/from_dict and
    to_json/from_json with the same hash; and that spec exports to a file that imports and holds it.
    """
    where = f"component {getattr(cls, '__qualname__', cls)!r}"
    if not (isinstance(cls, type) and issubclass(cls, Component)):
        raise ConformanceError(f"{where} is not a Component subclass")
    if getattr(cls, "slot", None) not in SLOTS or not getattr(cls, "name", None):
        raise ConformanceError(f"{where} needs a class attribute slot (one of {SLOTS}) and a name")
    where = f"{cls.slot} component '{cls.name}'"
    if cls.name not in REGISTRY.names(cls.slot) or REGISTRY.get(cls.slot, cls.name) is not cls:
        raise ConformanceError(f"{where} is not registered (decorate it with @register)")
    variants = [cls()]
    for info in cls.param_info():
        _check_range(where, info)
        variants.extend(cls().set_params(**{info.name: value}) for value in _probes(info))
    specs = [AgentSpec.create(model=model, **{cls.slot: component}) for component in variants]
    for spec in specs:
        _check_round_trip(where, spec)
    _check_export(where, specs[0])


def _check_range(where: str, info: ParamInfo) -> None:
    name = f"{where}: parameter '{info.name}'"
    if info.searchable and info.kind in ("int", "float") and None in (info.low, info.high):
        raise ConformanceError(f"{name} is searchable but has no low and high to search")
    if info.low is not None and info.high is not None and info.low > info.high:
        raise ConformanceError(f"{name} has low {info.low} above high {info.high}")
    if info.log and (info.low is None or info.low <= 0):
        raise ConformanceError(f"{name} is log-scaled, so its low must be above 0")
    if info.choices is not None and info.default not in info.choices:
        raise ConformanceError(f"{name}: default {info.default!r} is not one of its choices")


def _probes(info: ParamInfo) -> tuple[Any, ...]:
    """The values a search may give a searchable parameter at the edges of its range."""
    if not info.searchable:
        return ()
    if info.kind in ("bool", "choice"):
        return info.levels()
    assert info.low is not None and info.high is not None  # _check_range made sure
    number = int if info.kind == "int" else float
    return (number(info.low), number(info.high))


def _check_round_trip(where: str, spec: AgentSpec) -> None:
    again = AgentSpec.from_dict(spec.to_dict())
    parsed = AgentSpec.from_json(spec.to_json())
    if not again == parsed == spec or not again.spec_hash == parsed.spec_hash == spec.spec_hash:
        raise ConformanceError(f"{where}: {spec.to_json()} does not survive to_dict/from_dict")


def _check_export(where: str, spec: AgentSpec) -> None:
    """The exported agent file and its runtime run their module code (every class and the spec)
    without agentdesign's own registry: the folder holds everything it needs."""
    name = f"_agentdesign_conformance_{spec.spec_hash[:12]}"
    with tempfile.TemporaryDirectory() as folder:
        try:
            exported = write_export(spec, train_examples=(), out=Path(folder))
        except AgentDesignError as error:
            raise ConformanceError(f"{where} does not export: {error}") from None
        try:
            module = load_exported_agent(exported.folder, name=name)
        except Exception as error:
            raise ConformanceError(
                f"{where}: the exported agent fails to import: {type(error).__name__}: {error}"
            ) from error
        del sys.modules[name]
    if module.SPEC.to_json() != spec.to_json():
        raise ConformanceError(f"{where}: the exported agent holds another spec")
