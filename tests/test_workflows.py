"""Each workflow and functional component on the fake model: the orchestration itself."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from agentdesign.components import (
    REGISTRY,
    AgentResult,
    AgentSpec,
    Example,
    LLMCallError,
    Message,
    SpecError,
    TaskBudget,
    build_agent,
    current_isolation,
    parse_spec,
)
from agentdesign.components.library._memory import BM25
from agentdesign.components.library._tools import find_python
from agentdesign.components.testing import FakeChatModel

MODEL = "fake/model"
Reply = Callable[[str, str, int | None], str]  # (system, last message, seed) -> text


def fake(reply: Reply) -> FakeChatModel:
    def respond(
        model: str, messages: Sequence[Message], temperature: float, seed: int | None
    ) -> str:
        return reply(messages[0]["content"], messages[-1]["content"], seed)

    return FakeChatModel(respond)


def run(
    llm: FakeChatModel, question: str = "Q", pool: Sequence[Example] = (), **slots: Any
) -> AgentResult:
    return build_agent(AgentSpec.create(model=MODEL, **slots), llm=llm, train_examples=pool).run(
        question
    )


def roles(result: AgentResult) -> list[str]:
    return [r.role for r in result.trace]


def content(call: Any, index: int) -> str:
    return str(dict(call.messages[index])["content"])


# --- workflows ------------------------------------------------------------------------------------


def test_self_consistency_with_a_judge_returns_the_judges_pick() -> None:
    def reply(system: str, last: str, seed: int | None) -> str:
        if "BEST:" in system:
            return "The first one is right.\nBEST: 1"
        return {0: "Answer: 7", 1: "Answer: 9", 2: "Answer: 9"}[seed or 0]

    llm = fake(reply)
    workflow = {"name": "self_consistency", "params": {"n_samples": 3, "aggregate": "judge"}}
    result = run(llm, workflow=workflow)
    assert roles(result) == ["solver", "solver", "solver", "judge"]
    assert result.answer == "7"  # the judge overrules the majority
    judge_call = llm.calls[-1]
    assert judge_call.temperature == 0.0
    assert "Candidate 1:\nAnswer: 7" in content(judge_call, -1)
    assert "Candidate 3:\nAnswer: 9" in content(judge_call, -1)


def test_a_judge_that_names_no_candidate_falls_back_to_the_majority() -> None:
    llm = fake(lambda system, last, seed: "no idea" if "BEST:" in system else f"Answer: {seed}")
    workflow = {"name": "self_consistency", "params": {"n_samples": 2, "aggregate": "judge"}}
    assert run(llm, workflow=workflow).answer == "0"


def test_debate_runs_m_agents_for_r_rounds_then_a_judge() -> None:
    def reply(system: str, last: str, seed: int | None) -> str:
        if "BEST:" in system:
            return "BEST: 2"
        if "other agents" in last:
            return f"Having read them: Answer: {10 + (seed or 0)}"
        return f"Answer: {seed}"

    llm = fake(reply)
    result = run(llm, workflow={"name": "debate", "params": {"n_agents": 3, "rounds": 3}})
    assert len(llm.calls) == 3 * 3 + 1
    assert roles(result) == ["solver"] * 3 + ["debater"] * 6 + ["judge"]
    assert result.answer == "11"  # the judge chose agent 2's final answer
    # In round 2, agent 1 sees its own answer as its turn and the others' answers in the request.
    first_update = llm.calls[3].messages
    assert dict(first_update[-2])["content"] == "Answer: 0"
    request = dict(first_update[-1])["content"]
    assert "Agent 2:\nAnswer: 1" in request and "Agent 3:\nAnswer: 2" in request
    assert "Agent 1:" not in request
    # Round 3 shows the round-2 answers: every agent updates from the same round.
    assert "Agent 2:\nHaving read them: Answer: 11" in content(llm.calls[6], -1)


def test_self_refine_stops_when_the_critic_accepts() -> None:
    def reply(system: str, last: str, seed: int | None) -> str:
        if "VERDICT" in system:
            return "VERDICT: ACCEPT" if "fixed" in last else "Step 2 adds instead of multiplying."
        if "reviewer" in last:
            return "fixed it\nAnswer: 12"
        return "Answer: 7"

    llm = fake(reply)
    result = run(llm, workflow={"name": "self_refine", "params": {"max_rounds": 3}})
    assert roles(result) == ["solver", "critic", "reviser", "critic"]
    assert result.answer == "12"
    revise_request = content(llm.calls[2], -1)
    assert "Step 2 adds instead of multiplying." in revise_request
    assert content(llm.calls[2], -2) == "Answer: 7"  # the draft it revises


@pytest.mark.parametrize(
    ("critique", "expected"),
    [
        ("**VERDICT: ACCEPT**", ["solver", "critic"]),
        ("Wrong.", ["solver", "critic", "reviser", "critic", "reviser"]),  # max_rounds = 2
    ],
)
def test_self_refine_makes_at_most_two_calls_per_round(critique: str, expected: list[str]) -> None:
    llm = fake(lambda system, last, seed: critique if "VERDICT" in system else "Answer: 1")
    assert (
        roles(run(llm, workflow={"name": "self_refine", "params": {"max_rounds": 2}})) == expected
    )


def test_self_refine_uses_the_reflection_components_prompts() -> None:
    llm = fake(lambda system, last, seed: "VERDICT: ACCEPT" if "VERDICT" in system else "Answer: 1")
    custom = "Be strict. Reply 'VERDICT: ACCEPT' only if flawless."
    reflection = {"name": "self_critique", "params": {"critique_prompt": custom, "max_rounds": 3}}
    run(llm, workflow="self_refine", reflection=reflection)
    assert content(llm.calls[1], 0) == custom


def test_plan_solve_verify_re_solves_with_the_verifiers_correction() -> None:
    def reply(system: str, last: str, seed: int | None) -> str:
        if "numbered plan" in system:
            return "1. Multiply."
        if "VERDICT" in system:
            return "VERDICT: CORRECT" if "Answer: 12" in last else "It is 3 x 4, not 3 + 4."
        return "Answer: 12" if "3 x 4" in last else "Answer: 7"

    llm = fake(reply)
    result = run(llm, question="What is 3 times 4?", workflow="plan_solve_verify")
    assert roles(result) == ["planner", "solver", "verifier", "solver", "verifier"]
    assert result.answer == "12"
    # planning none: plan_and_solve's prompt makes the plan, which the solver is shown
    assert content(llm.calls[1], -1) == "What is 3 times 4?\n\nPlan:\n1. Multiply."
    assert "It is 3 x 4, not 3 + 4." in content(llm.calls[3], -1)
    assert content(llm.calls[3], -3) == "What is 3 times 4?\n\nPlan:\n1. Multiply."  # plan kept


def test_plan_solve_verify_uses_the_planning_component_when_there_is_one() -> None:
    llm = fake(lambda system, last, seed: "VERDICT: CORRECT" if "VERDICT" in system else "Ok.")
    run(llm, workflow={"name": "plan_solve_verify"}, planning="step_back")
    assert "step back" in content(llm.calls[0], 0)


def test_react_feeds_tool_observations_back() -> None:
    def reply(system: str, last: str, seed: int | None) -> str:
        if last.startswith("Observation:"):
            return f"Thought: that is it.\nAction: finish[{last.split(':')[1].strip()}]"
        return "Thought: multiply.\nAction: calculate[17 * 23]\nObservation: 999 (made up)"

    llm = fake(reply)
    result = run(llm, question="What is 17 times 23?", workflow="react", tool="calculator")
    assert result.answer == "391"
    assert [(r.kind, r.role) for r in result.trace] == [
        ("llm", "solver"),
        ("tool", "calculator"),
        ("llm", "solver"),
    ]
    second = llm.calls[1].messages
    assert dict(second[-2])["content"].endswith("Action: calculate[17 * 23]")  # invention cut
    assert dict(second[-1])["content"] == "Observation: 391"
    assert "calculate[...]" in content(llm.calls[0], 0) and "finish[...]" in content(
        llm.calls[0], 0
    )


def test_react_runs_python_with_brackets_in_the_code() -> None:
    def reply(system: str, last: str, seed: int | None) -> str:
        if last.startswith("Observation:"):
            return f"Action: finish[{last.split(':')[1].strip()}]"
        return "Thought: sum a list.\nAction: python[print(sum([1, 2, 3]) * 7)]"

    result = run(fake(reply), workflow="react", tool="python")
    assert result.answer == "42"
    assert result.trace[1].role == "python" and result.trace[1].input == "print(sum([1, 2, 3]) * 7)"


def test_react_without_a_tool_can_only_finish_and_stops_after_max_steps() -> None:
    llm = fake(lambda system, last, seed: "Thought: hm.\nAction: calculate[1 + 1]")
    result = run(llm, workflow={"name": "react", "params": {"max_steps": 3}})
    assert len(llm.calls) == 3 and roles(result) == ["solver"] * 3
    assert (
        content(llm.calls[1], -1) == "Observation: unknown action 'calculate'; use one of: finish"
    )
    assert "calculate[...]" not in content(llm.calls[0], 0)


def test_program_of_thought_prints_the_answer_and_retries_a_failing_program() -> None:
    def reply(system: str, last: str, seed: int | None) -> str:
        if "ZeroDivisionError" in last:
            return "```python\nprint(6 * 7)\n```"
        return "Here:\n```python\nprint(6 / 0)\n```"

    llm = fake(reply)
    result = run(llm, workflow="program_of_thought")
    assert result.answer == "42" and result.output.endswith("Answer: 42")
    assert [(r.kind, r.role) for r in result.trace] == [
        ("llm", "solver"),
        ("tool", "python"),
        ("llm", "solver"),
        ("tool", "python"),
    ]
    assert result.trace[1].error and "ZeroDivisionError" in result.trace[1].error
    # each program's record says what confined it; the archive keeps it in the task's trace
    assert [r.isolation for r in result.trace] == [None, current_isolation().level] * 2


def test_a_program_that_never_prints_is_an_empty_output() -> None:
    llm = fake(lambda system, last, seed: "```python\nx = 1\n```")
    result = run(llm, workflow="program_of_thought")
    assert result.error_kind == "empty_output" and len(llm.calls) == 2


# --- functional components ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("planning", "label"), [("plan_and_solve", "Plan"), ("step_back", "Underlying principle")]
)
def test_planning_is_one_extra_call_whose_answer_the_solver_sees(planning: str, label: str) -> None:
    llm = fake(lambda system, last, seed: "Answer: 1" if "Answer" in system else "Think first.")
    result = run(llm, question="Q?", planning=planning)
    assert roles(result) == ["planner", "solver"]
    assert content(llm.calls[1], -1) == f"Q?\n\n{label}:\nThink first."


def test_scratchpad_asks_for_labelled_sections() -> None:
    llm = fake(lambda system, last, seed: "Given: x\nSteps: 1. y\nCheck: ok\nAnswer: 5")
    pool = [Example(question="q", answer="2", rationale="1 + 1 = 2")]
    memory = {"name": "few_shot", "params": {"k": 1}}
    result = run(llm, pool=pool, reasoning="scratchpad", memory=memory)
    assert result.answer == "5"
    assert all(word in content(llm.calls[0], 0) for word in ("Given:", "Steps:", "Check:"))
    assert content(llm.calls[0], 2) == "Steps:\n1 + 1 = 2\nAnswer: 2"


def test_retrieval_shows_the_most_similar_solved_items_for_each_question() -> None:
    pool = [
        Example(question="A train travels 60 miles per hour for 3 hours.", answer="180"),
        Example(question="Tom has 5 apples and eats 2 apples.", answer="3"),
        Example(question="A baker bakes 12 loaves of bread a day.", answer="12"),
        Example(question="How far does a train go at 50 miles per hour in 2 hours?", answer="100"),
    ]
    llm = fake(lambda system, last, seed: "Answer: 1")
    spec = AgentSpec.create(model=MODEL, memory={"name": "retrieval", "params": {"k": 1}})
    agent = build_agent(spec, llm=llm, train_examples=pool)
    assert agent.examples == tuple(pool)
    agent.run("A train goes 40 miles per hour for 2 hours. How far?")
    agent.run("Sue has 9 apples and gives away 4 apples.")
    agent.run(pool[0].question)  # a pool item is never its own example
    shown = [content(call, 1) for call in llm.calls]
    assert shown == [pool[3].question, pool[1].question, pool[3].question]


def test_bm25_ranks_by_rare_shared_words_and_breaks_ties_by_order() -> None:
    index = BM25(["the cat sat", "the dog sat", "a cat and a cat", "nothing here"])
    assert index.top("cat", 5) == [2, 0]
    assert index.top("sat", 5) == [0, 1]
    assert index.top("zebra", 3) == []


def test_experience_memory_recalls_reviewer_complaints_on_similar_later_tasks() -> None:
    def reply(system: str, last: str, seed: int | None) -> str:
        if "VERDICT" in system:
            return (
                "You forgot the apples that were eaten." if "apples" in last else "VERDICT: ACCEPT"
            )
        return "Answer: 3"

    llm = fake(reply)
    spec = AgentSpec.create(
        model=MODEL,
        memory={"name": "experience", "params": {"k": 1}},
        reflection="self_critique",
    )
    agent = build_agent(spec, llm=llm)
    agent.run("Tom has 5 apples and eats 2. How many apples are left?")
    agent.run("A train goes 60 miles per hour for 3 hours. How far?")
    assert [ls.text for ls in agent.store.lessons] == ["You forgot the apples that were eaten."]
    first_calls = len(llm.calls)
    agent.run("Sue has 9 apples and eats 4. How many apples are left?")
    system = content(llm.calls[first_calls], 0)
    assert "Lessons from earlier problems" in system
    assert "You forgot the apples that were eaten." in system
    assert "Lessons" not in content(llm.calls[0], 0)  # nothing was known at the start


def test_experience_memory_learns_nothing_without_a_reviewer() -> None:
    agent = build_agent(
        AgentSpec.create(model=MODEL, memory="experience"), llm=fake(lambda s, q, n: "Answer: 1")
    )
    agent.run("Q1")
    agent.run("Q1 again")
    assert agent.store.lessons == ()


@pytest.mark.parametrize("workflow", sorted(set(REGISTRY.names("workflow", opt_in=False))))
def test_a_design_makes_exactly_the_calls_of_its_canonical_form(workflow: str) -> None:
    """What `unused_slots` and an experience memory's need of a reviewer claim: the parts the
    canonical form drops change no prompt, on tasks where a reviewer objects and tools are used."""

    def reply(system: str, last: str, seed: int | None) -> str:
        if "VERDICT" in system:
            return "The sum is wrong: add the apples again."
        return "Thought: add.\nAction: finish[3]\n```python\nprint(3)\n```\nAnswer: 3"

    for reflection in ("none", "self_critique"):
        spec = AgentSpec.create(
            model=MODEL,
            workflow=workflow,
            memory={"name": "experience", "params": {"k": 1}},
            tool="calculator",
            reflection=reflection,
        )
        calls = []
        for design in (spec, spec.canonical()):
            llm = fake(reply)
            agent = build_agent(design, llm=llm)
            for question in ("Tom has 5 apples and buys 2.", "Sue has 5 apples and buys 4."):
                agent.run(question)
            calls.append(list(llm.calls))
        assert calls[0] == calls[1], f"{spec.describe()} and its canonical form differ"


def test_python_tool_output_is_fed_back_and_invented_results_are_cut() -> None:
    def reply(system: str, last: str, seed: int | None) -> str:
        if last.startswith("RESULT:"):
            return f"So: Answer: {last.split(':')[1].strip()}"
        return "Compute it.\n```python\nprint(2 ** 10)\n```\nRESULT: 5\nAnswer: 5"

    llm = fake(reply)
    result = run(llm, tool="python")
    assert result.answer == "1024"
    assert content(llm.calls[1], -2).endswith("print(2 ** 10)\n```")
    assert content(llm.calls[1], -1) == "RESULT: 1024"
    assert "```python" in content(llm.calls[0], 0)


def test_python_blocks_are_found_fenced_or_marked() -> None:
    assert find_python("a\n```python\nprint(1)\n```\nafter") == (
        "a\n```python\nprint(1)\n```",
        "print(1)\n",
    )
    said, code = find_python("Let me run\nPYTHON: x = 2\nprint(x)\nRESULT: 3") or ("", "")
    assert code == "x = 2\nprint(x)\n" and said == "Let me run\nPYTHON: x = 2\nprint(x)"
    assert find_python("no code here") is None


def test_a_failing_program_is_an_observation_with_its_error() -> None:
    llm = fake(
        lambda s, last, n: "ok\nAnswer: 1" if last.startswith("RESULT") else "```python\n1/0\n```"
    )
    result = run(llm, tool="python")
    assert result.trace[1].error and "ZeroDivisionError" in result.trace[1].output
    assert "ZeroDivisionError" in content(llm.calls[1], -1)


# --- the runtime around them ----------------------------------------------------------------------


def test_every_call_is_recorded_with_its_role_and_failures_too() -> None:
    def reply(system: str, last: str, seed: int | None) -> str:
        if "VERDICT" in system:
            raise LLMCallError("critic's provider is down")
        return "Answer: 4"

    result = run(fake(reply), reflection="self_critique")
    assert result.error_kind == "llm" and "down" in (result.error or "")
    assert [(r.role, r.error is None) for r in result.trace] == [
        ("solver", True),
        ("critic", False),
    ]
    assert result.trace[0].prompt_tokens > 0 and result.trace[0].completion_tokens == 2


def test_the_budget_stops_a_debate_that_would_run_away() -> None:
    llm = fake(lambda system, last, seed: "Answer: 1")
    spec = AgentSpec.create(
        model=MODEL, workflow={"name": "debate", "params": {"n_agents": 4, "rounds": 3}}
    )
    result = build_agent(spec, llm=llm, budget=TaskBudget(max_calls=6)).run("Q")
    assert result.error_kind == "budget" and len(llm.calls) == 6


def test_arun_gives_the_same_result_as_run() -> None:
    spec = AgentSpec.create(
        model=MODEL, workflow={"name": "self_consistency", "params": {"n_samples": 3}}
    )
    agent = build_agent(spec, llm=fake(lambda system, last, seed: f"Answer: {seed}"))

    async def both() -> list[AgentResult]:
        return list(await asyncio.gather(agent.arun("Q"), agent.arun("Q")))

    assert asyncio.run(both()) == [agent.run("Q")] * 2


# --- specs ----------------------------------------------------------------------------------------


def test_a_spec_using_every_slot_round_trips() -> None:
    spec = AgentSpec.create(
        model=MODEL,
        workflow={"name": "debate", "params": {"n_agents": 2, "judge_prompt": "Pick. BEST: <n>"}},
        planning={"name": "step_back", "params": {"max_tokens": 64}},
        reasoning="scratchpad",
        memory={"name": "retrieval", "params": {"k": 4}},
        tool={"name": "python", "params": {"timeout_s": 5.0}},
        reflection={"name": "self_critique", "params": {"max_rounds": 2}},
    )
    assert AgentSpec.from_json(spec.to_json()) == spec
    assert AgentSpec.from_flat(spec.to_flat()) == spec
    assert spec.to_flat()["workflow__judge_prompt"] == "Pick. BEST: <n>"
    assert spec.set_params(reflection__max_rounds=3)["reflection"].get_params()["max_rounds"] == 3
    assert "judge_prompt" not in spec.describe() and "n_agents=2" in spec.describe()


def test_an_old_spec_without_the_new_slots_takes_their_defaults() -> None:
    spec = parse_spec({"model": MODEL, "components": {"workflow": "single", "tool": "calculator"}})
    assert spec["planning"].name == "none" and spec["reflection"].name == "none"


@pytest.mark.parametrize(
    ("slot", "component", "message"),
    [
        ("workflow", {"name": "debate", "params": {"n_agents": 1}}, "workflow__n_agents"),
        ("workflow", {"name": "debate", "params": {"rounds": 9}}, "workflow__rounds"),
        (
            "workflow",
            {"name": "self_consistency", "params": {"aggregate": "vote"}},
            "workflow__aggregate",
        ),
        (
            "workflow",
            {"name": "plan_solve_verify", "params": {"max_rounds": 0}},
            "workflow__max_rounds",
        ),
        (
            "workflow",
            {"name": "self_refine", "params": {"max_rounds": "2"}},
            "workflow__max_rounds",
        ),
        ("workflow", {"name": "react", "params": {"max_steps": 1}}, "workflow__max_steps"),
        (
            "workflow",
            {"name": "program_of_thought", "params": {"timeout_s": 0.1}},
            "workflow__timeout_s",
        ),
        ("workflow", {"name": "react", "params": {"instruction": 3}}, "workflow__instruction"),
        ("planning", "plan_first", "unknown planning component 'plan_first'"),
        ("planning", {"name": "step_back", "params": {"max_tokens": 4}}, "planning__max_tokens"),
        ("reasoning", {"name": "scratchpad", "params": {"depth": 2}}, "reasoning__depth"),
        ("memory", {"name": "retrieval", "params": {"k": 0}}, "memory__k"),
        ("memory", {"name": "experience", "params": {"k": 2.5}}, "memory__k"),
        ("tool", {"name": "python", "params": {"max_uses": 0}}, "tool__max_uses"),
        (
            "reflection",
            {"name": "self_critique", "params": {"max_rounds": 9}},
            "reflection__max_rounds",
        ),
        (
            "reflection",
            {"name": "self_critique", "params": {"temperature": True}},
            "reflection__temperature",
        ),
        ("reflection", "reflexion", "unknown reflection component 'reflexion'"),
    ],
)
def test_bad_specs_of_every_kind_are_refused(slot: str, component: object, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_spec({"model": MODEL, "components": {slot: component}})
