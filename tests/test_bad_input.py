"""Bad input gets one clear line and a non-zero exit, and leaves the archive as it was (issue 16).

Each case runs the command line as a user meets it. The archive's bytes are compared before and
after: the same SHA-256 means the command refused before it wrote anything.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from forked_python import run_forked
from test_cli import CLI, agentdesign, assert_one_line_error, make_archive_with_a_run

from agentdesign.archive import Archive, ArchiveError
from agentdesign.components import AgentSpec, write_export

# A model litellm knows a provider for; nothing here gets as far as calling it.
OFFLINE_MODEL = ["--model", "openai/fake-model", "--api-base", "http://127.0.0.1:9"]


@pytest.fixture(scope="module")
def kept_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An archive holding one finished run, "kept", all in its one file (so that it copies)."""
    db = make_archive_with_a_run(tmp_path_factory.mktemp("kept"))
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return db


@pytest.fixture
def kept(kept_archive: Path, tmp_path: Path) -> Path:
    """A copy of an archive holding one finished run, "kept", in this test's folder."""
    return Path(shutil.copy(kept_archive, tmp_path / "kept.db"))


def digest(db: Path) -> str:
    """The archive's bytes, with any write-ahead log: a write in either changes it."""
    wal = Path(f"{db}-wal")
    return hashlib.sha256(db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")).hexdigest()


def refuses(
    args: list[str], needle: str, db: Path, cwd: Path, *, prefix: list[str] | None = None
) -> None:
    """The command prints one error line with `needle`, exits 2, and leaves `db` as it was."""
    before = digest(db)
    if prefix is None:
        result = agentdesign(*args, "--storage", str(db), cwd=cwd)
    else:
        result = _run([*prefix, *CLI, *args, "--storage", str(db)], cwd)
    assert_one_line_error(result, needle)
    assert digest(db) == before


def _env(cwd: Path) -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200", "HOME": str(cwd), "AGENTDESIGN_CACHE_DIR": str(cwd)}


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=_env(cwd), capture_output=True, text=True, timeout=120, check=False
    )


def _run_forked(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`_run([sys.executable, "-c", code, *args], cwd)`, forked from a process that imported
    agentdesign already (see forked_python)."""
    return run_forked(code, *args, cwd=cwd, env=_env(cwd), timeout=120)


# --- options and paths ----------------------------------------------------------------------------


NO_TASKS_AT_ONCE = "concurrency (tasks run at once) must be at least 1, got 0"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--concurrency", "0", "--name", "c"], NO_TASKS_AT_ONCE),
        (["worker", "--run", "c", "--concurrency", "0"], NO_TASKS_AT_ONCE),
        (["evaluate", "spec.json", "--concurrency", "0"], NO_TASKS_AT_ONCE),
        (["export", "kept", "--out", "afile"], "cannot export into afile: it is not a directory"),
        (["export", "kept", "--out", "afile/sub"], "cannot export into afile/sub: Not a directory"),
        (["export", "kept", "--out", "/proc/x"], "cannot export into /proc/x: No such file"),
        (["report", "kept", "-o", "/proc/x.html"], "cannot write the report to /proc/x.html: No"),
        (["report", "kept", "-o", "."], "cannot write the report to .: Is a directory"),
    ],
)
def test_bad_options_and_paths(kept: Path, args: list[str], needle: str) -> None:
    (kept.parent / "afile").write_text("not a folder\n")
    (kept.parent / "spec.json").write_text('{"model": "openai/fake-model"}')
    refuses(args, needle, kept, kept.parent)
    assert (kept.parent / "afile").read_text() == "not a folder\n"


@pytest.mark.parametrize(
    "args",
    [["show"], ["show", "kept"], ["export"], ["report"], ["resume", "kept"], ["finalize", "kept"]],
)
def test_commands_that_need_an_archive_never_make_one(tmp_path: Path, args: list[str]) -> None:
    result = agentdesign(*args, "--storage", "missing.db", cwd=tmp_path)
    assert_one_line_error(result, f"no archive at {tmp_path / 'missing.db'}")
    assert list(tmp_path.iterdir()) == []  # not even an empty file or a lock


@pytest.mark.postgres
def test_an_empty_postgresql_database_is_no_archive(postgres_schema: Callable[[], str]) -> None:
    url = postgres_schema()
    with pytest.raises(ArchiveError, match=r"no archive at .*: the database is empty"):
        Archive(url, create=False)
    with Archive(url) as archive:  # nothing was made: a writer finds it empty and makes one
        assert archive.list_runs() == []


# --- archives this version must not write ---------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (
            "UPDATE ad_meta SET value = '8' WHERE key = 'schema_version'",
            "has archive schema 8, newer than the 7 this agentdesign knows: upgrade agentdesign",
        ),
        (
            "UPDATE ad_alembic_version SET version_num = '0008'",
            "has archive schema 0008 (ad_alembic_version), newer than the 7 this agentdesign knows",
        ),
        (
            "UPDATE version_info SET schema_version = 13, library_version = '6.0.0'",
            "has optuna schema 13, revision v3.2.0.a (written by optuna 6.0.0), which the optuna",
        ),
        (
            "UPDATE alembic_version SET version_num = 'v6.0.0.a'",
            "has optuna schema 12, revision v6.0.0.a (written by optuna 5.0.0), which the optuna",
        ),
    ],
)
def test_an_archive_of_a_newer_schema_is_refused(kept: Path, change: str, needle: str) -> None:
    with sqlite3.connect(kept) as conn:
        conn.execute(change)
    conn.close()
    refuses(["run", "--name", "new", *OFFLINE_MODEL], needle, kept, kept.parent)


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder another user can reach (pytest's own are the owner's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="agentdesign-readonly-"))
    folder.chmod(0o777)
    yield folder
    folder.chmod(0o755)
    shutil.rmtree(folder)


def as_unprivileged(folder: Path) -> list[str]:
    """A command prefix under which file modes hold: for root, none does, so it drops to nobody."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    prefix = [setpriv or "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    unusable = _UNPRIVILEGED_PYTHON.get(setpriv)
    if setpriv not in _UNPRIVILEGED_PYTHON:  # probed once a session: it is the same for each
        unusable = _UNPRIVILEGED_PYTHON[setpriv] = _unprivileged_python(setpriv, prefix, folder)
    if unusable:
        pytest.skip(unusable)
    return prefix


_UNPRIVILEGED_PYTHON: dict[str | None, str | None] = {}


def _unprivileged_python(setpriv: str | None, prefix: list[str], folder: Path) -> str | None:
    """Why Python cannot run agentdesign under `prefix` here, or None where it can."""
    if setpriv is None or _run([*prefix, sys.executable, "-c", "pass"], folder).returncode:
        return "running as root, and cannot run Python as an unprivileged user here"
    if _run([*prefix, sys.executable, "-c", "import agentdesign.search"], folder).returncode:
        # A checkout under a mode-700 folder (``mktemp -d``) hides the package from nobody.
        return "running as root, and the checkout is not readable by an unprivileged user"
    return None


@pytest.mark.parametrize(
    ("read_only", "needle"),
    [
        ("file", "is read-only for this user, and this command writes to it"),
        ("folder", "attempt to write a readonly database (SQLite also writes beside it"),
    ],
)
def test_a_read_only_archive_is_one_line(
    kept_archive: Path, shared_folder: Path, read_only: str, needle: str
) -> None:
    db = Path(shutil.copy(kept_archive, shared_folder / "kept.db"))
    prefix = as_unprivileged(shared_folder)
    db.chmod(0o444 if read_only == "file" else 0o666)
    if read_only == "folder":
        shared_folder.chmod(0o555)
    try:
        refuses(["run", "--name", "x", *OFFLINE_MODEL], needle, db, shared_folder, prefix=prefix)
        shown = _run([*prefix, *CLI, "show", "kept", "--storage", str(db)], shared_folder)
        if read_only == "file":  # reading still works
            assert shown.returncode == 0 and "kept" in shown.stdout, shown.stderr
    finally:
        shared_folder.chmod(0o777)


# --- a scorer that raises, and an exported agent on a missing model -----------------------------

_FAKE_MODEL_CLI = (
    "import sys; from agentdesign.components.testing import FakeChatModel; "
    "from agentdesign.search import _loop; from agentdesign.search.cli import main; "
    "_loop.default_chat_model = lambda **_: FakeChatModel(lambda *a: 'Answer: Paris'); "
    "sys.argv[0] = 'agentdesign'; main()"
)


def test_a_scorer_that_raises_fails_the_run_which_resumes_once_it_is_fixed(
    tmp_path: Path,
) -> None:
    (tmp_path / "capitals.jsonl").write_text(
        "".join(f'{{"question": "Capital number {i}?", "answer": "Paris"}}\n' for i in range(4))
    )
    (tmp_path / "capitals.yaml").write_text("scorer: judge:score\n")
    (tmp_path / "judge.py").write_text(
        "def score(prediction, answer):\n    raise ValueError('no rubric\\nfor this')\n"
    )
    args = ["--storage", "s.db"]
    run = ["run", "--benchmark", "jsonl:capitals.jsonl", "--name", "s", "--space", "tiny"]
    failed = _run_forked(
        _FAKE_MODEL_CLI,
        *[*run, "--max-agents", "1", "--n-search", "2", "--n-holdout", "1", *args],
        cwd=tmp_path,
    )
    assert_one_line_error(failed, "scorer judge:score raised ValueError on task capitals-")
    kept = ": no rubric for this; run s stopped and is kept: `agentdesign resume s` runs those"
    assert kept in failed.stderr
    with Archive(str(tmp_path / "s.db")) as archive:
        assert archive.get_run("s").status == "failed"
    (tmp_path / "judge.py").write_text("def score(prediction, answer):\n    return 1.0\n")
    resumed = _run_forked(_FAKE_MODEL_CLI, "resume", "s", *args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    with Archive(str(tmp_path / "s.db")) as archive:
        assert archive.get_run("s").status == "finished"
        assert [row.mean for row in archive.leaderboard(run_name="s")] == [1.0]


def test_an_exported_agent_on_an_unknown_embedded_model_is_one_line(tmp_path: Path) -> None:
    py = write_export(
        AgentSpec.create(model="fake/model"), train_examples=(), out=tmp_path
    ).agent_file
    result = _run(
        [sys.executable, str(py), "--model", "embedded/nosuch", "What is 2 + 2?"], tmp_path
    )
    assert_one_line_error(result, "unknown embedded model 'nosuch'; known: ")
    assert "litellm" not in result.stderr.lower()
