"""Schema 7: the meta agent's proposals, every one of them with its prompt, response and fate.

Revision ID: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ad_proposal",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("operator", sa.String(), nullable=False),
        sa.Column("parents", sa.JSON(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("response", sa.Text(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("spec_hash", sa.String(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["ad_run.id"], name="fk_ad_proposal_run_id_ad_run"),
        sa.PrimaryKeyConstraint("id", name="pk_ad_proposal"),
    )
    op.create_index("ix_ad_proposal_run_id", "ad_proposal", ["run_id"])
    op.create_index("ix_ad_proposal_spec_hash", "ad_proposal", ["spec_hash"])
    meta = sa.table("ad_meta", sa.column("key", sa.String), sa.column("value", sa.String))
    op.get_bind().execute(meta.update().where(meta.c.key == "schema_version").values(value="7"))


def downgrade() -> None:
    raise NotImplementedError("archives are never downgraded")
