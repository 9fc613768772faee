"""optuna's storage of a run's trials, with a trial's first heartbeat at the moment it starts.

optuna judges a running trial dead by its heartbeat alone and never judges one that has none. A
worker that records the first heartbeat only after `Study.ask` returns leaves the trial without
one while the sampler runs; killed then, it leaves a trial RUNNING for ever, and every worker that
waits for the others (`search._workers`) waits for it for ever. Here the first heartbeat comes
with the trial's start, before the sampler runs, so a trial that lacks one for long is one whose
worker died between those two commits; `running_without_heartbeat` finds them.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.storages._rdb.models import StudyModel, TrialHeartbeatModel, TrialModel
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import exists, select

from agentdesign.archive._outage import DatabaseOutage, riding

__all__ = ["TrialStorage"]


class TrialStorage(optuna.storages.RDBStorage):
    """`RDBStorage` that records a trial's first heartbeat as soon as the trial starts running,
    whether created running (`Study.ask`) or popped from the queue of waiting trials, and rides
    through a database outage as the archive does (`outage`, the archive's): optuna's own
    methods (each one transaction) are wrapped below."""

    def __init__(self, url: str, *, outage: DatabaseOutage, **kwargs: Any) -> None:
        self._outage = outage
        super().__init__(url, engine_kwargs={"pool_pre_ping": True}, **kwargs)
        if self.engine.dialect.name != "sqlite":  # a server's, as the archive's
            outage.listen(self.engine)

    # optuna's cached storage (what a study uses) creates trials through this private method
    # (checked with optuna 5.0.0, pinned); a test checks a started trial has its heartbeat.
    def _create_new_trial(
        self, study_id: int, template_trial: FrozenTrial | None = None
    ) -> FrozenTrial:
        trial = super()._create_new_trial(study_id, template_trial)
        if trial.state == TrialState.RUNNING:
            self._first_heartbeat(trial._trial_id)
        return trial

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        changed = super().set_trial_state_values(trial_id, state, values)
        if changed and state == TrialState.RUNNING:  # popped from the waiting trials
            self._first_heartbeat(trial_id)
        return changed

    def _first_heartbeat(self, trial_id: int) -> None:
        if self.heartbeat_interval is not None:
            self.record_heartbeat(trial_id)

    def running_without_heartbeat(self, study_name: str) -> dict[int, int]:
        """The id and number of each running trial of study `study_name` without a heartbeat."""
        beat = select(TrialHeartbeatModel.trial_id).where(
            TrialHeartbeatModel.trial_id == TrialModel.trial_id
        )
        query = (
            select(TrialModel.trial_id, TrialModel.number)
            .join(StudyModel, StudyModel.study_id == TrialModel.study_id)
            .where(
                StudyModel.study_name == study_name,
                TrialModel.state == TrialState.RUNNING,
                ~exists(beat),
            )
        )
        with self.engine.connect() as conn:
            return {trial_id: number for trial_id, number in conn.execute(query)}


# The storage's methods that reach the database, each one transaction: its public ones, and the
# private ones that optuna's cached storage and `fail_stale_trials` call (checked with optuna
# 5.0.0, pinned).
_CALLED_FROM_OUTSIDE = {
    "_create_new_trial",
    "_get_best_trial_id",
    "_get_stale_trial_ids",
    "_get_trials",
    "_set_trial_param",
}
for _name in {
    name
    for name, member in [*vars(optuna.storages.RDBStorage).items(), *vars(TrialStorage).items()]
    if inspect.isfunction(member) and (not name.startswith("_") or name in _CALLED_FROM_OUTSIDE)
}:
    setattr(TrialStorage, _name, riding(getattr(TrialStorage, _name)))
