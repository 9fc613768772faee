"""Records a replay table: a fixed, diverse set of designs evaluated on the same GSM8K items.

    .venv/bin/python bench/replay_record.py [--model embedded/qwen2.5-coder-1.5b] [--designs 64]
        [--items 10] [--seed 0] [--archive bench/results/replay.sqlite]
    .venv/bin/python bench/replay_export.py bench/results/replay.sqlite   # then the JSON table

The designs are a seeded sample of the full space under cheap limits (token caps 128-384, at most
3 samples or agents, one refinement round): first a pairwise covering design, so every workflow and
every component, and every pair of them, appears at least once, then random designs up to
--designs. Each is scored on the first --items search items of GSM8K (the split of seed 0, the
default run's) through the engine's archive path, so a killed sitting resumes where it stopped
(rerun the same command). It prints one line per design as it finishes.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from agentdesign.archive import Archive
from agentdesign.components import AgentSpec, default_chat_model
from agentdesign.evaluators import examples_from_tasks, get_benchmark, make_split
from agentdesign.search import SearchSpace, evaluate_agent, pairwise_design

CHEAP_LIMITS: dict[str, tuple[float, float]] = {
    "planning__max_tokens": (128, 384),
    "reasoning__max_tokens": (128, 384),
    "reflection__max_tokens": (128, 384),
    "reflection__max_rounds": (1, 1),
    "workflow__judge_max_tokens": (128, 384),
    "workflow__verifier_max_tokens": (128, 384),
    "workflow__n_samples": (2, 3),
    "workflow__n_agents": (2, 3),
    "workflow__rounds": (2, 2),
    "workflow__max_rounds": (1, 1),
    "workflow__max_steps": (2, 3),
    "memory__k": (1, 3),
    "tool__max_uses": (1, 2),
}


def designs(model: str, n: int, seed: int) -> list[AgentSpec]:
    """The covering design first (every component and pair), then random designs, no repeats."""
    space = SearchSpace(model=model, limits=CHEAP_LIMITS)
    rng = np.random.default_rng(seed)
    chosen: dict[str, AgentSpec] = {s.spec_hash: s for s in pairwise_design(space, rng)}
    while len(chosen) < n:
        spec = space.sample(rng)
        chosen.setdefault(spec.spec_hash, spec)
    return list(chosen.values())[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded/qwen2.5-coder-1.5b")
    parser.add_argument("--designs", type=int, default=64)
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--archive", type=Path, default=Path(__file__).parent / "results" / "replay.sqlite"
    )
    args = parser.parse_args()
    benchmark = get_benchmark("gsm8k")
    split = make_split([t.id for t in benchmark.tasks()], seed=0, n_search=args.items, n_holdout=0)
    tasks = benchmark.tasks_by_ids(split.search_ids)
    examples = examples_from_tasks(benchmark.train_examples())
    llm = default_chat_model()
    with Archive(str(args.archive)) as archive:
        for number, spec in enumerate(designs(args.model, args.designs, args.seed), start=1):
            started = time.perf_counter()
            evaluation = evaluate_agent(
                archive, spec, benchmark, tasks, llm=llm, split="search", train_examples=examples
            )
            assert evaluation is not None  # nothing stops it part-way
            tokens = evaluation.prompt_tokens + evaluation.completion_tokens
            print(
                f"{number:3d}/{args.designs} {spec.spec_hash[:10]} mean {evaluation.mean:.2f} "
                f"tokens {tokens:6d} {time.perf_counter() - started:6.1f}s  {spec.describe()}",
                flush=True,
            )


if __name__ == "__main__":
    main()
