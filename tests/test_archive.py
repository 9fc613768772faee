"""The archive, as one suite run against SQLite and PostgreSQL.

PostgreSQL tests use the server named by AGENTDESIGN_TEST_POSTGRES_URL, each in a fresh schema.
"""

from __future__ import annotations

import importlib.util
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC
from pathlib import Path
from typing import Any, TypeVar

import optuna
import pytest
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.exc import OperationalError, PendingRollbackError

from agentdesign.archive import (
    AgentRecord,
    Archive,
    ArchiveError,
    ArchiveUnreachableError,
    EvaluationRecord,
    RunTotals,
    database_url,
)
from agentdesign.archive.database._outage import DatabaseOutage
from agentdesign.archive.database._tables import SCHEMA_VERSION
from agentdesign.components import AgentDesignError
from agentdesign.evaluators import TaskOutcome

TASKS = ("t1", "t2", "t3")
HOLDOUT = ("h1", "h2")
SPEC = {"model": "fake", "prompt": "plain", "params": {"temperature": 0.0}}

_T = TypeVar("_T")


def _result(task_id: str, score: float = 1.0, **changes: Any) -> TaskOutcome:
    result = TaskOutcome(
        task_id=task_id,
        output=f"output of {task_id}",
        answer="42",
        score=score,
        prompt_tokens=10,
        completion_tokens=5,
        cost=0.01,
        latency_s=0.5,
    )
    return replace(result, **changes)


def _create_run(archive: Archive, name: str = "run-1") -> None:
    archive.create_run(
        name=name,
        benchmark="arith",
        model="fake",
        strategy="random",
        budget={"max_trials": 10, "max_cost": 1.5},
        config={"holdout_fraction": 0.4, "tags": ["a", "b"]},
        split_seed=7,
        search_task_ids=list(TASKS),
        holdout_task_ids=HOLDOUT,
    )


def _evaluated(
    archive: Archive,
    spec_hash: str,
    mean: float,
    *,
    cost: float = 0.01,
    status: str = "complete",
    split: str = "search",
    run_name: str | None = None,
) -> EvaluationRecord:
    """An agent with a finished evaluation on its split's tasks, linked to `run_name` if given."""
    task_ids = TASKS if split == "search" else HOLDOUT
    archive.add_agent(spec={**SPEC, "id": spec_hash}, spec_hash=spec_hash)
    evaluation = archive.get_or_create_evaluation(
        agent_hash=spec_hash, benchmark="arith", task_ids=task_ids, split=split
    )
    for task_id in task_ids:
        archive.add_task_result(evaluation.id, _result(task_id, mean, cost=cost))
    if run_name is not None:
        archive.add_run_entry(
            run_name=run_name, agent_hash=spec_hash, evaluation_id=evaluation.id, trial_number=0
        )
    return archive.finish_evaluation(
        evaluation.id, status=status, mean=mean, ci_low=mean - 0.1, ci_high=mean + 0.1
    )


def _in_threads(count: int, work: Callable[[int], _T]) -> list[_T]:
    """Runs `work(i)` in `count` threads released together; re-raises the first failure."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = work(index)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


# -- opening -------------------------------------------------------------------------------------


def test_new_archive_has_meta_and_prefixed_tables(archive: Archive) -> None:
    engine = create_engine(archive.url)
    try:
        tables = set(inspect(engine).get_table_names())
        with engine.connect() as conn:
            meta = {
                key: value for key, value in conn.execute(text("SELECT key, value FROM ad_meta"))
            }
            revision = conn.execute(text("SELECT version_num FROM ad_alembic_version")).scalar()
    finally:
        engine.dispose()
    assert tables == {
        "ad_meta",
        "ad_run",
        "ad_agent",
        "ad_evaluation",
        "ad_task_result",
        "ad_run_entry",
        "ad_search_call",
        "ad_task_failure",
        "ad_proposal",
        "ad_holdout_look",
        "ad_alembic_version",
    }
    assert meta == {"schema_version": str(SCHEMA_VERSION), "created_by": "agentdesign"}
    assert revision == f"{SCHEMA_VERSION:04d}"


def test_reopened_archive_finds_everything(archive_url: str) -> None:
    with Archive(archive_url) as archive:
        _create_run(archive)
        evaluation = _evaluated(archive, "a1", 0.8, run_name="run-1")
        before = (
            archive.get_run("run-1"),
            archive.get_agent("a1"),
            archive.task_results(evaluation.id),
            archive.leaderboard(run_name="run-1"),
        )
    with Archive(archive_url) as archive:
        after = (
            archive.get_run("run-1"),
            archive.get_agent("a1"),
            archive.task_results(evaluation.id),
            archive.leaderboard(run_name="run-1"),
        )
        assert archive.get_evaluation(evaluation.id) == evaluation
    assert after == before


def test_file_path_opens_as_absolute_sqlite_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Archive("runs.db") as archive:
        _create_run(archive)
        assert archive.url == f"sqlite:///{tmp_path / 'runs.db'}"
    with Archive(str(tmp_path / "runs.db")) as archive:
        assert [run.name for run in archive.list_runs()] == ["run-1"]
    engine = create_engine(f"sqlite:///{tmp_path / 'runs.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    engine.dispose()


def test_optuna_tables_in_the_same_database_are_accepted(archive_url: str) -> None:
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(archive_url)  # optuna first: its tables are not foreign
    optuna.create_study(storage=storage, study_name="run-1").optimize(lambda t: 0.0, n_trials=1)
    storage.engine.dispose()
    with Archive(archive_url) as archive:
        _create_run(archive)
    with Archive(archive_url) as archive:
        assert archive.get_run("run-1").name == "run-1"
        study = optuna.load_study(study_name="run-1", storage=archive.url)
        assert len(study.trials) == 1


def test_database_of_something_else_is_refused(archive_url: str) -> None:
    engine = create_engine(archive_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE customers (id INTEGER PRIMARY KEY)"))
    with pytest.raises(ArchiveError, match="is not an agentdesign archive"):
        Archive(archive_url)
    try:
        assert set(inspect(engine).get_table_names()) == {"customers"}
    finally:
        engine.dispose()


def test_newer_schema_is_refused(archive_url: str) -> None:
    Archive(archive_url).close()
    engine = create_engine(archive_url)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE ad_meta SET value = :v WHERE key = 'schema_version'"),
            {"v": str(SCHEMA_VERSION + 1)},
        )
    engine.dispose()
    with pytest.raises(ArchiveError, match="newer"):
        Archive(archive_url)


def test_archives_opened_at_once_create_one_schema(archive_url: str) -> None:
    archives = _in_threads(4, lambda _: Archive(archive_url))
    for archive in archives:
        archive.close()
    with Archive(archive_url) as archive:
        _create_run(archive)
        assert len(archive.list_runs()) == 1


def test_garbage_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    path.write_text("these are my notes, not a database\n" * 20)
    with pytest.raises(ArchiveError, match="file is not a database"):
        Archive(str(path))
    assert path.read_text() == "these are my notes, not a database\n" * 20


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("foo://somewhere/db", "unknown database URL scheme 'foo'"),
        ("postgresql+psycopg2://postgres@127.0.0.1:1/test", "cannot open archive"),
        ("sqlite:////nonexistent-dir/sub/archive.db", "unable to open database file"),
    ],
)
def test_unusable_urls_raise_one_line(url: str, message: str) -> None:
    with pytest.raises(ArchiveError, match=message) as caught:
        Archive(url)
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value, AgentDesignError)


def test_missing_driver_is_named() -> None:
    if importlib.util.find_spec("pg8000") is not None:
        pytest.skip("pg8000 is installed here")
    with pytest.raises(ArchiveError, match="driver is not installed"):
        Archive("postgresql+pg8000://postgres@127.0.0.1/test")


@pytest.mark.postgres
@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_a_postgresql_url_without_a_driver_opens_with_the_installed_one(
    scheme: str, postgres_schema: Callable[[], str]
) -> None:
    """SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3, which the postgres extra does not
    install: the archive opens the URL most users write with psycopg2."""
    url = postgres_schema()
    bare = scheme + "://" + url.split("://", 1)[1]
    assert database_url(bare).drivername == "postgresql+psycopg2"
    with Archive(bare) as archive:
        _create_run(archive)
    with Archive(url) as archive:
        assert archive.get_run("run-1").benchmark == "arith"


def test_password_stays_out_of_messages() -> None:
    with pytest.raises(ArchiveError) as caught:
        Archive("postgresql+psycopg2://postgres:hunter2@127.0.0.1:1/test")
    assert "hunter2" not in str(caught.value)


def test_a_dropped_transaction_runs_again_unless_it_may_have_been_written() -> None:
    """Dropped in a statement, a transaction wrote nothing and runs again (for a bounded time),
    as does one that only read, dropped in its commit; one that wrote, dropped in its commit, may
    have been written, and never runs again."""
    engine = create_engine("sqlite://")
    outage = DatabaseOutage(bound_s=0.5, shown_url="db")
    outage.listen(engine)
    runs: list[str] = []

    def dropped(sql: str, *, in_statement: str | None, times: int = 1) -> Callable[[], str]:
        def transaction() -> str:
            runs.append(sql)
            with engine.connect() as conn:
                conn.execute(text(sql))
            if len(runs) <= times:
                gone = Exception("gone")
                raise OperationalError(in_statement, {}, gone, connection_invalidated=True)
            return "done"

        return transaction

    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    insert = "INSERT INTO t VALUES (1)"
    assert outage.ride(dropped(insert, in_statement=insert)) == "done" and runs == [insert] * 2
    runs.clear()
    assert outage.ride(dropped("SELECT x FROM t", in_statement=None)) == "done" and len(runs) == 2
    runs.clear()
    with pytest.raises(ArchiveUnreachableError, match=r"^lost the archive database db \(gone\) "):
        outage.ride(dropped("INSERT INTO t VALUES (2)", in_statement=None))
    assert runs == ["INSERT INTO t VALUES (2)"]
    runs.clear()
    started = time.monotonic()
    with pytest.raises(ArchiveUnreachableError, match=r"did not answer again within 0\.5 s"):
        outage.ride(dropped("SELECT 1", in_statement="SELECT 1", times=1000))
    assert 0.5 <= time.monotonic() - started < 3 and len(runs) > 2
    engine.dispose()


def test_a_statement_refused_after_a_drop_is_the_drop() -> None:
    """optuna catches the error of a connection that dropped and tries another query on it, which
    SQLAlchemy refuses until the transaction is rolled back, and optuna wraps the refusal: that
    is the drop, and the transaction runs again, or stops if the drop was in a write's commit
    (a drop that was being handled when the transaction began is not its own). A refusal after a
    failed flush, whatever failed it, is not a drop."""
    engine = create_engine("sqlite://")
    outage = DatabaseOutage(bound_s=5, shown_url="db")
    outage.listen(engine)
    runs: list[str] = []

    def refused(dropped_in: str | bool | None, code: str = "8s2b") -> Callable[[], str]:
        """Writes, then is refused, after a drop in statement `dropped_in` (None: in the commit;
        False: none of its own)."""

        def refuse() -> None:
            try:
                raise PendingRollbackError("Can't reconnect until rolled back", code=code)
            except PendingRollbackError as refusal:
                raise optuna.exceptions.StorageInternalError("in the commit") from refusal

        def transaction() -> str:
            runs.append(code)
            if len(runs) > 1:
                return "done"
            with engine.connect() as conn:
                conn.execute(text("CREATE TABLE IF NOT EXISTS t (x INTEGER)"))
            if dropped_in is False:
                refuse()
            try:
                raise OperationalError(
                    dropped_in, {}, Exception("gone"), connection_invalidated=True
                )
            except OperationalError:
                refuse()
            return "never"

        return transaction

    for dropped_in in ("SELECT 1", False):
        assert outage.ride(refused(dropped_in)) == "done" and len(runs) == 2
        runs.clear()
    with pytest.raises(ArchiveUnreachableError, match=r"^lost the archive database db \(gone\) "):
        outage.ride(refused(None))
    assert len(runs) == 1
    runs.clear()
    try:
        raise OperationalError(None, {}, Exception("earlier"), connection_invalidated=True)
    except OperationalError:
        assert outage.ride(refused(False)) == "done" and len(runs) == 2
    runs.clear()
    with pytest.raises(optuna.exceptions.StorageInternalError):
        outage.ride(refused("SELECT 1", code="7s2a"))
    assert len(runs) == 1
    engine.dispose()


# -- runs ----------------------------------------------------------------------------------------


def test_run_round_trip(archive: Archive) -> None:
    _create_run(archive)
    run = archive.get_run("run-1")
    assert (run.name, run.benchmark, run.model, run.strategy) == (
        "run-1",
        "arith",
        "fake",
        "random",
    )
    assert run.budget == {"max_trials": 10, "max_cost": 1.5}
    assert run.config == {"holdout_fraction": 0.4, "tags": ["a", "b"]}
    assert (run.split_seed, run.search_task_ids, run.holdout_task_ids) == (7, TASKS, HOLDOUT)
    assert (run.status, run.elapsed_s) == ("running", 0.0)
    assert run.created_at.tzinfo is UTC and run.updated_at >= run.created_at
    assert archive.list_runs() == [run]


def test_update_run_accumulates_elapsed_time(archive: Archive) -> None:
    _create_run(archive)
    archive.update_run("run-1", add_elapsed_s=1.5)
    archive.update_run("run-1", status="failed", add_elapsed_s=2.0)
    run = archive.update_run("run-1", status="running", add_elapsed_s=0.5)
    assert (run.status, run.elapsed_s) == ("running", 4.0)
    assert archive.get_run("run-1") == run


def test_duplicate_run_name_is_refused(archive: Archive) -> None:
    _create_run(archive)
    with pytest.raises(ArchiveError, match="already exists"):
        _create_run(archive)
    assert len(archive.list_runs()) == 1


def test_missing_run_message_lists_runs(archive: Archive) -> None:
    with pytest.raises(ArchiveError, match=r"no run named 'nope' \(the archive has no runs yet\)"):
        archive.get_run("nope")
    _create_run(archive, "beta")
    _create_run(archive, "alpha")
    for call in (
        lambda: archive.get_run("nope"),
        lambda: archive.update_run("nope", status="finished"),
        lambda: archive.run_totals("nope"),
        lambda: archive.leaderboard(run_name="nope"),
    ):
        with pytest.raises(ArchiveError, match=r"no run named 'nope' \(runs: alpha, beta\)"):
            call()


def test_bad_run_input_writes_nothing(archive: Archive) -> None:
    valid: dict[str, Any] = {
        "name": "run-1",
        "benchmark": "arith",
        "model": "fake",
        "strategy": "random",
        "budget": {},
        "config": {},
        "split_seed": 0,
        "search_task_ids": ["t1"],
        "holdout_task_ids": [],
    }
    cases: list[tuple[dict[str, Any], str]] = [
        ({"holdout_task_ids": ["t1"]}, "both the search and the holdout"),
        ({"search_task_ids": ["t1", "t1"]}, "repeats task ids: t1"),
        ({"search_task_ids": []}, "search_task_ids is empty"),
        ({"search_task_ids": "t1"}, "not the string"),
        ({"budget": {"max_cost": math.nan}}, "budget is not plain JSON"),
        ({"config": {"model": object()}}, "config is not plain JSON"),
        ({"name": ""}, "run name must be a non-empty string"),
        ({"split_seed": "7"}, "split_seed must be an integer"),
    ]
    for changes, message in cases:
        with pytest.raises(ArchiveError, match=message):
            archive.create_run(**{**valid, **changes})
    assert archive.list_runs() == []


def test_bad_run_update_changes_nothing(archive: Archive) -> None:
    _create_run(archive)
    before = archive.get_run("run-1")
    with pytest.raises(ArchiveError, match="run status must be one of"):
        archive.update_run("run-1", status="paused", add_elapsed_s=1.0)
    with pytest.raises(ArchiveError, match="must not be negative"):
        archive.update_run("run-1", add_elapsed_s=-1.0)
    assert archive.get_run("run-1") == before


# -- agents --------------------------------------------------------------------------------------


def test_agent_round_trip_and_idempotency(archive: Archive) -> None:
    parent = archive.add_agent(spec=SPEC, spec_hash="p")
    child = archive.add_agent(
        spec={**SPEC, "prompt": "cot"}, spec_hash="c", parent_hash="p", operator="mutate"
    )
    assert (parent.spec, parent.parent_hash, parent.operator) == (SPEC, None, None)
    assert (child.spec["prompt"], child.parent_hash, child.operator) == ("cot", "p", "mutate")
    bred = archive.add_agent(
        spec={**SPEC, "n": 2}, spec_hash="x", parent_hash="p", co_parent_hash="c", operator="cross"
    )
    assert (bred.parent_hash, bred.co_parent_hash) == ("p", "c")
    assert parent.co_parent_hash is None
    assert archive.get_agent("c") == child
    assert archive.add_agent(spec=SPEC, spec_hash="p", operator="ignored") == parent


def test_same_hash_with_another_spec_is_refused(archive: Archive) -> None:
    archive.add_agent(spec=SPEC, spec_hash="h")
    with pytest.raises(ArchiveError, match="different spec"):
        archive.add_agent(spec={**SPEC, "prompt": "other"}, spec_hash="h")
    assert archive.get_agent("h").spec == SPEC


def test_stored_spec_is_a_copy(archive: Archive) -> None:
    spec: dict[str, Any] = {"params": {"k": [1, 2]}}
    archive.add_agent(spec=spec, spec_hash="h")
    spec["params"]["k"].append(3)
    assert archive.get_agent("h").spec == {"params": {"k": [1, 2]}}


def test_missing_agent_raises(archive: Archive) -> None:
    with pytest.raises(ArchiveError, match="no agent with spec hash 'nope'"):
        archive.get_agent("nope")
    with pytest.raises(ArchiveError, match="no agent with spec hash 'nope'"):
        archive.get_or_create_evaluation(
            agent_hash="nope", benchmark="arith", task_ids=TASKS, split="search"
        )


def test_concurrent_insert_of_the_same_agent_is_read_back(archive_url: str) -> None:
    """The other archive inserts the hash between this one's lookup and its insert."""
    with Archive(archive_url) as first, Archive(archive_url) as second:
        raced: list[Any] = []

        def insert_first(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            if statement.startswith("INSERT INTO ad_agent") and not raced:
                raced.append(second.add_agent(spec=SPEC, spec_hash="h", operator="second"))

        event.listen(first._engine, "before_cursor_execute", insert_first)
        record = first.add_agent(spec=SPEC, spec_hash="h", operator="first")
        assert raced == [record]
        assert record.operator == "second"


def test_agents_added_from_many_threads_are_stored_once(archive_url: str) -> None:
    with Archive(archive_url) as first, Archive(archive_url) as second:
        for hash_ in ("h1", "h2", "h3", "h4", "h5"):

            def add(index: int, hash_: str = hash_) -> AgentRecord:
                return (first, second)[index % 2].add_agent(spec=SPEC, spec_hash=hash_)

            assert len({record.id for record in _in_threads(6, add)}) == 1


# -- evaluations ---------------------------------------------------------------------------------


def test_evaluation_is_reused_whatever_the_task_order(archive: Archive) -> None:
    archive.add_agent(spec=SPEC, spec_hash="a")
    first = archive.get_or_create_evaluation(
        agent_hash="a", benchmark="arith", task_ids=["t3", "t1", "t2"], split="search"
    )
    again = archive.get_or_create_evaluation(
        agent_hash="a", benchmark="arith", task_ids=TASKS, split="holdout"
    )
    other = archive.get_or_create_evaluation(
        agent_hash="a", benchmark="arith", task_ids=["t1"], split="holdout"
    )
    assert again == first
    assert other.id != first.id and other.task_set != first.task_set
    assert (first.task_ids, first.split, first.n_planned, first.n_done) == (TASKS, "search", 3, 0)
    assert (first.status, first.mean, first.prompt_tokens, first.cost) == ("running", None, 0, 0.0)
    assert archive.get_evaluation(first.id) == first


def test_evaluations_created_from_many_threads_are_one(archive_url: str) -> None:
    with Archive(archive_url) as first, Archive(archive_url) as second:
        first.add_agent(spec=SPEC, spec_hash="a")
        records = _in_threads(
            6,
            lambda i: (first, second)[i % 2].get_or_create_evaluation(
                agent_hash="a", benchmark="arith", task_ids=TASKS, split="search"
            ),
        )
        assert len({record.id for record in records}) == 1


def test_task_scores_of_many_evaluations_are_read_at_once(archive: Archive) -> None:
    """More evaluations than one IN list takes: every one's scores, and none for the unscored."""
    ids = []
    for n in range(503):
        archive.add_agent(spec=SPEC, spec_hash=f"a{n}")
        evaluation = archive.get_or_create_evaluation(
            agent_hash=f"a{n}", benchmark="arith", task_ids=TASKS, split="search"
        )
        if n % 250 != 1:
            archive.add_task_result(evaluation.id, _result("t1", n / 1000))
            archive.add_task_result(evaluation.id, _result("t2"))
        ids.append(evaluation.id)
    scores = archive.task_scores(ids)
    assert list(scores) == ids
    assert scores[ids[1]] == {} and scores[ids[502]] == {"t1": 0.502, "t2": 1.0}
    assert sum(len(s) for s in scores.values()) == 2 * 503 - 2 * 3
    assert archive.task_scores([]) == {}


def test_task_results_are_recorded_once(archive: Archive) -> None:
    archive.add_agent(spec=SPEC, spec_hash="a")
    evaluation = archive.get_or_create_evaluation(
        agent_hash="a", benchmark="arith", task_ids=TASKS, split="search"
    )
    failed = _result(
        "t2",
        0.0,
        error_kind="timeout",
        error="took too long\nline 2",
        details={"error": "timeout", "tries": [1, 2.5, None], "gold": {"answer": "42"}},
    )
    assert archive.add_task_result(evaluation.id, _result("t1")) is True
    assert archive.add_task_result(evaluation.id, failed) is True
    assert archive.add_task_result(evaluation.id, _result("t1", 0.0, cost=9.0)) is False
    assert archive.task_results(evaluation.id) == {"t1": _result("t1"), "t2": failed}
    running = archive.get_evaluation(evaluation.id)
    assert (running.n_done, running.prompt_tokens, running.completion_tokens) == (2, 20, 10)
    assert running.cost == pytest.approx(0.02) and running.wall_s == pytest.approx(1.0)
    assert running.status == "running"


def test_task_results_written_together_are_as_written_one_at_a_time(
    archive: Archive, tmp_path: Path
) -> None:
    """One transaction for tasks that finished together: the same rows and totals (each cost
    added in turn), a task already recorded, or twice in the list, left as it was."""
    task_ids = [f"t{i}" for i in range(6)]
    outcomes = [
        _result(f"t{i}", i / 7, cost=0.1 * (i + 1), latency_s=0.3 * i, details={"i": i})
        for i in range(6)
    ]
    with Archive(f"sqlite:///{tmp_path / 'one.db'}") as one_by_one:
        for each in (archive, one_by_one):
            each.add_agent(spec=SPEC, spec_hash="a")
        together, alone = (
            each.get_or_create_evaluation(
                agent_hash="a", benchmark="arith", task_ids=task_ids, split="search"
            )
            for each in (archive, one_by_one)
        )
        assert archive.add_task_results(together.id, outcomes[:1]) == [True]
        batch = [*outcomes[1:4], replace(outcomes[0], score=0.0), replace(outcomes[2], score=0.5)]
        assert archive.add_task_results(together.id, batch) == [True, True, True, False, False]
        assert archive.add_task_results(together.id, outcomes[3:]) == [False, True, True]
        assert archive.add_task_results(together.id, []) == []
        for outcome in outcomes:
            assert one_by_one.add_task_result(alone.id, outcome) is True
        assert archive.task_results(together.id) == one_by_one.task_results(alone.id)
        written, expected = archive.get_evaluation(together.id), one_by_one.get_evaluation(alone.id)
        for name in ("n_done", "prompt_tokens", "completion_tokens", "cost", "wall_s"):
            assert getattr(written, name) == getattr(expected, name), name


def test_task_results_written_together_write_nothing_when_one_is_bad(archive: Archive) -> None:
    archive.add_agent(spec=SPEC, spec_hash="a")
    evaluation = archive.get_or_create_evaluation(
        agent_hash="a", benchmark="arith", task_ids=TASKS, split="search"
    )
    for bad, message in [
        (_result("t9"), "'t9' is not among the tasks"),
        (_result("t3", math.nan), "score must be a finite number"),
    ]:
        with pytest.raises(ArchiveError, match=message):
            archive.add_task_results(evaluation.id, [_result("t1"), bad, _result("t2")])
    with pytest.raises(ArchiveError, match="no evaluation with id 999"):
        archive.add_task_results(999, [_result("t1"), _result("t2")])
    assert archive.task_results(evaluation.id) == {}
    assert archive.get_evaluation(evaluation.id) == evaluation


def test_task_results_written_together_when_raced_are_written_one_at_a_time(
    tmp_path: Path,
) -> None:
    """SQLite only (see the test above it): another process records one of the tasks between the
    check and the insert; the rest are recorded, that one counted once."""
    with _raced_by_another_writer(tmp_path, "t2") as (first, evaluation_id, raced):
        batch = [_result("t1"), _result("t2", 0.0), _result("t3")]
        assert first.add_task_results(evaluation_id, batch) == [True, False, True]
        assert raced == [True]
        results = first.task_results(evaluation_id)
        assert results == {"t2": _result("t2"), "t1": _result("t1"), "t3": _result("t3")}
        assert first.get_evaluation(evaluation_id).n_done == 3


def test_text_with_nul_is_stored_on_every_backend(archive: Archive) -> None:
    """A model may write NUL, which PostgreSQL's text cannot hold: the archive stores each one as
    the symbol for NUL, in every text column and every JSON value, the same on every backend."""
    nul, stored = "\x00", "\u2400"
    spec = {**SPEC, "prompt": f"says {nul}"}
    archive.add_agent(spec=spec, spec_hash="a")
    assert archive.add_agent(spec=spec, spec_hash="a").spec == {**SPEC, "prompt": f"says {stored}"}
    _create_run(archive)
    evaluation = archive.get_or_create_evaluation(
        agent_hash="a", benchmark="arith", task_ids=TASKS, split="search"
    )
    trace = {"trace": [{"output": f"x{nul}y", f"key{nul}": [nul]}]}
    outcome = _result("t1", output=f"a{nul}b", answer=nul, error=f"e{nul}", details=trace)
    assert archive.add_task_result(evaluation.id, outcome) is True
    assert archive.add_task_result(evaluation.id, outcome) is False
    archive.add_task_failure(evaluation.id, replace(outcome, task_id="t2", error_kind="provider"))
    proposal = archive.add_proposal(
        run_name="run-1", operator="mutate", parents=[], prompt=f"p{nul}", response=f"r{nul}",
        status="failed", reason=f"why{nul}", spec_hash=None, prompt_tokens=1, completion_tokens=1,
    )  # fmt: skip
    expected = _result(
        "t1",
        output=f"a{stored}b",
        answer=stored,
        error=f"e{stored}",
        details={"trace": [{"output": f"x{stored}y", f"key{stored}": [stored]}]},
    )
    assert archive.task_results(evaluation.id) == {"t1": expected}
    [failure] = archive.task_failures(evaluation.id)
    assert failure.error == expected.error
    [read] = archive.proposals("run-1")
    assert (read.prompt, read.response, read.reason) == (f"p{stored}", f"r{stored}", f"why{stored}")
    assert proposal.id == read.id


def test_task_result_recorded_concurrently_counts_once(tmp_path: Path) -> None:
    """SQLite only: PostgreSQL makes the second writer wait on the evaluation's row lock."""
    with _raced_by_another_writer(tmp_path, "t1") as (first, evaluation_id, raced):
        assert first.add_task_result(evaluation_id, _result("t1", 0.0)) is False
        assert raced == [True]
        assert first.task_results(evaluation_id) == {"t1": _result("t1")}
        assert first.get_evaluation(evaluation_id).n_done == 1


@contextmanager
def _raced_by_another_writer(
    tmp_path: Path, task_id: str
) -> Iterator[tuple[Archive, int, list[bool]]]:
    """Two archives on one SQLite file and an evaluation: just before `first` inserts its first
    task result, `second` records `task_id` (`raced` holds what that call returned)."""
    url = f"sqlite:///{tmp_path / 'archive.db'}"
    with Archive(url) as first, Archive(url) as second:
        first.add_agent(spec=SPEC, spec_hash="a")
        evaluation = first.get_or_create_evaluation(
            agent_hash="a", benchmark="arith", task_ids=TASKS, split="search"
        )
        raced: list[bool] = []

        def insert_first(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            if statement.startswith("INSERT INTO ad_task_result") and not raced:
                raced.append(second.add_task_result(evaluation.id, _result(task_id)))

        event.listen(first._engine, "before_cursor_execute", insert_first)
        yield first, evaluation.id, raced


def test_task_results_from_many_threads_all_count(archive_url: str) -> None:
    task_ids = [f"t{i}" for i in range(8)]
    with Archive(archive_url) as first, Archive(archive_url) as second:
        first.add_agent(spec=SPEC, spec_hash="a")
        evaluation = first.get_or_create_evaluation(
            agent_hash="a", benchmark="arith", task_ids=task_ids, split="search"
        )
        added = _in_threads(
            8, lambda i: (first, second)[i % 2].add_task_result(evaluation.id, _result(f"t{i}"))
        )
        assert added == [True] * 8
        stored = first.get_evaluation(evaluation.id)
        assert (stored.n_done, stored.prompt_tokens) == (8, 80)


def test_bad_task_result_writes_nothing(archive: Archive) -> None:
    archive.add_agent(spec=SPEC, spec_hash="a")
    evaluation = archive.get_or_create_evaluation(
        agent_hash="a", benchmark="arith", task_ids=TASKS, split="search"
    )
    for result, message in [
        (_result("t9"), "'t9' is not among the tasks"),
        (_result("t1", math.nan), "score must be a finite number"),
        (_result("t1", prompt_tokens=-1), "prompt_tokens must not be negative"),
        (_result("t1", completion_tokens=1.5), "completion_tokens must be an integer"),
        (_result("t1", latency_s=math.inf), "latency_s must be a finite number"),
        (_result("t1", output=None), "output must be a string"),
        (_result("t1", details={"when": object()}), "details is not plain JSON"),
        (_result("t1", details={"score": math.nan}), "details is not plain JSON"),
    ]:
        with pytest.raises(ArchiveError, match=message):
            archive.add_task_result(evaluation.id, result)
    assert archive.task_results(evaluation.id) == {}
    assert archive.get_evaluation(evaluation.id) == evaluation


def test_missing_evaluation_raises(archive: Archive) -> None:
    for call in (
        lambda: archive.get_evaluation(999),
        lambda: archive.task_results(999),
        lambda: archive.add_task_result(999, _result("t1")),
        lambda: archive.finish_evaluation(999, status="failed", mean=0, ci_low=0, ci_high=0),
    ):
        with pytest.raises(ArchiveError, match="no evaluation with id 999"):
            call()


def test_finish_sums_task_results(archive: Archive) -> None:
    finished = _evaluated(archive, "a", 0.5, cost=0.25)
    assert (finished.status, finished.mean, finished.ci_low, finished.ci_high) == (
        "complete",
        0.5,
        0.4,
        0.6,
    )
    assert (finished.n_done, finished.prompt_tokens, finished.completion_tokens) == (3, 30, 15)
    assert finished.cost == pytest.approx(0.75) and finished.wall_s == pytest.approx(1.5)
    assert finished.updated_at >= finished.created_at


def test_incomplete_evaluation_cannot_be_complete(archive: Archive) -> None:
    archive.add_agent(spec=SPEC, spec_hash="a")
    evaluation = archive.get_or_create_evaluation(
        agent_hash="a", benchmark="arith", task_ids=TASKS, split="search"
    )
    archive.add_task_result(evaluation.id, _result("t1"))
    before = archive.get_evaluation(evaluation.id)
    with pytest.raises(ArchiveError, match="has 1 of 3 task results"):
        archive.finish_evaluation(evaluation.id, status="complete", mean=1, ci_low=1, ci_high=1)
    with pytest.raises(ArchiveError, match="evaluation status must be one of"):
        archive.finish_evaluation(evaluation.id, status="running", mean=1, ci_low=1, ci_high=1)
    with pytest.raises(ArchiveError, match="mean must be a finite number"):
        archive.finish_evaluation(
            evaluation.id, status="pruned", mean=math.nan, ci_low=0, ci_high=1
        )
    assert archive.get_evaluation(evaluation.id) == before
    pruned = archive.finish_evaluation(
        evaluation.id, status="pruned", mean=1.0, ci_low=0.2, ci_high=1.0
    )
    assert (pruned.status, pruned.n_done) == ("pruned", 1)


# -- runs and their agents -----------------------------------------------------------------------


def test_run_entries_are_idempotent_and_checked(archive: Archive) -> None:
    _create_run(archive)
    evaluation = _evaluated(archive, "a", 0.5)
    _evaluated(archive, "b", 0.5)
    for trial_number in (3, 4):
        archive.add_run_entry(
            run_name="run-1", agent_hash="a", evaluation_id=evaluation.id, trial_number=trial_number
        )
    assert [row.agent_hash for row in archive.leaderboard(run_name="run-1")] == ["a"]
    with pytest.raises(ArchiveError, match="is of agent a, not b"):
        archive.add_run_entry(
            run_name="run-1", agent_hash="b", evaluation_id=evaluation.id, trial_number=None
        )


def test_run_evaluations_keep_the_run_order_and_filter_by_role(archive: Archive) -> None:
    _create_run(archive)
    searched = _evaluated(archive, "a", 1.0, run_name="run-1")
    archive.add_agent(spec={**SPEC, "id": "a"}, spec_hash="a")
    developed = archive.get_or_create_evaluation(  # a refiner's look at a on other items
        agent_hash="a", benchmark="arith", task_ids=HOLDOUT, split="search"
    )
    for task_id in HOLDOUT:
        archive.add_task_result(developed.id, _result(task_id, 0.0))
    archive.finish_evaluation(developed.id, status="complete", mean=0.0, ci_low=0.0, ci_high=0.1)
    archive.add_run_entry(
        run_name="run-1", agent_hash="a", evaluation_id=developed.id, trial_number=None, role="dev"
    )
    assert [e.id for e in archive.run_evaluations("run-1")] == [searched.id, developed.id]
    only = archive.run_evaluations("run-1", split="search", role="candidate")
    assert [e.id for e in only] == [searched.id]
    assert [e.id for e in archive.run_evaluations("run-1", role="dev")] == [developed.id]
    assert archive.run_evaluations("run-1", split="holdout", role="candidate") == []
    with pytest.raises(ArchiveError, match="run entry role must be one of"):
        archive.run_evaluations("run-1", role="searched")
    # ranked nowhere, not even across runs, until a run searches on those items
    assert [row.evaluation_id for row in archive.leaderboard()] == [searched.id]
    assert [row.evaluation_id for row in archive.pareto()] == [searched.id]
    _create_run(archive, "run-2")
    archive.add_run_entry(
        run_name="run-2", agent_hash="a", evaluation_id=developed.id, trial_number=0
    )
    assert {row.evaluation_id for row in archive.leaderboard()} == {searched.id, developed.id}
    outside = _evaluated(archive, "b", 0.5)  # in no run: ranked as before
    assert outside.id in {row.evaluation_id for row in archive.leaderboard()}


def test_leaderboard_orders_by_mean_then_cost(archive: Archive) -> None:
    _create_run(archive)
    _create_run(archive, "run-2")
    _evaluated(archive, "dear", 0.5, cost=0.3, run_name="run-1")
    _evaluated(archive, "best", 0.9, run_name="run-1")
    _evaluated(archive, "cheap", 0.5, cost=0.1, run_name="run-1")
    _evaluated(archive, "pruned", 0.95, status="pruned", run_name="run-1")
    _evaluated(archive, "elsewhere", 0.7, run_name="run-2")
    _evaluated(archive, "held", 0.6, split="holdout", run_name="run-1")

    board = archive.leaderboard(run_name="run-1")
    assert [(row.rank, row.agent_hash) for row in board] == [(1, "best"), (2, "cheap"), (3, "dear")]
    top = board[0]
    assert (top.mean, top.ci_low, top.ci_high, top.n_tasks, top.status) == (
        0.9,
        0.8,
        1.0,
        3,
        "complete",
    )
    assert top.spec == {**SPEC, "id": "best"} and top.benchmark == "arith"
    assert (top.prompt_tokens, top.completion_tokens) == (30, 15)
    assert [row.agent_hash for row in archive.leaderboard()] == [
        "best",
        "elsewhere",
        "cheap",
        "dear",
    ]
    assert [row.agent_hash for row in archive.leaderboard(limit=1)] == ["best"]
    assert [row.agent_hash for row in archive.leaderboard(split="holdout")] == ["held"]
    assert archive.leaderboard(benchmark="other") == []
    with pytest.raises(ArchiveError, match="limit must be at least 1"):
        archive.leaderboard(limit=0)


def test_run_totals_cover_every_entry(archive: Archive) -> None:
    _create_run(archive)
    assert archive.run_totals("run-1") == RunTotals("run-1", 0, 0, 0, 0, 0, 0.0, 0.0)
    _evaluated(archive, "a", 0.5, cost=0.1, run_name="run-1")
    _evaluated(archive, "a", 0.5, cost=0.1, split="holdout", run_name="run-1")
    _evaluated(archive, "b", 0.2, cost=0.1, status="pruned", run_name="run-1")
    _evaluated(archive, "c", 0.9, cost=5.0)  # not in the run
    totals = archive.run_totals("run-1")
    assert (totals.n_agents, totals.n_complete) == (2, 1)
    assert (totals.prompt_tokens, totals.completion_tokens) == (80, 40)
    assert totals.cost == pytest.approx(0.8) and totals.wall_s == pytest.approx(4.0)


def test_the_searchs_own_calls_count_in_the_run_totals(archive: Archive) -> None:
    _create_run(archive)
    _evaluated(archive, "a", 0.5, cost=0.1, run_name="run-1")
    before = archive.run_totals("run-1")
    call = {"purpose": "refinement", "model": "m", "latency_s": 1.5}
    archive.add_search_call(
        run_name="run-1", prompt_tokens=7, completion_tokens=3, cost=0.2, **call
    )
    totals = archive.run_totals("run-1")
    assert (totals.n_search_calls, totals.n_agents) == (1, 1)
    assert totals.prompt_tokens - before.prompt_tokens == 7
    assert totals.completion_tokens - before.completion_tokens == 3
    assert totals.cost - before.cost == pytest.approx(0.2)
    assert totals.wall_s == before.wall_s  # task time only; the run's clock has the rest
    with pytest.raises(ArchiveError, match="prompt_tokens"):
        archive.add_search_call(
            run_name="run-1", prompt_tokens=-1, completion_tokens=0, cost=0, **call
        )
    with pytest.raises(ArchiveError, match="no run named"):
        archive.add_search_call(
            run_name="ghost", prompt_tokens=1, completion_tokens=0, cost=0, **call
        )
    assert archive.run_totals("run-1").n_search_calls == 1
