"""Schema 4: an agent's second parent (crossover and recombination have two).

Revision ID: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("ad_agent", sa.Column("co_parent_hash", sa.String(), nullable=True))
    meta = sa.table("ad_meta", sa.column("key", sa.String), sa.column("value", sa.String))
    op.get_bind().execute(meta.update().where(meta.c.key == "schema_version").values(value="4"))


def downgrade() -> None:
    raise NotImplementedError("archives are never downgraded")
