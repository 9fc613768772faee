"""`agentdesign doctor`: what this machine gives a run, checked before one fails on it.

It reports the sandbox's isolation (model-written code is refused where there is none), the threads
an embedded engine would use, and whether PostgreSQL (for parallel workers, and its tests) answers.
Nothing here changes anything: the checks only look.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

from sqlalchemy import create_engine, text
from sqlalchemy.exc import SQLAlchemyError

from agentdesign.archive import ArchiveError, database_url
from agentdesign.components import UNSAFE_ENV, current_isolation, embedded_thread_choice

__all__ = ["DEFAULT_POSTGRES_URL", "POSTGRES_ENV", "Check", "run_checks"]

POSTGRES_ENV = "AGENTDESIGN_TEST_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
_CONNECT_TIMEOUT_S = 5


@dataclass(frozen=True)
class Check:
    """One finding: `ok` False means something is missing, and `detail` says what it costs."""

    name: str
    ok: bool
    detail: str


def run_checks(postgres_url: str | None = None) -> list[Check]:
    """The sandbox, embedded-engine and PostgreSQL checks; the URL defaults to $POSTGRES_ENV."""
    url = postgres_url or os.environ.get(POSTGRES_ENV) or DEFAULT_POSTGRES_URL
    return [_sandbox(), _embedded(), _postgres(url)]


def _sandbox() -> Check:
    isolation = current_isolation()
    if isolation.launcher is not None:
        return Check("sandbox", True, isolation.level)
    return Check(
        "sandbox",
        False,
        f"{isolation.level}; model-written code is refused unless --unsafe-sandbox "
        f"({UNSAFE_ENV}=1); install bubblewrap for OS isolation",
    )


def _embedded() -> Check:
    count, why = embedded_thread_choice()
    threads = f"{count} threads per engine ({why})"
    if importlib.util.find_spec("xllamacpp") is None:
        return Check("embedded", False, f"{threads}; the xllamacpp runtime is not installed")
    return Check("embedded", True, threads)


def _postgres(url: str) -> Check:
    if "://" not in url:
        return Check("postgresql", False, f"{url!r} is not a database URL")
    try:
        parsed = database_url(url)
    except ArchiveError:
        return Check("postgresql", False, f"{url!r} is not a database URL")
    shown = parsed.render_as_string(hide_password=True)
    psycopg2 = parsed.drivername.endswith("psycopg2")
    options = {"connect_timeout": _CONNECT_TIMEOUT_S} if psycopg2 else {}
    try:
        engine = create_engine(parsed, connect_args=options)
    except (SQLAlchemyError, ImportError) as err:
        return Check("postgresql", False, f"{shown}: {_first_line(err)}")
    try:
        with engine.connect() as connection:
            version = str(connection.execute(text("select version()")).scalar())
    except (SQLAlchemyError, ImportError) as err:
        reason = _first_line(getattr(err, "orig", None) or err)
        return Check("postgresql", False, f"{shown} is unreachable: {reason}")
    finally:
        engine.dispose()
    return Check("postgresql", True, f"{shown}: {version.split(' on ')[0]}")


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
