"""Honest verdicts on the fake model: the winner is recorded before the holdout is touched and
never replaced, baselines are scored on the same holdout items, and no choice leaks the holdout."""

from __future__ import annotations

import json
import shutil
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from test_refine import adds_a_hint
from test_search import config as search_config
from test_strategies import config as strategies_config

from agentdesign.archive import Archive, ArchiveError, EvaluationRecord
from agentdesign.components import AgentDesignError, AgentSpec, Message
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import get_benchmark
from agentdesign.search import (
    Budget,
    Reporter,
    RunConfig,
    SearchSpace,
    finalize_run,
    labelled_from_archive,
    load_search,
    resume_search,
    run_search,
)
from agentdesign.search.cli import evaluation_items, leaderboard_json
from agentdesign.search.config import dev_task_ids
from agentdesign.search.verdict import (
    cot_baseline,
    cot_sc_baseline,
    holdout_choice,
    run_verdict,
)

GOLD = {t.question: t.answer for t in get_benchmark("gsm8k").tasks()}
# A BFCL request is the whole message (its paragraphs list the functions); the default run's.
BFCL_GOLD = {t.question: t.answer for t in get_benchmark("bfcl").tasks()}


def right_when_thinking(
    model: str, messages: Sequence[Message], temperature: float, seed: int | None
) -> str:
    """Right on every item when asked to think step by step (chain of thought), else wrong."""
    question = messages[-1]["content"].split("\n\n")[0]
    if "step by step" in messages[0]["content"]:
        return f"Let me think.\nAnswer: {GOLD.get(question, '0')}"
    return "Answer: -1"


def config(name: str, **overrides: object) -> RunConfig:
    values: dict[str, object] = {
        "n_search": 6,
        "n_holdout": 5,
        "race": True,
        "choices": {"workflow": ["single"], "reasoning": ["direct", "cot"]},
    }
    return search_config(name, **{**values, **overrides})


class HoldoutWatcher(Reporter):
    """Notes the winner the archive holds when each holdout evaluation starts."""

    def __init__(self, archive: Archive, name: str) -> None:
        self.archive, self.name = archive, name
        self.winner_at_holdout: list[str | None] = []

    def agent_started(self, spec: AgentSpec, n_tasks: int, n_done: int, split: str) -> None:
        if split == "holdout":
            self.winner_at_holdout.append(self.archive.get_run(self.name).winner_hash)


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    with Archive(str(tmp_path / "verdict.db")) as opened:
        yield opened  # type: ignore[misc]


def test_the_winner_is_recorded_before_any_holdout_task(archive: Archive) -> None:
    watcher = HoldoutWatcher(archive, "w")
    run_search(archive, config("w"), llm=FakeChatModel(right_when_thinking), reporter=watcher)
    run = archive.get_run("w")
    best = archive.leaderboard(run_name="w", limit=1)[0]
    assert run.winner_hash == best.agent_hash
    assert watcher.winner_at_holdout and set(watcher.winner_at_holdout) == {run.winner_hash}


def test_baselines_are_scored_on_the_same_holdout_items_and_make_the_headline(
    archive: Archive,
) -> None:
    run_search(archive, config("b"), llm=FakeChatModel(right_when_thinking))
    run = archive.get_run("b")
    roles = archive.run_roles("b")
    holdout = archive.run_evaluations("b", split="holdout")
    by_role: dict[str, list[EvaluationRecord]] = {}
    for evaluation in holdout:
        by_role.setdefault(roles[evaluation.id], []).append(evaluation)
    assert [e.agent_hash for e in by_role["winner"]] == [run.winner_hash]
    assert all(set(e.task_ids) == set(run.holdout_task_ids) for e in holdout)
    verdict = run_verdict(archive, "b")
    assert verdict.holdout is not None and verdict.holdout.agent_hash == run.winner_hash
    labels = {v.label for v in verdict.baselines}
    if run.winner_hash == cot_baseline("fake/model").spec_hash:  # the winner is plain CoT
        assert not labels
        assert {label for label, _ in verdict.unscored} == {"cot", "cot-sc"}
        assert "winner is chain of thought itself" in " ".join(verdict.headline())
    else:
        assert {"cot"} <= labels
    for baseline in verdict.baselines:
        assert baseline.comparison.n == 5
        assert baseline.sentence(verdict.winner_label).count("unseen items") == 1
    # baselines count in tokens, never as searched designs
    assert archive.run_totals("b").n_complete == 4


@pytest.mark.parametrize(
    ("winner_tokens", "samples"),
    [
        (100.0, None),
        (200.0, None),  # 2 samples vote for the first: one sample at twice the cost
        (299.0, None),
        (300.0, 3),
        (499.0, 3),  # 4 would tie 2-2
        (500.0, 5),
        (850.0, 7),
        (5e3, 9),
    ],
)
def test_cot_sc_takes_the_odd_samples_the_winners_tokens_buy_and_none_below_three(
    winner_tokens: float, samples: int | None
) -> None:
    spec = cot_sc_baseline("fake/model", winner_tokens=winner_tokens, cot_tokens=100.0)
    if samples is None:
        assert spec is None
    else:
        assert spec is not None and spec.to_flat()["workflow__n_samples"] == samples


def right_at_length(words: int) -> Callable[..., str]:
    """Right only without chain of thought, and then after `words` words: 200 make the winner
    cost CoT's tokens 3x over, 120 about 2.4x (2 samples' worth, too few for a vote), none less
    than CoT's wrong answer."""

    def answer(
        model: str, messages: Sequence[Message], temperature: float, seed: int | None
    ) -> str:
        question = messages[-1]["content"].split("\n\n")[0]
        if "step by step" in messages[0]["content"]:
            return "Answer: -1"
        return "word " * words + f"Answer: {GOLD.get(question, '0')}"

    return answer


@pytest.mark.parametrize(("words", "sc_scored"), [(200, True), (120, False), (0, False)])
def test_cot_sc_is_scored_only_when_the_winners_tokens_buy_three_samples_and_the_verdict_says_why(
    archive: Archive, words: int, sc_scored: bool
) -> None:
    plain = {"workflow": ["single"], "reasoning": ["direct", "cot"]} | {
        slot: ["none"] for slot in ("planning", "memory", "tool", "reflection")
    }
    run_search(archive, config("sc", choices=plain), llm=FakeChatModel(right_at_length(words)))
    verdict = run_verdict(archive, "sc")
    labels = [v.label for v in verdict.baselines]
    cot = next(v for v in verdict.baselines if v.label == "cot")
    assert cot.token_ratio >= 3 if sc_scored else cot.token_ratio < 3
    assert any(label.startswith("cot-sc(n=") for label in labels) == sc_scored
    unscored = [line for line in verdict.headline() if "cot-sc not scored" in line]
    assert len(unscored) == (0 if sc_scored else 1)
    assert not any("no baseline scored" in line for line in verdict.headline())
    if words == 120:  # 2 samples' worth, scored as "cot-sc(n=2)" before: the first sample's vote
        assert 2 <= cot.token_ratio < 3
    for baseline in verdict.baselines:  # the realised tokens per item, beside the winner's
        tokens = f"({baseline.winner_tokens:,.0f} vs {baseline.baseline_tokens:,.0f})"
        assert tokens in baseline.sentence(verdict.winner_label)
        if baseline.label.startswith("cot-sc"):
            samples = int(baseline.label.removeprefix("cot-sc(n=").removesuffix(")"))
            assert samples >= 3 and samples % 2 == 1
            assert baseline.baseline_tokens <= baseline.winner_tokens
    if not sc_scored:
        assert "CoT is the cost-matched baseline" in unscored[0]
        assert f"({cot.winner_tokens:,.0f} vs {cot.baseline_tokens:,.0f})" in unscored[0]


def test_finalize_scores_more_designs_as_exploratory_and_never_replaces_the_winner(
    archive: Archive,
) -> None:
    run_search(archive, config("f"), llm=FakeChatModel(right_when_thinking))
    winner = archive.get_run("f").winner_hash
    assert winner is not None
    finalize_run(archive, "f", top=3, llm=FakeChatModel(right_when_thinking))
    assert archive.get_run("f").winner_hash == winner
    roles = archive.run_roles("f")
    exploratory = [
        e for e in archive.run_evaluations("f", split="holdout") if roles[e.id] == "exploratory"
    ]
    assert len(exploratory) == 2 and winner not in {e.agent_hash for e in exploratory}
    other = next(
        row.agent_hash for row in archive.leaderboard(run_name="f") if row.agent_hash != winner
    )
    with pytest.raises(ArchiveError, match="never replaced"):
        archive.record_winner("f", other)
    assert archive.get_run("f").winner_hash == winner


def test_a_choice_on_holdout_selection_items_is_scored_on_the_final_test_items_only(
    archive: Archive,
) -> None:
    run_search(archive, config("h"), llm=FakeChatModel(right_when_thinking))
    with pytest.raises(AgentDesignError, match="needs 2 or more"):
        holdout_choice(archive, "h", n_selection=2)
    finalize_run(archive, "h", top=3, llm=FakeChatModel(right_when_thinking))
    for wrong in (0, 5):
        with pytest.raises(AgentDesignError, match="must leave final-test items"):
            holdout_choice(archive, "h", n_selection=wrong)
    run, roles = archive.get_run("h"), archive.run_roles("h")
    selection, final = run.holdout_task_ids[:2], run.holdout_task_ids[2:]
    scores = {
        e.agent_hash: {t: r.score for t, r in archive.task_results(e.id).items()}
        for e in archive.run_evaluations("h", split="holdout")
        if roles[e.id] in ("winner", "exploratory")
    }
    choice = holdout_choice(archive, "h", n_selection=2)
    best = max(sum(by_task[t] for t in selection) for by_task in scores.values())
    assert sum(scores[choice.chosen_hash][t] for t in selection) == best
    assert choice.n_candidates == 3 and choice.final.n == len(final) == 3
    assert choice.final.mean == pytest.approx(
        np.mean([scores[choice.chosen_hash][t] for t in final])
    )
    assert "final-test score on the other 3 holdout items" in choice.sentence()
    assert archive.get_run("h").winner_hash == run.winner_hash


def test_a_run_with_a_recorded_winner_cannot_search_on(archive: Archive) -> None:
    run_search(archive, config("r"), llm=FakeChatModel(right_when_thinking))
    with pytest.raises(AgentDesignError, match="cannot search on"):
        resume_search(
            archive, "r", budget=Budget(max_agents=8), llm=FakeChatModel(right_when_thinking)
        )
    summary = resume_search(archive, "r", llm=FakeChatModel(right_when_thinking))
    assert summary.stop_reason == "the run's winner is recorded"


def test_evaluate_run_uses_exactly_the_stored_ids(archive: Archive) -> None:
    run_search(archive, config("e", n_search=20), llm=FakeChatModel(right_when_thinking))
    run = archive.get_run("e")
    _, holdout = evaluation_items(archive, "e", "humaneval", "holdout", None, seed=7)
    _, search = evaluation_items(archive, "e", "humaneval", "search", 3, seed=7)
    assert holdout == list(run.holdout_task_ids)
    assert search == list(run.search_task_ids[:3])


def test_the_value_prior_drops_rows_that_saw_this_runs_holdout(archive: Archive) -> None:
    # with the same seed, a larger search split holds a smaller run's holdout items: a collision
    # refused unless allowed, and allowed, the prior still never learns from those items
    run_search(
        archive, config("big", n_search=12, n_holdout=1), llm=FakeChatModel(right_when_thinking)
    )
    small = config("small", n_search=6, n_holdout=5, allow_split_overlap=True)
    run_search(archive, small, llm=FakeChatModel(right_when_thinking))
    holdout = archive.get_run("small").holdout_task_ids
    big_search = set(archive.get_run("big").search_task_ids)
    assert big_search & set(holdout)
    everything = labelled_from_archive(archive)
    prior = labelled_from_archive(archive, benchmark="gsm8k", unseen=holdout)
    assert len(prior) < len(everything)
    kept = {
        row.agent_hash
        for row in archive.leaderboard(limit=1000)
        if not set(row.task_ids) & set(holdout)
    }
    assert len(prior) == len(kept)


def test_the_grid_keeps_near_duplicate_designs_apart() -> None:
    space = SearchSpace(model="fake/model", grid=True)
    rng = np.random.default_rng(0)
    caps = {space.sample(rng, {"reasoning": "cot"})["reasoning"].max_tokens for _ in range(200)}
    assert caps == {128, 352, 576, 800, 1024}
    free = SearchSpace(model="fake/model")
    assert (
        len({free.sample(rng, {"reasoning": "cot"})["reasoning"].max_tokens for _ in range(200)})
        > 20
    )


# -- the verdict reads the designs' search evaluations, never their development ones --------------


def wrong_on_the_dev_items(run: RunConfig) -> FakeChatModel:
    """Right with chain of thought on every item but the run's development items, where a design
    scores 0 against its 1 on the search items. As the refiner it appends a hint; as the meta agent
    it writes one chain-of-thought design, then designs without it (so that the first is the best
    design, and the meta agent's parent)."""
    gsm8k = get_benchmark("gsm8k")
    dev = {t.question for t in gsm8k.tasks_by_ids(dev_task_ids(gsm8k, run))}
    designs = [{"workflow": "single", "reasoning": "cot", "tool": "none"}] + [
        {"workflow": "single", "reasoning": "direct", "memory": memory, "tool": tool}
        for memory in ("none", {"name": "few_shot", "k": 2})
        for tool in ("none", "calculator")
    ]

    def answer(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
        system = messages[0]["content"]
        if system.startswith("You improve the prompts"):
            return adds_a_hint(model, messages, t, s)
        if system.startswith("You design LLM agents"):
            return json.dumps([designs.pop(0)] if designs else [])
        question = messages[-1]["content"].split("\n\n")[0]
        if "step by step" in system and question not in dev:
            return f"Answer: {GOLD.get(question, '0')}"
        return "Answer: -1"

    return FakeChatModel(answer)


@pytest.mark.parametrize(
    ("strategy", "agents", "operators"),
    [("mcts", 10, {"refine_every": 2}), ("meta", 4, {})],  # mcts refines after its 8-design start
    ids=["refine", "meta"],
)
def test_the_verdict_never_reads_a_development_evaluation(
    archive: Archive, strategy: str, agents: int, operators: dict[str, object]
) -> None:
    run = strategies_config("dev", strategy, budget=Budget(max_agents=agents), **operators)
    run_search(archive, run, llm=wrong_on_the_dev_items(run))
    record, roles = archive.get_run("dev"), archive.run_roles("dev")
    searched = archive.run_evaluations("dev", split="search")
    developed = {e.agent_hash for e in searched if roles[e.id] == "dev"}
    assert record.winner_hash in developed  # what went wrong: the winner was scored on dev items
    full = [
        e
        for e in searched
        if roles[e.id] == "candidate"
        and e.status == "complete"
        and set(e.task_ids) == set(record.search_task_ids)
    ]
    verdict = run_verdict(archive, "dev")
    assert verdict.winner is not None and roles[verdict.winner.id] == "candidate"
    assert verdict.winner.mean == 1.0
    assert set(verdict.winner.task_ids) == set(record.search_task_ids)
    assert verdict.runner_up is not None and verdict.runner_up.n == len(record.search_task_ids)
    # every fully scored design is in the designs x items matrix, those scored on dev items too
    assert verdict.selection == (len(full), len(record.search_task_ids))
    with load_search("dev", storage=archive) as search:  # the Python API reads the same
        assert search.verdict() == verdict


# -- selection overfit: printed only at a size where it means something ---------------------------


def noisy(model: str, messages: Sequence[Message], temperature: float, seed: int | None) -> str:
    """Right or wrong by a hash of the whole request: designs that differ by noise alone."""
    question = messages[-1]["content"]
    gold = GOLD.get(question.split("\n\n")[0]) or BFCL_GOLD.get(question, "0")
    asked = "\n".join(m["content"] for m in messages)
    right = zlib.crc32(asked.encode()) % 2 == 0
    return f"Answer: {gold if right else '-1'}"


def test_the_overfit_figures_come_with_their_shuffled_reference_from_8_designs_x_20_items(
    archive: Archive,
) -> None:
    run = config(
        "big", n_search=20, n_holdout=2, race=False, choices={}, budget=Budget(max_agents=8)
    )
    run_search(archive, run, llm=FakeChatModel(noisy))
    verdict = run_verdict(archive, "big")
    assert verdict.selection == (8, 20)
    overfit = verdict.overfit
    assert overfit is not None and (overfit.n_designs, overfit.n_items) == (8, 20)
    assert overfit.shuffled_low <= overfit.shuffled_pbo <= overfit.shuffled_high
    assert 0 <= overfit.best_share <= 1
    (line,) = [line for line in verdict.headline() if line.startswith("selection overfit")]
    assert f"probability of backtest overfitting {overfit.pbo:.2f}" in line
    assert f"as if equal: {overfit.shuffled_pbo:.2f}" in line
    assert f"in {overfit.best_share:.0%} of item bootstraps" in line
    assert not any(line.startswith("too few designs") for line in verdict.headline())
    shown = leaderboard_json(archive, "big", limit=10)
    assert shown["overfit"] == asdict(overfit)


def test_below_8_designs_x_20_items_the_verdict_prints_no_overfit_number(archive: Archive) -> None:
    run_search(archive, config("small"), llm=FakeChatModel(right_when_thinking))
    verdict = run_verdict(archive, "small")
    assert verdict.overfit is None and verdict.selection is not None
    designs, items = verdict.selection
    assert items == 6 and 2 <= designs < 8
    assert (
        f"too few designs or items to estimate selection overfit ({designs} designs x 6 search "
        "items; the estimate needs 8 x 20)"
    ) in verdict.headline()
    assert not any("backtest" in line or "optimism" in line for line in verdict.headline())


def test_the_default_run_prints_what_it_could_detect_and_no_overfit_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agentdesign run` with its defaults (BFCL, 4 designs x 4 search items, 40 holdout items),
    the fake model in place of the real one."""
    from typer.testing import CliRunner

    from agentdesign.search.cli import _app
    from agentdesign.search.config import _resolve

    monkeypatch.setattr(_resolve, "default_chat_model", lambda **_: FakeChatModel(noisy))
    monkeypatch.setattr(_app, "console", _app.Console(width=400))
    db = str(tmp_path / "default.db")
    ran = CliRunner().invoke(_app.app, ["run", "--model", "openai/fake-model", "--storage", db])
    assert ran.exit_code == 0, ran.output
    with Archive(db) as archive:
        run = archive.get_run(archive.list_runs()[0].name)
        verdict = run_verdict(archive, run.name)
    assert run.benchmark == "bfcl"
    assert (len(run.search_task_ids), len(run.holdout_task_ids)) == (4, 40)
    assert verdict.selection is not None and verdict.selection[1] == 4
    printed = ran.output.splitlines()
    assert any(
        line.startswith("too few designs or items to estimate selection overfit")
        for line in printed
    )
    assert not any("backtest overfitting" in line or "optimism" in line for line in printed)
    undecided = [v for v in verdict.baselines if v.comparison.ci_low <= 0 <= v.comparison.ci_high]
    assert undecided  # the verdict says what 40 items could have shown
    for baseline in undecided:
        line = baseline.sentence(verdict.winner_label)
        assert line in printed and "no difference shown (" in line and "80% power" in line


def test_a_recorded_verdict_reads_by_todays_rules(tmp_path: Path) -> None:
    """bench/results/honesty.sqlite holds runs on the embedded model scored before the rules
    above: its GSM8K winner won 4 of the 4 holdout items it and 2-sample self-consistency
    disagreed on, which Tango's interval alone called a win (exact p = 0.125)."""
    copy = tmp_path / "honesty.sqlite"
    shutil.copy(Path(__file__).parent.parent / "bench" / "results" / "honesty.sqlite", copy)
    with Archive(str(copy)) as recorded:
        verdict = run_verdict(recorded, "honest-gsm8k")
    (sc,) = [b for b in verdict.baselines if b.label.startswith("cot-sc")]
    assert sc.label == "cot-sc(n=2, an even vote whose ties go to the first sample)"
    c = sc.comparison
    assert (c.wins, c.losses, c.n) == (4, 0, 10) and c.p_value == pytest.approx(0.125)
    assert "no difference shown" in sc.sentence(verdict.winner_label)
