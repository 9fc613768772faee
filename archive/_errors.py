"""The one error the archive raises, so that callers catch storage problems apart from others."""

from __future__ import annotations

from agentdesign.components import AgentDesignError

__all__ = ["ArchiveError"]


# mypy cannot follow the editable install's package-dir mapping, so under `mypy archive/` the base
# class is Any; with the package resolved (`mypy -p agentdesign.archive`) no ignore is needed.
class ArchiveError(AgentDesignError):  # type: ignore[misc, unused-ignore]
    """The archive cannot be opened, or a call names something it lacks or passes a bad value."""
