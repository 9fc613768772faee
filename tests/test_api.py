"""The Python API on the fake model: ask/evaluate/tell, optimize, resume with load_search, in-memory
items with a custom scorer, strategy and model objects, bad input, and the runnable example."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import SUMS, space_choices, sums_model, sums_reply, sums_search

from agentdesign.archive import Archive, ArchiveError
from agentdesign.components import AgentDesignError, Message, ProviderError, extract_answer
from agentdesign.evaluators import Benchmark, BenchmarkError, Score, Task
from agentdesign.search import (
    History,
    Proposal,
    Search,
    SearchSpace,
    Strategy,
    create_search,
    load_search,
)

ROOT = Path(__file__).resolve().parents[1]
# Six designs: which reasoning, and whether a calculator is offered.
SPACE: Mapping[str, Any] = {
    "choices": space_choices(
        reasoning=["direct", "cot", "scratchpad"], tool=["none", "calculator"]
    ),
    "limits": {"reasoning__max_tokens": [512, 512]},
}


def exact(output: str, answer: str) -> bool:
    return extract_answer(output).strip() == answer


def new_search(tmp_path: Path, **overrides: Any) -> Search:
    arguments: dict[str, Any] = {
        "scorer": exact,
        "name": "api",
        "storage": tmp_path / "api.db",
        "space": SPACE,
        **overrides,
    }
    return sums_search(arguments.pop("benchmark", SUMS), **arguments)


def reopen(tmp_path: Path, **overrides: Any) -> Search:
    """Run "api" loaded again with what the archive cannot store, as `new_search` gave it."""
    arguments: dict[str, Any] = {
        "storage": tmp_path / "api.db",
        "benchmark": SUMS,
        "scorer": exact,
        "model": sums_model(),
        "model_name": "fake",
        **overrides,
    }
    return load_search("api", **arguments)


def test_ask_evaluate_and_tell_then_finalize_fixes_the_winner_before_the_holdout(
    tmp_path: Path,
) -> None:
    with new_search(tmp_path) as search:
        first = search.ask()
        assert [t.id for t in first.tasks] == list(search.run.search_task_ids)
        scored = search.evaluate(first)
        assert (scored.status, scored.n_done, scored.split) == ("complete", 4, "search")
        assert scored.mean == (1.0 if first.spec["reasoning"].name == "scratchpad" else 0.0)
        second = search.ask()
        assert second.spec.spec_hash != first.spec.spec_hash
        told = search.tell(
            second, dict(zip([t.id for t in second.tasks], [1, 0, 1, 1], strict=True))
        )
        assert told.mean == 0.75 and told.n_done == 4
        board = search.leaderboard()
        assert {row.agent_hash for row in board} == {first.spec.spec_hash, second.spec.spec_hash}
        assert search.best is not None and search.best.spec_hash == board[0].agent_hash
        assert search.run.winner_hash is None  # nothing chosen, no holdout item run
        assert search.archive.run_evaluations("api", split="holdout") == []

        verdict = search.finalize()
        run = search.run
        assert run.winner_hash == board[0].agent_hash == search.best.spec_hash
        assert verdict.holdout is not None and verdict.holdout.n_done == 3
        holdout = search.archive.run_evaluations("api", split="holdout")
        assert run.winner_at is not None
        assert all(run.winner_at <= e.created_at for e in holdout)
        with pytest.raises(AgentDesignError, match="fixed its winner"):
            search.ask()
        with pytest.raises(AgentDesignError, match="fixed its winner"):
            search.optimize(n_agents=1)
        assert search.finalize().run.winner_hash == run.winner_hash  # never replaced


def test_optimize_runs_the_loop_and_ends_with_the_holdout_verdict(tmp_path: Path) -> None:
    with new_search(tmp_path, strategy="tpe") as search:
        partial = search.optimize(n_agents=2, finalize=False)
        assert partial.agents_done == 2 and partial.holdout == ()
        assert search.run.winner_hash is None
        candidate = search.ask()  # ask/tell and optimize drive the same run
        search.tell(candidate, [0.5, 0.5, 0.5, 0.5])
        summary = search.optimize(n_agents=3)
        assert summary.agents_done == 6
        winner = search.run.winner_hash
        assert winner is not None and summary.holdout[0].agent_hash == winner
        assert search.best is not None and search.best.spec_hash == winner
        assert search.best["reasoning"].name == "scratchpad"  # the only design that works
        verdict = search.verdict().headline()
        assert any(line.startswith(f"winner {winner[:10]} vs baseline cot:") for line in verdict)
        exported = search.export(tmp_path / "out")
        assert exported.spec_file.is_file() and exported.agent_file.is_file()
        assert exported.folder.name == f"agent_{winner[:10]}"
        evidence = json.loads(exported.evidence_file.read_text())
        assert evidence["chosen_as"] == "its recorded winner"
        assert evidence["verdict"]["winner"] == winner and evidence["verdict"]["baselines"]


def test_load_search_resumes_and_asks_again_for_what_it_cannot_store(tmp_path: Path) -> None:
    search = new_search(tmp_path)
    done = search.ask()
    search.evaluate(done)
    pending = search.ask()  # never told: the process "dies" here
    search.close()

    with pytest.raises(AgentDesignError, match=r"benchmark=.*model=") as refused:
        load_search("api", storage=tmp_path / "api.db")
    assert "\n" not in str(refused.value)
    with pytest.raises(
        AgentDesignError, match="searched with model 'python/fake', not 'python/sums_reply'"
    ):
        reopen(tmp_path, model=sums_reply, model_name=None)
    with pytest.raises(AgentDesignError, match="other items, or another scorer"):
        reopen(tmp_path, benchmark=SUMS[:-1])
    with pytest.raises(AgentDesignError, match="other items, or another scorer"):
        reopen(tmp_path, scorer=lambda output, answer: 1.0)

    with reopen(tmp_path) as resumed:
        again = resumed.ask()  # the dead process's trial, queued again with its design
        assert again.spec.spec_hash == pending.spec.spec_hash
        resumed.evaluate(again)
        summary = resumed.optimize(n_agents=1)
        assert summary.agents_done == 3 and resumed.run.winner_hash is not None


def test_in_memory_items_are_scored_by_the_custom_scorer(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    def lenient(output: str, answer: str) -> float:
        seen.append((output, answer))
        return 0.5

    with new_search(tmp_path, scorer=lenient) as search:
        assert search.benchmark.name.startswith("items-")
        evaluation = search.evaluate(search.ask())
        assert evaluation.mean == 0.5 and len(seen) == 4
        gold = {t.answer for t in search.benchmark.tasks()}
        assert all(output.startswith("Answer: ") and answer in gold for output, answer in seen)

    def broken(output: str, answer: str) -> float:
        raise ValueError("no rubric")

    with new_search(tmp_path, scorer=broken, name="broken") as search:
        with pytest.raises(BenchmarkError, match=r"scorer .*broken raised ValueError"):
            search.optimize(n_agents=1)
        assert search.run.status == "failed"

    with (
        new_search(tmp_path, scorer=lambda output, answer: 2, name="two") as search,
        pytest.raises(BenchmarkError, match=r"returned 2 .*not a number in \[0, 1\]"),
    ):
        search.evaluate(search.ask())


class Doubling(Benchmark):
    """A user's own benchmark class, registered nowhere."""

    name = "doubling"
    description = "Add a number to itself; scored by the final number."

    def tasks(self) -> Sequence[Task]:
        return [
            Task(id=f"d/{n}", question=f"What is {n} plus {n}?", answer=str(2 * n))
            for n in range(9)
        ]

    def score(self, task: Task, prediction: str) -> Score:
        return Score(float(exact(prediction, task.answer)))


def test_a_benchmark_object_is_searched_and_passed_again_to_resume(tmp_path: Path) -> None:
    with new_search(tmp_path, benchmark=Doubling(), scorer=None) as search:
        assert search.run.benchmark == "doubling"
        summary = search.optimize(n_agents=2)
        assert summary.agents_done == 2 and summary.holdout
    with pytest.raises(AgentDesignError, match=r"load_search\('api', benchmark=<the same items"):
        reopen(tmp_path, benchmark=None, scorer=None)
    with reopen(tmp_path, benchmark=Doubling(), scorer=None) as resumed:
        assert resumed.best is not None and resumed.best.spec_hash == resumed.run.winner_hash


class OnlyCot(Strategy):
    """Proposes chain-of-thought designs only, so the test sees that this object proposed."""

    def suggest(self, history: History, rng: np.random.Generator) -> Proposal | None:
        return Proposal(spec=self.space.sample(rng, components={"reasoning": "cot"}))


def test_a_strategy_object_proposes_the_designs(tmp_path: Path) -> None:
    space = SearchSpace(model="python/fake", choices=SPACE["choices"], limits={}, grid=True)
    with new_search(tmp_path, strategy=OnlyCot(space=space), space=None) as search:
        summary = search.optimize(n_agents=2, finalize=False)
        assert summary.agents_done == 2
        assert {row.spec["components"]["reasoning"]["name"] for row in search.leaderboard()} == {
            "cot"
        }
        assert search.run.strategy == f"python/{__name__}.OnlyCot"
    with pytest.raises(
        AgentDesignError, match=r"load_search\('api', strategy=<the same Strategy>\)"
    ):
        reopen(tmp_path)


def test_a_function_is_a_model(tmp_path: Path) -> None:
    calls: list[Sequence[Message]] = []

    def my_model(messages: Sequence[Message]) -> str:
        calls.append(messages)
        return sums_reply(messages)

    with new_search(tmp_path, model=my_model, model_name=None) as search:
        assert search.run.model == "python/my_model"
        summary = search.optimize(n_agents=2)
        assert summary.agents_done == 2 and calls
        rows = search.leaderboard()
        assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in rows)

    def down(messages: Sequence[Message]) -> str:
        raise ConnectionError("no route to host")

    with new_search(tmp_path, model=down, model_name=None, name="down") as search:
        with pytest.raises(ProviderError, match="ConnectionError: no route to host"):
            search.evaluate(search.ask())
        assert search.archive.leaderboard(run_name="down") == []  # no score was made of it


def test_bad_input_is_one_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "api.db"
    refused: list[tuple[dict[str, Any], str]] = [
        ({"scorer": None}, "in-memory items need a scorer"),
        ({"scorer": lambda output: 1.0}, "must accept two arguments"),
        ({"benchmark": "gsm8k"}, "a scorer goes with in-memory items"),
        ({"benchmark": [{"question": "q"}]}, "item 1 has no 'answer'"),
        ({"benchmark": ["q"]}, "item 1 is a str, not a mapping"),
        ({"benchmark": []}, "no items"),
        ({"benchmark": 3}, "benchmark must be a name, a Benchmark or items"),
        ({"n_search": 20}, "a split needs 20 search"),
        ({"n_search": "4"}, "n_search must be a whole number"),
        ({"strategy": "nope"}, "unknown strategy 'nope'"),
        ({"strategy": object()}, "strategy must be a name or a Strategy"),
        ({"space": "nope"}, "must be a preset"),
        ({"space": {"slots": {}}}, "space must be a preset"),
        ({"model": 3}, "model must be a model string, a ChatModel or a function"),
        ({"model": "nosuchprovider/x", "model_name": None}, "litellm knows no provider"),
        ({"model": "openai/x"}, "model_name names a model function"),
        ({"budget": 3}, "the budget in optimize"),
        ({"colour": "red"}, "takes no option colour"),
        ({"concurrency": 0}, "concurrency"),
        (
            {"strategy": OnlyCot(space=SearchSpace(model="other")), "space": None},
            "the strategy's space is for model 'other'",
        ),
    ]
    for overrides, message in refused:
        arguments: dict[str, Any] = {
            "benchmark": SUMS,
            "scorer": exact,
            "storage": db,
            "model": sums_model(),
            "model_name": "fake",
            "space": SPACE,
            "n_search": 4,
            "n_holdout": 3,
            **overrides,
        }
        with pytest.raises(AgentDesignError, match=re.escape(message)):
            create_search(arguments.pop("benchmark"), **arguments)
    if db.exists():
        with Archive(str(db)) as archive:
            assert archive.list_runs() == []

    with pytest.raises(ArchiveError, match="no archive at"):
        load_search("api", storage=tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()
    with new_search(tmp_path) as search:
        with pytest.raises(ArchiveError):
            load_search("nope", storage=db)
        with pytest.raises(AgentDesignError, match="optimize needs n_agents"):
            search.optimize()
        with pytest.raises(AgentDesignError, match="n_agents must be positive, got 0"):
            search.optimize(n_agents=0)
        candidate = search.ask()
        with pytest.raises(AgentDesignError, match="a score for each of the 4 search items, got 2"):
            search.tell(candidate, [1, 0])
        with pytest.raises(AgentDesignError, match="missing"):
            search.tell(candidate, {"x": 1.0})
        with pytest.raises(AgentDesignError, match=r"is 2, not a number in \[0, 1\]"):
            search.tell(candidate, [1, 0, 2, 1])
        with pytest.raises(AgentDesignError, match="not str"):
            search.tell(candidate, "1011")  # type: ignore[arg-type]
        assert search.leaderboard() == []


# Each runnable script in examples/, and what its output shows it did.
EXAMPLES = {
    "ask_tell.py": r"winner [0-9a-f]{10}",
    "custom_strategy.py": r"winner [0-9a-f]{10}: single \+ ",
    "custom_component.py": r"winner [0-9a-f]{10}: .*almanac",
}


def run_example(name: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), "--fake"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(EXAMPLES[name], done.stdout), done.stdout
    return done.stdout


def test_every_runnable_example_is_run_here() -> None:
    scripts = {p.name for p in (ROOT / "examples").glob("*.py") if "__main__" in p.read_text()}
    assert scripts == set(EXAMPLES)


def test_the_example_runs_on_the_fake_model(tmp_path: Path) -> None:
    stdout = run_example("ask_tell.py", tmp_path)
    assert list(tmp_path.glob("exported/agent_*/agent.py")), stdout


def test_the_custom_strategy_example_searches_with_its_strategy(tmp_path: Path) -> None:
    run_example("custom_strategy.py", tmp_path)
    with Archive(str(tmp_path / "custom_strategy.db")) as archive:
        (run,) = archive.list_runs()
        assert run.config["strategy"] == "hill_climb"
        rows = archive.leaderboard(run_name=run.name)
        operators = [archive.get_agent(row.agent_hash).operator for row in rows]
    assert len(rows) == 4 and "mutation" in operators, operators


def test_the_custom_component_example_wins_with_its_tool_and_exports_it(tmp_path: Path) -> None:
    run_example("custom_component.py", tmp_path)
    (agent_file,) = tmp_path.glob("exported/agent_*/agentdesign_runtime.py")
    assert "class Almanac(Tool):" in agent_file.read_text()
