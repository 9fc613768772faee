"""Bad input gets one clear line and a non-zero exit, and leaves the archive as it was (issue 16).

Each case runs the command line as a user meets it. The archive's bytes are compared before and
after: the same SHA-256 means the command refused before it wrote anything.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

import pytest
from conftest import capitals_file
from forked_python import run_forked
from rich.console import Console
from test_cli import CLI, agentdesign, assert_one_line_error, make_archive_with_a_run

from agentdesign.archive import Archive, ArchiveError
from agentdesign.archive.database._tables import SCHEMA_VERSION
from agentdesign.components import AgentDesignError, AgentSpec, write_export
from agentdesign.components.testing import FakeChatModel
from agentdesign.search import Budget, RunConfig, create_search, run_worker
from agentdesign.search.cli import progress_bars
from agentdesign.search.config import MAX_SEED

SHARED_ENV = {**os.environ, "COLUMNS": "200"}  # as `agentdesign` has it: one server for all
# A model litellm knows a provider for; nothing here gets as far as calling it.
OFFLINE_MODEL = ["--model", "openai/fake-model", "--api-base", "http://127.0.0.1:9"]
# A run of one design, on two search items and one holdout item.
SMALL_RUN = ["--space", "tiny", "--max-agents", "1", "--n-search", "2", "--n-holdout", "1"]
SMALL_RUN += ["--baseline", "none"]


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
    args: list[str],
    needle: str,
    db: Path,
    cwd: Path,
    *,
    prefix: list[str] | None = None,
    code: str | None = None,
) -> None:
    """The command prints one error line with `needle`, exits 2, and leaves `db` as it was;
    run under `prefix`, or as the forked `code` (the CLI by default)."""
    before = digest(db)
    if prefix is not None:
        result = _run([*prefix, *CLI, *args, "--storage", str(db)], cwd)
    elif code is not None:
        result = run_forked(code, *args, "--storage", str(db), cwd=cwd, env=SHARED_ENV, timeout=120)
    else:
        result = agentdesign(*args, "--storage", str(db), cwd=cwd)
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
            f"UPDATE ad_meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema_version'",
            f"has archive schema {SCHEMA_VERSION + 1}, newer than the {SCHEMA_VERSION} this "
            "agentdesign knows: upgrade agentdesign",
        ),
        (
            f"UPDATE ad_alembic_version SET version_num = '{SCHEMA_VERSION + 1:04d}'",
            f"has archive schema {SCHEMA_VERSION + 1:04d} (ad_alembic_version), newer than the "
            f"{SCHEMA_VERSION} this agentdesign knows",
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
        # the kept run's sizes, so that the split is no collision and the write is what fails
        sizes = ["--n-search", "3", "--n-holdout", "2"]
        refuses(
            ["run", "--name", "x", *sizes, *OFFLINE_MODEL], needle, db, shared_folder, prefix=prefix
        )
        shown = _run([*prefix, *CLI, "show", "kept", "--storage", str(db)], shared_folder)
        if read_only == "file":  # reading still works
            assert shown.returncode == 0 and "kept" in shown.stdout, shown.stderr
    finally:
        shared_folder.chmod(0o777)


# --- a scorer that raises, and an exported agent on a missing model -----------------------------

_FAKE_MODEL_CLI = (
    "import sys; from agentdesign.components.testing import FakeChatModel; "
    "from agentdesign.search.config import _resolve; from agentdesign.search.cli import main; "
    "_resolve.default_chat_model = lambda **_: FakeChatModel(lambda *a: 'Answer: Paris'); "
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


# --- options that no run can take: refused before the run is written ---------------------------

HUGE = str(10**23)
SEEDS = "must be from 0 to 4294967295, got"
LONGEST_WAIT = "must be at most 1,000,000 seconds, got"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--seed", "-5"], f"seed {SEEDS} -5"),
        (["run", "--seed", HUGE], f"seed {SEEDS} {HUGE}"),
        (["run", "--seed", str(2**32)], f"seed {SEEDS} {2**32}"),
        (["run", "--race-alpha", "2"], "racing alpha must be between 0 and 1, got 2.0"),
        (["run", "--race-alpha", "0"], "racing alpha must be between 0 and 1, got 0.0"),
        (["run", "--max-agents", HUGE], "budget max_agents must be at most 9223372036854775807"),
        (["run", "--max-minutes", "nan"], "budget max_minutes must be a finite number, got nan"),
        (["run", "--task-timeout", "nan"], f"task timeout {LONGEST_WAIT} nan"),
        (["run", "--task-timeout", "1e300"], f"task timeout {LONGEST_WAIT} 1e+300"),
        (["run", "--llm-timeout", "inf"], f"LLM timeout {LONGEST_WAIT} inf"),
        (["run", "--confirm-top", HUGE], "confirm_top must be at most 9223372036854775807"),
        (["run", "--meta-view", HUGE], "meta_view must be at most 9223372036854775807"),
        (["worker", "--seed", "-5"], f"seed {SEEDS} -5"),
        (["worker", "--heartbeat", str(10**7)], "--heartbeat must be from 1 to 1,000,000 seconds"),
        (["evaluate", "spec.json", "--seed", "-5"], f"--seed {SEEDS} -5"),
        (["evaluate", "spec.json", "--task-timeout", "nan"], f"--task-timeout {LONGEST_WAIT} nan"),
        (["evaluate", "spec.json", "--llm-timeout", "nan"], f"--llm-timeout {LONGEST_WAIT} nan"),
        (["resume", "kept", "--max-minutes", "nan"], "budget max_minutes must be a finite number"),
        (["resume", "kept", "--llm-timeout", "inf"], f"--llm-timeout {LONGEST_WAIT} inf"),
    ],
)
def test_an_option_no_run_can_take_is_refused_before_anything_is_written(
    kept: Path, args: list[str], needle: str
) -> None:
    (kept.parent / "spec.json").write_text('{"model": "openai/fake-model"}')
    named = {"run": ["--name", "new"], "worker": ["--run", "new"]}.get(args[0], [])
    model = OFFLINE_MODEL if args[0] in ("run", "worker") else []
    refuses([*args, *named, *model], needle, kept, kept.parent)


def test_a_refused_option_leaves_the_run_name_usable(tmp_path: Path) -> None:
    capitals_file(tmp_path, 4)
    run = ["run", "--name", "s", "--benchmark", "jsonl:capitals.jsonl", *SMALL_RUN, "-s", "s.db"]
    for bad, needle in ((["--race-alpha", "2"], "racing alpha"), (["--seed", "-5"], "seed")):
        refused = _run_forked(_FAKE_MODEL_CLI, *run, *bad, cwd=tmp_path)
        assert_one_line_error(refused, f"error: {needle} must be")
    done = _run_forked(_FAKE_MODEL_CLI, *run, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with Archive(str(tmp_path / "s.db")) as archive:
        assert archive.get_run("s").status == "finished"


def test_a_worker_takes_the_largest_seed(tmp_path: Path) -> None:
    """Each worker adds its own offset to the seed, which must wrap round, not overflow."""
    config = RunConfig.of(
        name="w", model="fake/model", seed=MAX_SEED, budget=Budget(max_agents=1), n_holdout=2
    )
    with Archive(str(tmp_path / "w.db")) as archive:
        summary = run_worker(archive, config, llm=FakeChatModel(lambda *_: "Answer: 3"))
    assert summary.agents_done == 1


def test_the_time_left_of_a_budget_no_run_spends_is_shown() -> None:
    out = io.StringIO()
    with progress_bars(Console(file=out, width=100)) as progress:
        progress.add_task("designs", info="", deadline=time.monotonic() + 1e18)
    assert "ETA > 999 days" in out.getvalue()


# --- benchmark files, settings and specs, read within bounds ------------------------------------

# The CLI in a child that may take 1 GB more than it holds at the start, so that a file that
# expands without bound ends in MemoryError there (as it did before the bounds) and not here.
_CAPPED_CLI = (
    "import resource, sys; from agentdesign.search.cli import main; "
    "held = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize(); "
    "resource.setrlimit(resource.RLIMIT_AS, (held + 2**30, resource.RLIM_INFINITY)); "
    "sys.argv[0] = 'agentdesign'; main()"
)
# A billion "lol"s by the tenth level, its anchors in a setting that takes a list of them.
_LAUGHS = "description:\n  - &l0 lol\n" + "".join(
    f"  - &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 10)
)
_DEEP = "[" * 100_000 + "]" * 100_000


def _bad_files(folder: Path) -> None:
    """Every bad file the cases below name, in `folder`."""
    item = '{"question": "Capital of France?", "answer": "Paris"}\n'
    (folder / "ok.jsonl").write_text(item)
    (folder / "laughs.yaml").write_text(f"data: ok.jsonl\n{_LAUGHS}name: *l9\n")
    (folder / "zero.yaml").write_text("data: /dev/zero\n")
    os.mkfifo(folder / "fifo.jsonl")
    (folder / "fifo.yaml").write_text("data: fifo.jsonl\n")
    with (folder / "sparse.jsonl").open("wb") as sparse:
        sparse.truncate(300 * 2**20)
    (folder / "long.jsonl").write_text(item + f'{{"question": "{"x" * 9 * 2**20}", "answer": 1}}\n')
    (folder / "deep.jsonl").write_text(item + f'{{"question": "q", "answer": {_DEEP}}}\n')
    (folder / "nested.yaml").write_text(f"data: ok.jsonl\ndescription: {_DEEP}\n")
    (folder / "deep.json").write_text(f'{{"model": "openai/fake-model", "components": {_DEEP}}}')
    (folder / "half.jsonl").write_text(item + '{"question": "Capital of \\ud800?", "answer": 1}\n')


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--benchmark", "jsonl:laughs.yaml"], "laughs.yaml: refused: more than 16 aliases"),
        (["run", "--benchmark", "jsonl:zero.yaml"], "cannot read /dev/zero: not a regular file"),
        (["run", "--benchmark", "jsonl:fifo.yaml"], "fifo.jsonl: not a regular file"),
        (["run", "--benchmark", "jsonl:sparse.jsonl"], "314,572,800 bytes, more than the"),
        (["run", "--benchmark", "jsonl:long.jsonl"], "long.jsonl:2: a line of 9,437,"),
        (["run", "--benchmark", "jsonl:deep.jsonl"], "deep.jsonl:2: arrays and objects nested"),
        (["run", "--benchmark", "jsonl:nested.yaml"], "nested.yaml: refused: nested more than 64"),
        (["run", "--space", "deep.json"], "deep.json: arrays and objects nested 100001 deep"),
        (["run", "--baseline", "deep.json"], "invalid agent spec: arrays and objects nested"),
        (["evaluate", "deep.json"], "invalid agent spec: arrays and objects nested 100001"),
        (["run", "--benchmark", "jsonl:half.jsonl"], "half.jsonl:2: text holding a lone surrogate"),
    ],
)
def test_a_bad_file_is_one_line(kept: Path, args: list[str], needle: str) -> None:
    _bad_files(kept.parent)
    named = ["--name", "new", *OFFLINE_MODEL] if args[0] == "run" else []
    refuses([*args, *named], needle, kept, kept.parent, code=_CAPPED_CLI)


def test_items_with_a_lone_surrogate_are_refused_writing_nothing(tmp_path: Path) -> None:
    items = [{"question": "ok", "answer": "a"}, {"question": "\ud800", "answer": "a"}]
    with pytest.raises(AgentDesignError, match="item 2: 'question' is text holding a lone"):
        create_search(items, scorer=lambda output, answer: 1.0, storage=tmp_path / "a.db")
    assert not (tmp_path / "a.db").exists()


def test_a_regex_that_backtracks_for_ever_gives_up_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "runs.jsonl").write_text(
        "".join(f'{{"question": "Run {i}?", "answer": "^(a|aa)+$"}}\n' for i in range(3))
    )
    (tmp_path / "runs.yaml").write_text("scorer: regex\n")
    reply = "Answer: " + "a" * 80 + "!"  # 2**80 ways to fail to match
    code = _FAKE_MODEL_CLI.replace("'Answer: Paris'", repr(reply))
    run = ["run", "--benchmark", "jsonl:runs.jsonl", "--name", "r", *SMALL_RUN, "-s", "r.db"]
    args = [*run, "--task-timeout", "30"]
    done = run_forked(code, *args, cwd=tmp_path, env=SHARED_ENV, timeout=90)
    assert done.returncode == 0, done.stderr
    with Archive(str(tmp_path / "r.db")) as archive:
        assert archive.get_run("r").status == "finished"
        (evaluation,) = archive.run_evaluations("r")
        results = archive.task_results(evaluation.id).values()
        assert {(r.score, r.error_kind) for r in results} == {(0.0, "scorer_timeout")}


# --- a disk that fills up under the archive or the response cache ---------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs of this test's own, to fill up (mounting one needs root)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)]
    mounted = subprocess.run(mount, capture_output=True, text=True, check=False)
    if mounted.returncode:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


def fill(disk: Path, *, leave: int) -> Path:
    """Fills `disk` until at most `leave` bytes are free; returns the filler, to free them."""
    filler = disk / "filler"
    with suppress(OSError), filler.open("wb", buffering=0) as file:  # unbuffered: as much as fits
        file.write(bytes(max(shutil.disk_usage(disk).free - leave, 0)))
    return filler


# The cache's folder is the first argument; the provider is litellm's mock.
_MOCK_PROVIDER_CLI = (
    "import os, sys; os.environ.update(AGENTDESIGN_CACHE_DIR=sys.argv.pop(1), OPENAI_API_KEY='x'); "
    "from agentdesign.components import import_litellm; "
    "litellm = import_litellm(); real = litellm.completion; "
    "litellm.completion = lambda **kw: real(**kw, mock_response='Answer: 3'); "
    "from agentdesign.search.cli import main; sys.argv[0] = 'agentdesign'; main()"
)


def test_a_full_disk_under_the_archive_is_one_line_and_the_run_resumes(
    kept_archive: Path, small_disk: Path
) -> None:
    db = Path(shutil.copy(kept_archive, small_disk / "kept.db"))
    with Archive(str(db)) as archive:
        kept = archive.leaderboard(run_name="kept")
    filler = fill(small_disk, leave=150_000)  # room to start a run, not to finish it
    # --split-seed 1: a split beside kept's, so that the disk, not the split check, is what stops it
    args = ["run", "--name", "new", *OFFLINE_MODEL, *SMALL_RUN, "--split-seed", "1", "-s", str(db)]
    full = run_forked(_FAKE_MODEL_CLI, *args, cwd=small_disk.parent, env=SHARED_ENV, timeout=120)
    assert_one_line_error(full, f"the disk holding {db} is full: nothing the archive holds is lost")
    filler.unlink()
    resume = ["resume", "new", "-s", str(db)]
    resumed = run_forked(_FAKE_MODEL_CLI, *resume, cwd=small_disk.parent, env=SHARED_ENV)
    assert resumed.returncode == 0, resumed.stderr
    with Archive(str(db)) as archive:
        assert archive.leaderboard(run_name="kept") == kept
        assert archive.get_run("new").status == "finished"


def test_a_full_disk_under_the_response_cache_is_one_line_and_the_run_resumes(
    tmp_path: Path, small_disk: Path
) -> None:
    cache = small_disk / "responses.sqlite"
    args = [str(small_disk), "run", "--name", "c", *OFFLINE_MODEL, *SMALL_RUN, "-s", "c.db"]
    filler = fill(small_disk, leave=0)
    code = _MOCK_PROVIDER_CLI
    full = run_forked(code, *args, cwd=tmp_path, env=SHARED_ENV, timeout=120)
    assert_one_line_error(full, f"the disk holding {cache} is full: nothing the archive holds")
    filler.unlink()
    resume = [str(small_disk), "resume", "c", "-s", "c.db"]
    resumed = run_forked(code, *resume, cwd=tmp_path, env=SHARED_ENV, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    with Archive(str(tmp_path / "c.db")) as archive:
        assert archive.get_run("c").status == "finished"
