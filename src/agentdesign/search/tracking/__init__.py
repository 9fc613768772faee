"""A record of a run kept outside the archive: what the engine tells it (`RunTracking`), and the
copy of a run in MLflow (docs/mlflow.md), the one record there is, made when
`AGENTDESIGN_MLFLOW=1` asks for it."""

from __future__ import annotations

from agentdesign.search.tracking._connection import MLFLOW_ENV, MlflowConnection, connect_mlflow
from agentdesign.search.tracking._mlflow import MlflowTracking
from agentdesign.search.tracking._tracking import NoTracking, RunOutcome, RunTracking, TrackedRun

__all__ = [
    "MLFLOW_ENV",
    "MlflowConnection",
    "MlflowTracking",
    "NoTracking",
    "RunOutcome",
    "RunTracking",
    "TrackedRun",
    "connect_mlflow",
]
