"""Alembic environment of the archive: runs on the connection `Archive` hands over.

The version table is `ad_alembic_version`, so that it never meets optuna's own `alembic_version`
in a database the two share.
"""

from __future__ import annotations

from alembic import context

from agentdesign.archive.database._tables import metadata

VERSION_TABLE = "ad_alembic_version"

context.configure(
    connection=context.config.attributes["connection"],
    target_metadata=metadata,
    version_table=VERSION_TABLE,
    render_as_batch=True,  # SQLite alters tables by copying them
)
with context.begin_transaction():
    context.run_migrations()
