"""Exporting a run's design with its evidence: where it came from and what the run showed of it.

The exported folder itself is written by `agentdesign.components.write_export`; this adds what
only the archive knows: the run and archive the design came from, its scores there, and the
run's verdict when the design is the run's winner.
"""

from __future__ import annotations

import importlib.metadata
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import make_url

from agentdesign.archive import Archive, EvaluationRecord
from agentdesign.components import AgentSpec, Example, ExportedAgent, write_export
from agentdesign.search.verdict import RunVerdict, run_verdict

__all__ = ["export_design", "export_evidence"]

_SPLITS = ("search", "holdout")


def export_design(
    archive: Archive,
    run_name: str,
    spec: AgentSpec,
    *,
    out: Path,
    train_examples: Sequence[Example],
    question: str | None,
    chosen_as: str,
) -> ExportedAgent:
    """Writes `spec`'s folder into `out` with the evidence the run holds for it; `chosen_as`
    says why this design ("the run's winner", "on the run's Pareto front", ...)."""
    evidence = export_evidence(archive, run_name, spec, chosen_as=chosen_as)
    run = evidence["run"]
    origin = f"from run {run['name']} ({run['benchmark']}) in {evidence['archive']}, {chosen_as}"
    return write_export(
        spec,
        train_examples=train_examples,
        out=out,
        question=question,
        evidence=evidence,
        origin=origin,
    )


def export_evidence(
    archive: Archive, run_name: str, spec: AgentSpec, *, chosen_as: str
) -> dict[str, Any]:
    """The evidence file's content (JSON values): the design, the run and archive it came from,
    its complete evaluations in the run, and the run's verdict if it is the run's winner."""
    run = archive.get_run(run_name)
    scores = [
        _scores(evaluation)
        for split in _SPLITS
        for evaluation in archive.run_evaluations(run_name, split=split)
        if evaluation.agent_hash == spec.spec_hash and evaluation.status == "complete"
    ]
    is_winner = run.winner_hash == spec.spec_hash
    return {
        "agent": spec.spec_hash,
        "design": spec.describe(),
        "chosen_as": chosen_as,
        "exported_by": f"agentdesign {importlib.metadata.version('agentdesign')}",
        "archive": make_url(archive.url).render_as_string(hide_password=True),
        "run": {
            "name": run.name,
            "benchmark": run.benchmark,
            "model": run.model,
            "strategy": run.strategy,
            "status": run.status,
            "split_seed": run.split_seed,
            "search_items": len(run.search_task_ids),
            "holdout_items": len(run.holdout_task_ids),
            "winner": run.winner_hash,
        },
        "scores": scores,
        "verdict": verdict_evidence(run_verdict(archive, run_name)) if is_winner else None,
    }


def verdict_evidence(verdict: RunVerdict) -> dict[str, Any]:
    """The verdict's parts the evidence file holds: the winner and, per baseline, the paired
    difference on the holdout items (positive: the winner is better) with its interval, p and n.
    The one place an export reads a verdict."""
    return {
        "winner": verdict.run.winner_hash,
        "baselines": [
            {
                "label": baseline.label,
                "baseline": baseline.baseline_hash,
                "mean_difference": _finite(baseline.comparison.mean_diff),
                "ci_low": _finite(baseline.comparison.ci_low),
                "ci_high": _finite(baseline.comparison.ci_high),
                "p_value": _finite(baseline.comparison.p_value),
                "n": baseline.comparison.n,
            }
            for baseline in verdict.baselines
        ],
    }


def _scores(evaluation: EvaluationRecord) -> dict[str, Any]:
    """One complete evaluation of the design: its mean score with the 95% interval over n items."""
    return {
        "split": evaluation.split,
        "mean": _finite(evaluation.mean),
        "ci_low": _finite(evaluation.ci_low),
        "ci_high": _finite(evaluation.ci_high),
        "n": evaluation.n_done,
        "tokens_per_item": round(evaluation.tokens_per_item, 1),
        "cost": evaluation.cost,
    }


def _finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity: those are written as null."""
    return value if value is not None and math.isfinite(value) else None
