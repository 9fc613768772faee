"""Many workers on one run: each holds its trials with a heartbeat, a dead worker's trial is failed
and queued again with the same design, and the holdout confirmation waits for the live ones.

Any number of worker processes may drive one run on PostgreSQL (SQLite: one at a time). A trial
whose heartbeat stops is failed and queued again (optuna's RetryHeartbeatStaleTrialCallback), and
the evaluation lease in the archive makes sure no task is paid twice. So is a trial left without
any heartbeat, by a worker killed between starting it and its first heartbeat (see `TrialStorage`).

Workers ask for trials one at a time (`TrialStorage.asking`), so that optuna's constant liar sees
every design the others run; it makes those designs less likely, not impossible, so a trial that
draws one anyway is failed and asked again with a design at random that none of them runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress

import numpy as np
import optuna

from agentdesign.archive import Archive, Heartbeat, TrialStorage
from agentdesign.components import AgentSpec
from agentdesign.search.strategies import Proposal
from agentdesign.search.study._context import RunContext

__all__ = ["DEFAULT_HEARTBEAT_S", "GRACE_BEATS", "WorkerTrials", "trial_storage"]

# Seconds between a worker's heartbeats; a trial or an evaluation lease unrenewed for
# GRACE_BEATS of them belongs to a dead worker and is taken over.
DEFAULT_HEARTBEAT_S = 10
GRACE_BEATS = 3
# Designs drawn at random, at most, for one that no other worker runs.
_REDRAWS = 200


def trial_storage(archive: Archive, heartbeat_s: int) -> TrialStorage:
    """The run's optuna storage, with trial heartbeats every `heartbeat_s` seconds."""
    return archive.study_storage(
        heartbeat_interval=heartbeat_s,
        grace_period=heartbeat_s * GRACE_BEATS,
        stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(),
    )


class WorkerTrials:
    """This worker's part in sharing the run's trials (`study`, kept in `storage`): the trials it
    holds, beating for each, and those of dead workers, failed and queued again."""

    def __init__(self, context: RunContext, study: optuna.Study, storage: TrialStorage) -> None:
        self.context = context
        self.study = study
        self.storage = storage
        self.owned: set[int] = set()  # the numbers of this worker's trials
        self._unbeaten_since: dict[int, float] = {}  # trial id: when first seen without heartbeat

    @property
    def heartbeat_s(self) -> int:
        return self.context.heartbeat_s

    def reclaim_stale(self) -> None:
        """Fails the trials of dead workers and queues each again (as a WAITING trial).

        On PostgreSQL a trial is dead once its heartbeat is older than the grace period. A SQLite
        archive has one writing process, this one, so any trial it does not hold is dead.
        """
        if not self.context.archive.single_writer:
            self._fail_dead_trials()
            return
        retry = self.storage.get_heartbeat_stale_trial_callback()
        assert retry is not None
        for stale in self.study.get_trials(states=(optuna.trial.TrialState.RUNNING,)):
            if stale.number not in self.owned:
                self.study.tell(stale.number, state=optuna.trial.TrialState.FAIL)
                retry(self.study, stale)

    def _fail_dead_trials(self) -> None:
        """Fails the trials of dead workers on PostgreSQL and queues each again: those whose
        heartbeat is older than the grace period (optuna's rule), and those this worker has seen
        running without any heartbeat for the grace period, whose worker died between starting
        them and their first heartbeat. optuna never fails those, and the confirmation would wait
        for them for ever. They are timed on this worker's clock, as nothing of theirs in the
        database tells their age on the database's clock (optuna writes start times by the
        starting worker's clock, in its time zone)."""
        optuna.storages.fail_stale_trials(self.study)
        now = time.monotonic()
        unbeaten = self.storage.running_without_heartbeat(self.study.study_name)
        self._unbeaten_since = {
            trial_id: self._unbeaten_since.get(trial_id, now)
            for trial_id, number in unbeaten.items()
            if number not in self.owned
        }
        retry = self.storage.get_heartbeat_stale_trial_callback()
        for trial_id, since in self._unbeaten_since.items():
            if now - since < self.heartbeat_s * GRACE_BEATS:
                continue
            try:
                self.storage.set_trial_state_values(trial_id, state=optuna.trial.TrialState.FAIL)
            except optuna.exceptions.UpdateFinishedTrialError:
                continue  # another worker failed it just now, and queues it again
            if retry is not None:
                retry(self.study, self.storage.get_trial(trial_id))

    def apart_from_others(
        self, trial: optuna.Trial, spec: AgentSpec
    ) -> tuple[optuna.Trial, AgentSpec]:
        """`trial` and its design, unless another worker runs that design now (optuna's constant
        liar makes that less likely, not impossible): then `trial` is failed, and a new one asked
        with a design at random that no other worker runs, as a strategy that proposes a known
        design falls back to one. Called under the ask lock, where the running designs stand
        still. SQLite has no other worker."""
        if self.context.archive.single_writer:
            return trial, spec
        running = {
            t.user_attrs.get("spec")
            for t in self.study.get_trials(
                deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)
            )
            if t.number not in self.owned
        }
        if spec.to_json() not in running:
            return trial, spec
        self.finish(trial.number, state=optuna.trial.TrialState.FAIL)
        rng = np.random.default_rng([self.context.resolved.strategy.seed, trial.number])
        for _ in range(_REDRAWS):
            drawn = self.context.resolved.space.sample(rng)
            if drawn.to_json() not in running:
                break
        proposal = Proposal(spec=drawn, operator="sample")
        space = self.context.resolved.space
        self.study.enqueue_trial(space.trial_params(drawn), user_attrs=proposal.user_attrs())
        trial = self.study.ask()  # the one just queued: no other worker asks meanwhile
        self.owned.add(trial.number)
        self.storage.record_heartbeat(trial._trial_id)
        return trial, self.context.resolved.space.suggest(trial)

    def wait_for_others(self) -> None:
        """Waits until no other live worker holds a trial of this run, so that the holdout
        confirmation ranks the final leaderboard; a dead worker's trial stops counting once its
        heartbeat is stale. Every worker then confirms; the leases make them share the work."""
        if self.context.archive.single_writer:
            return
        while True:
            self._fail_dead_trials()
            running = self.study.get_trials(
                deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)
            )
            if all(t.number in self.owned for t in running):
                return
            time.sleep(self.heartbeat_s)

    @contextmanager
    def heartbeat(self, trial: optuna.Trial) -> Iterator[None]:
        beat = lambda: self.storage.record_heartbeat(trial._trial_id)  # noqa: E731
        with Heartbeat(interval_s=self.heartbeat_s, beat=beat):
            yield

    def finish(
        self,
        number: int,
        values: Sequence[float] | None = None,
        *,
        state: optuna.trial.TrialState | None = None,
    ) -> None:
        """Tells optuna how a trial ended, unless another worker has failed it meanwhile: this one
        was held up past its heartbeat, and that worker retries the design as a new trial
        (`evaluate_agent` has logged the takeover), so there is nothing left to tell."""
        with suppress(optuna.exceptions.UpdateFinishedTrialError):  # failed just now
            self.study.tell(number, values, state=state, skip_if_finished=True)
