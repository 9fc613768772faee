"""A run's items among the other runs of its archive: the split seed as its own setting, the
development items stored and kept apart, a split that collides with another run's refused in one
line, every look at a holdout recorded and counted in the verdict, and the run header's word on a
budget that never gets a strategy past its start-up designs."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from test_bad_input import OFFLINE_MODEL, refuses
from test_cli import make_archive_with_a_run
from typer.testing import CliRunner

from agentdesign.archive import Archive, ArchiveError
from agentdesign.components import AgentDesignError, AgentSpec, Message
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import get_benchmark, make_split
from agentdesign.search import Budget, RunConfig, make_strategy, resume_search, run_search
from agentdesign.search.cli import RunOptions, _app
from agentdesign.search.config import (
    RunItems,
    check_split,
    dev_task_ids,
    draw_items,
    holdout_reuse,
    run_header,
)
from agentdesign.search.study import stored_engine


def answers_3(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
    return "Answer: 3"


FAKE = FakeChatModel(answers_3)
# Single calls only: no program runs in the sandbox, so that a run takes a second.
CHOICES = {"workflow": ["single"], "tool": ["none"], "planning": ["none"], "reflection": ["none"]}


def config(name: str, **fields: object) -> RunConfig:
    settings: dict[str, object] = {
        "benchmark": "gsm8k",  # as `evaluate` draws by default
        "model": "fake/model",
        "budget": Budget(max_agents=2),
        "n_search": 3,
        "n_holdout": 2,
        "choices": CHOICES,
        **fields,
    }
    return RunConfig.of(name=name, **settings)  # type: ignore[arg-type]


def cli(monkeypatch: pytest.MonkeyPatch, folder: Path, command: str) -> str:
    """`agentdesign COMMAND` in this process, on the fake model (a run on GSM8K in the
    single-call space, written to `folder`); its output (exit 0 asserted)."""
    from agentdesign.search.config import _resolve

    args = command.split()
    if args[0] == "run":
        space = folder / "single-calls.json"
        space.write_text(json.dumps({"choices": CHOICES}))
        args += ["--benchmark", "gsm8k", "--space", str(space), "--model", "openai/fake-model"]
    monkeypatch.setattr(_resolve, "default_chat_model", lambda **_: FAKE)
    monkeypatch.setattr(_app, "default_chat_model", lambda **_: FAKE)
    monkeypatch.setattr(_app, "console", _app.Console(width=400))
    result = CliRunner().invoke(_app.app, args)
    assert result.exit_code == 0, result.output
    return result.output


# -- the split seed --------------------------------------------------------------------------------


def test_the_split_seed_is_its_own_setting_stored_and_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--split-seed` draws the split, `--seed` seeds the strategy; the header shows both, and
    that a budget of 1 design never gets tpe past its random start-up."""
    db = tmp_path / "s.db"
    shown = cli(
        monkeypatch,
        tmp_path,
        f"run --name a --seed 3 --split-seed 5 --n-search 3 --n-holdout 2 --max-agents 1 "
        f"--storage {db}",
    )
    assert "split seed 5: 3 search, 2 holdout items; strategy tpe, seed 3" in shown
    assert (
        "tpe draws its first 4 designs at random and the budget is 1: this run is a random "
        "search (a budget above 4 designs gets past them)"
    ) in shown
    pool = [t.id for t in get_benchmark("gsm8k").tasks()]
    drawn = make_split(pool, seed=5, n_search=3, n_holdout=2)
    with Archive(str(db)) as archive:
        run = archive.get_run("a")
    assert (run.search_task_ids, run.holdout_task_ids) == (drawn.search_ids, drawn.holdout_ids)
    assert run.split_seed == run.config["split_seed"] == 5 and run.config["seed"] == 3
    other = RunOptions(seed=4, split_seed=5).config("b")  # another strategy seed, the same split
    assert (other.seed, other.split.seed) == (4, 5)
    assert RunOptions(seed=4).config("c").split.seed == 0  # no longer the strategy's seed


def test_an_old_style_run_resumes_with_its_split_and_dev_items(archive_url: str) -> None:
    """A run stored before the split seed was its own setting (split seed = seed, no dev items
    stored, no `allow_split_overlap` in its config) in a schema 7 archive resumes on the items it
    had, and its refiner's development items are the ones it drew then."""
    old = config("old", strategy="mcts", refine_every=2, seed=3, split_seed=3, n_holdout=0)
    confirmed = config("confirmed", seed=3, split_seed=4)  # its holdout is looked at
    with Archive(archive_url) as archive:
        run_search(archive, old, llm=FAKE)
        run_search(archive, confirmed, llm=FAKE)
        before = archive.get_run("old")
        dev = before.dev_task_ids
        looks = archive.holdout_looks(benchmark="gsm8k")
    assert dev and dev == dev_task_ids(get_benchmark("gsm8k"), old)
    assert {look.run_name for look in looks} == {"confirmed"} and len(looks) >= 2
    stored = {k: v for k, v in before.config.items() if k != "allow_split_overlap"}
    engine = create_engine(archive_url)
    try:
        with engine.begin() as conn:  # the archive as schema 7 left it
            conn.execute(text("DROP TABLE ad_holdout_look"))
            conn.execute(text("ALTER TABLE ad_run DROP COLUMN dev_task_ids"))
            conn.execute(
                text("UPDATE ad_run SET config = :config WHERE name = 'old'"),
                {"config": json.dumps(stored)},
            )
            conn.execute(text("UPDATE ad_meta SET value = '7' WHERE key = 'schema_version'"))
            conn.execute(text("UPDATE ad_alembic_version SET version_num = '0007'"))
    finally:
        engine.dispose()
    with Archive(archive_url) as archive:
        upgraded = archive.get_run("old")
        assert upgraded.dev_task_ids == ()  # not stored then; drawn again from its config
        assert [t.id for t in stored_engine(archive, "old", None, FAKE, None, 1).dev_tasks] == list(
            dev
        )
        # the confirmed run's holdout evaluations are its looks, read off its run entries
        assert [
            (look.run_name, look.agent_hash, look.evaluation_id, look.source)
            for look in archive.holdout_looks(benchmark="gsm8k")
        ] == [(look.run_name, look.agent_hash, look.evaluation_id, look.source) for look in looks]
        resume_search(archive, "old", budget=Budget(max_agents=3), llm=FAKE)
        resumed = archive.get_run("old")
        searched = archive.run_evaluations("old")
    assert (resumed.search_task_ids, resumed.split_seed) == (before.search_task_ids, 3)
    assert len(searched) == 3 and all(
        set(e.task_ids) == set(before.search_task_ids) for e in searched
    )


# -- development items -------------------------------------------------------------------------


def test_dev_items_are_stored_with_the_run_and_apart_from_its_split(archive: Archive) -> None:
    run_search(archive, config("dev", strategy="mcts", refine_every=2), llm=FAKE)
    run = archive.get_run("dev")
    assert len(run.dev_task_ids) == 2  # a third of 3 search items, at least 2
    assert set(run.dev_task_ids).isdisjoint({*run.search_task_ids, *run.holdout_task_ids})
    assert run.dev_task_ids == dev_task_ids(
        get_benchmark("gsm8k"), config("x", strategy="mcts", refine_every=2)
    )
    for dev, needle in (
        (["t1"], "development and the search"),
        (["h1"], "development and the holdout"),
    ):
        with pytest.raises(ArchiveError, match=needle):
            archive.create_run(
                name="bad",
                benchmark="gsm8k",
                model="m",
                strategy="random",
                budget={},
                config={},
                split_seed=0,
                search_task_ids=["t1", "t2"],
                holdout_task_ids=["h1"],
                dev_task_ids=dev,
            )
    assert [r.name for r in archive.list_runs()] == ["dev"]


# -- a split that collides with another run's ----------------------------------------------------


def test_a_split_that_collides_with_another_runs_is_refused_in_one_line(tmp_path: Path) -> None:
    """The kept run searched 3 items and holds 2 out (split seed 0): more search items on the same
    seed search its holdout, fewer put its search items in the new holdout."""
    db = make_archive_with_a_run(tmp_path)
    with sqlite3.connect(db) as conn:  # all in its one file, so that its digest is its content
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for sizes, needle in (
        (["--n-search", "5", "--n-holdout", "2"], "2 of its search items are run kept's holdout"),
        (["--n-search", "2", "--n-holdout", "2"], "1 of its holdout items are items run kept's"),
    ):
        refuses(["run", "--name", "new", *sizes, *OFFLINE_MODEL], needle, db, tmp_path)
    with Archive(str(db)) as archive:
        on_kept = archive.get_run("kept").benchmark  # the command line's default, as above
        with pytest.raises(
            AgentDesignError, match=r"--split-seed \d+ draws items no run"
        ) as refused:
            run_search(archive, config("new", benchmark=on_kept, n_search=5), llm=FAKE)
        assert str(refused.value).endswith("or --allow-split-overlap starts it anyway")
        assert [r.name for r in archive.list_runs()] == ["kept"]
        seed = int(re.findall(r"--split-seed (\d+)", str(refused.value))[0])
        new = config("new", benchmark=on_kept, n_search=5, split_seed=seed)
        run_search(archive, new, llm=FAKE)  # the name's free
        new_run, kept = archive.get_run("new"), archive.get_run("kept")
        assert RunItems.of(new_run).used.isdisjoint(RunItems.of(kept).used)
        bench = get_benchmark(on_kept)
        pool = [t.id for t in bench.tasks()]
        for fine in (
            config("allowed", benchmark=on_kept, n_search=5, allow_split_overlap=True),
            # kept's split with more holdout items: no collision
            config("shared", benchmark=on_kept, n_holdout=4),
        ):
            check_split(archive, fine, draw_items(bench, fine), pool=pool)


# -- looks at a holdout ------------------------------------------------------------------------


def test_every_look_at_a_holdout_is_recorded_and_the_verdict_counts_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "looks.db"
    with Archive(str(db)) as archive:
        run_search(archive, config("a"), llm=FAKE)
        own = archive.holdout_looks(benchmark="gsm8k")
        assert own and {(look.run_name, look.source) for look in own} == {("a", "run")}
        assert all(set(look.task_ids) == set(archive.get_run("a").holdout_task_ids) for look in own)
        assert holdout_reuse(archive, "a") is None  # only its own designs so far
        run_search(archive, config("b", strategy="random", seed=9), llm=FAKE)  # a's split again
        line = holdout_reuse(archive, "a")
        designs = {look.agent_hash for look in archive.holdout_looks(benchmark="gsm8k")}
    assert line is not None and len(designs) > len({look.agent_hash for look in own})
    assert line.startswith(f"this holdout has now scored {len(designs)} designs in 2 runs")
    assert re.search(r"a new run with --split-seed \d+ draws a fresh holdout", line)
    shown = cli(monkeypatch, tmp_path, f"show a --storage {db}")
    assert f"this holdout has now scored {len(designs)} designs in 2 runs" in shown
    spec = AgentSpec.create(model="openai/fake-model", workflow="debate")
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_dict()))
    scored = cli(monkeypatch, tmp_path, f"evaluate {spec_file} --run a --storage {db}")
    assert f"scored {len(designs) + 1} designs in 2 runs and 1 evaluate command" in scored
    cli(monkeypatch, tmp_path, f"evaluate {spec_file} --run a --storage {db}")
    with Archive(str(db)) as archive:  # the same scores looked at again: one look
        evaluated = [
            look for look in archive.holdout_looks(benchmark="gsm8k") if look.source == "evaluate"
        ]
        assert [(look.run_name, look.agent_hash) for look in evaluated] == [("a", spec.spec_hash)]
    as_json = json.loads(cli(monkeypatch, tmp_path, f"show a --json --storage {db}"))
    assert as_json["holdout_reuse"].startswith(f"this holdout has now scored {len(designs) + 1}")
    # a drawn evaluation that holds a's holdout items is a look too; one that does not is not
    pool = [t.id for t in get_benchmark("gsm8k").tasks()]
    first = make_split(pool, seed=0, n_search=10, n_holdout=0).search_ids
    assert set(first) & set(own[0].task_ids)
    cli(monkeypatch, tmp_path, f"evaluate {spec_file} --items 10 --storage {db}")
    cli(monkeypatch, tmp_path, f"evaluate {spec_file} --items 2 --seed 77 --storage {db}")
    with Archive(str(db)) as archive:
        later = [
            look for look in archive.holdout_looks(benchmark="gsm8k") if look.source == "evaluate"
        ]
    assert [(look.run_name, sorted(look.task_ids)) for look in later[1:]] == [(None, sorted(first))]


# -- tiny budgets ----------------------------------------------------------------------------------


def test_the_header_says_when_the_budget_never_gets_past_the_start_up(archive: Archive) -> None:
    run = archive.create_run(
        name="h",
        benchmark="gsm8k",
        model="m",
        strategy="tpe",
        budget={},
        config={},
        split_seed=0,
        search_task_ids=[f"s{i}" for i in range(6)],
        holdout_task_ids=[f"h{i}" for i in range(8)],
    )
    items = RunItems.of(run)
    space = RunConfig.of(name="x").search_space()
    for strategy, budget, says in (
        ("tpe", 4, "this run is a random search"),
        ("tpe", 5, None),
        ("nsga2", 8, "this run is a random search"),
        ("mcts", 8, "its value model chooses none of them"),
        ("mcts", 9, None),
        ("random", 1, None),  # random by name: nothing to add
    ):
        made = make_strategy(strategy, space=space, seed=0)
        configured = RunConfig.of(name="x", strategy=strategy, budget=Budget(max_agents=budget))
        lines = run_header(run, configured, made, items)
        assert lines[0].startswith("split seed 0: 6 search, 8 holdout items")
        assert (lines[1:] and says in lines[1]) if says else lines[1:] == [], (strategy, lines)
    unbounded = RunConfig.of(name="x", budget=Budget(max_agents=None, max_tokens=1000))
    assert len(run_header(run, unbounded, make_strategy("tpe", space=space, seed=0), items)) == 1
