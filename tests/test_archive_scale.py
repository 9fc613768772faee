"""The archive at scale: schema upgrades, the SQLite writer lock, leases, the agent budget
reservation, the Pareto front, lineage and filters; on SQLite and PostgreSQL alike."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import time
import warnings
from pathlib import Path

import pytest
import sqlalchemy
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from forked_python import run_forked
from test_archive import SPEC, TASKS, _create_run, _evaluated

from agentdesign.archive import Archive, ArchiveError
from agentdesign.archive.database._tables import SCHEMA_VERSION, metadata

V1_ARCHIVE = Path(__file__).parent / "data" / "archive_v1.db"


def test_schema_1_archive_opens_and_is_upgraded(tmp_path: Path) -> None:
    """tests/data/archive_v1.db was written by agentdesign before alembic (schema 1)."""
    db = tmp_path / "old.db"
    shutil.copy(V1_ARCHIVE, db)
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT * FROM ad_task_result ORDER BY id").fetchall()
        assert conn.execute("SELECT value FROM ad_meta WHERE key='schema_version'").fetchone() == (
            "1",
        )
    with Archive(str(db)) as archive:
        board = archive.leaderboard(run_name="v1-run")
        assert len(board) == 2
        # the upgrade copied each agent's model out of its spec, so the filter finds them
        assert len(archive.leaderboard(model="fake/model")) == 2
        assert archive.leaderboard(model="other/model") == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT * FROM ad_task_result ORDER BY id").fetchall() == before
        meta = dict(conn.execute("SELECT key, value FROM ad_meta").fetchall())
        assert meta["schema_version"] == str(SCHEMA_VERSION)
        revision = conn.execute("SELECT version_num FROM ad_alembic_version").fetchone()
        assert revision == (f"{SCHEMA_VERSION:04d}",)
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()  # optuna's own
    with Archive(str(db)) as archive:  # a second open finds it current and changes nothing
        assert len(archive.leaderboard(run_name="v1-run")) == 2


def _schema_drift(db: Path) -> list[object]:
    """What alembic's autogenerate would change to make `db` match the archive's tables."""
    engine = sqlalchemy.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SQLite cannot reflect expression indexes
            context = MigrationContext.configure(
                conn,
                opts={
                    "include_name": lambda name, kind, parent: (
                        kind != "table" or (name.startswith("ad_") and name != "ad_alembic_version")
                    )
                },
            )
            return list(compare_metadata(context, metadata))
    finally:
        engine.dispose()


def test_an_upgraded_archive_has_the_tables_a_new_one_gets(tmp_path: Path) -> None:
    """The migrations and the table definitions describe the same schema."""
    old, new = tmp_path / "old.db", tmp_path / "new.db"
    shutil.copy(V1_ARCHIVE, old)
    for db in (old, new):
        Archive(str(db)).close()
        assert _schema_drift(db) == []


_WRITE_FROM_ANOTHER_PROCESS = """
import sys
from agentdesign.archive import Archive, ArchiveError
with Archive(sys.argv[1]) as archive:
    print(len(archive.list_runs()))  # reading is allowed
    try:
        archive.add_agent(spec={"model": "m"}, spec_hash="other")
    except ArchiveError as err:
        print(err)
"""


def _another_process(db: Path) -> subprocess.CompletedProcess[str]:
    """Runs _WRITE_FROM_ANOTHER_PROCESS in a process forked from one that imported agentdesign."""
    other = run_forked(_WRITE_FROM_ANOTHER_PROCESS, str(db), cwd=Path.cwd(), timeout=60)
    other.check_returncode()
    return other


def test_a_second_writing_process_on_sqlite_is_told_clearly(tmp_path: Path) -> None:
    db = tmp_path / "one.db"
    with Archive(str(db)) as archive:
        _create_run(archive)  # this process now writes the archive
        other = _another_process(db)
        lines = other.stdout.splitlines()
        assert lines[0] == "1"
        assert "being written by another process" in lines[1]
        assert "one writing process at a time" in lines[1]
    # once this process closes the archive, the other may write
    other = _another_process(db)
    assert other.stdout.splitlines() == ["1"]


def test_leases_let_one_process_run_an_evaluation(archive: Archive) -> None:
    archive.add_agent(spec=SPEC, spec_hash="a1")
    evaluation = archive.get_or_create_evaluation(
        agent_hash="a1", benchmark="arith", task_ids=TASKS, split="search"
    )
    assert archive.claim_evaluation(evaluation.id, owner="w1", lease_s=30)
    assert archive.claim_evaluation(evaluation.id, owner="w1", lease_s=30)  # renewal
    if archive.single_writer:  # SQLite: any other holder is a process that is gone
        assert archive.claim_evaluation(evaluation.id, owner="w2", lease_s=30)
        return
    assert not archive.claim_evaluation(evaluation.id, owner="w2", lease_s=30)
    archive.release_evaluation(evaluation.id, owner="w1")
    assert archive.claim_evaluation(evaluation.id, owner="w2", lease_s=0.2)
    time.sleep(0.4)  # w2 died: its lease runs out
    assert archive.claim_evaluation(evaluation.id, owner="w3", lease_s=30)
    with pytest.raises(ArchiveError, match="no evaluation"):
        archive.claim_evaluation(10_000, owner="w3", lease_s=30)


def test_complete_evaluations_cannot_be_claimed(archive: Archive) -> None:
    evaluation = _evaluated(archive, "a1", 0.5)
    assert not archive.claim_evaluation(evaluation.id, owner="w1", lease_s=30)


def test_agent_budget_is_reserved_once_per_agent(archive: Archive) -> None:
    _create_run(archive)

    def entry(agent: str, split: str = "search") -> bool:
        archive.add_agent(spec={**SPEC, "id": agent}, spec_hash=agent)
        evaluation = archive.get_or_create_evaluation(
            agent_hash=agent,
            benchmark="arith",
            task_ids=TASKS if split == "search" else ("h1",),
            split=split,
        )
        return archive.add_run_entry(
            run_name="run-1",
            agent_hash=agent,
            evaluation_id=evaluation.id,
            trial_number=None,
            max_agents=2,
        )

    assert entry("a1") and entry("a2")
    assert not entry("a3")  # the budget of two agents is taken
    assert entry("a1")  # an agent the run holds comes back freely, on search or holdout
    assert entry("a1", split="holdout")
    assert archive.run_totals("run-1").n_agents == 2


def test_pareto_front_trades_score_for_cost(archive: Archive) -> None:
    _create_run(archive)
    points = {"cheap": (0.2, 0.01), "mid": (0.5, 0.02), "dear": (0.9, 0.05), "bad": (0.4, 0.03)}
    for agent, (mean, cost) in points.items():
        _evaluated(archive, agent, mean, cost=cost, run_name="run-1")
    _evaluated(archive, "elsewhere", 1.0, cost=0.0)  # not in the run
    front = archive.pareto(run_name="run-1")
    assert [row.agent_hash for row in front] == ["cheap", "mid", "dear"]
    assert archive.pareto()[0].agent_hash == "elsewhere"


def test_pareto_front_of_free_models_uses_tokens(archive: Archive) -> None:
    from test_archive import _result

    _create_run(archive)
    for agent, mean, tokens in (("short", 0.3, 5), ("long", 0.6, 50), ("waste", 0.3, 80)):
        archive.add_agent(spec={**SPEC, "id": agent}, spec_hash=agent)
        evaluation = archive.get_or_create_evaluation(
            agent_hash=agent, benchmark="arith", task_ids=TASKS, split="search"
        )
        for task in TASKS:
            archive.add_task_result(
                evaluation.id, _result(task, mean, cost=0.0, prompt_tokens=tokens)
            )
        archive.finish_evaluation(evaluation.id, status="complete", mean=mean, ci_low=0, ci_high=1)
    assert [row.agent_hash for row in archive.pareto()] == ["short", "long"]


def test_lineage_follows_parents(archive: Archive) -> None:
    archive.add_agent(spec={**SPEC, "id": 1}, spec_hash="aaa111")
    archive.add_agent(
        spec={**SPEC, "id": 2}, spec_hash="bbb222", parent_hash="aaa111", operator="mutate"
    )
    archive.add_agent(
        spec={**SPEC, "id": 3}, spec_hash="ccc333", parent_hash="bbb222", operator="crossover"
    )
    archive.add_agent(spec={**SPEC, "id": 4}, spec_hash="ddd444", parent_hash="gone")
    chain = archive.lineage("ccc333")
    assert [(a.spec_hash, a.operator) for a in chain] == [
        ("ccc333", "crossover"),
        ("bbb222", "mutate"),
        ("aaa111", None),
    ]
    assert [a.spec_hash for a in archive.lineage("ddd444")] == ["ddd444"]
    assert archive.find_agent("bbb").spec_hash == "bbb222"
    archive.add_agent(spec={**SPEC, "id": 5}, spec_hash="bbb999")
    with pytest.raises(ArchiveError, match="more than one"):
        archive.find_agent("bbb")
    with pytest.raises(ArchiveError, match="no agent"):
        archive.find_agent("%")  # a LIKE wildcard is taken literally


def test_leaderboard_filters_by_model_and_benchmark(archive: Archive) -> None:
    _evaluated(archive, "a1", 0.5)  # SPEC's model is "fake"
    assert [r.agent_hash for r in archive.leaderboard(model="fake")] == ["a1"]
    assert archive.leaderboard(model="other") == []
    assert archive.leaderboard(benchmark="other") == []
    assert archive.get_agent("a1").spec["model"] == "fake"
