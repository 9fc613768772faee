"""Live searches on a real benchmark with the embedded model: each strategy, the same budget.

    .venv/bin/python bench/live_search.py [--benchmark bfcl-simple] [--strategies mcts random]
        [--max-agents 10] [--n-search 10] [--n-holdout 10] [--space quick] [--seed 0]
        [--archive bench/results/live_search.sqlite] [--archived]

Each strategy gets its own run (`live-<benchmark>-<strategy>-s<seed>`) in one archive, so a killed
sitting resumes: rerun the same command, a finished run is only reported. A design that two
strategies both propose is evaluated once and reused (its tokens count in both runs' totals).
Every run confirms its best search agent on the holdout items. `--archived` only reads: it reports
the finished runs in the archive and runs or resumes nothing (a missing or unfinished run is an
error), so it makes no model call. Prints per strategy: the best search score, the evaluation that
first reached it, that agent's holdout score, agents evaluated, tokens, and hours of task time;
each score's 95% interval is recomputed from the task scores (`summarize`) and shows its method
and n.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from _common import interval_legend, markdown_table, score_cell, score_summary

from agentdesign.archive import Archive, ArchiveError
from agentdesign.components import AgentSpec
from agentdesign.evaluators import ScoreSummary, TaskOutcome
from agentdesign.search import (
    Budget,
    Reporter,
    RunConfig,
    resume_search,
    run_search,
    space_from_option,
)


class _Progress(Reporter):
    """One stderr line per task and per agent, so a long sitting shows where it is."""

    def __init__(self, label: str) -> None:
        self.label = label

    def task_finished(self, outcome: TaskOutcome) -> None:
        print(
            f"  {self.label} {outcome.task_id} score={outcome.score} {outcome.latency_s:.0f}s",
            file=sys.stderr,
            flush=True,
        )

    def agent_started(self, spec: AgentSpec, n_tasks: int, n_done: int, split: str) -> None:
        print(f"{self.label} {split}: {spec.describe()}", file=sys.stderr, flush=True)


def search(archive: Archive, config: RunConfig) -> None:
    """Runs `config`, or resumes it if an earlier sitting was cut short."""
    try:
        run = archive.get_run(config.name)
    except ArchiveError:
        run_search(archive, config, reporter=_Progress(config.strategy))
        return
    if run.status != "finished":
        resume_search(archive, config.name, reporter=_Progress(config.strategy))


def run_config(args: argparse.Namespace, name: str, **settings: Any) -> RunConfig:
    """The run `name` of a live sitting: the benchmark, model, split and space of `args` (their
    `benchmark`, `model`, `n_search`, `n_holdout`, `seed`, `space`), with `settings`."""
    narrowing = space_from_option(args.space)
    return RunConfig.of(
        name=name,
        benchmark=args.benchmark,
        model=args.model,
        n_search=args.n_search,
        n_holdout=args.n_holdout,
        split_seed=args.seed,
        seed=args.seed,
        choices=narrowing.get("choices", {}),
        limits=narrowing.get("limits", {}),
        **settings,
    )


def finished(archive: Archive, name: str) -> None:
    """Exits with an error unless run `name` is in the archive and finished (for --archived)."""
    try:
        run = archive.get_run(name)
    except ArchiveError:
        sys.exit(f"error: the archive has no run {name}")
    if run.status != "finished":
        sys.exit(f"error: run {name} is {run.status}, not finished: resuming it calls the model")


def run_or_check(archive: Archive, args: argparse.Namespace, name: str, **settings: Any) -> None:
    """Runs (or resumes) the run `name` of `args` with `settings` (see `run_config`); with
    `args.archived`, only checks that it finished."""
    if args.archived:
        finished(archive, name)
    else:
        search(archive, run_config(args, name, **settings))


def row(archive: Archive, name: str, summaries: list[ScoreSummary]) -> dict[str, str]:
    """The table cells of a finished run; appends the scores' summaries to `summaries`."""
    (best,) = archive.leaderboard(run_name=name, limit=1)
    order = archive.run_evaluations(name, split="search", role="candidate")
    first = next(n for n, e in enumerate(order, start=1) if (e.mean or 0.0) >= best.mean)
    holdout = {e.agent_hash: e for e in archive.run_evaluations(name, split="holdout")}
    confirmed = holdout.get(best.agent_hash)
    totals = archive.run_totals(name)
    search_summary = score_summary(archive.task_results(best.evaluation_id))
    summaries.append(search_summary)
    holdout_cell = "-"
    if confirmed is not None:
        holdout_summary = score_summary(archive.task_results(confirmed.id))
        summaries.append(holdout_summary)
        holdout_cell = score_cell(holdout_summary)
    return {
        "best search [95% CI] method n": score_cell(search_summary),
        "reached at": f"{first} of {len(order)}",
        "its holdout [95% CI] method n": holdout_cell,
        "tokens": f"{totals.prompt_tokens + totals.completion_tokens:,}",
        "task hours": f"{totals.wall_s / 3600:.2f}",
        "best design": AgentSpec.from_dict(best.spec).describe(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="bfcl-simple")
    parser.add_argument("--model", default="embedded/qwen2.5-coder-1.5b")
    parser.add_argument("--strategies", nargs="+", default=["mcts", "random"])
    parser.add_argument("--max-agents", type=int, default=10)
    parser.add_argument("--n-search", type=int, default=10)
    parser.add_argument("--n-holdout", type=int, default=10)
    parser.add_argument("--space", default="quick")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--archive", type=Path, default=Path(__file__).parent / "results" / "live_search.sqlite"
    )
    parser.add_argument(
        "--archived",
        action="store_true",
        help="report the archive's finished runs only: no model call",
    )
    args = parser.parse_args()
    names = {s: f"live-{args.benchmark}-{s}-s{args.seed}" for s in args.strategies}
    with Archive(f"sqlite:///{args.archive}") as archive:
        for strategy, name in names.items():
            run_or_check(
                archive,
                args,
                name,
                strategy=strategy,
                budget=Budget(max_agents=args.max_agents),
                confirm_top=1,
            )
        summaries: list[ScoreSummary] = []
        rows = [{"strategy": s, **row(archive, name, summaries)} for s, name in names.items()]
    print(markdown_table(rows, right=("tokens", "task hours")))
    print()
    print(interval_legend(summaries))


if __name__ == "__main__":
    main()
