"""The exceptions agentdesign raises for problems a user can fix.

The CLI prints any `AgentDesignError` as one line and exits non-zero; everything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

__all__ = ["AgentDesignError", "ModelUnavailableError", "SpecError"]


class AgentDesignError(Exception):
    """A problem with the user's input or environment, explained in one line."""


class SpecError(AgentDesignError, ValueError):
    """An agent spec names an unknown component or gives a parameter a bad value."""


class ModelUnavailableError(AgentDesignError):
    """A model cannot be used here: its package is missing or its weights are corrupt."""
