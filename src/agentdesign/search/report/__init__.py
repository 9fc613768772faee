"""The HTML report of a run: self-contained, its figures inline, viewable offline."""

from __future__ import annotations

from agentdesign.search.report._report import write_report

__all__ = [
    "write_report",
]
