"""Recording a replay table item layer by item layer, and its cells file: the designs cover the
space, the items leave a run's out, a stopped recording is a rectangle and resumes, and the file
round-trips what each cell used."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic_table import make_synthetic_table
from test_strategies import Killed, cot_is_right, held_pairs

from agentdesign.archive import Archive
from agentdesign.benchmarking import (
    ANCHORS,
    CHEAP_LIMITS,
    LayerDone,
    ReplayDesign,
    ReplayTable,
    TableWorld,
    Usage,
    estimate,
    grid_values,
    load_tables,
    raced,
    record_layers,
    resume_designs,
    run_items,
    save_cells,
    table_designs,
    table_items,
    truth_search,
)
from agentdesign.components import SLOTS, AgentDesignError, AgentSpec
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import get_benchmark, make_split
from agentdesign.search import Racing, SearchSpace, make_strategy
from agentdesign.search.space import unsuited_components

ROOT = Path(__file__).resolve().parents[1]
GSM8K = get_benchmark("gsm8k")


def test_the_designs_cover_every_component_and_every_grid_value_and_start_with_the_anchors() -> (
    None
):
    designs = table_designs("fake/a", 40)
    assert len(designs) == len({d.spec_hash for d in designs}) == 40
    space = SearchSpace(model="fake/a", limits=CHEAP_LIMITS, grid=True)
    for slot in SLOTS:
        assert {d[slot].name for d in designs} == set(space.components(slot))
        for name in space.components(slot):
            users = [d for d in designs if d[slot].name == name]
            for info in users[0][slot].param_info():
                points = set(grid_values(space, slot, info))
                assert points <= {getattr(d[slot], info.name) for d in users}, (slot, name, info)
    # every pair of components of two slots that a design can hold appears together
    pairs = {
        (a, d[a].name, b, d[b].name) for d in designs for a, b in itertools.combinations(SLOTS, 2)
    }
    assert held_pairs(space) <= pairs
    assert all(d.canonical() == d for d in designs)
    # the anchors first, so a costlier model's table is the prefix; the same designs for any model
    assert designs[0] == AgentSpec.create(model="fake/a", workflow="single", reasoning="cot")
    other = table_designs("fake/b", len(ANCHORS))
    assert [d.set_params(model="fake/a") for d in other] == designs[: len(ANCHORS)]
    assert table_designs("fake/a", 40) == designs
    assert table_designs("fake/a", 44)[:40] == designs  # more designs keep the first ones


def test_the_items_leave_out_what_the_run_looks_at_and_grow_by_adding() -> None:
    excluded = run_items(GSM8K, seed=29, n_search=30, n_holdout=100)
    split = make_split([t.id for t in GSM8K.tasks()], seed=29, n_search=30, n_holdout=110)
    assert excluded == set(split.search_ids) | set(split.holdout_ids)  # with 10 dev items
    items = table_items(GSM8K, n_items=100, seed=0, exclude=excluded)
    assert len({t.id for t in items}) == 100 and not {t.id for t in items} & excluded
    assert table_items(GSM8K, n_items=50, seed=0, exclude=excluded) == items[:50]
    assert table_items(GSM8K, n_items=50, seed=1, exclude=excluded) != items[:50]


def _record(
    archive: Archive, designs: list[AgentSpec], items: int, stop_after: int = 0
) -> list[LayerDone]:
    done: list[LayerDone] = []

    def on_layer(finished: LayerDone) -> None:
        done.append(finished)
        if len(done) == stop_after:
            raise Killed

    tasks = table_items(GSM8K, n_items=items, seed=0, exclude=frozenset())
    with contextlib.suppress(Killed):
        record_layers(
            archive,
            designs,
            GSM8K,
            tasks,
            layer=2,
            llm=FakeChatModel(cot_is_right),
            on_layer=on_layer,
        )
    return done


def test_a_stopped_recording_is_a_rectangle_on_an_item_prefix_and_resumes(tmp_path: Path) -> None:
    designs = table_designs("fake/model", 3)
    with Archive(str(tmp_path / "t.sqlite")) as archive:
        tasks = table_items(GSM8K, n_items=6, seed=0, exclude=frozenset())
        before = estimate(archive, designs, tasks, layer=2, benchmark="gsm8k")
        assert (before.cells_left, before.cells_done, before.measured) == (18, 0, False)
        first = _record(archive, designs, 6, stop_after=4)  # layer 1, and one design of layer 2
        assert [(d.layer, d.design) for d in first] == [(0, 0), (0, 1), (0, 2), (1, 0)]
        table = ReplayTable.from_layers(archive, benchmark="gsm8k", model="fake/model")
        # the archive keeps an evaluation's items sorted: a layer's order within it is by id
        assert len(table.designs) == 3 and table.task_ids == tuple(sorted(t.id for t in tasks[:2]))
        assert all(len(d.usage) == 2 and d.usage[0].tokens > 0 for d in table.designs)
        by_hash = table.by_hash()
        assert by_hash[designs[0].spec_hash].mean == 1.0  # chain of thought: right every time
        assert by_hash[designs[1].spec_hash].mean == 0.0  # a direct answer: never
        middle = estimate(archive, designs, tasks, layer=2, benchmark="gsm8k")
        assert (middle.cells_left, middle.cells_done, middle.measured_designs) == (10, 8, 3)
        # rerun: what the archive holds is not run again, the rest is
        again = _record(archive, designs, 6)
        assert [d.new_items for d in again] == [0, 0, 0, 0, 2, 2, 2, 2, 2]
        full = ReplayTable.from_layers(archive, benchmark="gsm8k", model="fake/model")
        layers = [sorted(t.id for t in tasks[start : start + 2]) for start in (0, 2, 4)]
        assert full.task_ids == tuple(t for layer in layers for t in layer)
        assert estimate(archive, designs, tasks, layer=2, benchmark="gsm8k").cells_left == 0
        # extended by a layer: only the new layer runs
        more = _record(archive, designs, 8)
        assert [d.new_items for d in more] == [0] * 9 + [2, 2, 2]


def test_a_resumed_recording_finishes_the_designs_it_began_even_if_the_draws_changed(
    tmp_path: Path,
) -> None:
    designs = table_designs("fake/model", 4)
    with Archive(str(tmp_path / "t.sqlite")) as archive:
        assert resume_designs(archive, designs, benchmark="gsm8k") == designs  # nothing begun
        _record(archive, [designs[2], designs[0]], 2)
        changed = [designs[1], designs[3], designs[0], table_designs("fake/model", 5)[4]]
        # what the archive began comes first, in the order recorded; then the rest, as many
        assert resume_designs(archive, changed, benchmark="gsm8k") == [
            designs[2],
            designs[0],
            designs[1],
            designs[3],
        ]
        # another benchmark's or model's recording is not this one's
        assert resume_designs(archive, changed, benchmark="bfcl-multiple") == changed
        other = [d.set_params(model="fake/other") for d in changed]
        assert resume_designs(archive, other, benchmark="gsm8k") == other


def test_the_designs_leave_out_the_components_a_benchmark_cannot_use() -> None:
    unsuited = unsuited_components(get_benchmark("bfcl-multiple"))
    designs = table_designs("fake/a", 30, unsuited=unsuited)
    assert len({d.spec_hash for d in designs}) == 30
    names = {d[slot].name for d in designs for slot in SLOTS}
    assert not names & unsuited and {"experience", "react", "debate"} <= names
    # the anchors without such components stay first
    anchors = [AgentSpec.create(model="fake/a", **a).canonical() for a in ANCHORS]
    kept = [a for a in anchors if not {a[slot].name for slot in SLOTS} & unsuited]
    assert 0 < len(kept) < len(anchors) and designs[: len(kept)] == kept


def _table(tmp_path: Path, model: str) -> ReplayTable:
    with Archive(str(tmp_path / f"{model.replace('/', '_')}.sqlite")) as archive:
        _record(archive, table_designs(model, 2), 4)
        return ReplayTable.from_layers(archive, benchmark="gsm8k", model=model)


def _to_ms(usage: Usage) -> Usage:
    return dataclasses.replace(usage, seconds=round(usage.seconds, 3))  # as the file keeps it


def test_a_cells_file_round_trips_each_cell_and_holds_a_table_per_model(tmp_path: Path) -> None:
    small, large = _table(tmp_path, "fake/small"), _table(tmp_path, "fake/large")
    path = tmp_path / "cells.json"
    save_cells([small, large], path, provenance={"archive": {"sha256": "ab"}})
    data = json.loads(path.read_text())
    assert data["provenance"] == {"archive": {"sha256": "ab"}} and len(data["cells"]) == 16
    assert len(path.read_text().splitlines()) > 16  # one cell a line
    loaded = {t.model: t for t in load_tables(path)}
    for table in (small, large):
        again = loaded[table.model]
        assert again.task_ids == table.task_ids
        assert [(d.spec, d.scores, d.usage) for d in again.designs] == [
            (d.spec, d.scores, tuple(_to_ms(u) for u in d.usage)) for d in table.designs
        ]
        assert ReplayTable.load(path, model=table.model) == again
    with pytest.raises(AgentDesignError, match="fake/small, fake/large: name a model"):
        ReplayTable.load(path)
    # a table must be rectangular: a cell missing is refused with what is missing
    data["cells"] = data["cells"][1:]
    path.write_text(json.dumps(data))
    with pytest.raises(AgentDesignError, match="has 3 of the 4 items"):
        load_tables(path)
    data["cells"][0][1] = "fake/other"
    path.write_text(json.dumps(data))
    with pytest.raises(AgentDesignError, match="is not of model fake/other"):
        load_tables(path)
    path.write_text('{"format": "agentdesign-replay/2", "columns": ["design"]}')
    with pytest.raises(AgentDesignError, match="columns"):
        load_tables(path)


def test_a_subset_of_a_tables_items_keeps_their_cells() -> None:
    spec = AgentSpec.create(model="fake/model")
    usage = [
        Usage(prompt_tokens=10 * i, completion_tokens=i, cost=0.0, seconds=i) for i in (1, 2, 3)
    ]
    table = ReplayTable(
        benchmark="gsm8k",
        description="d",
        model="fake/model",
        task_ids=("a", "b", "c"),
        designs=(ReplayDesign.of(spec, [1.0, 0.0, 1.0], usage),),
    )
    part = table.subset([2, 2, 0])
    assert part.task_ids == ("c", "c", "a") and part.designs[0].scores == (1.0, 1.0, 1.0)
    assert part.designs[0].tokens == 33 + 33 + 11
    with pytest.raises(AgentDesignError, match="usage of 2 items"):
        ReplayDesign(
            spec=spec,
            scores=(1.0,),
            prompt_tokens=0,
            completion_tokens=0,
            cost=0.0,
            usage=tuple(usage[:2]),
        )


def _script(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def test_the_exporter_refuses_what_it_cannot_export_in_one_line(tmp_path: Path) -> None:
    missing = _script("bench/replay_export.py", str(tmp_path / "none.sqlite"), "--cells")
    assert missing.returncode != 0 and missing.stderr.strip().startswith("error:")
    assert "Traceback" not in missing.stderr
    bad = _script("bench/replay_record.py", "--items", "0", "--estimate")
    assert bad.returncode != 0 and bad.stderr.strip().startswith("error:")
    unknown = _script("bench/replay_record.py", "--benchmark", "nope", "--estimate")
    assert unknown.returncode != 0 and unknown.stderr.strip().startswith("error: unknown bench")


@pytest.mark.embedded
def test_a_table_records_resumes_and_exports_on_smollm2(tmp_path: Path) -> None:
    """Two designs x two items of the real embedded model, through the scripts a recording uses."""
    archive, out = tmp_path / "t.sqlite", tmp_path / "table.json"
    args = ["bench/replay_record.py", "--model", "embedded/smollm2-135m", "--designs", "2"]
    args += ["--items", "2", "--layer", "1", "--archive", str(archive)]
    first = _script(*args, timeout=1800)
    assert first.returncode == 0, first.stderr
    assert "a guess" in first.stdout and first.stdout.count("1 new;") == 4
    again = _script(*args, timeout=600)
    assert again.returncode == 0 and "nothing left to record" in again.stdout
    exported = _script("bench/replay_export.py", str(archive), "--cells", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    table = ReplayTable.load(out)
    assert len(table.designs) == 2 and len(table.task_ids) == 2
    assert all(u.seconds > 0 and u.tokens > 0 for d in table.designs for u in d.usage)
    provenance = json.loads(out.read_text())["provenance"]
    assert len(provenance["archive"]["sha256"]) == 64
    assert provenance["license"]["name"] == "MIT License"
    assert out.with_suffix(".LICENSE").read_text().startswith("MIT License")


# -- a table as a world to search in -------------------------------------------------------------


def _cells_table(n_designs: int = 30, n_tasks: int = 12) -> ReplayTable:
    """The synthetic table with a usage per item that differs from item to item."""
    base = make_synthetic_table(n_designs=n_designs, n_tasks=n_tasks)
    designs = []
    for d in base.designs:
        usage = [
            Usage(
                prompt_tokens=100 + 10 * i,
                completion_tokens=d.tokens // n_tasks,
                cost=0.0,
                seconds=1.0,
            )
            for i in range(n_tasks)
        ]
        designs.append(ReplayDesign.of(d.spec, d.scores, usage))
    return dataclasses.replace(base, designs=tuple(designs))


def test_a_table_world_answers_from_the_table_and_runs_out_of_designs() -> None:
    table = _cells_table()
    world = TableWorld(table, seed=0, n_search=8)
    assert len(set(world.search_items)) == 8 and max(world.search_items) < 12
    assert TableWorld(table, seed=1, n_search=8).search_items != world.search_items
    design = table.designs[3]
    evaluated = world.evaluate(design.spec, world.search_items[:3])
    assert evaluated.scores == tuple(design.scores[i] for i in world.search_items[:3])
    assert evaluated.tokens == sum(design.usage[i].tokens for i in world.search_items[:3])
    assert world.accuracy([design.spec])[0] == design.mean
    run = truth_search(
        world,
        make_strategy("random", space=world.space, seed=0),
        name="random",
        stop=lambda d: False,
    )
    assert len({e.spec.spec_hash for e in run.evaluations}) == len(run.evaluations) == 30
    with pytest.raises(AgentDesignError, match="n_search"):
        TableWorld(table, seed=0, n_search=13)


def test_racing_on_a_table_stops_designs_on_their_recorded_items() -> None:
    table = _cells_table(n_designs=40, n_tasks=16)
    world = TableWorld(table, seed=3, n_search=16)
    run = truth_search(
        world,
        make_strategy("random", space=world.space, seed=3),
        name="random+race",
        stop=lambda done: len(done) >= 30,
        schedule=raced(Racing()),
    )
    stopped = [e for e in run.evaluations if not e.complete]
    assert stopped
    for evaluated in stopped:
        items = world.search_items[: len(evaluated.scores)]
        assert len(items) in Racing().stages(16)
        assert evaluated == dataclasses.replace(
            world.evaluate(evaluated.spec, items), complete=False
        )
    reported = run.reported()
    assert all(
        h is None or h in {e.spec.spec_hash for e in run.evaluations if e.complete}
        for h in reported
    )


def _other_model_table(path: Path) -> None:
    """Saves another model's synthetic table (20 designs x 10 items of fake/other) at `path`."""
    other = make_synthetic_table(n_designs=20, n_tasks=10, seed=5)
    dataclasses.replace(
        other,
        model="fake/other",
        designs=tuple(
            dataclasses.replace(d, spec=dataclasses.replace(d.spec, model="fake/other"))
            for d in other.designs
        ),
    ).save(path)


def test_the_table_bench_runs_on_a_synthetic_table_and_says_what_it_cannot(tmp_path: Path) -> None:
    path = tmp_path / "synthetic.json"
    # 30 designs: 10 labels leave 20 out; 30 labels leave none, and the table says so.
    save_cells([_cells_table(n_designs=30, n_tasks=30)], path, provenance={})
    _other_model_table(tmp_path / "prior.json")  # the value model's prior
    args = ["bench/strategies_table.py", str(path), "--seeds", "2", "--evaluations", "6"]
    args += ["--boot", "50", "--value-reps", "2", "--items", "3:26", "--race-alpha", "0.2"]
    args += ["--prior", str(tmp_path / "prior.json")]
    names = ("shuffled", "screened", "random", "mcts+race")
    done = _script(*args, "--strategies", *names, timeout=900)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "30 designs x 24 items (3:26)" in out and "alpha=0.2" in out
    assert "| screened | " in out
    assert "SYNTHETIC" in out and "what 30 designs can say" in out
    assert "too few designs left out" in out
    for section in ("split-half reliability", "Spearman with table accuracy", "after 5"):
        assert section in out
    for section in ("adjusted R^2", "| first-order | 10 |", "| with pairs | 10 |"):
        assert section in out
    assert "| with pairs, prior gsm8k on fake/other | 10 |" in out
    assert "| with pairs, prior gsm8k on fake/other - with pairs | 10 |" in out
    missing = _script("bench/strategies_table.py", str(tmp_path / "none.json"))
    assert missing.returncode != 0 and missing.stderr.strip().startswith("error:")
    bad = _script("bench/strategies_table.py", str(path), "--strategies", "nope")
    assert bad.returncode != 0 and "unknown strategies" in bad.stderr
    itself = _script("bench/strategies_table.py", str(path), "--prior", str(path))
    assert itself.returncode != 0 and "a prior is another model's" in itself.stderr
    backwards = _script("bench/strategies_table.py", str(path), "--items", "20:5")
    assert backwards.returncode != 0 and backwards.stderr.strip().startswith("error: --items")


def test_the_racing_bench_sweeps_settings_on_the_same_seeds(tmp_path: Path) -> None:
    path = tmp_path / "synthetic.json"
    save_cells([_cells_table(n_designs=30, n_tasks=30)], path, provenance={})
    args = ["bench/racing_table.py", str(path), "--seeds", "2", "--evaluations", "6"]
    args += ["--boot", "50", "--items", "1:20", "--strategies", "random"]
    done = _script(*args, "--rules", "bounds", "--alphas", "0.1", "0.3", "--first-stages", "4")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| random |")]
    assert [row.split(" | ")[2] for row in rows] == ["0.1", "0.3"]
    # the oracle's ceiling: a share, larger where a larger error rate is allowed
    ceilings = [float(row.rstrip(" |").split(" | ")[-1].rstrip("%")) for row in rows]
    assert 0 <= ceilings[0] < ceilings[1] <= 100, ceilings
    assert "30 designs x 20 items (1:20)" in done.stdout and "| 4, 8, 16 |" in done.stdout
    bad = _script("bench/racing_table.py", str(path), "--alphas", "2")
    assert bad.returncode != 0 and bad.stderr.strip().startswith("error: racing alpha")


def test_the_value_ceiling_bench_ranks_a_structured_table_and_pairs_the_learners(
    tmp_path: Path,
) -> None:
    path = tmp_path / "synthetic.json"
    # the synthetic table's scores follow its components: on 60 items, leaving one design out,
    # the value model ranks the designs far better than chance (0.585 on this table)
    save_cells([_cells_table(n_designs=24, n_tasks=60)], path, provenance={})
    _other_model_table(tmp_path / "prior.json")
    args = ["bench/value_ceiling.py", str(path), "--draws", "1", "--boot", "20"]
    args += ["--prior", str(tmp_path / "prior.json")]
    done = _script(*args, "--label-items", "10", timeout=600)
    assert done.returncode == 0, done.stderr
    cells = {
        (row[1], row[2]): row[3]
        for line in done.stdout.splitlines()
        if (row := [c.strip() for c in line.split("|")])[0] == "" and len(row) > 3
    }
    assert "SYNTHETIC" in done.stdout and "predicted from the other 23" in done.stdout
    assert cells["all", "measured"].startswith("1.000")
    assert float(cells["all", "value model"].split()[0]) > 0.4
    learners = ("value model, first-order", "pairwise ranks", "Gaussian process")
    for name in (*learners, "value model, prior gsm8k on fake/other"):
        assert ("10", f"{name} - value model") in cells and ("all", name) in cells
    bad = _script("bench/value_ceiling.py", str(path), "--draws", "0")
    assert bad.returncode != 0 and bad.stderr.strip().startswith("error:")
    itself = _script("bench/value_ceiling.py", str(path), "--prior", str(path))
    assert itself.returncode != 0 and "a prior is another model's" in itself.stderr
