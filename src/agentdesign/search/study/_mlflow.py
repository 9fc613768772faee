"""A copy of a run in MLflow (docs/mlflow.md): one MLflow run per agentdesign run, a child run
per evaluation of a design, and the verdict on the parent at the end.

Off unless asked for: `AGENTDESIGN_MLFLOW=1`, with MLflow's own variables (`MLFLOW_TRACKING_URI`,
`MLFLOW_EXPERIMENT_NAME` or `MLFLOW_EXPERIMENT_ID`, its credentials and HTTP settings) saying where
to. Until then nothing here imports mlflow (the optional `mlflow` extra).

The archive is the source of truth; MLflow gets a copy. `connect_mlflow` checks the setting and the
tracking server before the run starts (a bad one stops the command in one line, before anything
is stored); after that the copy never stops or fails the run: every MLflow call runs on a thread
of its own, in order, and the first one that fails ends the copy for this process with one
warning line. Each time the engine says an evaluation finished, the copy looks at what the
archive holds and sends what it has not sent, so a resumed run, or `agentdesign resume` after the
server came back, fills in what is missing without sending anything twice: the parent run is
found again by a tag naming the archive and the run, and a child by the evaluation's id.
"""

from __future__ import annotations

import atexit
import contextlib
import getpass
import hashlib
import json
import math
import os
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import make_url

from agentdesign.archive import Archive, EvaluationRecord
from agentdesign.components import AgentDesignError, AgentSpec
from agentdesign.search.config import holdout_reuse
from agentdesign.search.study._context import RunContext
from agentdesign.search.study._tracking import RunOutcome
from agentdesign.search.verdict import run_verdict

__all__ = ["MLFLOW_ENV", "MlflowConnection", "MlflowTracking", "connect_mlflow"]

MLFLOW_ENV = "AGENTDESIGN_MLFLOW"
_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"", "0", "false", "no", "off"})
# Seconds a run waits for the tracking server: for its first answer before the run starts, and at
# the end for what is left to send (a copy that waited so long stops, with its warning).
WAIT_S = 30.0
_CONNECT_S = 5.0  # seconds to open a connection to the server's port, before its first answer
_MAX_VALUE = 6000  # the longest parameter value MLflow takes: a longer one is cut, marked "…"
_BATCH = 100  # parameters, or tags, MLflow takes in one call
_BATCH_ALL = 1000  # metrics, parameters and tags together
# MLflow's run statuses for how this process's part of the run ended.
_STATUS: Mapping[RunOutcome, str] = {
    "finished": "FINISHED",
    "stopped": "FINISHED",
    "failed": "FAILED",
    "interrupted": "KILLED",
}
# Tags: the one a parent run is found by again (the archive and the run, hashed: no quoting),
# and the one a child run is found by (the evaluation's id in that archive).
RUN_KEY_TAG = "agentdesign.run_key"
EVALUATION_TAG = "agentdesign.evaluation_id"


def _requested() -> bool:
    value = os.environ.get(MLFLOW_ENV, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise AgentDesignError(
        f"{MLFLOW_ENV} must be 1 (on) or 0 (off), got {os.environ[MLFLOW_ENV]!r}"
    )


def shown_uri(uri: str) -> str:
    """`uri` with any password in it replaced by `***`."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.hostname or ""
    user = f"{parts.username}:***@" if parts.username else ":***@"
    netloc = f"{user}{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def archive_address(archive: Archive) -> str:
    """The archive's URL as a tag may show it: no password, a SQLite file by its absolute path
    (so that a resume from another directory finds the same MLflow run)."""
    url = make_url(archive.url)
    database = url.database
    relative = (
        url.drivername.startswith("sqlite")
        and database
        and database != ":memory:"
        and not database.startswith("file:")
        and not Path(database).is_absolute()
    )
    if relative and database:
        url = url.set(database=str(Path(database).resolve()))
    return url.render_as_string(hide_password=True)


# What an MLflow or connection error says, by the words in it (MLflow wraps the cause in its own
# message), in a few words of ours; the first that matches.
_REASONS = (
    ("Connection refused", "connection refused"),
    ("Failed to resolve", "its host name does not resolve"),
    ("Name or service not known", "its host name does not resolve"),
    ("RemoteDisconnected", "the server closed the connection"),
    ("Connection aborted", "the server closed the connection"),
    ("Connection reset", "the server closed the connection"),
    ("timed out", "no answer (timed out)"),
    ("unsupported URI", "MLflow supports no such URI"),
)


def _reason(exc: BaseException) -> str:
    """An MLflow or connection error in a few words, on one line."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return "its host name does not resolve"
    if isinstance(exc, TimeoutError):
        return "no answer (timed out)"
    text = " ".join(str(exc).split())
    for words, reason in _REASONS:
        if words in text:
            return reason
    status = re.search(r"failed with error code (\d+)", text)
    if status:
        return f"the server answered HTTP {status[1]}"
    if "Max retries exceeded" in text:
        return "no connection to the server"
    first = re.split(r"(?<=[.;])\s", text, maxsplit=1)[0]
    return first if len(first) <= 200 else first[:199] + "…"


def _bounded(call: Callable[[], str], wait_s: float, where: str) -> str:
    """`call()` on a thread of its own, waited for up to `wait_s` (MLflow's own retries may take
    minutes); its error, or the wait running out, as one line about `where`."""
    done: list[str] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(call())
        except Exception as exc:
            failed.append(exc)

    thread = threading.Thread(target=run, name="agentdesign-mlflow-check", daemon=True)
    thread.start()
    thread.join(wait_s)
    if done:
        return done[0]
    if failed:
        raise AgentDesignError(f"cannot use {where}: {_reason(failed[0])}")
    raise AgentDesignError(f"cannot use {where}: no answer within {wait_s:g} s")


@dataclass(frozen=True)
class MlflowConnection:
    """An MLflow client checked against its tracking server, and the experiment runs go to."""

    client: Any  # an mlflow.tracking.MlflowClient
    uri: str  # the tracking URI, password hidden
    experiment_id: str


def connect_mlflow() -> MlflowConnection | None:
    """None unless `AGENTDESIGN_MLFLOW=1`; then an MLflow client that reached its tracking server
    and found (or made) the experiment, or an `AgentDesignError` in one line: the switch set to
    something else, mlflow not installed, a URI MLflow cannot use, a server that does not answer.
    """
    if not _requested():
        return None
    # MLflow prints a link to each run it ends: a line per design among the progress bars.
    # Unless the user set it (false: the links are printed).
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    try:
        import mlflow
        from mlflow.environment_variables import MLFLOW_EXPERIMENT_ID, MLFLOW_EXPERIMENT_NAME
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise AgentDesignError(
            f"{MLFLOW_ENV}=1 asks for MLflow tracking, but MLflow is not installed: "
            "pip install 'agentdesign[mlflow]'"
        ) from None
    uri = str(mlflow.get_tracking_uri())
    shown = shown_uri(uri)
    where = f"the MLflow tracking URI {shown} (MLFLOW_TRACKING_URI)"
    try:
        client = MlflowClient(tracking_uri=uri)
    except Exception as exc:
        raise AgentDesignError(f"cannot use {where}: {_reason(exc)}") from None
    parts = urlsplit(uri)
    if parts.scheme in ("http", "https"):  # a refused port is said at once, not after retries
        if not parts.hostname:
            raise AgentDesignError(f"cannot use {where}: it names no host")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            socket.create_connection((parts.hostname or "", port), timeout=_CONNECT_S).close()
        except (OSError, ValueError) as exc:
            raise AgentDesignError(f"cannot reach {where}: {_reason(exc)}") from None
    # MLflow's own variables, read as MLflow reads them
    name: str | None = MLFLOW_EXPERIMENT_NAME.get()  # type: ignore[no-untyped-call]
    given_id: str | None = MLFLOW_EXPERIMENT_ID.get()  # type: ignore[no-untyped-call]

    def experiment() -> str:
        if given_id:
            return str(client.get_experiment(given_id).experiment_id)
        found = client.get_experiment_by_name(name or "Default")
        if found is not None:
            return str(found.experiment_id)
        return str(client.create_experiment(name or "Default"))

    if given_id:
        which = f"the MLflow experiment {given_id!r} (MLFLOW_EXPERIMENT_ID) at {shown}"
    elif name:
        which = f"the MLflow experiment {name!r} (MLFLOW_EXPERIMENT_NAME) at {shown}"
    else:
        which = where
    return MlflowConnection(client, shown, _bounded(experiment, WAIT_S, which))


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
                    self.failure = _reason(exc)


@dataclass(frozen=True)
class _Child:
    """One evaluation as a child run: what it is called and what it carries."""

    evaluation_id: int
    name: str
    params: Mapping[str, str]
    metrics: Mapping[str, float]
    tags: Mapping[str, str]
    start_ms: int
    end_ms: int
    # a candidate's place among the run's scored designs, and the best search score until it
    best: tuple[int, float] | None = None


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 1] + "…"


def spec_params(spec: AgentSpec) -> dict[str, str]:
    """A design's parameters flattened for MLflow: the model, each slot's component (`reasoning`:
    `cot`) and its parameters (`reasoning.max_tokens`: `512`), and its spec hash."""
    params = {"model": spec.model, "spec_hash": spec.spec_hash}
    for key, value in spec.to_dict().items():
        if key == "components" and isinstance(value, Mapping):
            for slot, part in value.items():
                if isinstance(part, Mapping) and "name" in part:
                    params[slot] = _value(part["name"])
                    for name, setting in (part.get("params") or {}).items():
                        params[f"{slot}.{name}"] = _value(setting)
                else:
                    params[slot] = _value(part)
        elif key != "model":
            params[key] = _value(value)
    return params


def config_params(config: Mapping[str, Any]) -> dict[str, str]:
    """A run's stored settings flattened for MLflow (the budget's settings by their own names,
    the baselines by their labels)."""
    params: dict[str, str] = {}
    for key, value in config.items():
        if key == "budget" and isinstance(value, Mapping):
            params |= {name: _value(setting) for name, setting in value.items()}
        elif key == "baselines" and isinstance(value, Sequence):
            params[key] = ", ".join(str(b.get("label", b)) for b in value if isinstance(b, Mapping))
        elif key == "models" and isinstance(value, Sequence):
            params[key] = ", ".join(map(str, value))
        elif key == "api_base" and isinstance(value, str):
            params[key] = shown_uri(value)
        else:
            params[key] = _value(value)
    return params


def _key(label: str) -> str:
    """A baseline's label as MLflow takes it in a metric's name: `cot-sc(n=9)` as `cot-sc_n_9`."""
    return re.sub(r"[^\w\-. /]+", "_", label).strip("_") or "_"


def _ms(when: datetime) -> int:
    return int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp() * 1000)


def _finite(metrics: Mapping[str, float | int | None]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(v)}


def _child(evaluation: EvaluationRecord, spec: AgentSpec, role: str) -> _Child:
    n = evaluation.n_done
    metrics = _finite(
        {
            "mean": evaluation.mean,
            "ci_low": evaluation.ci_low,
            "ci_high": evaluation.ci_high,
            "n_items": n,
            "tokens_per_item": evaluation.tokens_per_item,
            "seconds_per_item": evaluation.wall_s / n if n else None,
            "cost_usd": evaluation.cost,
            "tokens": evaluation.prompt_tokens + evaluation.completion_tokens,
        }
    )
    tags = {
        "agentdesign.role": role,
        "agentdesign.split": evaluation.split,
        "agentdesign.status": evaluation.status,
        "agentdesign.design": spec.describe()[:_MAX_VALUE],
        "agentdesign.agent_hash": spec.spec_hash,
        EVALUATION_TAG: str(evaluation.id),
    }
    return _Child(
        evaluation_id=evaluation.id,
        name=f"{spec.spec_hash[:10]} {role} {evaluation.split}",
        params=spec_params(spec),
        metrics=metrics,
        tags=tags,
        start_ms=_ms(evaluation.created_at),
        end_ms=max(_ms(evaluation.updated_at), _ms(evaluation.created_at)),
    )


def _verdict(archive: Archive, run_name: str) -> tuple[dict[str, float], dict[str, str], str]:
    """The run's verdict as the parent's metrics and tags, and its lines as `show` prints them."""
    verdict = run_verdict(archive, run_name)
    values: dict[str, float | int | None] = {}
    tags: dict[str, str] = {}
    if verdict.winner is not None:
        tags["agentdesign.winner"] = verdict.winner.agent_hash
        values |= {
            "winner.search.mean": verdict.winner.mean,
            "winner.search.ci_low": verdict.winner.ci_low,
            "winner.search.ci_high": verdict.winner.ci_high,
            "winner.search.n": verdict.winner.n_done,
        }
    if verdict.holdout is not None:
        values |= {
            "winner.holdout.mean": verdict.holdout.mean,
            "winner.holdout.ci_low": verdict.holdout.ci_low,
            "winner.holdout.ci_high": verdict.holdout.ci_high,
            "winner.holdout.n": verdict.holdout.n_done,
        }
    for baseline in verdict.baselines:
        c, key = baseline.comparison, f"gain_vs_{_key(baseline.label)}"
        values |= {
            key: c.mean_diff,
            f"{key}.ci_low": c.ci_low,
            f"{key}.ci_high": c.ci_high,
            f"{key}.p_value": c.p_value,
            f"{key}.n": c.n,
            f"{key}.token_ratio": baseline.token_ratio,
        }
        shown = "winner better" if c.ci_low > 0 else "baseline better" if c.ci_high < 0 else None
        tags[f"agentdesign.verdict.{_key(baseline.label)}"] = shown or "no difference shown"
    if verdict.overfit is not None:
        values |= {
            "selection.pbo": verdict.overfit.pbo,
            "selection.optimism": verdict.overfit.optimism,
        }
    lines = verdict.headline()
    reuse = holdout_reuse(archive, run_name)
    if reuse is not None:
        lines.append(reuse)
    return _finite(values), tags, "\n".join(lines) + "\n"


class MlflowTracking:
    """The run of `context` copied into MLflow (a `RunTracking`): a parent run named after it, a
    child run per evaluation the run holds, the verdict on the parent when the run finishes."""

    def __init__(self, connection: MlflowConnection, context: RunContext) -> None:
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
            self._sender.submit(partial(self._log_parent, metrics=_finite(spent)))
            if run.status == "finished" and run.winner_hash is not None:
                metrics, tags, text = _verdict(ctx.archive, run.name)
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
                self._sender.failure = _reason(exc)
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
            child = _child(evaluation, spec, role)
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

    def _log_child(self, child: _Child) -> None:
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
