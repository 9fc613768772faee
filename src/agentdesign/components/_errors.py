"""The exceptions agentdesign raises for problems a user can fix.

The CLI prints any `AgentDesignError` as one line and exits non-zero; everything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

__all__ = [
    "AgentDesignError",
    "ModelUnavailableError",
    "ProviderError",
    "SandboxUnavailableError",
    "SpecError",
]


class AgentDesignError(Exception):
    """A problem with the user's input or environment, explained in one line."""


class SpecError(AgentDesignError, ValueError):
    """An agent spec names an unknown component or gives a parameter a bad value."""


class ModelUnavailableError(AgentDesignError):
    """A model cannot be used here: its package is missing or its weights are corrupt."""


class ProviderError(AgentDesignError):
    """The model provider failed tasks even after the retries (a rate limit, a server error, a
    timeout, a garbled or empty reply, a refused key): none of them is scored, so the evaluation
    stays open and a later run or resume retries exactly those tasks."""


class SandboxUnavailableError(AgentDesignError):
    """Model-written code would run without operating-system isolation, and unsafe mode is off."""
