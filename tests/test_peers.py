"""bench/peers.py end to end on a tiny size: a fake-model agentdesign run for the archive side,
DSPy's programs on the real SmolLM2 for the other, scored by the benchmark, resumed, re-printed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest
from test_search import config

from agentdesign.archive import Archive
from agentdesign.components import Message
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import get_benchmark
from agentdesign.search import Budget, run_search

pytest.importorskip("dspy")

BENCH = Path(__file__).parent.parent / "bench"
GOLD = {t.question: t.answer for t in get_benchmark("gsm8k").tasks()}


def _always_right(
    model: str, messages: Sequence[Message], temperature: float, seed: int | None
) -> str:
    asked = messages[-1]["content"]
    return f"Answer: {next((a for q, a in GOLD.items() if q in asked), '0')}"


@pytest.fixture
def peers(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    import peers

    return peers


@pytest.fixture
def run_archive(tmp_path: Path) -> str:
    """A finished fake-model run: 4 search items, 3 holdout items, a winner and baselines."""
    path = str(tmp_path / "run.db")
    run = config(
        "tiny",
        n_search=4,
        n_holdout=3,
        budget=Budget(max_agents=2),
        choices={"workflow": ["single"], "reasoning": ["direct", "cot"]},
    )
    with Archive(path) as archive:
        run_search(archive, run, llm=FakeChatModel(_always_right))
    return path


def test_a_run_without_a_scored_winner_is_refused_in_one_line(
    peers: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Archive(str(tmp_path / "empty.db")):
        pass
    with pytest.raises(SystemExit) as stopped:
        peers.main(["--archive", str(tmp_path / "empty.db"), "--run", "ghost"])
    assert str(stopped.value).startswith("error: ") and "ghost" in str(stopped.value)
    assert "\n" not in str(stopped.value)


def test_the_plan_says_what_the_optimizers_ask_for_against_the_budget(
    peers: ModuleType, run_archive: str
) -> None:
    with Archive(run_archive) as archive:
        side = peers.read_run(archive, "tiny")
    cot = {task: {"tokens": 100 + 50 * i} for i, task in enumerate(side.holdout_ids)}  # mean 150
    setup = {
        "model": side.model,
        "search_ids": list(side.search_ids),
        "train_ids": ["a", "b"],
        "budget": 3300,
    }
    shown = peers.plan(side, {"setup": setup, "programs": {"cot": {"items": cot}}})
    # MIPROv2 light: the start program, then 10 trials, each on all 4 validation items.
    assert (
        "| 44 (the start program, then 10 trials, each on all 4 validation items) | 6,600 | 2.00x |"
        in shown
    )
    assert "GEPA(auto='light')" in shown and "150 tokens a program run" in shown
    unknown = peers.plan(side, {"setup": setup, "programs": {}})
    assert "unknown" in unknown and "--programs cot first" in unknown


@pytest.mark.embedded
def test_peers_end_to_end_on_smollm2(
    peers: ModuleType, run_archive: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_path = tmp_path / "peers.json"
    args = ["--archive", run_archive, "--run", "tiny", "--state", str(state_path)]
    # JSON adapter: the engine's grammar makes each reply parse, so one call per item.
    small = [
        *("--model", "embedded/smollm2-135m", "--adapter", "json"),
        *("--train-items", "2", "--max-tokens", "48"),
    ]
    peers.main([*args, *small, "--programs", "predict", "cot", "bootstrap"])
    printed = capsys.readouterr().out
    state = json.loads(state_path.read_text())

    with Archive(run_archive) as archive:
        side = peers.read_run(archive, "tiny")
    assert side.search_tokens > 0 and len(side.holdout_ids) == 3
    assert state["setup"]["holdout_ids"] == list(side.holdout_ids)
    assert not set(state["setup"]["train_ids"]) & set(side.holdout_ids)  # train split only
    gsm8k = get_benchmark("gsm8k")
    for name in ("predict", "cot", "bootstrap"):
        entry = state["programs"][name]
        assert set(entry["items"]) == set(side.holdout_ids)
        for task_id, outcome in entry["items"].items():
            if outcome["answer"] is not None:  # scored by the benchmark's own scorer
                expected = gsm8k.score(gsm8k.task(task_id), outcome["answer"]).value
                assert outcome["score"] == expected
            assert outcome["tokens"] > 0
    assert state["programs"]["predict"]["search"]["tokens"] == 0
    assert state["programs"]["bootstrap"]["search"]["tokens"] > 0  # its teacher's calls
    assert state["programs"]["bootstrap"]["search"]["calls"] >= 1
    for label in ("agentdesign winner", "dspy.Predict", "dspy.ChainOfThought", "BootstrapFewShot"):
        assert label in printed
    assert "n=3" in printed and "NOT the run's model fake/model" in printed

    # The table again from the file alone, with no model call.
    peers.main([*args, *small, "--table"])
    assert capsys.readouterr().out == printed

    # A killed run resumes with only what is missing.
    kept = state["programs"]["bootstrap"]["search"]
    missing = side.holdout_ids[0]
    del state["programs"]["cot"]["items"][missing]
    state_path.write_text(json.dumps(state))
    peers.main([*args, *small, "--programs", "predict", "cot", "bootstrap"])
    resumed = json.loads(state_path.read_text())
    assert resumed["programs"]["bootstrap"]["search"] == kept  # not searched again
    assert set(resumed["programs"]["cot"]["items"]) == set(side.holdout_ids)
    assert resumed["programs"]["predict"] == state["programs"]["predict"]
    capsys.readouterr()

    # A search killed part-way, mid-write of its journal, resumes from the calls journalled:
    # counted as paid, so its tokens are the unbroken search's, and the cut call made again.
    journal = tmp_path / "peers.bootstrap.calls.jsonl"
    lines = journal.read_text().splitlines()
    assert len(lines) - 1 == kept["calls"]  # a header, then one line per model call
    journal.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:40])
    del resumed["programs"]["bootstrap"]["search"]
    state_path.write_text(json.dumps(resumed))
    peers.main([*args, *small, "--programs", "bootstrap"])
    again = json.loads(state_path.read_text())["programs"]["bootstrap"]["search"]
    assert again["replayed_calls"] == kept["calls"] - 1
    assert (again["tokens"], again["calls"], again["program"]) == (
        kept["tokens"],
        kept["calls"],
        kept["program"],
    )
    remade = journal.read_text().splitlines()  # whole again, the cut call made again
    assert [json.loads(line).get("key") for line in remade] == [
        json.loads(line).get("key") for line in lines
    ]
    capsys.readouterr()

    # A journal of another comparison is refused, never replayed.
    other = tmp_path / "other.json"
    (tmp_path / "other.bootstrap.calls.jsonl").write_text(lines[0].replace("tiny", "other") + "\n")
    with pytest.raises(SystemExit, match="journals another comparison"):
        peers.main([*args[:-1], str(other), *small, "--programs", "bootstrap"])

    # Another comparison is refused, not mixed into this file.
    with pytest.raises(SystemExit, match="holds another comparison"):
        peers.main([*args, "--model", "embedded/smollm2-135m", "--train-items", "3"])
