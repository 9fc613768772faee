"""Write your own search strategy, check it, register it, and search with it.

    python examples/custom_strategy.py           # the embedded model (CPU; a few minutes)
    python examples/custom_strategy.py --fake    # a scripted stand-in model, in seconds (CI)

A strategy subclasses `Strategy` and overrides its public extension points (see
docs/extending.md): here only `suggest`, which returns the next design to score as a `Proposal`
(or None, to leave the choice to the study's sampler). The run calls `propose`, which seeds the
random generator it hands `suggest` and redraws any design the run already has, so the strategy
stays reproducible and never scores a design twice.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np

from agentdesign import Strategy, create_search
from agentdesign.components import AgentSpec, Message, extract_answer
from agentdesign.components.testing import FakeChatModel
from agentdesign.search import History, Proposal, mutate, register_strategy
from agentdesign.search.checks import check_strategy
from agentdesign.search.config import DEFAULTS


class HillClimb(Strategy):
    """Hill climbing: a random design first, then one mutation of the best design so far."""

    def suggest(self, history: History, rng: np.random.Generator) -> Proposal | None:
        # `history.trials` holds every design the run asked for; `complete` those with a score.
        if not history.complete:
            return None  # nothing scored yet: the sampler (random, by default) draws a design
        best = max(history.complete, key=lambda trial: trial.score or 0.0)
        # Draw every random number from `rng`: a resumed run then proposes the same designs.
        child = mutate(best.spec, self.space, rng)
        return Proposal(spec=child, parents=(best.spec.spec_hash,), operator="mutation")


# By name, as `--strategy hill_climb` on the command line would take it (a plugin registers it
# through an `agentdesign.strategies` entry point instead). The description defaults to the
# first line of the docstring, as `agentdesign strategies` lists it.
register_strategy("hill_climb", HillClimb)

ITEMS = [
    {"question": f"What is {a} * {b}? Give the number.", "answer": str(a * b)}
    for a, b in [(12, 13), (17, 23), (31, 4), (25, 25), (14, 15), (9, 99), (41, 3), (16, 16)]
]


def close_enough(output: str, answer: str) -> float:
    """1 when the final answer is the product, else 0."""
    return float(extract_answer(output).replace(",", "").strip(" .") == answer)


def scripted(model: str, messages: Sequence[Message], temperature: float, seed: int | None) -> str:
    """The stand-in model: multiplies right only when told to work step by step."""
    numbers = [int(w) for w in messages[-1]["content"].replace("?", " ").split() if w.isdigit()]
    product = numbers[0] * numbers[1] if len(numbers) >= 2 else 0
    if "step by step" in messages[0]["content"]:
        return f"Multiplying: {product}.\nAnswer: {product}"
    return f"Answer: {product + 1}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake", action="store_true", help="a scripted model, for a fast check")
    parser.add_argument("--designs", type=int, default=4, help="how many designs to score")
    parser.add_argument("--storage", default="custom_strategy.db", help="the archive (SQLite)")
    args = parser.parse_args()

    # The conformance kit: valid designs, never one the history holds, the same proposal for the
    # same seed and history. It raises on the first rule broken.
    check_strategy("hill_climb")

    model = FakeChatModel(scripted) if args.fake else DEFAULTS["model"]
    with create_search(
        ITEMS,
        scorer=close_enough,
        name=time.strftime("custom-strategy-%Y%m%d-%H%M%S"),
        storage=args.storage,
        strategy="hill_climb",
        space={
            "choices": {
                "workflow": ["single"],
                "reasoning": ["direct", "cot", "scratchpad"],
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
        search.optimize(n_agents=args.designs)  # the designs, then the holdout confirmation
        for row in search.leaderboard():
            print(f"{AgentSpec.from_dict(row.spec).describe()}: {row.mean:.2f} on the search items")
        verdict = search.verdict()
        print(f"winner {verdict.winner_label}: {search.best.describe() if search.best else '-'}")
        for line in verdict.headline():
            print(line)


if __name__ == "__main__":
    main()
