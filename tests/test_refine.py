"""Prompt refinement: a model rewrites one prompt of a good design from its failed tasks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import optuna
import pytest
from test_strategies import config, cot_is_right

from agentdesign.archive import Archive
from agentdesign.components import (
    AgentDesignError,
    AgentSpec,
    LLMCallError,
    Message,
    default_chat_model,
)
from agentdesign.components.testing import FakeChatModel
from agentdesign.search import (
    Budget,
    Failure,
    History,
    PromptRefiner,
    Proposal,
    Reporter,
    Strategy,
    ask_trial,
    make_strategy,
    prompt_params,
    run_search,
)
from agentdesign.search.space import PROMPTS_ATTR

SPEC = AgentSpec.create(model="fake/model", reasoning="cot")
FAILED = [Failure(question="What is 2 + 3?", output="Answer: 6", expected="5")]
HINT = " Check every sum twice."


def _shown_prompt(messages: Sequence[Message]) -> str:
    found = re.search(r"<<<\n(.*)\n>>>", messages[-1]["content"], re.DOTALL)
    assert found is not None, messages[-1]["content"]
    return found.group(1)


def adds_a_hint(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
    """A refining model that keeps the prompt and appends advice (fenced, as small models do)."""
    return f"```\n{_shown_prompt(messages)}{HINT}\n```"


def refiner(respond: object, failures: Sequence[Failure] = FAILED) -> PromptRefiner:
    return PromptRefiner(
        llm=FakeChatModel(respond),  # type: ignore[arg-type]
        model="fake/model",
        failures=lambda spec: failures,
    )


def test_a_refinement_rewrites_one_prompt_and_keeps_the_rest() -> None:
    calls = []
    refining = refiner(adds_a_hint)
    refining.on_call = calls.append
    result = refining.refine(SPEC, FAILED, np.random.default_rng(0))
    assert result is not None and len(calls) == 1
    before, after = prompt_params(SPEC), prompt_params(result.spec)
    assert after[result.param] == before[result.param] + HINT
    assert {k: v for k, v in after.items() if k != result.param} == {
        k: v for k, v in before.items() if k != result.param
    }
    assert prompt_params(result.spec, changed_only=True) == {result.param: after[result.param]}
    assert result.spec.spec_hash != SPEC.spec_hash


def test_the_refining_model_sees_the_failures() -> None:
    seen: list[str] = []

    def spy(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
        seen.append(messages[-1]["content"])
        return adds_a_hint(model, messages, t, s)

    assert refiner(spy).refine(SPEC, FAILED, np.random.default_rng(1)) is not None
    assert (
        "What is 2 + 3?" in seen[0] and "Answer: 6" in seen[0] and "Expected answer: 5" in seen[0]
    )


def test_a_rewrite_that_breaks_the_output_contract_is_refused() -> None:
    spec = AgentSpec.create(model="fake/model")
    contract = {k for k, v in prompt_params(spec).items() if "'Answer: <answer>'" in v}
    assert contract

    def drops_the_format(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
        return _shown_prompt(messages).replace("'Answer: <answer>'", "the answer")

    refining = refiner(drops_the_format)
    for seed in range(20):  # whichever prompt it picks, no rewrite without its format line
        result = refining.refine(spec, FAILED, np.random.default_rng(seed))
        assert result is None or result.param not in contract


def test_no_failures_no_call_and_a_failed_call_gives_nothing() -> None:
    def never(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
        raise AssertionError("called without failures")

    assert refiner(never).refine(SPEC, [], np.random.default_rng(0)) is None
    assert refiner(never, failures=[]).failures_of(SPEC) == []

    def down(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
        raise LLMCallError("503")

    assert refiner(down).refine(SPEC, FAILED, np.random.default_rng(0)) is None


def test_only_value_guided_strategies_refine() -> None:
    space = config("x", "mcts").search_space()
    with pytest.raises(AgentDesignError, match="value-guided"):
        make_strategy("tpe", space=space, seed=0, refiner=refiner(adds_a_hint))
    with pytest.raises(AgentDesignError, match=r"value-guided strategy \(mcts, evolution, meta\)"):
        config("y", "tpe", refine_every=2)
    with pytest.raises(AgentDesignError, match="must not be negative"):
        config("z", "mcts", refine_every=-1)
    with pytest.raises(AgentDesignError, match="needs n >= 1, got 0"):
        PromptRefiner(
            llm=FakeChatModel(adds_a_hint), model="fake/model", failures=lambda s: [], every=0
        )


def answers_and_refines(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
    if messages[0]["content"].startswith("You improve the prompts"):
        return adds_a_hint(model, messages, t, s)
    return cot_is_right(model, messages, t, s)


def test_a_run_refines_records_the_parent_and_pays_for_the_calls(tmp_path: Path) -> None:
    calls: list[str] = []

    class Told(Reporter):
        def search_call_started(self, purpose: str) -> None:
            calls.append(purpose)

    with Archive(str(tmp_path / "r.db")) as archive:
        run_search(
            archive,
            config("refine", "mcts", refine_every=2, budget=Budget(max_agents=16)),
            llm=FakeChatModel(answers_and_refines),
            reporter=Told(),
        )
        searched = archive.run_evaluations("refine")  # racing may drop a refinement: not ranked
        agents = [archive.get_agent(e.agent_hash) for e in searched]
        refined = [a for a in agents if a.operator == "refinement"]
        assert refined
        for agent in refined:  # the rewritten prompt went through the optuna trial intact
            spec, parent = AgentSpec.from_dict(agent.spec), archive.get_agent(agent.parent_hash)
            changed = prompt_params(spec, changed_only=True)
            assert any(v.endswith(HINT) for v in changed.values())
            assert spec.set_params(**prompt_params(AgentSpec.from_dict(parent.spec))).spec_hash == (
                parent.spec_hash
            )
        totals = archive.run_totals("refine")
        evaluations = archive.run_evaluations("refine", split="search")
        evaluations += archive.run_evaluations("refine", split="holdout")
        assert totals.n_search_calls >= len(refined)
        assert calls == ["refinement"] * totals.n_search_calls  # the progress bar was told
        assert totals.prompt_tokens > sum(e.prompt_tokens for e in evaluations)


def test_a_proposal_carries_its_prompts_through_the_trial() -> None:
    space = config("p", "mcts").search_space()
    spec = space.sample(np.random.default_rng(3))
    rewritten = spec.set_params(**{"reasoning__instruction": "Think hard. 'Answer: <answer>'"})

    class Fixed(Strategy):
        def suggest(self, history: History, rng: np.random.Generator) -> Proposal:
            return Proposal(spec=rewritten, operator="refinement")

    study = optuna.create_study()
    trial = ask_trial(study, Fixed(space=space), History(description=""))
    assert trial.user_attrs[PROMPTS_ATTR] == prompt_params(rewritten, changed_only=True)
    assert space.suggest(trial).spec_hash == rewritten.spec_hash


@pytest.mark.embedded
def test_the_embedded_model_refines_a_prompt() -> None:
    """The real model, once: its rewrite must pass the contract check or be refused cleanly."""
    spec = AgentSpec.create(model="embedded/smollm2-135m", reasoning="cot")
    calls = []
    refining = PromptRefiner(
        llm=default_chat_model(cache=False),
        model=spec.model,
        failures=lambda s: FAILED,
        on_call=calls.append,
        max_tokens=96,
    )
    result = refining.refine(spec, FAILED, np.random.default_rng(0))
    assert len(calls) == 1 and calls[0].completion_tokens > 0
    if result is not None:
        changed = prompt_params(result.spec, changed_only=True)
        assert list(changed) == [result.param]


@pytest.mark.parametrize(
    "leak",
    [
        " For example, 2 + 3 gives 5.",  # a shown gold answer
        # a shown question
        " Think of tasks like: a robe takes 2 bolts of blue fiber and half that much.",
    ],
)
def test_a_rewrite_that_carries_a_shown_task_is_rejected(leak: str) -> None:
    shown = [
        Failure(
            question="A robe takes 2 bolts of blue fiber and half that much white fiber.",
            output="Answer: 2",
            expected="3",
        ),
        Failure(question="What is 2 + 3 when you add them up?", output="Answer: 6", expected="5"),
    ]

    def leaks(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
        return _shown_prompt(messages) + leak

    assert refiner(leaks, shown).refine(SPEC, shown, np.random.default_rng(0)) is None
    assert refiner(adds_a_hint, shown).refine(SPEC, shown, np.random.default_rng(0)) is not None
