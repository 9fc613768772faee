"""The models a run searches, when it searches several (`--models`), and the one of them its
baselines run on (`--reference-model`): chosen once, when its config is made, and said in its
header."""

from __future__ import annotations

from collections.abc import Sequence

from agentdesign.components import AgentDesignError, model_size
from agentdesign.search.config._settings import DEFAULTS

__all__ = ["choose_models", "reference_why"]


def choose_models(
    model: str, models: Sequence[str], reference: str | None
) -> tuple[tuple[str, ...], str | None]:
    """The models a run searches (none: `model` alone) and the one of them its baselines run on:
    `reference` where given, else `model` where it is not the table's default (a model named
    twice), else the largest where every model is embedded (by its weights), else the first
    listed. Refuses an empty or repeated name, an unknown embedded model, and a reference model
    that is not listed."""
    listed = tuple(models)
    if not listed:
        if reference is not None:
            raise AgentDesignError(
                f"reference model {reference!r} needs the models to search (models, --models)"
            )
        return (), None
    if not all(isinstance(m, str) and m.strip() == m and m for m in listed):
        raise AgentDesignError(f"models must be model strings, none empty, got {list(listed)!r}")
    repeated = sorted({m for m in listed if listed.count(m) > 1})
    if repeated:
        raise AgentDesignError(f"models lists {', '.join(repeated)} more than once")
    sizes = {m: model_size(m) for m in listed}  # refuses an unknown embedded model
    named = model if model != DEFAULTS["model"] else None
    if reference is None and named is not None:
        if named not in listed:
            raise AgentDesignError(
                f"model {named!r} is not one of the models ({', '.join(listed)}): name the "
                "models with models and the one the baselines run on with reference_model"
            )
        reference = named
    if reference is None:
        known = [size for size in sizes.values() if size is not None]
        if len(known) == len(listed):
            reference = max(listed, key=lambda m: sizes[m] or 0)  # ties: the first listed
        else:
            reference = listed[0]
    if reference not in listed:
        raise AgentDesignError(
            f"reference model {reference!r} is not one of the models ({', '.join(listed)})"
        )
    if named is not None and named != reference:
        raise AgentDesignError(
            f"model {named!r} and reference model {reference!r} differ: the baselines run on "
            "the reference model, name it once"
        )
    return listed, reference


def reference_why(models: Sequence[str], reference: str) -> str:
    """Why `reference` is the one of `models` the baselines run on, as `choose_models` chose it:
    the largest, the first listed, or named."""
    sizes = [model_size(m) for m in models]
    if all(size is not None for size in sizes):
        if reference == models[max(range(len(models)), key=lambda i: sizes[i] or 0)]:
            return "the largest"
    elif reference == models[0]:
        return "the first listed"
    return "as named"
