"""Replaying a search against a recorded table: every evaluation is answered from the table.

A strategy proposes as it would in a live run, the value-guided ones screening their offspring
by the value model among all designs of the space. Only then is the proposal mapped to its
nearest table design not yet evaluated (by the value model's design features), and the study
records *that* design: its own parameters, its recorded score. So TPE and NSGA-II learn from what
was measured, never from a proposal's parameters paired with another design's score, and no
replay evaluates a design twice, as no live run does.

The ask-and-tell loop is the strategies' `drive`, shared with the truth benchmark
(`_truth_search.py`), whose simulated evaluations need no mapping. Two yardsticks go with the
replay. `shuffled_replay` evaluates the table in a random order, with no mapping: the no-information
baseline for a finite table (the mapping itself can favour designs in sparse corners of the space).
`split_half_reliability` says how far the table's own scores agree with themselves, which bounds how
well any value model can rank them. `TableWorld` makes a table a world for the truth benchmark's
searches (`_truth_search.py`): racing there stops designs on the table's real item outcomes, and a
run is judged by its reported design's mean over all the table's items.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from agentdesign.benchmarking._table import ReplayTable
from agentdesign.components import AgentDesignError, AgentSpec
from agentdesign.search.strategies import (
    Evaluate,
    Evaluated,
    History,
    drive,
    make_strategy,
)
from agentdesign.search.valuemodel import (
    Labelled,
    ValueModel,
    ValueReport,
    design_features,
    rank_correlation,
    value_report,
)

__all__ = [
    "ReplayResult",
    "TableWorld",
    "held_out_accuracy",
    "replay_search",
    "shuffled_replay",
    "split_half_reliability",
    "table_evaluator",
]


@dataclass(frozen=True)
class ReplayResult:
    """The designs one replayed search evaluated, in order, with their recorded scores, tokens."""

    strategy: str
    seed: int
    hashes: tuple[str, ...]
    scores: tuple[float, ...]
    tokens: tuple[int, ...]

    def evaluations_to(self, targets: frozenset[str]) -> int | None:
        """How many evaluations it took to evaluate one of `targets` (None: never did)."""
        for n, spec_hash in enumerate(self.hashes, start=1):
            if spec_hash in targets:
                return n
        return None

    def best_after(self, n: int) -> float:
        return max(self.scores[:n])

    def tokens_after(self, n: int) -> int:
        return sum(self.tokens[:n])

    @classmethod
    def of(cls, strategy: str, seed: int, evaluated: Sequence[Evaluated]) -> ReplayResult:
        """The result of evaluating `evaluated` in this order."""
        return cls(
            strategy=strategy,
            seed=seed,
            hashes=tuple(e.spec.spec_hash for e in evaluated),
            scores=tuple(e.mean for e in evaluated),
            tokens=tuple(e.tokens for e in evaluated),
        )


def table_evaluator(table: ReplayTable) -> Evaluate:
    """Answers a proposal with the recorded evaluation of its nearest table design not yet
    evaluated."""
    designs = table.by_hash()
    pool = tuple(d.spec for d in table.designs)

    def evaluate(spec: AgentSpec, history: History) -> Evaluated | None:
        untried = [s for s in pool if s.spec_hash not in history.seen]
        if not untried:
            return None
        design = designs[nearest(spec, untried).spec_hash]
        return Evaluated(spec=design.spec, scores=design.scores, tokens=design.tokens)

    return evaluate


def nearest(spec: AgentSpec, designs: Sequence[AgentSpec]) -> AgentSpec:
    """The design of `designs` closest to `spec` by design features (Euclidean distance)."""
    distances = np.linalg.norm(design_features(designs) - design_features([spec]), axis=1)
    return designs[int(distances.argmin())]


def replay_search(
    table: ReplayTable,
    strategy: str,
    *,
    seed: int,
    n_evaluations: int,
    objective: str = "score",
) -> ReplayResult:
    """Runs `strategy` for `n_evaluations` (at most the table's size) against `table`."""
    chosen = make_strategy(strategy, space=table.space(), seed=seed, objective=objective)
    evaluated = drive(
        chosen,
        table_evaluator(table),
        description=table.description,
        stop=lambda done: len(done) >= n_evaluations,
    )
    return ReplayResult.of(strategy, seed, evaluated)


def shuffled_replay(table: ReplayTable, *, seed: int, n_evaluations: int) -> ReplayResult:
    """The table's designs in a seeded random order: uniform sampling without replacement."""
    order = np.random.default_rng(seed).permutation(len(table.designs))[:n_evaluations]
    designs = [table.designs[i] for i in order]
    evaluated = [Evaluated(spec=d.spec, scores=d.scores, tokens=d.tokens) for d in designs]
    return ReplayResult.of("shuffled", seed, evaluated)


def held_out_accuracy(table: ReplayTable, *, n_labelled: int, seed: int) -> ValueReport:
    """The value model's accuracy on the table's designs it was not fit on, after fitting on
    `n_labelled` designs drawn at random: what a search knows after that many evaluations."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(table.designs))
    rows = [
        Labelled(spec=d.spec, description=table.description, score=d.mean) for d in table.designs
    ]
    model = ValueModel(seed=seed).fit([rows[i] for i in order[:n_labelled]])
    held_out = [rows[i] for i in order[n_labelled:]]
    means, stds = model.predict([r.spec for r in held_out], description=table.description)
    return value_report(means, stds, np.array([r.score for r in held_out]))


def split_half_reliability(table: ReplayTable, *, n_splits: int = 200, seed: int = 0) -> float:
    """How reproducible the table's ranking of designs is from its own tasks.

    Splits the tasks at random into two halves, ranks the designs by each half's mean, and takes
    Spearman's rho between the two rankings, averaged over `n_splits` splits and stepped up to the
    full task count (Spearman-Brown). Near 1: more tasks would barely reorder the designs; a value
    model's rank correlation with these scores can hardly exceed the square root of it.
    """
    n_tasks = len(table.task_ids)
    if n_tasks < 2:
        raise AgentDesignError("split-half reliability needs at least two tasks")
    scores = np.array([d.scores for d in table.designs])
    rng = np.random.default_rng(seed)
    halves = []
    for _ in range(n_splits):
        order = rng.permutation(n_tasks)
        first, second = order[: n_tasks // 2], order[n_tasks // 2 :]
        halves.append(rank_correlation(scores[:, first].mean(1), scores[:, second].mean(1)))
    half = float(np.mean(halves))
    return 2 * half / (1 + half) if half > -1 else -1.0


class TableWorld:
    """A recorded table as a world to search in: its designs are the only ones (a proposal
    evaluates its nearest one not yet evaluated, as `table_evaluator` maps it), a design's
    outcomes on an item and the tokens it used there are the recorded ones, and the accuracy a
    run is judged by is a design's mean over every item of the table.

    `n_search` items, drawn at random by `seed`, are the run's search items, in the drawn order
    (racing scores a design on their first few first). Tables of the first format kept only each
    design's total tokens: each of its items then costs an equal share.
    """

    # Keeps the draw of search items apart from a strategy seeded with the same number.
    _ITEMS = 3

    def __init__(self, table: ReplayTable, *, seed: int, n_search: int) -> None:
        n_items = len(table.task_ids)
        if not 2 <= n_search <= n_items:
            raise AgentDesignError(f"need 2 <= n_search <= {n_items} table items, got {n_search}")
        self.table = table
        self.seed = seed
        self.description = table.description
        self.space = table.space()
        order = np.random.default_rng([seed, self._ITEMS]).permutation(n_items)[:n_search]
        self.search_items = tuple(int(i) for i in order)
        self._index = {d.spec.spec_hash: i for i, d in enumerate(table.designs)}
        self._scores = np.array([d.scores for d in table.designs], dtype=float)
        self._tokens = np.array([d.tokens_per_item() for d in table.designs], dtype=float)

    def design(self, spec: AgentSpec, history: History) -> AgentSpec | None:
        untried = [d.spec for d in self.table.designs if d.spec.spec_hash not in history.seen]
        return nearest(spec, untried) if untried else None

    def row(self, spec_hash: str) -> int:
        """The design's row in the table."""
        return self._index[spec_hash]

    def evaluate(self, spec: AgentSpec, items: Sequence[int]) -> Evaluated:
        row, chosen = self.row(spec.spec_hash), list(items)
        return Evaluated(
            spec=spec,
            scores=tuple(float(s) for s in self._scores[row, chosen]),
            tokens=round(float(self._tokens[row, chosen].sum())),
        )

    def accuracy(self, specs: Sequence[AgentSpec]) -> np.ndarray:
        rows = [self.row(s.spec_hash) for s in specs]
        return np.asarray(self._scores[rows].mean(axis=1), dtype=float)
