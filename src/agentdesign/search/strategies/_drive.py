"""Driving a strategy without the live loop: ask it for designs through an in-memory optuna study
and tell it each evaluation, as the live loop does. The conformance check uses it, and so do the
benchmarks that replay strategies against recorded tables and simulated worlds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import optuna

from agentdesign.components import AgentSpec
from agentdesign.search.strategies._base import History, Proposal, Strategy
from agentdesign.search.strategies._optuna import ask_trial, history_from_study, report_items

__all__ = ["Evaluate", "Evaluated", "drive"]


@dataclass(frozen=True)
class Evaluated:
    """One evaluation as a replay records it: the design actually evaluated (a table maps the
    proposal to its nearest design), its score on each item it got, and the tokens it used.

    `complete` is False for a design stopped before it got every item (racing): the study is told
    it was pruned, as the live loop tells it."""

    spec: AgentSpec
    scores: tuple[float, ...]
    tokens: int
    complete: bool = True

    @property
    def mean(self) -> float:
        return sum(self.scores) / len(self.scores)


# Evaluates a proposed design given the run's history; None when nothing is left to evaluate.
Evaluate = Callable[[AgentSpec, History], Evaluated | None]


def drive(
    strategy: Strategy,
    evaluate: Evaluate,
    *,
    description: str,
    stop: Callable[[Sequence[Evaluated]], bool],
) -> list[Evaluated]:
    """Asks `strategy` for designs through an in-memory study (as the live loop does) and tells it
    each evaluation, until `stop` says so or `evaluate` has nothing left.

    A design evaluated as proposed is told on its own trial; one that `evaluate` replaced (a
    table's nearest design) on a trial of its own, with its own parameters (`_record`).
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=strategy.sampler(), directions=strategy.directions())
    done: list[Evaluated] = []
    while not stop(done):
        history = history_from_study(study, description=description)
        trial = ask_trial(study, strategy, history)
        proposed = strategy.space.suggest(trial)
        result = evaluate(proposed, history)
        if result is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            break
        values = [result.mean]
        if strategy.objective == "score-cost":
            values.append(result.tokens / len(result.scores))
        if result.spec.spec_hash != proposed.spec_hash:
            _record(study, strategy, trial, result.spec, values)
        else:
            trial.set_user_attr("spec", proposed.to_json())
            report_items(trial, result.mean, len(result.scores))
            if result.complete:
                study.tell(trial, values)
            else:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        done.append(result)
    return done


def _record(
    study: optuna.Study,
    strategy: Strategy,
    proposal: optuna.Trial,
    spec: AgentSpec,
    values: list[float],
) -> None:
    """Records `spec` with `values` as a trial of its own: its parameters and distributions as
    `suggest` asks for them, the proposal's parents and operator, and the proposal's system
    attributes (NSGA-II's generation, which a trial with fixed parameters would never get). The
    proposal's trial fails, so no sampler learns from it."""
    study.tell(proposal, state=optuna.trial.TrialState.FAIL)
    fixed = optuna.trial.FixedTrial(strategy.space.trial_params(spec))
    strategy.space.suggest(cast(optuna.Trial, fixed))  # the same suggest calls, on fixed values
    origin = Proposal(
        spec=spec,
        parents=tuple(proposal.user_attrs.get("parents", ())),
        operator=proposal.user_attrs.get("operator") or "sample",
    )
    study.add_trial(
        optuna.trial.create_trial(
            params=fixed.params,
            distributions=fixed.distributions,
            values=values,
            user_attrs={**origin.user_attrs(), "spec": spec.to_json()},
            system_attrs=study.get_trials(deepcopy=False)[proposal.number].system_attrs,
        )
    )
