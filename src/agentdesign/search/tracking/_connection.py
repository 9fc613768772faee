"""Whether a run is copied into MLflow, and the MLflow client it is copied with (docs/mlflow.md).

Off unless asked for: `AGENTDESIGN_MLFLOW=1`, with MLflow's own variables (`MLFLOW_TRACKING_URI`,
`MLFLOW_EXPERIMENT_NAME` or `MLFLOW_EXPERIMENT_ID`, its credentials and HTTP settings) saying where
to. Until then nothing here imports mlflow (the optional `mlflow` extra). `connect_mlflow` checks
the setting and the tracking server before the run starts: a bad one stops the command in one
line, before anything is stored.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agentdesign.components import AgentDesignError

__all__ = ["MLFLOW_ENV", "WAIT_S", "MlflowConnection", "connect_mlflow", "reason", "shown_uri"]

MLFLOW_ENV = "AGENTDESIGN_MLFLOW"
_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"", "0", "false", "no", "off"})
# Seconds a run waits for the tracking server: for its first answer before the run starts, and at
# the end for what is left to send (a copy that waited so long stops, with its warning).
WAIT_S = 30.0
_CONNECT_S = 5.0  # seconds to open a connection to the server's port, before its first answer


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


def reason(exc: BaseException) -> str:
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
        raise AgentDesignError(f"cannot use {where}: {reason(failed[0])}")
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
        raise AgentDesignError(f"cannot use {where}: {reason(exc)}") from None
    parts = urlsplit(uri)
    if parts.scheme in ("http", "https"):  # a refused port is said at once, not after retries
        if not parts.hostname:
            raise AgentDesignError(f"cannot use {where}: it names no host")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            socket.create_connection((parts.hostname or "", port), timeout=_CONNECT_S).close()
        except (OSError, ValueError) as exc:
            raise AgentDesignError(f"cannot reach {where}: {reason(exc)}") from None
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
