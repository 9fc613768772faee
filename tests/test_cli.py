"""The command line as a user meets it: bad input gets one line and exit 2, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from conftest import EmbeddedSpeed
from forked_python import run_forked
from test_report import assert_self_contained

from agentdesign.components import REGISTRY, SLOTS, default_cache_dir

CLI = [sys.executable, "-c", "from agentdesign.search.cli import main; main()"]


def agentdesign(
    *args: str, cwd: Path, timeout: float = 120, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`agentdesign ARGS` in a process of its own, forked from one that imported the CLI once;
    `env` adds to the environment."""
    # wide enough that rich truncates no name
    full = {**os.environ, "COLUMNS": "200", **(env or {})}
    return run_forked(CLI[2], *args, cwd=cwd, env=full, timeout=timeout)


def assert_one_line_error(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]


def make_archive_with_a_run(tmp_path: Path) -> Path:
    """A small archive holding one finished run (on the fake model, no LLM needed)."""
    from agentdesign.archive import Archive
    from agentdesign.components.testing import FakeChatModel
    from agentdesign.search import Budget, RunConfig, run_search

    db = tmp_path / "kept.db"
    with Archive(str(db)) as archive:
        run_search(
            archive,
            RunConfig.of(
                name="kept",
                model="fake/model",
                budget=Budget(max_agents=2),
                n_search=3,
                n_holdout=2,
            ),
            llm=FakeChatModel(lambda model, messages, temperature, seed: "Answer: 3"),
        )
    return db


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make_archive_with_a_run`'s archive, made once, all in its one file (so that it copies)."""
    db = make_archive_with_a_run(tmp_path_factory.mktemp("kept"))
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return db


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--benchmark", "nope", "--name", "a"], "unknown benchmark 'nope'"),
        (["run", "--max-agents", "0", "--name", "b"], "max_agents must be positive"),
        (["run", "--strategy", "magic", "--name", "c"], "unknown strategy 'magic'"),
        (["run", "--n-search", "0", "--name", "d"], "n_search"),
        (["resume", "ghost"], "no run named 'ghost'"),
        (["run", "--name", "kept", "--max-agents", "1"], "already exists"),
        (["run", "--model", "embedded/nope", "--name", "e"], "nope"),
        (["run", "--task-timeout", "0", "--name", "f"], "task timeout must be positive"),
        (["run", "--refine-every", "2", "--name", "g"], "needs a value-guided strategy"),
        (["finalize", "kept", "--select-on", "2"], "must leave final-test items"),
    ],
)
def test_bad_input_is_one_line_and_leaves_the_archive_intact(
    tmp_path: Path, kept_run: Path, args: list[str], needle: str
) -> None:
    db = Path(shutil.copy(kept_run, tmp_path / "kept.db"))  # a copy of its own
    before = _dump(db)
    result = agentdesign(*args, "--storage", str(db), cwd=tmp_path)
    assert_one_line_error(result, needle)
    assert not result.stdout.strip(), "bad input printed more than its error line"
    shown = agentdesign("show", "kept", "--storage", str(db), cwd=tmp_path)
    assert shown.returncode == 0 and "kept" in shown.stdout
    assert _dump(db) == before


def _dump(db: Path) -> list[str]:
    """The archive's logical content, independent of how SQLite lays out its pages."""
    with sqlite3.connect(db) as conn:
        return list(conn.iterdump())


def test_corrupt_and_foreign_databases_are_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_text("this is not a database\n" * 100)
    assert_one_line_error(
        agentdesign("show", "--storage", str(garbage), cwd=tmp_path), "garbage.db"
    )
    assert garbage.read_text() == "this is not a database\n" * 100

    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    assert_one_line_error(
        agentdesign("show", "--storage", str(foreign), cwd=tmp_path), "not an agentdesign archive"
    )


def test_unreachable_database_is_one_line(tmp_path: Path) -> None:
    url = "postgresql+psycopg2://nobody@127.0.0.1:1/none"
    assert_one_line_error(agentdesign("show", "--storage", url, cwd=tmp_path), "")


def test_show_and_export_from_an_archive(tmp_path: Path) -> None:
    db = make_archive_with_a_run(tmp_path)
    shown = agentdesign("show", "--storage", str(db), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "holdout" in shown.stdout
    exported = agentdesign("export", "--storage", str(db), "--out", "out", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    (folder,) = (tmp_path / "out").iterdir()
    assert {"agent.py", "prompts.md", "evidence.json", "spec.json"} <= {
        p.name for p in folder.iterdir()
    }
    assert_one_line_error(
        agentdesign("export", "--storage", str(db), "--agent", "zzzz", cwd=tmp_path), "zzzz"
    )


def test_listings(tmp_path: Path) -> None:
    listed = agentdesign("components", cwd=tmp_path)
    assert listed.returncode == 0
    for slot in SLOTS:  # every component of every slot, with its parameters
        for name in REGISTRY.names(slot):
            assert name in listed.stdout
            for info in REGISTRY.get(slot, name).param_info():
                assert f"{slot}__{info.name}" in listed.stdout
    benches = agentdesign("benchmarks", cwd=tmp_path)
    assert benches.returncode == 0 and "gsm8k" in benches.stdout and "1319" in benches.stdout
    flat = " ".join(benches.stdout.replace("│", " ").split())
    assert "[func(a=1," in flat  # descriptions are text, not rich markup that would eat brackets


@pytest.mark.embedded
def test_real_search_kill_resume_and_export_on_smollm2(
    tmp_path: Path, smollm2_speed: EmbeddedSpeed
) -> None:
    """The whole product on the real embedded model: run, SIGKILL, resume, export, run it.

    Waits as long as the work takes at the speed measured now (see `EmbeddedSpeed`), with token
    counts that bound it from above: a design of this space makes one call a task, of at most
    128 tokens with at most one example shown (the tiny space's ensembles, critics and retrieved
    examples took 14-18 s a task, and the workflows have tests of their own); the holdout adds
    the CoT baseline (512-token calls). One holdout item: the verdict runs as with more, and each
    more item costs a CoT call.
    """
    task_tokens, cot_tokens = 400, 512
    db = tmp_path / "real.db"
    space = tmp_path / "one_call.json"
    one_call = {
        "workflow": ["single"],
        "planning": ["none"],
        "memory": ["none", "few_shot"],
        "reflection": ["none"],
    }
    limits = {"reasoning__max_tokens": [16, 128], "memory__k": [1, 1]}
    space.write_text(json.dumps({"choices": one_call, "limits": limits}))
    # A cache of its own (the model files shared): with answers cached by an earlier run, the
    # run would finish before the kill, and nothing would be killed or resumed.
    cache = tmp_path / "cache"
    cache.mkdir()
    if (default_cache_dir() / "models").is_dir():
        (cache / "models").symlink_to(default_cache_dir() / "models")
    fresh = {"AGENTDESIGN_CACHE_DIR": str(cache)}
    args = [
        "run",
        "--name",
        "real",
        "--benchmark",
        "gsm8k",  # short prompts: the point is kill, resume and export, on a real model
        "--baseline",
        "cot",
        "--model",
        "embedded/smollm2-135m",
        "--max-agents",
        "2",
        "--n-search",
        "3",
        "--n-holdout",
        "1",
        "--space",
        str(space),
        "--storage",
        str(db),
    ]
    proc = subprocess.Popen(
        [*CLI, *args],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **fresh},
    )
    # Kill it hard as soon as some task results are committed.
    deadline = smollm2_speed.timeout(2 * task_tokens)
    import time

    started = time.monotonic()
    while time.monotonic() - started < deadline and proc.poll() is None:
        time.sleep(0.5)
        if db.exists() and _count(db, "ad_task_result") >= 2:
            break
    proc.kill()  # also when the deadline passed, so no orphan outlives the test
    proc.wait(timeout=30)
    committed = _task_rows(db)
    assert committed, "the run committed no task result before it was killed"
    assert _run_status(db) != "finished", "the run finished before the kill: nothing was killed"

    rest = 2 * 3 * task_tokens + task_tokens + cot_tokens
    resumed = agentdesign(
        "resume",
        "real",
        "--storage",
        str(db),
        cwd=tmp_path,
        timeout=smollm2_speed.timeout(rest),
        env=fresh,
    )
    assert resumed.returncode == 0, resumed.stderr
    after = _task_rows(db)
    assert all(after[key] == row for key, row in committed.items())  # nothing lost or redone
    assert _count(db, "ad_task_result") == len(after)  # no (evaluation, task) twice
    assert "holdout" in resumed.stdout

    exported = agentdesign("export", "real", "--storage", str(db), "--out", "out", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    (folder,) = (tmp_path / "out").iterdir()
    standalone = tmp_path / "elsewhere"
    shutil.copytree(folder, standalone / "shipped")
    answered = subprocess.run(
        [
            sys.executable,
            "-I",
            "shipped/agent.py",
            "Tom has 3 apples and buys 4 more. How many apples?",
        ],
        cwd=standalone,
        capture_output=True,
        text=True,
        timeout=smollm2_speed.timeout(task_tokens),
        check=False,
    )
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.strip()


def _run_status(db: Path) -> str:
    with sqlite3.connect(db, timeout=5) as conn:
        return str(conn.execute("SELECT status FROM ad_run").fetchone()[0])


def _count(db: Path, table: str) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def _task_rows(db: Path) -> dict[tuple[int, str], tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT evaluation_id, task_id, output, score, created_at FROM ad_task_result"
        ).fetchall()
    return {(r[0], r[1]): tuple(r[2:]) for r in rows}


def test_finalize_show_lineage_pareto_export_and_report(tmp_path: Path) -> None:
    db = make_archive_with_a_run(tmp_path)
    before = _count(db, "ad_task_result")
    finalized = agentdesign("finalize", "kept", "--top", "2", "--storage", str(db), cwd=tmp_path)
    assert finalized.returncode == 0, finalized.stderr
    assert "holdout (95% CI)" in finalized.stdout and "gap" in finalized.stdout
    paid = _count(db, "ad_task_result") - before
    again = agentdesign("finalize", "kept", "--top", "2", "--storage", str(db), cwd=tmp_path)
    assert again.returncode == 0 and _count(db, "ad_task_result") - before == paid  # idempotent
    lineage = agentdesign("show", "--lineage", "--storage", str(db), cwd=tmp_path)
    assert lineage.returncode == 0 and "lineage of" in lineage.stdout
    exported = agentdesign("export", "--pareto", "--storage", str(db), "--out", "p", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    from agentdesign.archive import Archive

    with Archive(str(db)) as archive:
        front = {row.agent_hash[:10] for row in archive.pareto(run_name="kept")}
    written = {p.name.removeprefix("agent_") for p in (tmp_path / "p").iterdir()}
    assert front and written == front  # a folder for each
    assert "agentdesign evaluate" in exported.stdout
    report = agentdesign("report", "kept", "-o", "r.html", "--storage", str(db), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "r.html").read_text()
    assert '<section id="leaderboard">' in page and "Plotly.newPlot" in page
    assert_self_contained(page)  # no CDN or other network resource
    assert_one_line_error(
        agentdesign("evaluate", "missing.json", "--storage", str(db), cwd=tmp_path), "missing.json"
    )
    assert_one_line_error(
        agentdesign("show", "--lineage", "zzzz", "--storage", str(db), cwd=tmp_path), "zzzz"
    )


@pytest.mark.embedded
def test_evaluate_an_exported_spec_on_smollm2(tmp_path: Path, smollm2_speed: EmbeddedSpeed) -> None:
    reasoning = {"name": "direct", "params": {"max_tokens": 16}}
    spec = {"model": "embedded/smollm2-135m", "components": {"reasoning": reasoning}}
    (tmp_path / "spec.json").write_text(__import__("json").dumps(spec))
    args = ["evaluate", "spec.json", "--benchmark", "gsm8k", "--items", "1", "--storage", "e.db"]
    timeout = smollm2_speed.timeout(16)  # one item, one direct call of at most 16 tokens
    result = agentdesign(*args, cwd=tmp_path, timeout=timeout)
    assert result.returncode == 0, result.stderr
    assert (
        "score" in result.stdout
        and "95% CI" in result.stdout
        and "search (1 items)" in result.stdout  # without --run: a seeded draw of search items
        and "Clopper-Pearson, n=1" in result.stdout
    )
    again = agentdesign(*args, cwd=tmp_path, timeout=timeout)  # reused, not paid again
    assert again.returncode == 0 and _count(tmp_path / "e.db", "ad_task_result") == 1


def _bfcl_or_capital(model: str, messages: object, temperature: float, seed: int | None) -> str:
    """A fake model that answers BFCL's first task right and every question with Paris."""
    return "Answer: [calculate_triangle_area(base=10, height=5)]\nAnswer: Paris"


@pytest.mark.parametrize("benchmark", ["bfcl", "jsonl"])
def test_run_and_resume_other_benchmarks_on_the_fake_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, benchmark: str
) -> None:
    """`run --benchmark bfcl` and `run --benchmark jsonl:FILE` (a relative path, resumed and
    shown from another directory) work end to end; the fake model replaces litellm."""
    from typer.testing import CliRunner

    from agentdesign.components.testing import FakeChatModel
    from agentdesign.search.cli import _app
    from agentdesign.search.config import _resolve

    monkeypatch.setattr(_resolve, "default_chat_model", lambda **_: FakeChatModel(_bfcl_or_capital))
    monkeypatch.setattr(_app, "console", _app.Console(width=200))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "capitals.jsonl").write_text(
        "".join(f'{{"question": "Capital number {i}?", "answer": "Paris"}}\n' for i in range(4))
    )
    monkeypatch.chdir(tmp_path / "data")
    name = "bfcl" if benchmark == "bfcl" else "jsonl:capitals.jsonl"
    db = str(tmp_path / "runs.db")
    common = ["--storage", db]
    runner = CliRunner()
    result = runner.invoke(
        _app.app,
        [
            "run",
            "--benchmark",
            name,
            "--name",
            "r",
            "--model",
            "openai/fake-model",  # a provider litellm knows; the fake model answers
            "--space",
            "tiny",
            "--max-agents",
            "1",
            "--n-search",
            "3",
            "--n-holdout",
            "0",  # no holdout, so no winner is fixed and the run may search on
            *common,
        ],
    )
    assert result.exit_code == 0, result.output
    monkeypatch.chdir(tmp_path)
    resumed = runner.invoke(_app.app, ["resume", "r", "--max-agents", "2", *common])
    assert resumed.exit_code == 0, resumed.output
    shown = runner.invoke(_app.app, ["show", "r", *common])
    assert shown.exit_code == 0, shown.output
    from agentdesign.archive import Archive

    with Archive(db) as archive:
        run = archive.get_run("r")
        board = archive.leaderboard(run_name="r")
    if benchmark == "bfcl":
        assert run.benchmark == "bfcl" and all(i.startswith("bfcl/") for i in run.search_task_ids)
    else:
        assert run.benchmark == f"jsonl:{tmp_path / 'data' / 'capitals.jsonl'}"
        assert [row.mean for row in board] == [1.0, 1.0]  # every capital is Paris
    assert (
        len(board) == 2 and f"{run.benchmark}, ranked on the search split (3 items)" in shown.output
    )


_SMALL = ("--max-agents", "1", "--n-search", "3", "--n-holdout", "0")


@pytest.mark.parametrize(
    ("args", "note"),
    [
        (
            (),
            "default run: BFCL with the embedded Qwen2.5-Coder-0.5B, 4 designs x 4 search items, "
            "40 holdout items: about 9 minutes on 2 CPU cores, enough holdout items to show a "
            "gain of about 0.23 (give --model/--benchmark to choose)",
        ),
        (_SMALL, "default run: BFCL with the embedded Qwen2.5-Coder-0.5B (give --model/"),
        (("--model", "openai/fake-model", *_SMALL), None),
        (("--benchmark", "bfcl-simple", *_SMALL), None),
        (("--model", "embedded/qwen2.5-coder-0.5b", *_SMALL), None),  # chosen, if the default
        (("--benchmark", "bfcl", *_SMALL), None),
    ],
)
def test_a_default_run_says_which_model_it_runs_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], note: str | None
) -> None:
    """A user who names neither the benchmark nor the model is told which the run uses and what
    the default buys (its time and power only where the sizes are the defaults too); one who
    named them, even as the defaults, chose them and is not told."""
    from typer.testing import CliRunner

    from agentdesign.components.testing import FakeChatModel
    from agentdesign.search.cli import _app
    from agentdesign.search.config import _resolve

    monkeypatch.setattr(_resolve, "default_chat_model", lambda **_: FakeChatModel(_bfcl_or_capital))
    monkeypatch.setattr(_resolve, "check_model", lambda *_, **__: None)  # no weights needed
    monkeypatch.setattr(_app, "console", _app.Console(width=400))
    db = str(tmp_path / "runs.db")
    result = CliRunner().invoke(_app.app, ["run", "--name", "r", *args, "--storage", db])
    assert result.exit_code == 0, result.output
    if note is None:
        assert "default run" not in result.output
    else:
        assert note in result.output


def test_benchmark_listing_has_bfcl_and_mentions_own_data(tmp_path: Path) -> None:
    benches = agentdesign("benchmarks", cwd=tmp_path)
    assert benches.returncode == 0
    for name in ("bfcl", "bfcl-simple", "bfcl-multiple", "bfcl-irrelevance", "humaneval"):
        assert f"│ {name} " in benches.stdout
    assert "jsonl:data.jsonl" in benches.stdout
