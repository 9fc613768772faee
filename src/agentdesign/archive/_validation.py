"""Input checks: each returns the value it accepts or raises ArchiveError before any write.

Every public method of the archive checks its input here first, so that a bad value is one clear
line and never a half-written transaction. The other modules call them as `check.text(...)`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from agentdesign.archive._errors import ArchiveError

__all__ = [
    "FINISHED_EVALUATION_STATUSES",
    "LOOK_SOURCES",
    "PROPOSAL_STATUSES",
    "RUN_ENTRY_ROLES",
    "RUN_STATUSES",
    "SPLITS",
    "choice",
    "count",
    "finite",
    "hashes",
    "integer",
    "json_object",
    "listing",
    "non_negative",
    "optional_string",
    "optional_text",
    "string",
    "task_ids",
    "text",
]

# The values the status, split and role columns take.
RUN_STATUSES = ("running", "finished", "failed")
FINISHED_EVALUATION_STATUSES = ("complete", "pruned", "failed")
SPLITS = ("search", "holdout", "all")
RUN_ENTRY_ROLES = ("candidate", "dev", "winner", "baseline", "exploratory")
# Who scored a design on holdout items: a run's confirmation, or the evaluate command.
LOOK_SOURCES = ("run", "evaluate")
# What became of a meta agent's proposal; every status but the first is a refusal or a failure.
PROPOSAL_STATUSES = ("accepted", "screened", "invalid", "duplicate", "failed")


def text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ArchiveError(f"{what} must be a non-empty string, not {value!r}")
    return value


def optional_text(value: object, what: str) -> str | None:
    return None if value is None else text(value, what)


def integer(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArchiveError(f"{what} must be an integer, not {value!r}")
    return value


def count(value: object, what: str) -> int:
    number = integer(value, what)
    if number < 0:
        raise ArchiveError(f"{what} must not be negative, not {value!r}")
    return number


def finite(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ArchiveError(f"{what} must be a finite number, not {value!r}")
    return float(value)


def non_negative(value: object, what: str) -> float:
    number = finite(value, what)
    if number < 0:
        raise ArchiveError(f"{what} must not be negative, not {value!r}")
    return number


def choice(value: str, options: Sequence[str], what: str) -> str:
    if value not in options:
        raise ArchiveError(f"{what} must be one of {', '.join(options)}, not {value!r}")
    return value


def task_ids(ids: Sequence[str], what: str, *, allow_empty: bool = False) -> list[str]:
    if isinstance(ids, str):
        raise ArchiveError(f"{what} must be a sequence of task ids, not the string {ids!r}")
    checked = [text(task_id, f"a task id in {what}") for task_id in ids]
    if not checked and not allow_empty:
        raise ArchiveError(f"{what} is empty")
    if len(set(checked)) != len(checked):
        repeated = sorted({task_id for task_id in checked if checked.count(task_id) > 1})
        raise ArchiveError(f"{what} repeats task ids: {listing(repeated)}")
    return checked


def hashes(values: Sequence[str], what: str) -> list[str]:
    """Spec hashes, in their order (empty allowed): a plain list, so that it stores as JSON."""
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise ArchiveError(f"{what} must be a sequence of spec hashes, not {values!r}")
    return [text(value, f"a spec hash in {what}") for value in values]


def string(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ArchiveError(f"{what} must be a string, not {type(value).__name__}")
    return value


def optional_string(value: object, what: str) -> str | None:
    return None if value is None else string(value, what)


def json_object(value: Mapping[str, Any], what: str) -> dict[str, Any]:
    """A plain-JSON copy, so that the stored value cannot change under the caller's later edits."""
    if not isinstance(value, Mapping):
        raise ArchiveError(f"{what} must be a mapping, not {type(value).__name__}")
    try:
        copy: dict[str, Any] = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as err:
        raise ArchiveError(f"{what} is not plain JSON: {err}") from None
    return copy


def listing(names: Sequence[str], most: int = 10) -> str:
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, ... ({len(names) - most} more)"
