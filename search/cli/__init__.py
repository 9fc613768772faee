"""The `agentdesign` command line and the HTML report, outside the search core: this package calls
the core, and nothing in the core imports it."""

from __future__ import annotations

from agentdesign.search.cli._app import app, main

__all__ = ["app", "main"]
