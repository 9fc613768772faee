"""Schema 5: model calls the search itself makes (prompt refinements), counted in run totals.

Revision ID: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ad_search_call",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("purpose", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["ad_run.id"], name="fk_ad_search_call_run_id_ad_run"),
        sa.PrimaryKeyConstraint("id", name="pk_ad_search_call"),
    )
    op.create_index("ix_ad_search_call_run_id", "ad_search_call", ["run_id"])
    meta = sa.table("ad_meta", sa.column("key", sa.String), sa.column("value", sa.String))
    op.get_bind().execute(meta.update().where(meta.c.key == "schema_version").values(value="5"))


def downgrade() -> None:
    raise NotImplementedError("archives are never downgraded")
