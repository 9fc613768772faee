"""What a user types comes from the listings, so they must show every name whole at 80 columns
and when piped, and give scripts JSON; the run's progress must fit 80 columns too."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.progress import Progress
from test_cli import CLI, make_archive_with_a_run
from typer.testing import CliRunner

from agentdesign.archive import Archive, EvaluationRecord
from agentdesign.components import REGISTRY, SLOTS, AgentSpec
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import (
    PairedComparison,
    ScoreSummary,
    available_benchmarks,
    summarize,
)
from agentdesign.search import STRATEGIES, Budget, RunConfig, run_search, run_verdict
from agentdesign.search.cli import ProgressReporter, _app, progress_bars

# Variables that make rich draw for a terminal (or in colour) even when piped.
_TERMINAL_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS")


@pytest.fixture(scope="module")
def archive_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_archive_with_a_run(tmp_path_factory.mktemp("listings"))


@pytest.fixture(params=["80", None], ids=["COLUMNS=80", "piped"])
def invoke(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Runs a command as a piped process does: a console made under COLUMNS=80, or with no
    COLUMNS and no terminal at all, writing to a stream that is no terminal."""
    for name in _TERMINAL_ENV:
        monkeypatch.delenv(name, raising=False)
    if request.param is None:
        monkeypatch.delenv("COLUMNS", raising=False)
        monkeypatch.setattr(os, "get_terminal_size", _no_terminal)  # rich asks fds 0, 1 and 2
    else:
        monkeypatch.setenv("COLUMNS", request.param)
    runner = CliRunner()

    def run(*args: str) -> str:
        # Made per call, as at start-up: rich reads COLUMNS when a console is made.
        monkeypatch.setattr(_app, "console", Console())
        result = runner.invoke(_app.app, list(args))
        assert result.exit_code == 0, result.output
        assert "…" not in result.stdout, result.stdout  # rich's mark of a cut cell
        assert max(map(len, result.stdout.splitlines())) <= 80, result.stdout
        return result.stdout

    yield run


def _no_terminal(fd: int = 0) -> os.terminal_size:
    raise OSError(f"fd {fd} is not a terminal")


def first_cells(out: str) -> set[str]:
    """The first word of each line, table borders aside: where a listing puts its names."""
    words = (line.strip("│┃ ").split() for line in out.splitlines())
    return {w[0] for w in words if w}


def test_components_show_every_name_whole(invoke: Any) -> None:
    out = invoke("components")
    names = first_cells(out)
    assert "Opt-in" in out  # the code workflow, which a space holds only where named
    for slot in SLOTS:
        assert slot in names
        for name in REGISTRY.names(slot):
            assert name in names  # e.g. self_consistency, not self_cons…
            for info in REGISTRY.get(slot, name).param_info():
                assert f"{slot}__{info.name}" in names


def test_benchmarks_and_strategies_show_every_name_whole(invoke: Any) -> None:
    assert set(available_benchmarks()) <= first_cells(invoke("benchmarks"))
    assert set(STRATEGIES) <= first_cells(invoke("strategies"))


def test_show_fits_80_columns_with_hashes_and_component_names_whole(
    invoke: Any, archive_db: Path
) -> None:
    out = invoke("show", "--storage", str(archive_db))
    with Archive(str(archive_db)) as archive:
        rows = archive.leaderboard(run_name="kept")
    words = set(re.findall(r"[\w-]+", out))
    for row in rows:
        assert row.agent_hash[:10] in words
        spec = AgentSpec.from_dict(row.spec)
        assert {spec[slot].name for slot in SLOTS} <= words
    assert "holdout (95% CI)" in out and "winner" in out


def test_piped_components_process_keeps_names_whole(tmp_path: Path) -> None:
    """The complaint as filed: `agentdesign components | less` printed `self_cons…`."""
    env = {k: v for k, v in os.environ.items() if k not in (*_TERMINAL_ENV, "COLUMNS")}
    result = subprocess.run(
        [*CLI, "components"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "self_consistency" in first_cells(result.stdout) and "…" not in result.stdout


def _json(*args: str) -> Any:
    result = CliRunner().invoke(_app.app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_listings_print_json() -> None:
    listed = _json("components")
    assert [(c["slot"], c["name"]) for c in listed] == [
        (slot, name) for slot in SLOTS for name in REGISTRY.names(slot)
    ]
    for entry in listed:
        assert set(entry) == {"slot", "name", "description", "parameters"} and entry["description"]
        infos = REGISTRY.get(entry["slot"], entry["name"]).param_info()
        assert [p["name"] for p in entry["parameters"]] == [
            f"{entry['slot']}__{info.name}" for info in infos
        ]
        for param in entry["parameters"]:
            assert {"default", "low", "high", "choices", "log", "searchable", "kind"} <= set(param)
    benches = _json("benchmarks")
    assert [b["name"] for b in benches] == list(available_benchmarks())
    gsm8k = next(b for b in benches if b["name"] == "gsm8k")
    assert gsm8k["tasks"] == 1319 and gsm8k["description"].startswith("GSM8K")
    assert [s["name"] for s in _json("strategies")] == list(STRATEGIES)


def test_show_prints_the_verdict_and_leaderboard_as_json(archive_db: Path) -> None:
    shown = _json("show", "--storage", str(archive_db))
    with Archive(str(archive_db)) as archive:
        verdict = run_verdict(archive, "kept")
        rows = archive.leaderboard(run_name="kept")
    assert shown["run"] == "kept" and shown["winner"] == verdict.run.winner_hash
    assert shown["verdict"] == verdict.headline()
    assert [b["label"] for b in shown["baselines"]] == [b.label for b in verdict.baselines]
    for entry, expected in zip(shown["baselines"], verdict.baselines, strict=True):
        assert entry["comparison"] == {
            f.name: getattr(expected.comparison, f.name) for f in fields(PairedComparison)
        }
    # a run of a few designs on a few items gets no overfit figures, and the verdict says why
    assert verdict.overfit is None and shown["overfit"] is None
    assert any(line.startswith("too few designs or items") for line in shown["verdict"])
    summary_keys = {f.name for f in fields(ScoreSummary)}  # mean, ci_low, ci_high, n, method
    assert [r["agent"] for r in shown["leaderboard"]] == [r.agent_hash for r in rows]
    for entry in shown["leaderboard"]:
        assert set(entry["search"]) == summary_keys
        assert entry["holdout"] is None or set(entry["holdout"]) == summary_keys
        assert {"rank", "role", "design", "tokens_per_item", "s_per_item", "cost"} <= set(entry)
    winner = shown["leaderboard"][0]
    assert winner["role"] == "winner" and winner["holdout"]["n"] == 2
    assert winner["search"]["method"] == "Clopper-Pearson" and winner["search"]["n"] == 3


def _render(progress: Progress) -> str:
    text = io.StringIO()
    Console(file=text, width=80).print(progress.get_renderable())
    return text.getvalue()


def test_progress_shows_designs_to_go_eta_best_and_the_holdout(tmp_path: Path) -> None:
    """A fake run drawn at 80 columns: each finished design moves the count, the best with its
    interval and the ETA; the holdout phase says which winner is fixed and scores each role."""
    out = io.StringIO()
    progress = progress_bars(Console(file=out, width=80))
    frames: list[tuple[str, EvaluationRecord]] = []

    class Recording(ProgressReporter):
        def agent_finished(self, spec: AgentSpec, evaluation: EvaluationRecord, split: str) -> None:
            super().agent_finished(spec, evaluation, split)
            frames.append((_render(self.progress), evaluation))

    budget = Budget(max_agents=3)
    config = RunConfig.of(name="p", model="fake/model", budget=budget, n_search=3, n_holdout=2)
    with Archive(str(tmp_path / "p.db")) as archive:
        with progress:
            run_search(
                archive,
                config,
                llm=FakeChatModel(lambda model, messages, temperature, seed: "Answer: 3"),
                reporter=Recording(progress, archive, budget),
            )
        first, evaluation = frames[0]
        scores = [r.score for r in archive.task_results(evaluation.id).values()]
        run = archive.get_run("p")
    best = summarize(scores)
    row = next(line for line in first.splitlines() if line.startswith("designs"))
    assert " 1/3 " in row and "2 to go" in row
    assert f"best {best.mean:.3f} [{best.ci_low:.2f}, {best.ci_high:.2f}]" in row
    assert re.search(r"ETA \d+:\d\d:\d\d", row), row
    assert all(len(line) <= 80 for frame, _ in frames for line in frame.splitlines())
    third = next(line for line in frames[2][0].splitlines() if line.startswith("designs"))
    assert " 3/3 " in third and "0 to go" in third
    printed = out.getvalue()
    assert run.winner_hash is not None
    winner = run.winner_hash[:10]
    for k in (1, 2, 3):
        assert re.search(rf"^design {k}/3 [0-9a-f]{{10}}: \d\.\d{{3}} \[", printed, re.M)
    assert f"holdout: winner {winner} is fixed on the search items" in printed
    assert re.search(rf"^holdout winner {winner}: .* n=2$", printed, re.M)
    assert len(re.findall(r"^holdout baseline [0-9a-f]{10}: ", printed, re.M)) == 2  # cot, cot-sc
    last = [line for line in _render(progress).splitlines() if line.startswith("holdout")]
    assert last and " 3/3 " in last[0]


def test_progress_says_while_the_meta_agent_writes_and_counts_its_tokens(tmp_path: Path) -> None:
    """A meta run drawn at 80 columns: while its model call runs the bar names the meta agent,
    and its tokens join the count."""
    from test_meta import designs_and_answers

    progress = progress_bars(Console(file=io.StringIO(), width=80))
    during: list[str] = []
    counted: list[tuple[int, int]] = []

    class Recording(ProgressReporter):
        def search_call_started(self, purpose: str) -> None:
            super().search_call_started(purpose)
            during.append(_render(self.progress))

        def search_call_finished(self, purpose: str, tokens: int) -> None:
            before = self.tokens
            super().search_call_finished(purpose, tokens)
            counted.append((self.tokens - before, tokens))

    budget = Budget(max_agents=3)
    config = RunConfig.of(
        name="m", model="fake/model", strategy="meta", budget=budget, n_search=3, n_holdout=2
    )
    with Archive(str(tmp_path / "m.db")) as archive:
        with progress:
            run_search(
                archive,
                config,
                llm=FakeChatModel(designs_and_answers),
                reporter=Recording(progress, archive, budget),
            )
        n_calls = archive.run_totals("m").n_search_calls
    assert len(during) == len(counted) == n_calls >= 1
    assert all("the meta agent writes designs" in frame for frame in during)
    assert all(added == used > 0 for added, used in counted)


def test_a_design_that_only_ties_the_best_says_why_it_leads() -> None:
    """Equal scores rank the cheaper design first: its "best so far" line says it is a tie, so
    that a run of equal scores does not read as a run of gains."""
    from agentdesign.archive import LeaderboardRow
    from agentdesign.search.cli._progress import _tie_note

    best = LeaderboardRow(
        rank=1, agent_hash="a" * 64, spec={}, evaluation_id=1, benchmark="bfcl", mean=0.5,
        ci_low=0.31, ci_high=0.69, n_tasks=30, prompt_tokens=900, completion_tokens=100,
        cost=0.0, wall_s=60.0, status="complete",
    )  # fmt: skip
    fewer_tokens = replace(best, agent_hash="b" * 64, prompt_tokens=500)
    assert _tie_note(fewer_tokens, best) == " (a tie, fewer tokens)"
    assert _tie_note(best, replace(best, agent_hash="b" * 64, cost=0.01)) == " (a tie, costs less)"
    assert _tie_note(replace(best, agent_hash="c" * 64), best) == " (a tie)"
    assert _tie_note(replace(fewer_tokens, mean=16 / 30), best) == ""  # a gain, not a tie
    assert _tie_note(best, None) == _tie_note(best, best) == ""
