"""The error the archive raises, so that callers catch storage problems apart from others; and
its kind for a database that stopped answering."""

from __future__ import annotations

from agentdesign.components import AgentDesignError

__all__ = ["ArchiveError", "ArchiveUnreachableError"]


# mypy cannot follow the editable install's package-dir mapping, so under `mypy archive/` the base
# class is Any; with the package resolved (`mypy -p agentdesign.archive`) no ignore is needed.
class ArchiveError(AgentDesignError):  # type: ignore[misc, unused-ignore]
    """The archive cannot be opened, or a call names something it lacks or passes a bad value."""


class ArchiveUnreachableError(ArchiveError):
    """The archive's database dropped its connections and did not answer again in time, or
    dropped one while committing (see `_outage`): what was committed before is kept."""
