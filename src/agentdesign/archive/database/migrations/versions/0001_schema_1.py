"""Schema 1, as agentdesign 0.1 created it with `create_all`: the baseline older archives stamp.

Revision ID: 0001
"""

from __future__ import annotations

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing to do: an archive of schema 1 already has these tables."""


def downgrade() -> None:
    raise NotImplementedError("archives are never downgraded")
