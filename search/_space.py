"""The design space as optuna sees it: conditional distributions built from the registry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna

from agentdesign.components import REGISTRY, SLOTS, AgentSpec, ParamInfo, SpecError

__all__ = ["SearchSpace"]


@dataclass(frozen=True)
class SearchSpace:
    """Which components and parameters a search may choose, for one model.

    Each slot's component is a categorical choice; each searchable parameter of the chosen component
    is suggested under its nested name (`workflow__n_samples`), so the space is conditional and
    TPE with `group=True` models each branch on its own. `limits` narrows a parameter's range
    (`{"workflow__n_samples": (2, 5)}`), `choices` narrows a slot's components.
    """

    model: str
    choices: Mapping[str, Sequence[str]] = field(default_factory=dict)
    limits: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for slot, names in self.choices.items():
            if slot not in SLOTS:
                raise SpecError(f"unknown slot '{slot}' in the search space (slots: {SLOTS})")
            for name in names:
                try:
                    REGISTRY.get(slot, name)
                except ValueError as exc:
                    raise SpecError(str(exc)) from None

    def components(self, slot: str) -> tuple[str, ...]:
        return tuple(self.choices.get(slot, REGISTRY.names(slot)))

    def _range(self, slot: str, info: ParamInfo) -> tuple[float, float]:
        assert info.low is not None and info.high is not None
        low, high = self.limits.get(f"{slot}__{info.name}", (info.low, info.high))
        return max(low, info.low), min(high, info.high)

    def suggest(self, trial: optuna.Trial) -> AgentSpec:
        """The spec for `trial`, asking optuna for each choice in turn (define-by-run)."""
        components: dict[str, Any] = {}
        for slot in SLOTS:
            name = trial.suggest_categorical(slot, list(self.components(slot)))
            assert isinstance(name, str)
            params: dict[str, Any] = {}
            for info in REGISTRY.get(slot, name).param_info():
                if info.searchable:
                    params[info.name] = self._suggest_param(trial, slot, info)
            components[slot] = {"name": name, "params": params}
        return AgentSpec.create(model=self.model, **components)

    def _suggest_param(self, trial: optuna.Trial, slot: str, info: ParamInfo) -> Any:
        key = f"{slot}__{info.name}"
        if info.kind == "bool":
            return trial.suggest_categorical(key, [False, True])
        if info.kind == "choice":
            assert info.choices is not None
            return trial.suggest_categorical(key, list(info.choices))
        low, high = self._range(slot, info)
        if info.kind == "int":
            return trial.suggest_int(key, int(low), int(high), log=info.log)
        return trial.suggest_float(key, float(low), float(high), log=info.log)

    def trial_params(self, spec: AgentSpec) -> dict[str, Any]:
        """The parameters a trial would hold for `spec`, for `study.enqueue_trial`."""
        params: dict[str, Any] = {}
        for slot in SLOTS:
            component = spec[slot]
            params[slot] = component.name
            for info in component.param_info():
                if info.searchable:
                    params[f"{slot}__{info.name}"] = getattr(component, info.name)
        return params

    def size_hint(self) -> int:
        """The number of distinct component combinations (parameters not counted)."""
        total = 1
        for slot in SLOTS:
            total *= len(self.components(slot))
        return total
