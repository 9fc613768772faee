"""Schema 3: indexes that hold the leaderboard's and the Pareto front's whole order.

Revision ID: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_TOKENS = sa.text("(prompt_tokens + completion_tokens)")
_MEAN_DESC = sa.text("mean DESC")


def upgrade() -> None:
    op.drop_index("ix_ad_evaluation_leaderboard", table_name="ad_evaluation")
    op.create_index(
        "ix_ad_evaluation_leaderboard",
        "ad_evaluation",
        ["split", "status", "benchmark", _MEAN_DESC, "cost", _TOKENS, "agent_hash", "id"],
    )
    op.create_index(
        "ix_ad_evaluation_leaderboard_all",
        "ad_evaluation",
        ["split", "status", _MEAN_DESC, "cost", _TOKENS, "agent_hash", "id"],
    )
    op.create_index(
        "ix_ad_evaluation_pareto",
        "ad_evaluation",
        ["split", "status", "benchmark", "cost", _TOKENS, _MEAN_DESC, "id"],
    )
    meta = sa.table("ad_meta", sa.column("key", sa.String), sa.column("value", sa.String))
    op.get_bind().execute(meta.update().where(meta.c.key == "schema_version").values(value="3"))


def downgrade() -> None:
    raise NotImplementedError("archives are never downgraded")
