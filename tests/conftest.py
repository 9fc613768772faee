"""Fixtures shared by the archive suites: a fresh database per test, SQLite or PostgreSQL.

PostgreSQL tests use the server named by AGENTDESIGN_TEST_POSTGRES_URL, each in a fresh schema;
without a server they are skipped, except in CI (`CI=true`), where that is a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.exc import OperationalError

from agentdesign.archive import Archive

POSTGRES_URL = os.environ.get(
    "AGENTDESIGN_TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
)


@pytest.fixture(scope="session")
def postgres_schema() -> Iterator[Callable[[], str]]:
    """Makes the URL of a fresh, empty schema per call; drops them all at the end, in one go."""
    engine = create_engine(POSTGRES_URL)
    try:
        with engine.connect():
            pass
    except OperationalError as err:
        engine.dispose()
        reason = str(err.orig).strip().splitlines()[0]
        message = (
            f"PostgreSQL at {make_url(POSTGRES_URL)!s} is unreachable ({reason}); point "
            "AGENTDESIGN_TEST_POSTGRES_URL at a server (a SQLAlchemy URL) to run these tests"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    schemas: list[str] = []

    def new_schema() -> str:
        schema = f"test_archive_{uuid.uuid4().hex[:12]}"
        with engine.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        schemas.append(schema)
        url = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
        return url.render_as_string(hide_password=False)

    yield new_schema
    with engine.begin() as conn:
        for schema in schemas:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def archive_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database: a SQLite file, or a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'archive.db'}"
    new_schema: Callable[[], str] = request.getfixturevalue("postgres_schema")
    return new_schema()


@pytest.fixture
def archive(archive_url: str) -> Iterator[Archive]:
    with Archive(archive_url) as opened:
        yield opened
