"""Schema 2: agents carry their model (for filters), evaluations a lease (for many workers).

Revision ID: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ad_agent") as batch:
        batch.add_column(sa.Column("model", sa.String(), nullable=True))
        batch.create_index("ix_ad_agent_model", ["model"])
    with op.batch_alter_table("ad_evaluation") as batch:
        batch.add_column(sa.Column("lease_owner", sa.String(), nullable=True))
        batch.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
    agents = sa.table(
        "ad_agent", sa.column("id", sa.Integer), sa.column("spec", sa.JSON), sa.column("model")
    )
    conn = op.get_bind()
    for agent_id, spec in conn.execute(sa.select(agents.c.id, agents.c.spec)).all():
        model = spec.get("model") if isinstance(spec, dict) else None
        conn.execute(agents.update().where(agents.c.id == agent_id).values(model=model))
    meta = sa.table("ad_meta", sa.column("key", sa.String), sa.column("value", sa.String))
    conn.execute(meta.update().where(meta.c.key == "schema_version").values(value="2"))


def downgrade() -> None:
    raise NotImplementedError("archives are never downgraded")
