"""`agentdesign doctor`: it reports the sandbox, the embedded threads and PostgreSQL, and exits 0
even when something is missing. And `--unsafe-sandbox`, which doctor's sandbox line points to."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentdesign.components import UNSAFE_ENV, current_isolation
from agentdesign.components.llm._embedded import embedded_threads
from agentdesign.search.cli import POSTGRES_ENV, app, run_checks

UNREACHABLE = "postgresql+psycopg2://nobody:hunter2@127.0.0.1:1/none"


def test_the_checks_report_what_a_run_would_use(monkeypatch: pytest.MonkeyPatch) -> None:
    # A URL that names no driver is tried as the archive would open it (with psycopg2).
    monkeypatch.setenv(POSTGRES_ENV, UNREACHABLE.replace("postgresql+psycopg2:", "postgresql:"))
    sandbox, embedded, postgres = run_checks()
    assert sandbox.name == "sandbox" and sandbox.detail.startswith(current_isolation().level)
    assert embedded.detail.startswith(f"{embedded_threads()} threads per engine")
    assert (postgres.name, postgres.ok) == ("postgresql", False)
    assert "127.0.0.1:1/none is unreachable: " in postgres.detail
    assert "hunter2" not in postgres.detail


def test_a_bad_url_is_a_finding_not_a_crash() -> None:
    assert run_checks("not a url")[2].detail == "'not a url' is not a database URL"


def test_the_command_prints_every_check_and_exits_0() -> None:
    result = CliRunner().invoke(app, ["doctor", "--postgres", UNREACHABLE])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split()[0] for line in lines] == ["sandbox", "embedded", "postgresql"]
    assert lines[0].split(maxsplit=2)[2].startswith(current_isolation().level.split(":")[0])
    assert lines[2].split()[1] == "missing"


def test_commands_that_run_code_take_unsafe_sandbox(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for command in ("run", "worker", "evaluate"):
        assert "--unsafe-sandbox" in CliRunner().invoke(app, [command, "--help"]).output
    monkeypatch.setenv(UNSAFE_ENV, "0")  # off, and put back as it was after the test
    spec, archive = str(tmp_path / "missing.json"), str(tmp_path / "a.db")
    CliRunner().invoke(app, ["evaluate", spec, "--unsafe-sandbox", "--storage", archive])
    assert os.environ[UNSAFE_ENV] == "1"  # for the sandbox, set before anything runs
