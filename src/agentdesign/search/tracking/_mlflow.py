"""A copy of a run in MLflow (docs/mlflow.md): one MLflow run per agentdesign run, a child run
per evaluation of a design, and the verdict on the parent at the end.

The archive is the source of truth; MLflow gets a copy. Once `connect_mlflow` has checked the
tracking server, the copy never stops or fails the run: every MLflow call runs on a thread of its
own, in order, and the first one that fails ends the copy for this process with one warning line.
Each time the engine says an evaluation finished, the copy looks at what the archive holds and
sends what it has not sent, so a resumed run, or `agentdesign resume` after the server came back,
fills in what is missing without sending anything twice: the parent run is found again by a tag
naming the archive and the run, and a child by the evaluation's id.
"""

from __future__ import annotations

import atexit
import contextlib
import getpass
import hashlib
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from functools import partial
from importlib import metadata
from typing import Any

from agentdesign.components import AgentDesignError, AgentSpec
from agentdesign.search.tracking._connection import WAIT_S, MlflowConnection, reason
from agentdesign.search.tracking._content import (
    EVALUATION_TAG,
    RUN_KEY_TAG,
    Child,
    archive_address,
    as_child,
    config_params,
    finite,
    verdict_fields,
)
from agentdesign.search.tracking._tracking import RunOutcome, TrackedRun

__all__ = ["MlflowTracking"]

_BATCH = 100  # parameters, or tags, MLflow takes in one call
_BATCH_ALL = 1000  # metrics, parameters and tags together
# MLflow's run statuses for how this process's part of the run ended.
_STATUS: Mapping[RunOutcome, str] = {
    "finished": "FINISHED",
    "stopped": "FINISHED",
    "failed": "FAILED",
    "interrupted": "KILLED",
}


class _Sender:
    """Runs MLflow calls on one thread of its own, in the order given; after the first that
    fails (`failure` says why), the rest are dropped."""

    def __init__(self) -> None:
        # (a call, or a drain's mark to set once the calls before it are done)
        self._jobs: queue.Queue[Callable[[], None] | threading.Event] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.failure: str | None = None

    def submit(self, job: Callable[[], None]) -> None:
        if self.failure is not None:
            return
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._work, name="agentdesign-mlflow", daemon=True
            )
            self._thread.start()
        self._jobs.put(job)

    def drain(self, wait_s: float) -> None:
        """Waits up to `wait_s` for every call given so far; past that, the copy stops."""
        if self._thread is None or self.failure is not None:
            return
        done = threading.Event()
        self._jobs.put(done)
        if not done.wait(wait_s) and self.failure is None:
            self.failure = f"no answer within {wait_s:g} s"

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if isinstance(job, threading.Event):
                job.set()
            elif self.failure is None:
                try:
                    job()
                except Exception as exc:
                    self.failure = reason(exc)


class MlflowTracking:
    """The run of `context` copied into MLflow (a `RunTracking`): a parent run named after it, a
    child run per evaluation the run holds, the verdict on the parent when the run finishes."""

    def __init__(self, connection: MlflowConnection, context: TrackedRun) -> None:
        self.connection = connection
        self.context = context
        self._sender = _Sender()
        self._parent_id: str | None = None  # set and read on the sender's thread only
        self._opened = False
        self._sent: set[int] = set()  # evaluation ids given to the sender
        self._best: tuple[int, float] = (0, -math.inf)  # candidates sent, best mean among them
        self._warned = False
        self._at_exit = False

    # -- what the engine tells it --

    def run_started(self) -> None:
        if self._stopped():
            return
        with self._guarded():
            if self._opened:  # a second search in this process: running again
                self._sender.submit(partial(self._set_status, "RUNNING"))
            self._open()
            self._sync()

    def evaluated(self) -> None:
        if self._stopped():
            return
        with self._guarded():
            self._open()
            self._sync()

    def run_ended(self, outcome: RunOutcome) -> None:
        if self._stopped():
            return
        with self._guarded():
            self._open()
            self._sync()
            ctx = self.context
            run = ctx.archive.get_run(ctx.run.name)
            totals = ctx.archive.run_totals(run.name)
            spent = {
                "run.agents": totals.n_finished,
                "run.tokens": totals.prompt_tokens + totals.completion_tokens,
                "run.cost_usd": totals.cost,
                "run.minutes": run.elapsed_s / 60,
            }
            self._sender.submit(partial(self._log_parent, metrics=finite(spent)))
            if run.status == "finished" and run.winner_hash is not None:
                metrics, tags, text = verdict_fields(ctx.archive, run.name)
                self._sender.submit(partial(self._log_parent, metrics=metrics, tags=tags))
                self._sender.submit(partial(self._log_text, text, "verdict.txt"))
            self._sender.submit(partial(self._set_status, _STATUS[outcome]))
        self._sender.drain(WAIT_S)
        if self._at_exit:
            atexit.unregister(self._sender.drain)
            self._at_exit = False
        self._warn()

    # -- on the engine's thread: what to send --

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        """The copy never stops the run: an error in it (reading the archive included) ends the
        copy, with its warning."""
        try:
            yield
        except Exception as exc:
            if self._sender.failure is None:
                self._sender.failure = reason(exc)
        self._warn()

    def _stopped(self) -> bool:
        """Whether the copy has ended (said once, by its warning): then nothing more is sent."""
        self._warn()
        return self._sender.failure is not None

    def _warn(self) -> None:
        failure = self._sender.failure
        if failure is None or self._warned:
            return
        self._warned = True
        name = self.context.run.name
        self.context.reporter.warning(
            f"warning: MLflow logging stopped ({self.connection.uri}: {failure}); the search "
            f"goes on and the archive keeps every result: `agentdesign resume {name}` logs "
            "what is missing to the same MLflow run"
        )

    def _open(self) -> None:
        """Finds the run's parent in MLflow, or makes it, before anything else is sent; until
        `run_ended`, what was given is sent when the process exits too."""
        if not self._at_exit:
            atexit.register(self._sender.drain, WAIT_S)
            self._at_exit = True
        if self._opened:
            return
        self._opened = True
        run = self.context.run
        archive = archive_address(self.context.archive)
        key = hashlib.sha256(f"{archive}\n{run.name}".encode()).hexdigest()[:32]
        try:
            version = metadata.version("agentdesign")
        except metadata.PackageNotFoundError:  # run from a source tree
            version = "unknown"
        tags = {
            RUN_KEY_TAG: key,
            "agentdesign.run": run.name,
            "agentdesign.archive": archive,
            "agentdesign.version": version,
            "agentdesign.benchmark": run.benchmark,
            "mlflow.source.name": "agentdesign",
            "mlflow.source.type": "LOCAL",
        }
        with contextlib.suppress(Exception):  # no user name on this machine: no tag
            tags["mlflow.user"] = getpass.getuser()
        params = config_params(run.config) | {
            "search_items": str(len(run.search_task_ids)),
            "holdout_items": str(len(run.holdout_task_ids)),
        }
        self._sender.submit(partial(self._find_or_make_parent, key, tags, params, run.config))

    def _sync(self) -> None:
        """Sends the run's finished evaluations not sent yet, oldest first."""
        archive = self.context.archive
        roles = archive.run_roles(self.context.run.name)
        for evaluation_id in sorted(set(roles) - self._sent):
            evaluation = archive.get_evaluation(evaluation_id)
            if evaluation.status not in ("complete", "pruned"):
                continue
            self._sent.add(evaluation_id)
            spec = AgentSpec.from_dict(archive.get_agent(evaluation.agent_hash).spec)
            role = roles[evaluation_id]
            child = as_child(evaluation, spec, role)
            if role == "candidate" and evaluation.mean is not None:
                n, best = self._best
                self._best = n + 1, max(best, evaluation.mean)
                child = replace(child, best=self._best)
            self._sender.submit(partial(self._log_child, child))

    # -- on the sender's thread: the MLflow calls --

    @property
    def _client(self) -> Any:
        return self.connection.client

    @property
    def _parent(self) -> str:
        # always set: the parent's call comes first, and a failure there drops the rest
        if self._parent_id is None:
            raise AgentDesignError("no MLflow parent run")
        return self._parent_id

    def _find_or_make_parent(
        self,
        key: str,
        tags: Mapping[str, str],
        params: Mapping[str, str],
        config: Mapping[str, Any],
    ) -> None:
        experiment = self.connection.experiment_id
        found = self._client.search_runs(
            [experiment],
            filter_string=f"tags.`{RUN_KEY_TAG}` = '{key}'",
            max_results=1,
            order_by=["attributes.start_time ASC"],
        )
        if found:  # a resumed run, or another worker's
            self._parent_id = str(found[0].info.run_id)
            self._set_status("RUNNING")
            missing = {k: v for k, v in params.items() if k not in found[0].data.params}
            if not missing:
                return
            params = missing  # made when the server went away: finished now
        else:
            made = self._client.create_run(
                experiment, tags=dict(tags), run_name=tags["agentdesign.run"]
            )
            self._parent_id = str(made.info.run_id)
        self._log(self._parent_id, params=params)
        self._client.log_dict(self._parent_id, dict(config), "config.json")

    def _set_status(self, status: str) -> None:
        if status == "RUNNING":
            self._client.update_run(self._parent, status)
        else:
            self._client.set_terminated(self._parent, status)

    def _log_text(self, text: str, name: str) -> None:
        self._client.log_text(self._parent, text, name)

    def _log_parent(
        self,
        *,
        metrics: Mapping[str, float] | None = None,
        tags: Mapping[str, str] | None = None,
        step: int = 0,
    ) -> None:
        self._log(self._parent, metrics=metrics, tags=tags, step=step)

    def _log_child(self, child: Child) -> None:
        parent = self._parent
        there = self._client.search_runs(
            [self.connection.experiment_id],
            filter_string=(
                f"tags.`mlflow.parentRunId` = '{parent}' and "
                f"tags.`{EVALUATION_TAG}` = '{child.evaluation_id}'"
            ),
            max_results=1,
        )
        if there and there[0].info.status == "FINISHED":  # sent by an earlier process, or
            return  # by another worker; one left unfinished (the server went away) is finished
        if there:
            run_id = str(there[0].info.run_id)
        else:
            run = self._client.create_run(
                self.connection.experiment_id,
                start_time=child.start_ms,
                tags={**child.tags, "mlflow.parentRunId": parent},
                run_name=child.name,
            )
            run_id = str(run.info.run_id)
        self._log(run_id, metrics=child.metrics, params=child.params)
        self._client.set_terminated(run_id, "FINISHED", end_time=child.end_ms)
        if child.best is not None:
            step, best = child.best
            self._log(parent, metrics={"search.best_mean": best}, step=step)

    def _log(
        self,
        run_id: str,
        *,
        metrics: Mapping[str, float] | None = None,
        params: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
        step: int = 0,
    ) -> None:
        """Logs in as few calls as MLflow's limits on one call allow."""
        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        values = [Metric(k, v, now, step) for k, v in (metrics or {}).items()]
        settings = [Param(k, v) for k, v in (params or {}).items()]
        marks = [RunTag(k, v) for k, v in (tags or {}).items()]
        while values or settings or marks:
            some_settings, settings = settings[:_BATCH], settings[_BATCH:]
            some_marks, marks = marks[:_BATCH], marks[_BATCH:]
            room = _BATCH_ALL - len(some_settings) - len(some_marks)
            some_values, values = values[:room], values[room:]
            self._client.log_batch(
                run_id, metrics=some_values, params=some_settings, tags=some_marks
            )
