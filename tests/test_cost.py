"""Money before and during a run, against a hosted model played on loopback
(tests/limited_provider.py, every call 7 prompt and 2 completion tokens) that litellm is told to
price: `run --estimate` says within a quarter what the same run then spends; `--max-cost` stops
the search, warns at 50% and 80% once each, and the verdict is still scored and printed;
`resume --max-cost` raises it; a model with no price says "price unknown", never $0; a bad dollar
budget is one error line; `show` splits the spend by part.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import capitals_file, space_choices
from limited_provider import LimitedProvider
from test_bad_input import refuses
from test_cli import agentdesign, assert_one_line_error, make_archive_with_a_run
from typer.testing import CliRunner

from agentdesign.archive import Archive
from agentdesign.components import AgentDesignError, import_litellm, token_price
from agentdesign.components.testing import FakeChatModel
from agentdesign.search import Budget, RunConfig, create_search, estimate_run, run_search
from agentdesign.search.cli import _app

PRICED = "openai/pricey-test"  # $0.001 a prompt token, $0.002 a completion token: $0.011 a call
UNPRICED = "openai/limited"  # in no price table
CALL = 7 * 1e-3 + 2 * 2e-3
# Designs that all make one call an item (a reasoning prompt and its token cap differ).
ONE_CALL = space_choices(reasoning=["direct", "cot", "scratchpad"])


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # litellm's OpenAI client wants one
    monkeypatch.setenv("AGENTDESIGN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_app, "console", _app.Console(width=200))
    import_litellm().register_model(
        {
            PRICED: {
                "litellm_provider": "openai",
                "mode": "chat",
                "input_cost_per_token": 1e-3,
                "output_cost_per_token": 2e-3,
                "cache_creation_input_token_cost": 0.0,
                "cache_read_input_token_cost": 0.0,
            }
        }
    )


@pytest.fixture
def provider() -> Iterator[LimitedProvider]:
    with LimitedProvider(rpm=1e6) as served:
        yield served


def _run_args(tmp_path: Path, provider: LimitedProvider, model: str = PRICED) -> list[str]:
    space = tmp_path / "space.json"
    space.write_text(json.dumps({"choices": ONE_CALL}))
    return [
        "--benchmark", f"jsonl:{capitals_file(tmp_path, 40)}", "--model", model,
        "--api-base", provider.url, "--space", str(space), "--n-search", "5",
        "--n-holdout", "6", "--storage", str(tmp_path / "runs.db"),
    ]  # fmt: skip


def _cli(*args: str) -> str:
    result = CliRunner().invoke(_app.app, list(args))
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    return result.output


def _candidates_cost(db: Path, name: str) -> float:
    with Archive(str(db)) as archive:
        return archive.role_totals(name)["candidate"][3]


def test_the_estimate_is_within_a_quarter_of_what_the_run_then_spends(
    tmp_path: Path, provider: LimitedProvider
) -> None:
    """The estimate of 4 designs on 5 search items, the winner and CoT on 6 holdout items (CoT-SC
    not bought), from a calibration kept in no run; then the run, and its spend; then a second
    estimate reads the archive's history instead of calibrating."""
    args = [*_run_args(tmp_path, provider), "--max-agents", "4", "--name", "r"]
    said = _cli("run", "--estimate", *args)
    assert "from a calibration: the run's first 2 designs, as its strategy (tpe)" in said, said
    assert "racing ignored, an upper bound" in said and "cot-sc not scored" in said
    asked_before = len(provider.ok_at)
    assert not (tmp_path / "runs.db").exists()  # an estimate leaves no archive behind
    with Archive(str(tmp_path / "runs.db")) as archive:
        config = RunConfig.of(
            "r",
            benchmark=args[1],
            model=PRICED,
            api_base=provider.url,
            choices=ONE_CALL,
            max_agents=4,
            n_search=5,
            n_holdout=6,
        )
        estimate = estimate_run(config, archive)
    assert estimate.dollars is not None and f"${estimate.dollars:,.4f}" in said
    assert len(provider.ok_at) == asked_before  # the same calls again: all from the cache
    _cli("run", *args)
    # the calibration's designs were the run's first two: their first two items came from the
    # response cache, not the provider
    assert len(provider.ok_at) - asked_before == 32 - 2 * 2
    with Archive(str(tmp_path / "runs.db")) as archive:
        spent = archive.run_totals("r")
        later = estimate_run(replace(config, name="r2"), archive)
    print(
        f"estimate ${estimate.dollars:.4f}, {estimate.calls:.0f} calls, {estimate.tokens:.0f} "
        f"tokens; spent ${spent.cost:.4f}, {spent.prompt_tokens + spent.completion_tokens} tokens"
    )
    assert abs(estimate.dollars - spent.cost) <= 0.25 * spent.cost
    assert estimate.calls == pytest.approx(4 * 5 + 6 + 6)  # candidates, winner, CoT
    assert later.basis.startswith("this archive's evaluations") and later.calibration is None
    assert later.dollars == pytest.approx(estimate.dollars, rel=0.25)


def test_max_cost_stops_the_search_warns_once_each_and_the_verdict_still_prints(
    tmp_path: Path, provider: LimitedProvider
) -> None:
    """A design costs $0.055 (5 items, a call each): $0.15 stops the search in its third, after
    the warnings at 50% and 80%; the winner and CoT are still scored on the holdout."""
    args = [*_run_args(tmp_path, provider), "--max-agents", "10", "--max-cost", "0.15"]
    said = _cli("run", "--name", "r", *args)
    assert said.count("past 50% of its $0.15 dollar budget") == 1, said
    assert said.count("past 80% of its $0.15 dollar budget") == 1, said
    stopped = r"stopped: the dollar budget ended the search: spent \$0\.1\d+ of \$0\.15"
    assert re.search(stopped, said), said
    assert "winner" in said and "vs baseline cot" in said
    assert "the run's spend by part" in said
    with Archive(str(tmp_path / "runs.db")) as archive:
        run = archive.get_run("r")
        totals = archive.run_totals("r")
        roles = archive.role_totals("r")
        calls = archive.search_call_totals("r")
    assert run.status == "finished" and run.winner_hash is not None
    assert totals.n_finished < 10
    assert 0.15 <= roles["candidate"][3] < 0.15 + CALL * 2  # stopped between its tasks
    assert set(roles) == {"candidate", "winner", "baseline"}
    summed = sum(t[3] for t in roles.values()) + sum(t[3] for t in calls.values())
    assert summed == pytest.approx(totals.cost)
    for part, line in (("candidates", roles["candidate"]), ("holdout winner", roles["winner"])):
        assert re.search(rf"{part} +{line[1] + line[2]:,} +\${line[3]:,.4f}", said), part
    shown = json.loads(_cli("show", "r", "--json", "--storage", str(tmp_path / "runs.db")))
    assert [p["part"] for p in shown["spend"]] == ["candidates", "holdout winner", "baselines"]
    assert shown["spend"][0]["cost"] == pytest.approx(roles["candidate"][3])


def test_resume_raises_the_dollar_budget_and_no_warning_is_said_twice(
    tmp_path: Path, provider: LimitedProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    """From Python, a run whose dollar budget (create_search's) stops `optimize` unfinished; its
    resume with a larger one searches on to it and says only the warning it had not said."""
    with create_search(
        f"jsonl:{capitals_file(tmp_path, 40)}",
        name="r",
        storage=tmp_path / "runs.db",
        model=PRICED,
        api_base=provider.url,
        space={"choices": ONE_CALL},
        n_search=5,
        n_holdout=6,
        max_cost=0.15,
    ) as search:
        summary = search.optimize(n_agents=10, finalize=False)
        assert summary.stop_reason.startswith("the dollar budget ended the search")
        with pytest.raises(AgentDesignError, match="the dollar budget ended the search"):
            search.ask()
    warned = capsys.readouterr().err
    assert warned.count("past 50%") == 1 and warned.count("past 80%") == 1, warned
    before = _candidates_cost(tmp_path / "runs.db", "r")
    said = _cli("resume", "r", "--max-cost", "0.3", "--storage", str(tmp_path / "runs.db"))
    assert "past 50%" not in said  # passed at $0.15 of $0.30 before this resume
    assert said.count("past 80% of its $0.3 dollar budget") == 1, said
    assert "stopped: the dollar budget ended the search" in said and "vs baseline cot" in said
    assert before < 0.3 <= _candidates_cost(tmp_path / "runs.db", "r")


def test_a_model_with_no_price_is_price_unknown_never_zero_dollars(
    tmp_path: Path, provider: LimitedProvider
) -> None:
    args = [*_run_args(tmp_path, provider, UNPRICED), "--max-agents", "2"]
    said = _cli("run", "--estimate", "--name", "r", *args)
    assert "price unknown" in said and "$0" not in said, said
    assert token_price(UNPRICED) is None and token_price("embedded/qwen2.5-coder-1.5b") is None
    ran = _cli("run", "--name", "r", "--max-cost", "1", *args)
    warnings = [line for line in ran.splitlines() if "cannot stop this run" in line]
    assert len(warnings) == 1 and UNPRICED in warnings[0], ran
    shown = _cli("show", "r", "--storage", str(tmp_path / "runs.db"))
    spend = shown[shown.index("the run's spend by part") :]
    assert "candidates" in spend and "price unknown" in spend and "$0" not in spend


def test_the_estimate_counts_the_meta_agent_the_refiner_and_their_dev_items(
    tmp_path: Path,
) -> None:
    """An mcts run with a meta agent every 2nd and a refiner every 3rd proposal, on a fake model:
    the estimate's calls of each, and its dev evaluations, bound what the run then makes."""
    config = RunConfig.of(
        "m",
        benchmark=f"jsonl:{capitals_file(tmp_path, 40)}",
        model=PRICED,
        strategy="mcts",
        meta_every=2,
        refine_every=3,
        choices=ONE_CALL,
        max_agents=6,
        n_search=3,
        n_holdout=2,
    )
    llm = FakeChatModel(lambda *_: "Answer: Rome")  # wrong, so that the dev items fail
    with Archive(str(tmp_path / "runs.db")) as archive:
        estimate = estimate_run(config, archive, llm=llm)
        parts = {part.role: part for part in estimate.parts}
        assert {"candidates", "dev", "meta agent", "refiner"} <= set(parts), parts
        run_search(archive, config, llm=llm)
        calls = archive.search_call_totals("m")
        roles = archive.role_totals("m")
    assert calls["meta"][0] <= parts["meta agent"].calls
    assert calls.get("refinement", (0,))[0] <= parts["refiner"].calls
    assert roles["dev"][0] <= parts["dev"].calls / 3  # 3 dev items a dev evaluation, a call each


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("-1", "budget max_cost must be positive, got -1.0"),
        ("0", "budget max_cost must be positive, got 0.0"),
        ("abc", "--max-cost must be a number of dollars, got 'abc'"),
        ("nan", "budget max_cost must be a finite number, got nan"),
    ],
)
def test_a_bad_dollar_budget_is_one_error_line_and_writes_nothing(
    tmp_path: Path, value: str, needle: str
) -> None:
    kept = make_archive_with_a_run(tmp_path)
    with sqlite3.connect(kept) as conn:  # all in its one file, so that its bytes say any write
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for command in (["run", "--name", "new", "--model", "openai/x"], ["resume", "kept"]):
        refuses([*command, "--max-cost", value], needle, kept, tmp_path)
    fresh = tmp_path / "fresh.db"
    refused = agentdesign("run", "--estimate", "--max-cost", value, "-s", str(fresh), cwd=tmp_path)
    assert_one_line_error(refused, needle)
    assert not fresh.exists()


def test_a_budget_stored_before_dollars_reads_back_without_one() -> None:
    stored = {"max_agents": 8, "max_tokens": None, "max_minutes": None}
    config = RunConfig.from_dict({"name": "old", "model": "fake/model", "budget": stored})
    assert config.budget == Budget(max_agents=8) and config.budget.max_cost is None
    assert list(config.to_dict()["budget"]) == [*stored, "max_cost"]  # appended at the end
    with pytest.raises(AgentDesignError, match="budget max_cost must be positive"):
        Budget(max_cost=-2.0)
    with pytest.raises(AgentDesignError, match="budget max_cost must be a finite number"):
        RunConfig.of("x", max_cost=float("inf"))
