"""Add your own component, check it, and let a search decide whether it helps.

    python examples/custom_component.py           # the embedded model (CPU; a few minutes)
    python examples/custom_component.py --fake    # a scripted stand-in model, in seconds (CI)

The component is a tool, `almanac` (in almanac_tool.py beside this file): the model looks a
country's capital up by writing `LOOKUP: <country>`. The questions ask for capitals of made-up
countries, which no model knows, so a design with the almanac should win and one without it lose.
The same steps hold for the other slots: subclass `Workflow`, `Planning`, `Reasoning`, `Memory`
or `Reflection` from `agentdesign.components` and decorate it with `@register`.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Sequence

from almanac_tool import ALMANAC, Almanac

from agentdesign import create_search
from agentdesign.components import AgentSpec, Message, extract_answer
from agentdesign.components.testing import FakeChatModel
from agentdesign.search.checks import check_component
from agentdesign.search.config import DEFAULTS

ITEMS = [
    {"question": f"What is the capital of {country}? Answer with the city's name.", "answer": city}
    for country, city in ALMANAC.items()
]


def close_enough(output: str, answer: str) -> float:
    """1 when the final answer names the city (any case, any surrounding words), else 0."""
    return float(answer.casefold() in extract_answer(output).casefold())


def scripted(model: str, messages: Sequence[Message], temperature: float, seed: int | None) -> str:
    """The stand-in model: it knows no capital of these countries, but uses an almanac it is
    told about, and answers with what the lookup returned."""
    last = messages[-1]["content"]
    if last.startswith("RESULT: "):
        return f"Answer: {last.removeprefix('RESULT: ')}"
    country = re.search(r"capital of (.+?)\?", last)
    if "LOOKUP:" in messages[0]["content"] and country is not None:
        return f"LOOKUP: {country.group(1)}"
    return "Answer: I do not know."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake", action="store_true", help="a scripted model, for a fast check")
    parser.add_argument("--storage", default="custom_component.db", help="the archive (SQLite)")
    args = parser.parse_args()

    # The conformance kit checks what the search relies on: registration, parameter ranges, specs
    # that round-trip, and an export that carries the component. It raises on the first rule broken.
    check_component(Almanac)

    model = FakeChatModel(scripted) if args.fake else DEFAULTS["model"]
    with create_search(
        ITEMS,
        scorer=close_enough,
        name=time.strftime("custom-component-%Y%m%d-%H%M%S"),
        storage=args.storage,
        strategy="random",
        space={
            # The new tool is a choice like any built-in one; the other slots are kept fixed.
            "choices": {
                "workflow": ["single"],
                "reasoning": ["direct"],
                "planning": ["none"],
                "memory": ["none"],
                "tool": ["none", "almanac"],
                "reflection": ["none"],
            },
            "limits": {"reasoning__max_tokens": [128, 128]},
        },
        n_search=4,
        n_holdout=4,
        model=model,
        model_name="scripted" if args.fake else None,
    ) as search:
        summary = search.optimize(n_agents=3)  # three designs, then the holdout confirmation
        print(f"scored {summary.agents_done} designs")
        for row in search.leaderboard():
            print(f"{AgentSpec.from_dict(row.spec).describe()}: {row.mean:.2f} on the search items")
        verdict = search.verdict()
        print(f"winner {verdict.winner_label}: {search.best.describe() if search.best else '-'}")
        for line in verdict.headline():
            print(line)
        exported = search.export("exported")  # the almanac travels with the exported agent
        print(f"exported {exported.folder}: run it with python {exported.agent_file} QUESTION")


if __name__ == "__main__":
    main()
