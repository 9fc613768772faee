"""Honest verdicts on the fake model: the winner is recorded before the holdout is touched and
never replaced, baselines are scored on the same holdout items, and no choice leaks the holdout."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from test_search import config as search_config

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
    resume_search,
    run_search,
)
from agentdesign.search._verdict import (
    cot_baseline,
    cot_sc_baseline,
    holdout_choice,
    run_verdict,
)
from agentdesign.search.cli._app import _evaluation_items

GOLD = {t.question: t.answer for t in get_benchmark("gsm8k").tasks()}


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
    ("winner_tokens", "samples"), [(100.0, None), (199.0, None), (200.0, 2), (290.0, 2), (5e3, 9)]
)
def test_cot_sc_takes_the_samples_the_winners_tokens_buy_and_none_below_two(
    winner_tokens: float, samples: int | None
) -> None:
    spec = cot_sc_baseline("fake/model", winner_tokens=winner_tokens, cot_tokens=100.0)
    if samples is None:
        assert spec is None
    else:
        assert spec is not None and spec.to_flat()["workflow__n_samples"] == samples


def right_at_length(
    model: str, messages: Sequence[Message], temperature: float, seed: int | None
) -> str:
    """Right only without chain of thought, and then at length: the winner costs CoT 3x over."""
    question = messages[-1]["content"].split("\n\n")[0]
    if "step by step" in messages[0]["content"]:
        return "Answer: -1"
    return "word " * 200 + f"Answer: {GOLD.get(question, '0')}"


def right_direct(
    model: str, messages: Sequence[Message], temperature: float, seed: int | None
) -> str:
    """Right only without chain of thought, in as few words as CoT's wrong answer."""
    question = messages[-1]["content"].split("\n\n")[0]
    if "step by step" in messages[0]["content"]:
        return "Answer: -1"
    return f"Answer: {GOLD.get(question, '0')}"


@pytest.mark.parametrize(("answer", "sc_scored"), [(right_at_length, True), (right_direct, False)])
def test_cot_sc_is_scored_only_when_the_winners_tokens_buy_two_samples_and_the_verdict_says_why(
    archive: Archive, answer: Callable[..., str], sc_scored: bool
) -> None:
    plain = {"workflow": ["single"], "reasoning": ["direct", "cot"]} | {
        slot: ["none"] for slot in ("planning", "memory", "tool", "reflection")
    }
    run_search(archive, config("sc", choices=plain), llm=FakeChatModel(answer))
    verdict = run_verdict(archive, "sc")
    labels = [v.label for v in verdict.baselines]
    cot = next(v for v in verdict.baselines if v.label == "cot")
    assert cot.token_ratio >= 2 if sc_scored else cot.token_ratio < 2
    assert any(label.startswith("cot-sc(n=") for label in labels) == sc_scored
    unscored = [line for line in verdict.headline() if "cot-sc not scored" in line]
    assert len(unscored) == (0 if sc_scored else 1)
    assert not any("no baseline scored" in line for line in verdict.headline())


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
    _, holdout = _evaluation_items(archive, "e", "humaneval", "holdout", None, seed=7)
    _, search = _evaluation_items(archive, "e", "humaneval", "search", 3, seed=7)
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
