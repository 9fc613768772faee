"""Schema 8: a run's development items, and every design scored on holdout items (a look).

The looks of runs stored before are read off their holdout run entries (the winner, baselines
and exploratory designs they confirmed); what the evaluate command scored on a holdout before
was never recorded, so none of it can be.

Revision ID: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ad_run") as batch:
        batch.add_column(sa.Column("dev_task_ids", sa.JSON(), nullable=False, server_default="[]"))
    looks = op.create_table(
        "ad_holdout_look",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("benchmark", sa.String(), nullable=False),
        sa.Column("task_set", sa.String(), nullable=False),
        sa.Column("task_ids", sa.JSON(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("agent_hash", sa.String(), nullable=False),
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_hash"], ["ad_agent.spec_hash"], name="fk_ad_holdout_look_agent_hash_ad_agent"
        ),
        sa.ForeignKeyConstraint(
            ["evaluation_id"],
            ["ad_evaluation.id"],
            name="fk_ad_holdout_look_evaluation_id_ad_evaluation",
        ),
        sa.ForeignKeyConstraint(["run_id"], ["ad_run.id"], name="fk_ad_holdout_look_run_id_ad_run"),
        sa.PrimaryKeyConstraint("id", name="pk_ad_holdout_look"),
    )
    op.create_index("ix_ad_holdout_look_benchmark", "ad_holdout_look", ["benchmark"])
    conn = op.get_bind()
    run = sa.table("ad_run", sa.column("id", sa.Integer), sa.column("benchmark", sa.String))
    entry = sa.table(
        "ad_run_entry",
        sa.column("run_id", sa.Integer),
        sa.column("evaluation_id", sa.Integer),
        sa.column("role", sa.String),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    evaluation = sa.table(
        "ad_evaluation",
        sa.column("id", sa.Integer),
        sa.column("agent_hash", sa.String),
        sa.column("task_set", sa.String),
        sa.column("task_ids", sa.JSON),
        sa.column("split", sa.String),
    )
    confirmed = (
        sa.select(
            run.c.benchmark,
            evaluation.c.task_set,
            evaluation.c.task_ids,
            entry.c.run_id,
            evaluation.c.agent_hash,
            evaluation.c.id.label("evaluation_id"),
            entry.c.created_at,
        )
        .select_from(entry)
        .join(evaluation, evaluation.c.id == entry.c.evaluation_id)
        .join(run, run.c.id == entry.c.run_id)
        .where(
            evaluation.c.split == "holdout",
            entry.c.role.in_(("winner", "baseline", "exploratory")),
        )
        .order_by(entry.c.created_at)
    )
    rows = [{**row, "source": "run"} for row in conn.execute(confirmed).mappings()]
    if rows:
        op.bulk_insert(looks, rows)
    meta = sa.table("ad_meta", sa.column("key", sa.String), sa.column("value", sa.String))
    conn.execute(meta.update().where(meta.c.key == "schema_version").values(value="8"))


def downgrade() -> None:
    raise NotImplementedError("archives are never downgraded")
