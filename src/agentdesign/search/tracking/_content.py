"""What the MLflow copy of a run sends: a design's and a run's settings as parameters, an evaluation
as a child run, the verdict as the parent's metrics and tags, and the tags a run is found by again.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import make_url

from agentdesign.archive import Archive, EvaluationRecord
from agentdesign.components import AgentSpec
from agentdesign.search.config import holdout_reuse
from agentdesign.search.tracking._connection import shown_uri
from agentdesign.search.verdict import run_verdict

__all__ = [
    "EVALUATION_TAG",
    "RUN_KEY_TAG",
    "Child",
    "archive_address",
    "as_child",
    "config_params",
    "finite",
    "spec_params",
    "verdict_fields",
]

_MAX_VALUE = 6000  # the longest parameter value MLflow takes: a longer one is cut, marked "…"
# Tags: the one a parent run is found by again (the archive and the run, hashed: no quoting),
# and the one a child run is found by (the evaluation's id in that archive).
RUN_KEY_TAG = "agentdesign.run_key"
EVALUATION_TAG = "agentdesign.evaluation_id"


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


@dataclass(frozen=True)
class Child:
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


def finite(metrics: Mapping[str, float | int | None]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(v)}


def as_child(evaluation: EvaluationRecord, spec: AgentSpec, role: str) -> Child:
    n = evaluation.n_done
    metrics = finite(
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
    return Child(
        evaluation_id=evaluation.id,
        name=f"{spec.spec_hash[:10]} {role} {evaluation.split}",
        params=spec_params(spec),
        metrics=metrics,
        tags=tags,
        start_ms=_ms(evaluation.created_at),
        end_ms=max(_ms(evaluation.updated_at), _ms(evaluation.created_at)),
    )


def verdict_fields(archive: Archive, run_name: str) -> tuple[dict[str, float], dict[str, str], str]:
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
    return finite(values), tags, "\n".join(lines) + "\n"
