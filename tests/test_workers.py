"""Many workers on one archive, and crash safety, with real processes and SIGKILL.

The fake model answers after a fixed latency, so the workers overlap as real ones do. Each worker
logs every task it ran and committed; no (agent, split, task) may appear twice across them.
"""

from __future__ import annotations

import json
import logging
import random
import signal
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest
from forked_python import ForkedProcess, start_forked
from outage_proxy import OutageProxy
from sqlalchemy import create_engine, event, make_url, text

from agentdesign.archive import Archive

_WORKER = """
import json, sys
from agentdesign.archive import Archive
from agentdesign.components import AgentDesignError
from agentdesign.components.testing import FakeChatModel
from agentdesign.search import Budget, RunConfig
from agentdesign.search import Reporter
from agentdesign.search import resume_search, run_worker
from agentdesign.search import space_from_option

url, name, log_path, mode = sys.argv[1:5]


class Log(Reporter):
    '''Writes each committed task as (agent, split, task) to this worker's log.'''

    def __init__(self) -> None:
        self.agent = self.split = ""
        self.file = open(log_path, "a", buffering=1)

    def agent_started(self, spec, n_tasks, n_done, split) -> None:
        self.agent, self.split = spec.spec_hash, split

    def task_finished(self, outcome) -> None:
        self.file.write(json.dumps([self.agent, self.split, outcome.task_id]) + "\\n")

    def agent_finished(self, spec, evaluation, split) -> None:
        pass


llm = FakeChatModel(lambda model, messages, temperature, seed: "Answer: 3", latency_s=0.05)
quick = space_from_option("quick")
config = RunConfig.of(
    name=name, model="fake/model", strategy="random", budget=Budget(max_agents=4),
    n_search=3, n_holdout=2, confirm_top=2, baselines=[],
    choices=quick.get("choices", {}), limits=quick.get("limits", {}),
)
try:
    with Archive(url) as archive:
        if mode == "resume":
            try:
                archive.get_run(name)
            except Exception:
                run_worker(archive, config, llm=llm, reporter=Log(), heartbeat_s=1)
            else:
                resume_search(archive, name, llm=llm, reporter=Log(), heartbeat_s=1)
        else:
            run_worker(archive, config, llm=llm, reporter=Log(), heartbeat_s=1)
except AgentDesignError as exc:  # as the command line says it
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)
"""


def _start(url: str, log: Path, mode: str = "worker") -> ForkedProcess:
    """A worker process, forked from one that imported agentdesign already."""
    return start_forked(
        _WORKER,
        url,
        "shared",
        str(log),
        mode,
        cwd=Path.cwd(),
    )


def _logged(logs: list[Path]) -> Counter[tuple[str, str, str]]:
    runs: Counter[tuple[str, str, str]] = Counter()
    for log in logs:
        if log.exists():
            runs.update(tuple(json.loads(line)) for line in log.read_text().splitlines() if line)
    return runs


def _check_run(url: str, logs: list[Path]) -> None:
    """The run finished within its budget, with every committed task run exactly once."""
    twice = [key for key, n in _logged(logs).items() if n > 1]
    assert not twice, f"tasks run twice: {twice}"
    with Archive(url) as archive:
        totals = archive.run_totals("shared")
        assert totals.n_complete == 4 and totals.n_agents == 4  # budget met, not exceeded
        board = archive.leaderboard(run_name="shared", limit=100)
        assert len(board) == 4
        holdout = archive.leaderboard(run_name="shared", split="holdout")
        assert [r.agent_hash for r in holdout] == [r.agent_hash for r in board[:2]] or (
            {r.mean for r in board[:3]} == {board[0].mean}  # ties may rank either way
        )
        assert len(holdout) == 2
        assert archive.get_run("shared").status == "finished"
        for row in board:  # every committed result of every search evaluation is in the logs
            assert len(archive.task_results(row.evaluation_id)) == 3


def _wait(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.postgres
def test_three_workers_share_a_run_on_postgresql(
    postgres_schema: Callable[[], str], tmp_path: Path
) -> None:
    url = postgres_schema()
    logs = [tmp_path / f"worker{i}.log" for i in range(3)]
    workers = [_start(url, log) for log in logs]
    for worker in workers:
        _, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, err
    _check_run(url, logs)
    assert sum(1 for log in logs if log.exists() and log.read_text()) >= 2  # work was shared


_TPE_WORKER = """
import json, sys
import optuna
from agentdesign.archive import Archive
from agentdesign.components.testing import FakeChatModel
from agentdesign.search import Budget, RunConfig, run_worker, space_from_option
from agentdesign.search.study import Engine

url, log_path, agents = sys.argv[1], sys.argv[2], int(sys.argv[3])
log = open(log_path, "a", buffering=1)
asked = Engine.ask


def ask(self):
    # each design this worker is given, with the designs the other workers run at that moment
    work = asked(self)
    if work is not None:
        trial, spec = work
        running = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        elsewhere = [t.user_attrs.get("spec") for t in running if t.number != trial.number]
        log.write(json.dumps([trial.number, spec.to_json(), elsewhere]) + "\\n")
    return work


Engine.ask = ask
llm = FakeChatModel(lambda model, messages, temperature, seed: "Answer: 3", latency_s=0.1)
quick = space_from_option("quick")
config = RunConfig.of(
    "tpe", model="fake/model", strategy="tpe", budget=Budget(max_agents=agents),
    n_search=3, n_holdout=0, baselines=[],
    choices=quick.get("choices", {}), limits=quick.get("limits", {}),
)
with Archive(url) as archive:
    run_worker(archive, config, llm=llm, heartbeat_s=1)
"""


@pytest.mark.postgres
def test_four_tpe_workers_never_draw_a_design_another_one_is_running(
    postgres_schema: Callable[[], str], tmp_path: Path
) -> None:
    """optuna's constant liar across worker processes: each worker is given a design that no
    other worker runs at that moment. (A design that finished earlier may come again, as in one
    process: TPE returns to good designs, and the archive's result is reused, not paid again.)"""
    url = postgres_schema()
    logs = [tmp_path / f"tpe{i}.log" for i in range(4)]
    workers = [start_forked(_TPE_WORKER, url, str(log), "20", cwd=Path.cwd()) for log in logs]
    for worker in workers:
        _, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
    asked = [
        json.loads(line) for log in logs if log.exists() for line in log.read_text().splitlines()
    ]
    assert len({log for log in logs if log.exists() and log.read_text()}) >= 3  # work was shared
    clashes = [number for number, spec, elsewhere in asked if spec in elsewhere]
    assert not clashes, f"trials given a design another worker was running: {clashes}"
    with Archive(url) as archive:
        assert archive.run_totals("tpe").n_complete == 20


@pytest.mark.postgres
def test_workers_ask_one_at_a_time_and_not_behind_a_held_up_one(
    postgres_schema: Callable[[], str], caplog: pytest.LogCaptureFixture
) -> None:
    from agentdesign.search.study import trial_storage

    with Archive(postgres_schema()) as archive:
        mine, theirs = trial_storage(archive, 1), trial_storage(archive, 1)
        events: list[str] = []

        def other_worker(wait_s: float) -> None:
            with theirs.asking("run", wait_s=wait_s):
                events.append("theirs")

        # the other worker waits for this one; then this one is held up past its wait
        for hold_s, wait_s, expected in (
            (0.5, 5.0, ["left", "theirs"]),
            (3.0, 0.5, ["theirs", "left"]),
        ):
            events.clear()
            with mine.asking("run", wait_s=5.0):
                other = threading.Thread(target=other_worker, args=(wait_s,))
                other.start()
                time.sleep(hold_s)
                events.append("left")
            other.join()
            assert events == expected
        assert "held the ask lock of run for 0.5 s: asking without it" in caplog.text


@pytest.mark.postgres
def test_workers_ride_through_a_database_restart(
    postgres_schema: Callable[[], str], tmp_path: Path
) -> None:
    """PostgreSQL restarts (every connection dropped, the port closed for a second and a half)
    while two workers share a run: they reconnect and finish it, with nothing lost or run twice.
    A worker whose write the outage cut in its commit (written or not, nobody can tell) stops
    instead, in one line, and the other takes its work over; were both stopped, a resume."""
    direct = make_url(postgres_schema())
    with OutageProxy((direct.host or "127.0.0.1", direct.port or 5432)) as proxy:
        url = direct.set(port=proxy.port).render_as_string(hide_password=False)
        logs = [tmp_path / f"worker{i}.log" for i in range(2)]
        workers = [_start(url, log) for log in logs]
        _wait(lambda: len(_logged(logs)) >= 4, 120)  # both well under way
        proxy.cut(1.5)
        stopped = 0
        for worker in workers:
            _, err = worker.communicate(timeout=240)
            assert "lost the archive database" in err, err
            if worker.returncode == 0:
                assert "reconnecting for up to 60 s" in err, err
                continue
            last = err.strip().splitlines()[-1]
            assert worker.returncode == 2 and last.startswith("error: lost the archive"), err
            assert "during a commit; this process stopped and what it recorded is kept" in last
            stopped += 1
        if stopped == len(workers):
            logs.append(tmp_path / "resumed.log")
            resumed = _start(url, logs[-1], mode="resume")
            _, err = resumed.communicate(timeout=240)
            assert resumed.returncode == 0, err
    _check_run(direct.render_as_string(hide_password=False), logs)


@pytest.mark.postgres
@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used")
def test_a_read_of_the_trials_cut_half_way_rides_through(
    postgres_schema: Callable[[], str], caplog: pytest.LogCaptureFixture
) -> None:
    """The outage drops the connection after optuna read the trials but before it loaded their
    values: optuna tries another query on the dropped connection, which refuses it until rolled
    back; the read runs again once the database answers, as any read cut by an outage does."""
    direct = make_url(postgres_schema())
    with OutageProxy((direct.host or "127.0.0.1", direct.port or 5432)) as proxy:
        url = direct.set(port=proxy.port).render_as_string(hide_password=False)
        with Archive(url) as archive:
            storage = archive.study_storage(
                heartbeat_interval=10, grace_period=30, stale_trial_callback=lambda *_: None
            )
            study = optuna.create_study(study_name="cut", storage=storage)
            for x in (1.0, 2.0):
                study.enqueue_trial({"x": x})
            cuts: list[str] = []

            def cut_once(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
                if "FROM trial_values" in statement and not cuts:
                    cuts.append(statement)
                    proxy.cut(0.3)

            event.listen(storage.engine, "before_cursor_execute", cut_once)
            with caplog.at_level(logging.WARNING):
                study = optuna.load_study(study_name="cut", storage=storage)
                waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
            fixed = [trial.system_attrs["fixed_params"] for trial in waiting]
            assert len(cuts) == 1 and fixed == [{"x": 1.0}, {"x": 2.0}]
            assert "reconnecting for up to 60 s" in caplog.text
            storage.engine.dispose()


@pytest.mark.postgres
def test_a_worker_whose_database_stays_away_stops_in_one_line_and_resumes(
    postgres_schema: Callable[[], str],
) -> None:
    """The database is gone for longer than the worker waits for it: the worker stops with one
    line, keeping what it recorded, and a resume once the database is back finishes the run."""
    from agentdesign.components import AgentDesignError
    from agentdesign.components.testing import FakeChatModel
    from agentdesign.search import Budget, RunConfig
    from agentdesign.search.study import resume_search, run_worker

    direct = make_url(postgres_schema())
    config = RunConfig.of(
        name="away", model="fake/model", strategy="random", budget=Budget(max_agents=2),
        n_search=3, n_holdout=1, baselines=[],
    )  # fmt: skip
    with OutageProxy((direct.host or "127.0.0.1", direct.port or 5432)) as proxy:
        url = direct.set(port=proxy.port).render_as_string(hide_password=False)
        outage = threading.Thread(target=proxy.cut, args=(4.0,), daemon=True)
        recorded = create_engine(direct)

        def answer(model: str, messages: object, temperature: float, seed: int | None) -> str:
            if not outage.is_alive() and not outage.ident:  # once a task is recorded: 4 s away
                with recorded.connect() as conn:
                    if conn.execute(text("SELECT COUNT(*) FROM ad_task_result")).scalar():
                        outage.start()
                        time.sleep(0.2)
            return "Answer: 3"

        with Archive(url, reconnect_s=1.0) as archive, pytest.raises(AgentDesignError) as stopped:
            run_worker(archive, config, llm=FakeChatModel(answer), heartbeat_s=1)
        message = str(stopped.value)
        assert "\n" not in message and message.startswith("lost the archive database"), message
        assert "did not answer again within 1 s" in message
        assert "`agentdesign resume away` goes on once the database answers" in message
        outage.join()
        with Archive(url) as archive:
            [evaluation] = archive.run_evaluations("away")
            kept = archive.task_results(evaluation.id)
            assert len(kept) >= 1  # what it recorded before the outage
            resume_search(archive, "away", llm=FakeChatModel(answer), heartbeat_s=1)
            assert archive.get_run("away").status == "finished"
            assert archive.run_totals("away").n_complete == 2
            again = archive.task_results(evaluation.id)
            assert all(again[task_id] == outcome for task_id, outcome in kept.items())
        recorded.dispose()


@pytest.mark.postgres
def test_a_killed_worker_is_taken_over_by_heartbeat(
    postgres_schema: Callable[[], str], tmp_path: Path
) -> None:
    url = postgres_schema()
    logs = [tmp_path / f"worker{i}.log" for i in range(2)]
    victim = _start(url, logs[0])
    _wait(lambda: logs[0].exists() and len(logs[0].read_text().splitlines()) >= 2, 120)
    survivor = _start(url, logs[1])
    time.sleep(0.3)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    committed = _logged(logs[:1])
    _, err = survivor.communicate(timeout=240)
    assert survivor.returncode == 0, err
    _check_run(url, logs)
    assert committed  # the victim's work was kept and not redone (no duplicates above)


@pytest.mark.postgres
def test_a_worker_killed_before_its_trials_first_heartbeat_is_taken_over(
    postgres_schema: Callable[[], str], tmp_path: Path
) -> None:
    """A running trial with no heartbeat at all, as a worker killed between starting a trial and
    its first heartbeat leaves it: optuna never fails such a trial, and the survivor used to wait
    for it before the holdout confirmation for ever (one CI run in four timed out so)."""
    from agentdesign.search.study import study_name

    url = postgres_schema()
    with Archive(url):  # its tables, optuna's among them
        pass
    dead = optuna.create_study(
        study_name=study_name("shared"),
        storage=optuna.storages.RDBStorage(url),  # no heartbeats
        direction="maximize",
    )
    dead.ask()
    log = tmp_path / "worker.log"
    survivor = _start(url, log)
    try:
        _, err = survivor.communicate(timeout=240)
    finally:
        survivor.kill()  # if it hangs, not left waiting after the test
    assert survivor.returncode == 0, err
    _check_run(url, [log])
    assert dead.trials[0].state == optuna.trial.TrialState.FAIL


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used")
def test_a_trial_has_its_heartbeat_from_its_start(archive: Archive) -> None:
    """Before the sampler's first call (inside `Study.ask`), for a new trial and for one taken
    from the waiting queue: a worker killed before it returns leaves a trial that other workers
    see as dead once it has had no heartbeat for the grace period."""
    storage = archive.study_storage(
        heartbeat_interval=1,
        grace_period=3,
        stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(),
    )
    unbeaten: list[dict[int, int]] = []

    class Probe(optuna.samplers.RandomSampler):
        def before_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
            unbeaten.append(storage.running_without_heartbeat(study.study_name))

    study = optuna.create_study(study_name="probe", storage=storage, sampler=Probe())
    study.ask()
    study.enqueue_trial({"x": 1.0})
    study.ask()
    assert unbeaten == [{}, {}]
    assert storage.running_without_heartbeat("probe") == {}


def test_sigkill_at_random_moments_then_resume_on_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    url = f"sqlite:///{db}"
    logs: list[Path] = []
    rng = random.Random(7)
    for attempt in range(3):
        before = _rows(db)
        logs.append(tmp_path / f"attempt{attempt}.log")
        proc = _start(url, logs[-1], mode="resume")
        n_before = len(before)
        _wait(lambda p=proc, n=n_before: p.poll() is not None or len(_rows(db)) > n, 120)
        time.sleep(rng.uniform(0.0, 0.6))  # somewhere inside the next tasks
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        after = _rows(db)
        assert all(after[key] == row for key, row in before.items())  # nothing lost or changed
    logs.append(tmp_path / "final.log")
    final = _start(url, logs[-1], mode="resume")
    _, err = final.communicate(timeout=240)
    assert final.returncode == 0, err
    _check_run(url, logs)


def _rows(db: Path) -> dict[tuple[int, str], tuple[object, ...]]:
    if not db.exists():
        return {}
    try:
        with sqlite3.connect(db, timeout=10) as conn:
            rows = conn.execute(
                "SELECT evaluation_id, task_id, output, score, created_at FROM ad_task_result"
            ).fetchall()
    except sqlite3.OperationalError:  # the tables are not made yet
        return {}
    return {(r[0], r[1]): tuple(r[2:]) for r in rows}


def test_a_worker_held_up_past_its_lease_abandons_the_lost_work_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker stopped (as by SIGSTOP) in the middle of a task while another fails its trial and
    takes its evaluation over: once it goes on, it records nothing twice, runs no task of the lost
    evaluation again, tells optuna nothing about the failed trial, logs one line, and carries on
    with new designs. Simulated without timing: the held-up worker's model call is where the
    other worker runs, so on SQLite (where any trial another process holds is stale) it always
    finds the first worker's trial to take over."""
    from agentdesign.components.testing import FakeChatModel
    from agentdesign.search import Budget, RunConfig
    from agentdesign.search.study import resume_search, run_worker

    def answer(model: str, messages: object, temperature: float, seed: int | None) -> str:
        return "Answer: 3"

    takeover = FakeChatModel(answer)
    held_up_calls = 0

    def held_up(model: str, messages: object, temperature: float, seed: int | None) -> str:
        nonlocal held_up_calls
        held_up_calls += 1
        if held_up_calls == 1:  # "stopped" here: the other worker does the whole first design
            resume_search(archive, "held", budget=Budget(max_agents=1), llm=takeover)
        return answer(model, messages, temperature, seed)

    config = RunConfig.of(
        name="held", model="fake/model", strategy="random", budget=Budget(max_agents=3),
        n_search=3, n_holdout=1, baselines=[],
    )  # fmt: skip
    with Archive(f"sqlite:///{tmp_path / 'held.db'}") as archive:
        recorded: list[bool] = []
        add_task_result = archive.add_task_result

        def add_and_note(evaluation_id: int, outcome: Any) -> bool:
            recorded.append(add_task_result(evaluation_id, outcome))
            return recorded[-1]

        archive.add_task_result = add_and_note  # type: ignore[method-assign]
        with caplog.at_level(logging.WARNING):
            summary = run_worker(archive, config, llm=FakeChatModel(held_up))
        assert summary.agents_done == 3  # it went on with new designs after the lost one
        assert recorded.count(False) == 1  # only the task in flight was refused, none run again
        taken_over = [r for r in caplog.records if "taken over by another process" in r.message]
        assert len(taken_over) == 1
        entries = archive.run_evaluations("held")
        first = entries[0]
        assert len(archive.task_results(first.id)) == 3 and first.status == "complete"
        assert archive.get_run("held").status == "finished"
        study = optuna.load_study(study_name="agentdesign/held", storage=archive.url)
        states = [t.state for t in study.get_trials(deepcopy=False)]
    # the held-up worker's trial, failed by the other; its retry, told by the other; two more
    assert states.count(optuna.trial.TrialState.FAIL) == 1
    assert states.count(optuna.trial.TrialState.COMPLETE) == 3
