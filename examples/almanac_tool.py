"""A tool component for examples/custom_component.py: an almanac the model looks things up in.

A component lives in a module of its own that imports only `agentdesign.components` (and the
standard library), so that `agentdesign export` can copy it into an exported agent's runtime, as
it copies the built-in components. A plugin package is the same module with an entry point under
`agentdesign.components` in its pyproject.toml; without one, importing the module registers it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from agentdesign.components import Observation, Tool, param, register

# Made-up countries, so that no model knows their capitals without the tool.
ALMANAC = {
    "Arvenia": "Castel Morrow",
    "Brellin": "Ostkirk",
    "Caldora": "Vey",
    "Dunmark": "Harrowgate",
    "Essaly": "Liraine",
    "Fennick": "Port Adley",
    "Galvany": "Soreth",
    "Hollis": "Marrowby",
    "Istrel": "Quenna",
    "Jorvik Isles": "Tallow",
}

_LOOKUP = re.compile(r"^\s*LOOKUP:\s*(.+?)\s*$", re.MULTILINE)


@register  # registers it as the tool "almanac": `agentdesign components` lists it from now on
@dataclass(frozen=True, kw_only=True)
class Almanac(Tool):
    """An almanac of capitals the model looks up by writing `LOOKUP: <country>`; each use costs a
    model call."""

    name: ClassVar[str] = "almanac"
    # Parameters are dataclass fields declared with `param`: the search explores their ranges.
    max_uses: int = param(2, low=1, high=3, doc="lookups allowed per attempt")
    instruction: str = param(
        "You have an almanac. To look up a country's capital, write a line "
        "'LOOKUP: <country>' and stop; you will get back 'RESULT: <capital>'.",
        doc="how the tool is explained to the model",
    )

    @property
    def protocol(self) -> str:
        """What the model is told about the tool (added to the reasoning's instruction)."""
        return self.instruction

    @property
    def call_limit(self) -> int:
        return self.max_uses

    def find_call(self, text: str) -> tuple[str, str] | None:
        """The model's text up to its lookup, and the country it looks up (None: no lookup)."""
        match = _LOOKUP.search(text)
        return None if match is None else (text[: match.end()], match.group(1))

    def execute(self, argument: str) -> Observation:
        """What the model gets back; an `Observation` with an `error` for a failed lookup."""
        country = argument.strip().strip("'\".").casefold()
        for name, capital in ALMANAC.items():
            if name.casefold() == country:
                return Observation(capital)
        return Observation(f"no entry for {argument!r}", error="not in the almanac")
