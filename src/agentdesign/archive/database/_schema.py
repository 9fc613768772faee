"""Opening a database as an archive: an empty one becomes one, an older one is upgraded, and one
that is something else, or that a newer agentdesign or optuna wrote, is refused before any write.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources

import optuna
from optuna.storages._rdb.models import SCHEMA_VERSION as OPTUNA_SCHEMA_VERSION
from sqlalchemy import Connection, insert, inspect
from sqlmodel import select

from agentdesign.archive import _validation as check
from agentdesign.archive._errors import ArchiveError
from agentdesign.archive.database._migrate import create_schema, upgrade_schema
from agentdesign.archive.database._tables import OPTUNA_TABLES, SCHEMA_VERSION, MetaRow

__all__ = ["lock_for_set_up", "set_up"]

_CREATED_BY = "agentdesign"
_MIGRATION_TABLE = "ad_alembic_version"  # alembic's, named apart from optuna's alembic_version
# Any fixed 64-bit number: every process opening a PostgreSQL archive takes this advisory lock.
_SETUP_LOCK_KEY = 0x61_64_61_72_63_68  # "adarch"


def lock_for_set_up(conn: Connection) -> None:
    """Makes processes that open a new archive at once take turns, so only one creates it."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_SETUP_LOCK_KEY})")
    elif conn.dialect.name == "sqlite":
        # pysqlite opens no transaction before DDL by itself; this one takes the write lock.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def set_up(conn: Connection, *, shown_url: str, create: bool) -> None:
    """Checks that the database is an archive this code reads, turning an empty one into one."""
    lock_for_set_up(conn)
    tables = set(inspect(conn).get_table_names())
    if MetaRow.__tablename__ in tables:
        meta = dict(conn.execute(select(MetaRow.key, MetaRow.value)).all())
        version = _check_meta(meta, shown_url)
        _check_migration(conn, tables, shown_url)
        _check_optuna(conn, tables, shown_url)
        if version < SCHEMA_VERSION:
            upgrade_schema(conn, version=version, stamped=_MIGRATION_TABLE in tables)
        return
    foreign = sorted(tables - OPTUNA_TABLES)
    if foreign:
        raise ArchiveError(
            f"{shown_url} is not an agentdesign archive: it has no ad_meta table "
            f"but other tables ({check.listing(foreign)})"
        )
    if not create:
        raise ArchiveError(f"no archive at {shown_url}: the database is empty")
    create_schema(conn)
    conn.execute(
        insert(MetaRow),
        [
            {"key": "schema_version", "value": str(SCHEMA_VERSION)},
            {"key": "created_by", "value": _CREATED_BY},
        ],
    )


def _check_meta(meta: Mapping[str, str], shown_url: str) -> int:
    """The archive's schema version, if this code can read it (perhaps after an upgrade)."""
    if meta.get("created_by") != _CREATED_BY:
        raise ArchiveError(
            f"{shown_url} is not an agentdesign archive: its ad_meta was not written by agentdesign"
        )
    version = meta.get("schema_version", "")
    if not version.isdigit():
        raise ArchiveError(f"{shown_url} has an unreadable schema_version {version!r}")
    if int(version) > SCHEMA_VERSION:
        raise _newer_schema(version, shown_url)
    return int(version)


def _check_migration(conn: Connection, tables: set[str], shown_url: str) -> None:
    """Refuses an archive that a newer agentdesign migrated, even if its ad_meta says less:
    writing into tables this code does not know the shape of could damage them."""
    if _MIGRATION_TABLE not in tables:
        return
    revision = conn.exec_driver_sql(f"SELECT version_num FROM {_MIGRATION_TABLE}").scalar()
    if revision is not None and not (revision.isdigit() and int(revision) <= SCHEMA_VERSION):
        raise _newer_schema(f"{revision} ({_MIGRATION_TABLE})", shown_url)


def _newer_schema(found: str, shown_url: str) -> ArchiveError:
    return ArchiveError(
        f"{shown_url} has archive schema {found}, newer than the {SCHEMA_VERSION} "
        "this agentdesign knows: upgrade agentdesign"
    )


def _check_optuna(conn: Connection, tables: set[str], shown_url: str) -> None:
    """Refuses an archive whose optuna tables a newer optuna wrote, before anything is written:
    optuna itself only finds out when a search opens its storage, after the run is made."""
    if not {"version_info", "alembic_version"} <= tables:
        return
    info = conn.exec_driver_sql("SELECT schema_version, library_version FROM version_info")
    schema, library = info.first() or (None, "?")
    revision = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    known = _optuna_revisions()
    if (schema is not None and int(schema) > OPTUNA_SCHEMA_VERSION) or (
        known and revision is not None and revision not in known
    ):
        raise ArchiveError(
            f"{shown_url} has optuna schema {schema}, revision {revision} (written by "
            f"optuna {library}), which the optuna {optuna.__version__} installed here (schema "
            f"{OPTUNA_SCHEMA_VERSION}) does not know: upgrade optuna"
        )


@functools.cache
def _optuna_revisions() -> frozenset[str]:
    """The schema revisions the installed optuna knows (named as its migration files are), or
    none if its migrations cannot be listed: then only its schema_version is compared."""
    versions = resources.files("optuna.storages._rdb") / "alembic" / "versions"
    try:
        names = [entry.name for entry in versions.iterdir()]
    except OSError:
        return frozenset()
    return frozenset(n.removesuffix(".py").rstrip("_") for n in names if n.endswith(".py"))
