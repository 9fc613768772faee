"""The statements and rows the archive's writes share: insert-or-read-the-winner, the per-task
statements built once, an evaluation's totals recomputed from its results, and a task outcome
checked into a row."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, TypeVar

from sqlalchemy import bindparam, func, insert, update
from sqlalchemy import select as sql_select  # sqlmodel's select types at most four columns
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, col, select

from agentdesign.archive import _validation as check
from agentdesign.archive._records import (
    utc_now,
)
from agentdesign.archive.database._tables import (
    EvaluationRow,
    TaskResultRow,
)
from agentdesign.evaluators import TaskOutcome

__all__ = [
    "ADD_RESULT",
    "INSERT_RESULT",
    "RECORDED",
    "RECORDED_AMONG",
    "TASK_IDS",
    "get_or_insert",
    "outcome_row",
    "outcome_values",
    "refresh_totals",
    "task_set_digest",
]

_Row = TypeVar("_Row", bound=SQLModel)


def get_or_insert(session: Session, row: _Row, find: Callable[[], _Row | None]) -> _Row:
    """The row `find` locates, else `row` inserted and committed; if another process inserts the
    same key in between, its row (the unique key rejects ours)."""
    existing = find()
    if existing is not None:
        return existing
    session.add(row)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        winner = find()
        if winner is None:
            raise
        return winner
    return row


# The statements `add_task_result` runs for every task, built once: building them took longer
# than running them. An evaluation's task ids, locked; whether a task has its result; the
# result's counts added to its evaluation's totals.
TASK_IDS = (
    sql_select(col(EvaluationRow.task_ids))
    .where(col(EvaluationRow.id) == bindparam("evaluation"))
    .with_for_update()
)
RECORDED = sql_select(col(TaskResultRow.id)).where(
    col(TaskResultRow.evaluation_id) == bindparam("evaluation"),
    col(TaskResultRow.task_id) == bindparam("task"),
)
# Which of some tasks (a list, "tasks") have their results: for results written together.
RECORDED_AMONG = sql_select(col(TaskResultRow.task_id)).where(
    col(TaskResultRow.evaluation_id) == bindparam("evaluation"),
    col(TaskResultRow.task_id).in_(bindparam("tasks", expanding=True)),
)
# The insert and the update are on the tables, not the ORM classes: the ORM's unit of work and
# bulk update took half the CPU of a task's write (bench/concurrency.py).
INSERT_RESULT = insert(TaskResultRow.__table__)  # type: ignore[attr-defined]
_EVALUATION = EvaluationRow.__table__.c  # type: ignore[attr-defined]
ADD_RESULT = (
    update(EvaluationRow.__table__)  # type: ignore[attr-defined]
    .where(_EVALUATION.id == bindparam("evaluation"))
    .values(
        n_done=_EVALUATION.n_done + 1,
        prompt_tokens=_EVALUATION.prompt_tokens + bindparam("add_prompt"),
        completion_tokens=_EVALUATION.completion_tokens + bindparam("add_completion"),
        cost=_EVALUATION.cost + bindparam("add_cost"),
        wall_s=_EVALUATION.wall_s + bindparam("add_wall"),
        updated_at=bindparam("now"),
    )
)


def refresh_totals(session: Session, evaluation_id: int, **values: Any) -> None:
    """Recomputes an evaluation's counts and sums from its task results (and sets `values`)."""
    results = select(TaskResultRow).where(col(TaskResultRow.evaluation_id) == evaluation_id)
    subquery = results.subquery()

    def total(column: Any) -> Any:
        return select(func.coalesce(func.sum(column), 0)).select_from(subquery).scalar_subquery()

    session.exec(
        update(EvaluationRow)
        .where(col(EvaluationRow.id) == evaluation_id)
        .values(
            n_done=select(func.count()).select_from(subquery).scalar_subquery(),
            prompt_tokens=total(subquery.c.prompt_tokens),
            completion_tokens=total(subquery.c.completion_tokens),
            cost=total(subquery.c.cost),
            wall_s=total(subquery.c.latency_s),
            updated_at=utc_now(),
            **values,
        )
    )


def task_set_digest(sorted_ids: Sequence[str]) -> str:
    # JSON keeps ids that contain separators apart: ["a,b"] and ["a", "b"] differ.
    return hashlib.sha256(json.dumps(list(sorted_ids)).encode()).hexdigest()


# How each field of the runner's `TaskOutcome` is checked before it is stored: the task result and
# failure tables name their columns after these fields, so one outcome fills either row.
_OUTCOME_CHECKS: dict[str, Callable[[Any, str], object]] = {
    "task_id": check.text,
    "output": check.string,
    "answer": check.string,
    "score": check.finite,
    "prompt_tokens": check.count,
    "completion_tokens": check.count,
    "cost": check.non_negative,
    "latency_s": check.non_negative,
    "error_kind": check.optional_text,
    "error": check.optional_string,
    "details": check.json_object,
}


def outcome_values(
    table: type[SQLModel], evaluation_id: int, outcome: TaskOutcome
) -> dict[str, Any]:
    """The column values of a row of `table` holding the outcome's fields it has columns for,
    each checked."""
    values = {
        field.name: _OUTCOME_CHECKS[field.name](getattr(outcome, field.name), field.name)
        for field in fields(TaskOutcome)
        if field.name in table.model_fields
    }
    return {"evaluation_id": evaluation_id, "created_at": utc_now(), **values}


def outcome_row(table: type[_Row], evaluation_id: int, outcome: TaskOutcome) -> _Row:
    """A row of `table` holding the outcome's fields it has columns for, each checked."""
    return table(**outcome_values(table, evaluation_id, outcome))
