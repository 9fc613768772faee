"""A run's verdict: its pre-registered winner against hand-designed baselines on unseen items,
and how much the selection on the search items overfit.

Users ask first whether the found agent beats plain chain of thought or self-consistency at the
same cost, so that comparison is the headline, always paired on the same holdout items. The search
score of the winner is biased upward by the selection itself (the winner's curse); the overfit
figures say by how much, from the designs x search-items score matrix the archive already holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from agentdesign.archive import Archive, EvaluationRecord, RunRecord
from agentdesign.components import AgentDesignError, AgentSpec
from agentdesign.evaluators import (
    SELECTION_MIN_DESIGNS,
    SELECTION_MIN_ITEMS,
    OverfitReport,
    PairedComparison,
    ScoreSummary,
    minimum_detectable_effect,
    paired_difference,
    selection_estimable,
    selection_overfit,
    summarize,
)

__all__ = [
    "BASELINES",
    "BaselineVerdict",
    "HoldoutChoice",
    "RunVerdict",
    "check_selection",
    "cot_baseline",
    "cot_sc_baseline",
    "holdout_choice",
    "run_verdict",
]

# The built-in baselines a run scores beside its winner unless told otherwise.
BASELINES = ("cot", "cot-sc")
# The self-consistency baseline's sample counts: odd ones, so that a vote between two answers
# cannot tie (majority gives a tie to the first sample: 2 samples would be one sample at twice
# the cost), up to the self_consistency workflow's 9.
_SC_SAMPLES = (3, 9)
# The power at which a "no difference shown" says which gain it could have shown.
_POWER = 0.8


def cot_baseline(model: str, *, interactive: bool = False) -> AgentSpec:
    """One chain-of-thought call; in an environment, ReAct with chain of thought."""
    return AgentSpec.create(model=model, workflow="react" if interactive else "single")


def cot_sc_baseline(model: str, *, winner_tokens: float, cot_tokens: float) -> AgentSpec | None:
    """Self-consistency over the largest odd number of chain-of-thought samples the winner's
    tokens per item buy at the CoT baseline's tokens per item (at most 9), so that it costs no
    more than the winner and its vote never ties between two answers. None when they buy fewer
    than 3: then CoT itself is the cost-matched baseline."""
    if cot_tokens <= 0:
        raise AgentDesignError("the cot-sc baseline needs the CoT baseline's tokens per item")
    low, high = _SC_SAMPLES
    bought = min(math.floor(winner_tokens / cot_tokens), high)
    samples = bought - (1 - bought % 2)  # the odd count at or below
    if samples < low:
        return None
    return AgentSpec.create(
        model=model, workflow={"name": "self_consistency", "params": {"n_samples": samples}}
    )


@dataclass(frozen=True)
class BaselineVerdict:
    """The winner minus one baseline on the same holdout items (positive: the winner is better);
    `detectable` is the least gain the comparison's test shows with 80% power at its n and the
    two's disagreement (see `minimum_detectable_effect`), None where no gain would be."""

    label: str
    baseline_hash: str
    comparison: PairedComparison
    winner_tokens: float
    baseline_tokens: float
    detectable: float | None

    @property
    def token_ratio(self) -> float:
        """The winner's tokens per item over the baseline's."""
        return self.winner_tokens / self.baseline_tokens if self.baseline_tokens else math.inf

    def sentence(self, winner: str) -> str:
        """The verdict in words: a win or a loss exactly when the test's p is below 0.05 (the
        interval then excludes 0), else "no difference shown" with the gain it could have shown."""
        c = self.comparison
        where = f"on {c.n} unseen items (p = {c.p_value:.3g}, {c.method})"
        cost = (
            f"the winner using {self.token_ratio:.2f}x the baseline's tokens per item "
            f"({self.winner_tokens:,.0f} vs {self.baseline_tokens:,.0f})"
        )
        if c.ci_low > 0:
            gain = f"{c.mean_diff:+.2f} [{c.ci_low:+.2f}, {c.ci_high:+.2f}]"
            return f"winner {winner} beats baseline {self.label} by {gain} {where}, {cost}"
        if c.ci_high < 0:
            loss = f"{-c.mean_diff:+.2f} [{-c.ci_high:+.2f}, {-c.ci_low:+.2f}]"
            return f"baseline {self.label} beats winner {winner} by {loss} {where}, {cost}"
        gain = f"{c.mean_diff:+.2f} [{c.ci_low:+.2f}, {c.ci_high:+.2f}]"
        missed = (
            f"no gain would be shown with {_POWER:.0%} power"
            if self.detectable is None
            else f"{_POWER:.0%} power only for a gain of {self.detectable:+.2f} or more"
        )
        return (
            f"winner {winner} vs baseline {self.label}: {gain} {where}: no difference shown (the "
            f"two differ on {c.wins + c.losses} of {c.n} items: at this n and disagreement, "
            f"{missed}), {cost}"
        )


@dataclass(frozen=True)
class RunVerdict:
    """What a run can honestly claim about its winner, and how firm its search score is."""

    run: RunRecord
    winner: EvaluationRecord | None  # its search evaluation; None before the winner is recorded
    holdout: EvaluationRecord | None  # the winner's holdout evaluation, once complete
    baselines: tuple[BaselineVerdict, ...]
    # (designs, items) of the fully scored designs x search items matrix; None below 2 x 2
    selection: tuple[int, int] | None
    overfit: OverfitReport | None  # None below SELECTION_MIN_DESIGNS x SELECTION_MIN_ITEMS
    runner_up: PairedComparison | None  # winner minus the second design on the search items
    unscored: tuple[tuple[str, str], ...] = ()  # (label, why) of baselines never to be scored

    @property
    def winner_label(self) -> str:
        return self.run.winner_hash[:10] if self.run.winner_hash else "-"

    def headline(self) -> list[str]:
        """The verdict's lines, most important first."""
        if self.winner is None:
            return ["no winner recorded yet: the search has not finished"]
        lines = [verdict.sentence(self.winner_label) for verdict in self.baselines]
        lines += [f"baseline {label} not scored: {why}" for label, why in self.unscored]
        if self.holdout is None:
            lines.append(f"winner {self.winner_label} is not yet scored on the holdout")
        elif not self.baselines and not self.unscored:
            lines.append(f"winner {self.winner_label}: no baseline scored on the holdout yet")
        if self.overfit is not None:
            o = self.overfit
            lines.append(
                f"selection overfit on the search items ({o.n_designs} designs x {o.n_items} "
                f"items): probability of backtest overfitting {o.pbo:.2f} (with the designs "
                f"shuffled within items, as if equal: {o.shuffled_pbo:.2f}, 10th-90th "
                f"percentile {o.shuffled_low:.2f}-{o.shuffled_high:.2f}); expected optimism of "
                f"the winner's search score {o.optimism:+.3f}; the winner is the best design in "
                f"{o.best_share:.0%} of item bootstraps"
            )
        elif self.selection is not None:
            designs, items = self.selection
            lines.append(
                f"too few designs or items to estimate selection overfit ({designs} designs x "
                f"{items} search items; the estimate needs {SELECTION_MIN_DESIGNS} x "
                f"{SELECTION_MIN_ITEMS})"
            )
        if self.runner_up is not None and self.runner_up.ci_low <= 0:
            r = self.runner_up
            lines.append(
                f"warning: the top designs cannot be told apart on the search items (winner minus "
                f"runner-up {r.mean_diff:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}], "
                f"p = {r.p_value:.3g}, n = {r.n})"
            )
        return lines


def run_verdict(archive: Archive, run_name: str) -> RunVerdict:
    """Reads a run's verdict from the archive; spends nothing."""
    run = archive.get_run(run_name)
    # Candidates only: a refiner's or meta agent's development evaluation of a design is on
    # other items, and would stand in for its search evaluation.
    search = {
        e.agent_hash: e
        for e in archive.run_evaluations(run_name, split="search", role="candidate")
        if e.status == "complete"
    }
    roles = archive.run_roles(run_name)
    holdout = [
        e for e in archive.run_evaluations(run_name, split="holdout") if e.status == "complete"
    ]
    winner = search.get(run.winner_hash) if run.winner_hash else None
    confirmed = next(
        (e for e in holdout if e.agent_hash == run.winner_hash and roles.get(e.id) == "winner"),
        None,
    )
    verdicts: list[BaselineVerdict] = []
    if confirmed is not None:
        baselines = [e for e in holdout if roles.get(e.id) == "baseline"]
        labels = _baseline_labels(run, [e.agent_hash for e in baselines], archive)
        winner_scores = _scores(archive, confirmed)
        for evaluation in baselines:
            baseline_scores = _scores(archive, evaluation)
            verdicts.append(
                BaselineVerdict(
                    label=labels.get(evaluation.agent_hash, evaluation.agent_hash[:10]),
                    baseline_hash=evaluation.agent_hash,
                    comparison=paired_difference(winner_scores, baseline_scores),
                    winner_tokens=confirmed.tokens_per_item,
                    baseline_tokens=evaluation.tokens_per_item,
                    detectable=minimum_detectable_effect(
                        winner_scores, baseline_scores, power=_POWER
                    ),
                )
            )
    ordered = sorted(search.values(), key=lambda e: (-(e.mean or 0.0), e.tokens_per_item))
    selection, overfit, runner_up = None, None, None
    task_ids = list(run.search_task_ids)
    full = [e for e in ordered if set(e.task_ids) == set(task_ids)]
    if len(full) >= 2 and len(task_ids) >= 2:
        rows = {e.agent_hash: _by_task(archive, e) for e in full}  # one read per design
        matrix = np.array([[rows[e.agent_hash][t] for t in task_ids] for e in full])
        selection = matrix.shape[0], matrix.shape[1]
        hashes = [e.agent_hash for e in full]
        chosen = (
            hashes.index(winner.agent_hash)
            if winner is not None and winner.agent_hash in hashes
            else None
        )
        if selection_estimable(*selection):
            overfit = selection_overfit(matrix, chosen=chosen)
        if chosen is not None:
            second = next((matrix[i] for i in range(len(full)) if i != chosen), None)
            if second is not None:
                runner_up = paired_difference(matrix[chosen].tolist(), second.tolist())
    return RunVerdict(
        run=run,
        winner=winner,
        holdout=confirmed,
        baselines=tuple(verdicts),
        selection=selection,
        overfit=overfit,
        runner_up=runner_up,
        unscored=_unscored_baselines(run, confirmed, verdicts),
    )


def _unscored_baselines(
    run: RunRecord, holdout: EvaluationRecord | None, verdicts: Sequence[BaselineVerdict]
) -> tuple[tuple[str, str], ...]:
    """(label, why) for each built-in baseline the run asked for and will never score, so that
    the headline never drops one without a word."""
    asked = sorted(
        str(entry["label"])
        for entry in run.config.get("baselines") or ()
        if entry.get("spec") is None
    )
    cots = {cot_baseline(run.model).spec_hash, cot_baseline(run.model, interactive=True).spec_hash}
    if holdout is None or not asked:
        return ()
    if holdout.agent_hash in cots:
        return tuple(
            (label, "the winner is chain of thought itself, its own cost-matched baseline")
            for label in asked
        )
    cot = next((v for v in verdicts if v.label == "cot"), None)
    if "cot-sc" not in asked or cot is None or any(v.label.startswith("cot-sc") for v in verdicts):
        return ()
    if cot.baseline_hash != cot_baseline(run.model).spec_hash:
        return (("cot-sc", "self-consistency cannot play an environment"),)
    cost_matched = cot_sc_baseline(
        run.model, winner_tokens=cot.winner_tokens, cot_tokens=cot.baseline_tokens
    )
    if cost_matched is not None:  # it will be scored: the holdout is still running
        return ()
    why = (
        f"the winner uses {cot.token_ratio:.2f}x CoT's tokens per item ({cot.winner_tokens:,.0f} "
        f"vs {cot.baseline_tokens:,.0f}), too few for the {_SC_SAMPLES[0]} samples "
        "self-consistency needs (an odd count, so that its vote cannot tie between two answers), "
        "so CoT is the cost-matched baseline"
    )
    return (("cot-sc", why),)


@dataclass(frozen=True)
class HoldoutChoice:
    """A design chosen among those scored on the holdout by its *selection* items alone, and its
    score on the other holdout items (the *final test*), which the choice never looked at. The
    recorded winner stays the run's winner: this answers a user who picks on held-out data."""

    chosen_hash: str
    n_candidates: int
    n_selection: int
    selection_mean: float
    final: ScoreSummary

    def sentence(self) -> str:
        f = self.final
        return (
            f"chosen on {self.n_selection} holdout selection items among {self.n_candidates} "
            f"designs: {self.chosen_hash[:10]} ({self.selection_mean:.2f} there); its final-test "
            f"score on the other {f.n} holdout items: {f.mean:.3f} [{f.ci_low:.2f}, "
            f"{f.ci_high:.2f}] ({f.method}, n = {f.n})"
        )


def check_selection(n_selection: int, *, n_holdout: int) -> None:
    """Refuses a selection part that leaves no final-test items (or has none itself)."""
    if not 0 < n_selection < n_holdout:
        raise AgentDesignError(
            f"--select-on must leave final-test items: between 1 and {n_holdout - 1} of the "
            f"{n_holdout} holdout items, got {n_selection}"
        )


def holdout_choice(archive: Archive, run_name: str, *, n_selection: int) -> HoldoutChoice:
    """Chooses among the run's holdout-scored designs (the winner and the exploratory ones) on
    the first `n_selection` holdout items, in the run's stored order; reads, spends nothing."""
    run = archive.get_run(run_name)
    holdout_ids = list(run.holdout_task_ids)
    check_selection(n_selection, n_holdout=len(holdout_ids))
    roles = archive.run_roles(run_name)
    scored = [
        e
        for e in archive.run_evaluations(run_name, split="holdout")
        if e.status == "complete" and roles.get(e.id) in ("winner", "exploratory")
    ]
    if len(scored) < 2:
        raise AgentDesignError(
            f"run {run_name!r} has {len(scored)} design(s) scored on the holdout: choosing "
            "among them needs 2 or more (finalize --top 2 or more)"
        )
    selection, final = holdout_ids[:n_selection], holdout_ids[n_selection:]
    rows = {e.agent_hash: _by_task(archive, e) for e in scored}

    def selection_mean(evaluation: EvaluationRecord) -> float:
        return float(np.mean([rows[evaluation.agent_hash][t] for t in selection]))

    # ties go to the recorded winner, then to the fewer tokens per item
    chosen = min(
        scored,
        key=lambda e: (-selection_mean(e), roles.get(e.id) != "winner", e.tokens_per_item),
    )
    return HoldoutChoice(
        chosen_hash=chosen.agent_hash,
        n_candidates=len(scored),
        n_selection=n_selection,
        selection_mean=selection_mean(chosen),
        final=summarize([rows[chosen.agent_hash][t] for t in final], seed=run.split_seed),
    )


def _baseline_labels(run: RunRecord, hashes: Sequence[str], archive: Archive) -> dict[str, str]:
    """Spec hash -> the baseline's name: a user's baseline by the label stored with the run, a
    built-in one by recognising its spec."""
    labels = {
        AgentSpec.from_dict(entry["spec"]).spec_hash: str(entry["label"])
        for entry in run.config.get("baselines") or ()
        if entry.get("spec") is not None
    }
    cots = {cot_baseline(run.model).spec_hash, cot_baseline(run.model, interactive=True).spec_hash}
    for spec_hash in hashes:
        if spec_hash in labels:
            continue
        spec = AgentSpec.from_dict(archive.get_agent(spec_hash).spec)
        if spec_hash in cots:
            labels[spec_hash] = "cot"
        elif spec["workflow"].name == "self_consistency":
            samples = int(spec.to_flat()["workflow__n_samples"])
            # scored so by a version that allowed even votes: say what such a vote is
            even = ", an even vote whose ties go to the first sample" if samples % 2 == 0 else ""
            labels[spec_hash] = f"cot-sc(n={samples}{even})"
    return labels


def _by_task(archive: Archive, evaluation: EvaluationRecord) -> dict[str, float]:
    return {task: outcome.score for task, outcome in archive.task_results(evaluation.id).items()}


def _scores(archive: Archive, evaluation: EvaluationRecord) -> Sequence[float]:
    """Scores in the evaluation's task order (sorted ids), the same for every agent paired."""
    by_task = _by_task(archive, evaluation)
    return [by_task[t] for t in evaluation.task_ids]
