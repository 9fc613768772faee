"""Meta agent search live: `meta`, and `mcts` with the meta operator, against plain `mcts`, on
the embedded model, at the same token budget.

    .venv/bin/python bench/meta_live.py [--benchmark gsm8k] [--max-tokens 16000]
        [--n-search 6] [--n-holdout 8] [--space quick] [--seed 0] [--meta-view 4]
        [--archive bench/results/meta_live.sqlite] [--archived]

Three runs in one archive (`meta-<benchmark>-<variant>-t<tokens>-s<seed>`): "mcts"; "mcts+meta"
(every second proposal written by the meta agent, which is the run's own model); "meta" (the
meta strategy: every proposal after two covering designs written by the meta agent, which may
also write workflows as code); on request (`--variants random`) "random", random search without
racing. The token budget counts the meta agent's calls; the holdout
confirmation of each winner runs after it, with the CoT and CoT-SC baselines. A killed sitting
resumes when rerun; `--archived` only reports finished runs (no model call).

Prints per run: designs the meta agent wrote, the share that was valid (accepted, screened out or
a duplicate), those evaluated, the meta agent's tokens, agents evaluated, total tokens, the best
search score, the winner's holdout score and its paired gain over CoT (the run's verdict), and the
winner minus mcts's winner, paired on the holdout items (`--against` names the mcts run when it is
not among the variants run).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import interval_legend, markdown_table, score_cell, score_summary
from live_search import run_or_check

from agentdesign.archive import Archive
from agentdesign.components import AgentSpec
from agentdesign.evaluators import ScoreSummary, paired_difference
from agentdesign.search import Budget, run_verdict

VARIANTS = {
    "mcts": {"strategy": "mcts"},
    "mcts+meta": {"strategy": "mcts", "meta_every": 2},
    "meta": {"strategy": "meta", "meta_code": True},
    # not run by default: random search without racing, the baseline issue 17 asks mcts (which
    # races, as every run does by default) to beat at the same token budget
    "random": {"strategy": "random", "race": False},
}
DEFAULT_VARIANTS = ["mcts", "mcts+meta", "meta"]


def winner_holdout(archive: Archive, name: str) -> dict[str, float]:
    """The run's winner's holdout scores by task (empty before it is confirmed)."""
    winner = archive.get_run(name).winner_hash
    for evaluation in archive.run_evaluations(name, split="holdout"):
        if evaluation.agent_hash == winner and evaluation.status == "complete":
            return {t: r.score for t, r in archive.task_results(evaluation.id).items()}
    return {}


def versus(archive: Archive, name: str, other: str | None) -> str:
    """This run's winner minus `other` run's, paired on the holdout items both were scored on."""
    if other is None or other == name:
        return "-"
    mine, theirs = winner_holdout(archive, name), winner_holdout(archive, other)
    shared = sorted(set(mine) & set(theirs))
    if not shared:
        return "-"
    d = paired_difference([mine[t] for t in shared], [theirs[t] for t in shared])
    return f"{d.mean_diff:+.2f} [{d.ci_low:+.2f}, {d.ci_high:+.2f}] n={d.n}, p = {d.p_value:.3g}"


def row(archive: Archive, name: str, summaries: list[ScoreSummary]) -> dict[str, str]:
    """The table cells of a finished run; appends its scores' summaries to `summaries`."""
    counts = archive.proposal_counts(name)
    written = sum(counts.values()) - counts["failed"]
    valid = counts["accepted"] + counts["screened"] + counts["duplicate"]
    meta_calls = archive.search_call_totals(name).get("meta")
    meta_tokens = (meta_calls[1] + meta_calls[2]) if meta_calls else 0
    totals = archive.run_totals(name)
    verdict = run_verdict(archive, name)
    best = archive.leaderboard(run_name=name, limit=1)
    search_cell = holdout_cell = gain = "-"
    design = "-"
    if best:
        summary = score_summary(archive.task_results(best[0].evaluation_id))
        summaries.append(summary)
        search_cell = score_cell(summary)
        design = AgentSpec.from_dict(best[0].spec).describe()
    if verdict.holdout is not None:
        summary = score_summary(archive.task_results(verdict.holdout.id))
        summaries.append(summary)
        holdout_cell = score_cell(summary)
    cot = next((b for b in verdict.baselines if b.label == "cot"), None)
    if cot is not None:
        gain = cot.sentence(verdict.winner_label)
    return {
        "meta designs (failed calls)": f"{written} ({counts['failed']})",
        "valid": f"{valid / written:.0%}" if written else "-",
        "evaluated": str(counts["accepted"]),
        "meta tokens": f"{meta_tokens:,}",
        "agents": str(totals.n_agents),
        "tokens": f"{totals.prompt_tokens + totals.completion_tokens:,}",
        "best search": search_cell,
        "winner's holdout": holdout_cell,
        "winner vs cot": gain,
        "winner": design,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="gsm8k")
    parser.add_argument("--model", default="embedded/qwen2.5-coder-1.5b")
    parser.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS, choices=list(VARIANTS))
    parser.add_argument("--max-tokens", type=int, default=16_000)
    parser.add_argument("--n-search", type=int, default=6)
    parser.add_argument("--n-holdout", type=int, default=8)
    parser.add_argument("--space", default="quick")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--meta-view", type=int, default=4)
    parser.add_argument(
        "--archive", type=Path, default=Path(__file__).parent / "results" / "meta_live.sqlite"
    )
    parser.add_argument(
        "--archived", action="store_true", help="report the archive's finished runs only"
    )
    parser.add_argument(
        "--against",
        help="the run each winner is compared with on the holdout, paired (default: the mcts "
        "variant's run, if run here)",
    )
    args = parser.parse_args()
    names = {
        v: f"meta-{args.benchmark}-{v}-v{args.meta_view}-t{args.max_tokens}-s{args.seed}"
        for v in args.variants
    }
    with Archive(f"sqlite:///{args.archive}") as archive:
        for variant, name in names.items():
            run_or_check(
                archive,
                args,
                name,
                budget=Budget(max_agents=50, max_tokens=args.max_tokens),
                meta_view=args.meta_view,
                **VARIANTS[variant],
            )
        summaries: list[ScoreSummary] = []
        against = args.against or names.get("mcts")
        rows = [
            {
                "run": v,
                **row(archive, name, summaries),
                "winner vs mcts's winner (holdout, paired)": versus(archive, name, against),
            }
            for v, name in names.items()
        ]
    print(markdown_table(rows, right=("meta tokens", "agents", "tokens")))
    print()
    print(interval_legend(summaries))


if __name__ == "__main__":
    main()
