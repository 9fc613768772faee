"""optuna's storage of a run's trials, with a trial's first heartbeat at the moment it starts.

optuna judges a running trial dead by its heartbeat alone and never judges one that has none. A
worker that records the first heartbeat only after `Study.ask` returns leaves the trial without
one while the sampler runs; killed then, it leaves a trial RUNNING for ever, and every worker that
waits for the others (`search._workers`) waits for it for ever. Here the first heartbeat comes
with the trial's start, before the sampler runs, so a trial that lacks one for long is one whose
worker died between those two commits; `running_without_heartbeat` finds them.

Workers on PostgreSQL ask for trials one at a time (`asking`), so that each sampler sees the
trials the others asked for with their parameters, as optuna's constant liar needs: two workers
sampling at once each see the other's new trial without parameters, and may both draw the same
design.
"""

from __future__ import annotations

import inspect
import logging
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import optuna
from optuna.storages._rdb.models import StudyModel, TrialHeartbeatModel, TrialModel
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import Connection, exists, select, text
from sqlalchemy.exc import DBAPIError, OperationalError

from agentdesign.archive.database._outage import DatabaseOutage, riding

__all__ = ["TrialStorage"]

log = logging.getLogger(__name__)

# The advisory locks of asking, one per study: this prefix ("ask") and the study name's CRC-32.
_ASK_LOCK_PREFIX = 0x61_73_6B << 32


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

    @contextmanager
    def asking(self, study_name: str, *, wait_s: float) -> Iterator[None]:
        """Holds study `study_name`'s ask lock for the block, in which a worker asks the sampler
        for a trial and writes its parameters; the other workers' asks wait (SQLite: one writer,
        no lock). A worker that cannot have the lock within `wait_s` seconds (its holder is held
        up, say stopped) asks without it, with one line in the log."""
        if self.engine.dialect.name == "sqlite":
            yield
            return
        key = _ASK_LOCK_PREFIX | zlib.crc32(study_name.encode())

        def lock() -> Connection | None:
            conn = self.engine.connect()
            try:
                conn.begin()  # held open for the block: the lock is the transaction's
                conn.execute(text(f"SET LOCAL lock_timeout = {max(1, int(wait_s * 1000))}"))
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
            except OperationalError as err:
                conn.close()
                if "lock timeout" not in str(err.orig):
                    raise
                return None
            except BaseException:
                conn.close()
                raise
            return conn

        held = self._outage.ride(lock)
        if held is None:
            log.warning(
                "another worker has held the ask lock of %s for %g s: asking without it",
                study_name,
                wait_s,
            )
        try:
            yield
        finally:
            if held is not None:
                with suppress(DBAPIError):  # a dropped connection dropped its lock with it
                    held.rollback()
                held.close()

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
