"""The designs of several runs that share their search items, one model each (or several), on one
score x seconds front: is there a design of a smaller model within the best design's interval at
a fraction of its seconds per item?

    .venv/bin/python bench/model_front.py ARCHIVE:RUN [ARCHIVE:RUN ...] [--reference MODEL]
        [--fraction 0.5]

Each run is read from its archive (no model call): its candidates' complete search evaluations
(racing's dropped designs are listed, but have fewer items and stay off the front), each with its
model, search score and 95% interval, tokens and seconds per item. The seconds are those of the
design's model and tool calls as each task's trace recorded them, a call answered from the
response cache counted at the seconds it took when it ran (a design whose prompts equal another's
is served from the cache, and its wall time would make it look free); they depend on the machine
and its load when each run ran: the header says so. The runs must share their search items, or
the comparison is refused.

Printed: one table of every design, best first, marking the score x seconds front; the target
line (a design of another model whose search score reaches the reference model's best design's
interval, at most `--fraction` of its seconds per item, or "none"); and the paired comparisons of
the runs' best designs on the search items and, where their holdouts overlap, of their recorded
winners on the shared holdout items.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from _common import markdown_table

from agentdesign.archive import Archive, EvaluationRecord
from agentdesign.components import model_size, parse_spec
from agentdesign.evaluators import PairedComparison, ScoreSummary, paired_difference, summarize


@dataclass(frozen=True)
class Design:
    """One design's complete search evaluation in one run."""

    run: str
    model: str
    spec_hash: str
    describe: str
    summary: ScoreSummary
    scores: dict[str, float]
    tokens_per_item: float
    seconds_per_item: float
    complete: bool


@dataclass(frozen=True)
class Run:
    name: str
    model: str
    search_ids: tuple[str, ...]
    designs: list[Design]
    winner_holdout: dict[str, float]


def read_run(path: str, name: str) -> Run:
    with Archive(path) as archive:
        run = archive.get_run(name)
        n_search = len(run.search_task_ids)
        evaluations = [
            e
            for e in archive.run_evaluations(name, split="search", role="candidate")
            if e.n_done > 0
        ]
        designs = [_design(archive, name, e, n_search) for e in evaluations]
        holdout = {}
        roles = archive.run_roles(name)
        for evaluation in archive.run_evaluations(name, split="holdout"):
            if roles.get(evaluation.id) == "winner" and evaluation.status == "complete":
                holdout = archive.task_scores([evaluation.id])[evaluation.id]
        model = str(run.config.get("model"))
        return Run(name, model, tuple(run.search_task_ids), designs, holdout)


def _design(archive: Archive, run: str, evaluation: EvaluationRecord, n: int) -> Design:
    spec = parse_spec(archive.get_agent(evaluation.agent_hash).spec)
    results = archive.task_results(evaluation.id)
    scores = {task_id: outcome.score for task_id, outcome in results.items()}
    call_s = sum(
        float(call.get("latency_s") or 0.0)
        for outcome in results.values()
        for call in outcome.details.get("trace", [])
    )
    return Design(
        run=run,
        model=spec.model,
        spec_hash=evaluation.agent_hash,
        describe=spec.describe(),
        summary=summarize([scores[task_id] for task_id in sorted(scores)]),
        scores=scores,
        tokens_per_item=evaluation.tokens_per_item,
        seconds_per_item=call_s / max(len(results), 1),
        complete=evaluation.status == "complete" and evaluation.n_done == n,
    )


def front(designs: list[Design]) -> set[str]:
    """The complete designs no other complete design beats on score without costing more
    seconds per item (or matches on score at fewer seconds)."""
    complete = [d for d in designs if d.complete]
    return {
        d.spec_hash
        for d in complete
        if not any(
            o.summary.mean >= d.summary.mean
            and o.seconds_per_item <= d.seconds_per_item
            and (o.summary.mean > d.summary.mean or o.seconds_per_item < d.seconds_per_item)
            for o in complete
        )
    }


def paired(a: dict[str, float], b: dict[str, float]) -> PairedComparison | None:
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    return paired_difference([a[t] for t in shared], [b[t] for t in shared])


def gain_cell(comparison: PairedComparison) -> str:
    return (
        f"{comparison.mean_diff:+.3f} [{comparison.ci_low:+.2f}, {comparison.ci_high:+.2f}], "
        f"p = {comparison.p_value:.3g}, n = {comparison.n} ({comparison.wins} won, "
        f"{comparison.losses} lost)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="ARCHIVE:RUN, one per run")
    parser.add_argument("--reference", help="the model whose best design is the reference")
    parser.add_argument("--fraction", type=float, default=0.5, help="of its seconds per item")
    args = parser.parse_args()
    runs: list[Run] = []
    for item in args.runs:
        path, _, name = item.rpartition(":")
        if not path or not name or not Path(path).is_file():
            sys.exit(f"error: {item!r} is not ARCHIVE:RUN with an existing archive file")
        runs.append(read_run(path, name))
    if len({frozenset(r.search_ids) for r in runs}) != 1:
        sys.exit("error: the runs' search items differ; a front across them would not be paired")
    designs = sorted(
        (d for r in runs for d in r.designs),
        key=lambda d: (-d.summary.mean, d.seconds_per_item),
    )
    models = sorted({d.model for d in designs}, key=lambda m: (model_size(m) or 0, m))
    reference = args.reference or models[-1]
    on_front = front(designs)
    print(
        f"{len(designs)} designs of {len(runs)} runs on the same {len(runs[0].search_ids)} "
        f"search items; models: {', '.join(models)}; seconds per item are the calls' "
        "recorded seconds, cached ones at their first run's (machine and load as each run "
        "had them)\n"
    )
    rows = [
        {
            "model": d.model.removeprefix("embedded/"),
            "design": f"{d.spec_hash[:10]} {d.describe}",
            "search (95% CI)": f"{d.summary.mean:.3f} [{d.summary.ci_low:.2f}, "
            f"{d.summary.ci_high:.2f}] n={d.summary.n}",
            "tokens/item": f"{d.tokens_per_item:,.0f}",
            "s/item": f"{d.seconds_per_item:.1f}",
            "front": "yes" if d.spec_hash in on_front else ("" if d.complete else "(raced)"),
        }
        for d in designs
    ]
    print(markdown_table(rows, right=["tokens/item", "s/item"]))
    best = {
        model: max(
            (d for d in designs if d.model == model and d.complete),
            key=lambda d: (d.summary.mean, -d.seconds_per_item),
        )
        for model in models
        if any(d.model == model and d.complete for d in designs)
    }
    ref = best[reference]
    cheap = [
        d
        for d in designs
        if d.complete
        and d.model != reference
        and d.summary.mean >= ref.summary.ci_low
        and d.seconds_per_item <= args.fraction * ref.seconds_per_item
    ]
    print(
        f"\nreference: {reference}'s best design {ref.spec_hash[:10]} at "
        f"{ref.summary.mean:.3f} [{ref.summary.ci_low:.2f}, {ref.summary.ci_high:.2f}], "
        f"{ref.seconds_per_item:.1f} s/item"
    )
    if cheap:
        for d in cheap:
            print(
                f"within its interval at <= {args.fraction:g} of its seconds: {d.model} "
                f"{d.spec_hash[:10]} {d.summary.mean:.3f} at {d.seconds_per_item:.1f} s/item"
            )
    else:
        print(
            f"within its interval at <= {args.fraction:g} of its seconds per item: none (no "
            f"design of another model reaches {ref.summary.ci_low:.2f} at "
            f"<= {args.fraction * ref.seconds_per_item:.1f} s/item)"
        )
    print()
    for model, design in best.items():
        if model == reference:
            continue
        comparison = paired(design.scores, ref.scores)
        if comparison is not None:
            print(
                f"search items: {model}'s best minus {reference}'s best: {gain_cell(comparison)}"
            )
    by_model = {r.model: r for r in runs if r.winner_holdout}
    if reference in by_model:
        for model, run in by_model.items():
            if model == reference:
                continue
            comparison = paired(run.winner_holdout, by_model[reference].winner_holdout)
            if comparison is not None:
                print(
                    f"shared holdout items: {run.name}'s winner minus "
                    f"{by_model[reference].name}'s winner: {gain_cell(comparison)}"
                )


if __name__ == "__main__":
    main()
