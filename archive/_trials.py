"""optuna's storage of a run's trials, with a trial's first heartbeat at the moment it starts.

optuna judges a running trial dead by its heartbeat alone and never judges one that has none. A
worker that records the first heartbeat only after `Study.ask` returns leaves the trial without
one while the sampler runs; killed then, it leaves a trial RUNNING for ever, and every worker that
waits for the others (`search._workers`) waits for it for ever. Here the first heartbeat comes
with the trial's start, before the sampler runs, so a trial that lacks one for long is one whose
worker died between those two commits; `running_without_heartbeat` finds them.
"""

from __future__ import annotations

from collections.abc import Sequence

import optuna
from optuna.storages._rdb.models import StudyModel, TrialHeartbeatModel, TrialModel
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import exists, select

__all__ = ["TrialStorage"]


class TrialStorage(optuna.storages.RDBStorage):
    """`RDBStorage` that records a trial's first heartbeat as soon as the trial starts running,
    whether created running (`Study.ask`) or popped from the queue of waiting trials."""

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
