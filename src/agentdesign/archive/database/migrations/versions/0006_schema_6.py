"""Schema 6: a run's pre-registered winner, the role of each run entry, provider failures kept
apart from scores.

Revision ID: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ad_run") as batch:
        batch.add_column(sa.Column("winner_hash", sa.String(), nullable=True))
        batch.add_column(sa.Column("winner_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("ad_run_entry") as batch:
        batch.add_column(sa.Column("role", sa.String(), nullable=False, server_default="candidate"))
    op.create_table(
        "ad_task_failure",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.String(), nullable=False),
        sa.Column("error_kind", sa.String(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["evaluation_id"],
            ["ad_evaluation.id"],
            name="fk_ad_task_failure_evaluation_id_ad_evaluation",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_ad_task_failure"),
    )
    op.create_index("ix_ad_task_failure_evaluation_id", "ad_task_failure", ["evaluation_id"])
    meta = sa.table("ad_meta", sa.column("key", sa.String), sa.column("value", sa.String))
    op.get_bind().execute(meta.update().where(meta.c.key == "schema_version").values(value="6"))


def downgrade() -> None:
    raise NotImplementedError("archives are never downgraded")
