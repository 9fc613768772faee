"""Drive a search from Python with ask and tell, on in-memory items and your own scorer.

    python examples/ask_tell.py           # the embedded model (CPU; a few minutes)
    python examples/ask_tell.py --fake    # a scripted stand-in model, in seconds (CI runs this)

Each proposed design is run here on the search items and scored by `close_enough`, and the scores
are told back to the search; `search.evaluate(candidate)` would do the same through the archive
(with its cache and racing). `finalize()` then records the winner, chosen on the search items
alone, and only after that scores it and the baselines on the holdout items it never saw.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from agentdesign import create_search
from agentdesign.components import Message, extract_answer
from agentdesign.components.testing import FakeChatModel
from agentdesign.search.config import DEFAULTS

CAPITALS = {
    "France": "Paris",
    "Japan": "Tokyo",
    "Kenya": "Nairobi",
    "Canada": "Ottawa",
    "Peru": "Lima",
    "Norway": "Oslo",
    "Egypt": "Cairo",
    "Chile": "Santiago",
    "Poland": "Warsaw",
    "Vietnam": "Hanoi",
}
ITEMS = [
    {"question": f"What is the capital of {country}? Answer with the city's name.", "answer": city}
    for country, city in CAPITALS.items()
]


def close_enough(output: str, answer: str) -> float:
    """1 when the final answer names the city (any case, any surrounding words), else 0."""
    return float(answer.casefold() in extract_answer(output).casefold())


def scripted(model: str, messages: Sequence[Message], temperature: float, seed: int | None) -> str:
    """The stand-in model: knows every capital, but says so only when told to think first."""
    country = next((c for c in CAPITALS if c in messages[-1]["content"]), "")
    if "step by step" in messages[0]["content"]:
        return f"The capital of {country} is {CAPITALS.get(country, '?')}.\nAnswer: "
    return "Answer: I am not sure."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake", action="store_true", help="a scripted model, for a fast check")
    parser.add_argument("--designs", type=int, default=3, help="how many designs to try")
    parser.add_argument("--storage", default="ask_tell.db", help="the archive (SQLite file)")
    args = parser.parse_args()

    model = FakeChatModel(scripted) if args.fake else DEFAULTS["model"]
    with create_search(
        ITEMS,
        scorer=close_enough,
        name=time.strftime("ask-tell-%Y%m%d-%H%M%S"),
        storage=args.storage,
        strategy="random",
        space={
            "choices": {
                "workflow": ["single"],
                "reasoning": ["direct", "cot"],
                "planning": ["none", "step_back"],
                "memory": ["none"],
                "tool": ["none"],
                "reflection": ["none"],
            },
            "limits": {"reasoning__max_tokens": [256, 256], "planning__max_tokens": [128, 128]},
        },
        n_search=4,
        n_holdout=4,
        model=model,
        model_name="scripted" if args.fake else None,
    ) as search:
        for _ in range(args.designs):
            candidate = search.ask()
            agent = search.agent(candidate.spec)
            scores = [close_enough(agent.run(t.question).output, t.answer) for t in candidate.tasks]
            evaluation = search.tell(candidate, scores)
            print(f"{candidate.spec.describe()}: {evaluation.mean:.2f} on the search items")
        verdict = search.finalize()
        print(f"winner {verdict.winner_label}: {search.best.describe() if search.best else '-'}")
        for line in verdict.headline():
            print(line)
        exported = search.export("exported")
        print(f"exported {exported.folder}: run it with python {exported.agent_file} QUESTION")


if __name__ == "__main__":
    main()
