"""The optuna study under a strategy: a run's history read from its trials, a proposal enqueued
as a trial, and a trial's partial mean reported where racing can prune it."""

from __future__ import annotations

from collections.abc import Sequence

import optuna

from agentdesign.components import AgentSpec
from agentdesign.search.strategies._base import History, Strategy, Trial
from agentdesign.search.valuemodel import Labelled

__all__ = ["ask_trial", "history_from_study", "report_items"]


def history_from_study(
    study: optuna.Study,
    *,
    description: str,
    prior: Sequence[Labelled] = (),
) -> History:
    """A run's history as its study stores it: every trial with a spec, failed ones left out."""
    states = {
        optuna.trial.TrialState.COMPLETE: "complete",
        optuna.trial.TrialState.PRUNED: "pruned",
        optuna.trial.TrialState.RUNNING: "running",
        optuna.trial.TrialState.WAITING: "running",
    }
    trials = []
    for trial in study.get_trials(deepcopy=False):
        spec_json = trial.user_attrs.get("spec")
        if spec_json is None or trial.state not in states:
            continue
        values = trial.values or []
        if not values and trial.last_step is not None:  # pruned: the mean when it was stopped
            values = [trial.intermediate_values[trial.last_step]]
        trials.append(
            Trial(
                spec=AgentSpec.from_json(spec_json),
                state=states[trial.state],
                score=values[0] if values else None,
                tokens_per_item=values[1] if len(values) > 1 else None,
                parents=tuple(trial.user_attrs.get("parents", ())),
                operator=trial.user_attrs.get("operator"),
                n_items=trial.last_step,
            )
        )
    return History(
        description=description,
        trials=tuple(trials),
        prior=tuple(prior),
    )


def report_items(trial: optuna.Trial, mean: float, n_items: int) -> None:
    """Records a single-objective trial's mean on the `n_items` search items it was scored on, as
    its intermediate value at step `n_items`: a pruned trial keeps its partial mean (optuna's TPE
    and the value model learn from it) and every trial its item count. A no-op for two objectives,
    which optuna cannot report and racing never prunes."""
    if len(trial.study.directions) == 1:
        trial.report(mean, step=n_items)


def ask_trial(study: optuna.Study, strategy: Strategy, history: History) -> optuna.Trial:
    """A new trial of `study` holding the strategy's proposal, or the sampler's when it has none.

    The proposal is enqueued with its parents and operator as user attributes, so the trial, and
    not this process, remembers where the design came from.
    """
    proposal = strategy.propose(history)
    if proposal is not None:
        study.enqueue_trial(
            strategy.space.trial_params(proposal.spec), user_attrs=proposal.user_attrs()
        )
    return study.ask()
