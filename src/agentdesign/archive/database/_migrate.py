"""Schema versions through alembic: new archives are stamped, older ones upgraded in place.

The migrations live in `migrations/versions/`, one revision per schema version ("0002" creates
schema 2). A new archive is made by `create_all` of the current tables and stamped with the head
revision; an archive of schema 1 (made before alembic was used, so with no version table) is
stamped as "0001" first and then upgraded.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from agentdesign.archive.database._tables import SCHEMA_VERSION, metadata

# alembic is imported where a schema is made or upgraded: a command on an archive of the current
# schema (most of them) need not pay its import (a quarter of a second).
if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["create_schema", "upgrade_schema"]

_MIGRATIONS = Path(__file__).parent / "migrations"


def _config(conn: Connection) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    config.attributes["connection"] = conn
    return config


def _revision(version: int) -> str:
    return f"{version:04d}"


def create_schema(conn: Connection) -> None:
    """Creates the current tables in an empty database and records their revision."""
    from alembic import command

    metadata.create_all(conn)
    command.stamp(_config(conn), _revision(SCHEMA_VERSION))


def upgrade_schema(conn: Connection, *, version: int, stamped: bool) -> None:
    """Upgrades an archive of schema `version` to the current one, in the caller's transaction."""
    from alembic import command

    config = _config(conn)
    if not stamped:
        command.stamp(config, _revision(version))
    command.upgrade(config, _revision(SCHEMA_VERSION))
