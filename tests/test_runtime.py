"""Orchestration of the runtime on the deterministic fake model, and spec validation."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import ClassVar

import pytest

from agentdesign.components import (
    REGISTRY,
    AgentSpec,
    Component,
    Example,
    LLMCallError,
    Message,
    Registry,
    SpecError,
    TaskBudget,
    Workflow,
    build_agent,
    extract_answer,
    parse_spec,
    safe_eval,
)
from agentdesign.components.testing import FakeChatModel, failing_responder

MODEL = "fake/model"


def constant(text: str) -> FakeChatModel:
    return FakeChatModel(lambda model, messages, temperature, seed: text)


def test_spec_round_trips_through_json_and_flat_form() -> None:
    spec = AgentSpec.create(
        model=MODEL,
        workflow={"name": "self_consistency", "params": {"n_samples": 3}},
        memory={"name": "few_shot", "params": {"k": 2}},
        tool="calculator",
    )
    assert AgentSpec.from_json(spec.to_json()) == spec
    assert AgentSpec.from_flat(spec.to_flat()) == spec
    assert spec.to_flat()["workflow__n_samples"] == 3
    assert parse_spec(spec.to_json()).spec_hash == spec.spec_hash


def test_hash_ignores_how_defaults_were_written() -> None:
    short = AgentSpec.create(model=MODEL)
    explicit = AgentSpec.create(
        model=MODEL,
        workflow="single",
        reasoning={"name": "cot", "params": {"max_tokens": 512}},
        memory="none",
        tool="none",
    )
    assert short.spec_hash == explicit.spec_hash
    assert short.spec_hash != short.set_params(reasoning__max_tokens=256).spec_hash


def test_the_canonical_form_sets_parts_a_design_never_uses_to_none() -> None:
    pot = AgentSpec.create(
        model=MODEL,
        workflow="program_of_thought",
        memory="experience",
        tool="calculator",
        reflection="self_critique",
    )
    assert pot.unused_slots() == {"memory", "tool", "reflection"}
    assert pot.canonical() == AgentSpec.create(model=MODEL, workflow="program_of_thought")
    assert pot.spec_hash != pot.canonical().spec_hash  # a written spec keeps its own hash
    reviewed = AgentSpec.create(model=MODEL, memory="experience", reflection="self_critique")
    assert reviewed.unused_slots() == frozenset() and reviewed.canonical() is reviewed
    refined = AgentSpec.create(model=MODEL, workflow="self_refine", memory="experience")
    assert refined.canonical() is refined  # the workflow itself reviews
    alone = AgentSpec.create(model=MODEL, memory={"name": "experience", "params": {"k": 1}})
    assert alone.canonical().spec_hash == AgentSpec.create(model=MODEL).spec_hash
    react = AgentSpec.create(
        model=MODEL, workflow="react", tool="python", reflection="self_critique"
    )
    assert react.canonical() == react.set_params(reflection="none")  # ReAct calls its tool


def test_set_params_switching_component_starts_from_its_defaults() -> None:
    spec = AgentSpec.create(model=MODEL, reasoning={"name": "cot", "params": {"max_tokens": 900}})
    switched = spec.set_params(reasoning="direct")
    assert switched["reasoning"].get_params()["max_tokens"] == 64
    with pytest.raises(ValueError, match="unknown parameter 'reasoning__bogus'"):
        spec.set_params(reasoning__bogus=1)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"model": MODEL, "components": {"workflow": "nope"}}, "unknown workflow component 'nope'"),
        ({"model": MODEL, "components": {"planner": "x"}}, "unknown slot"),
        (
            {
                "model": MODEL,
                "components": {
                    "workflow": {"name": "self_consistency", "params": {"n_samples": 1}}
                },
            },
            "workflow__n_samples",
        ),
        (
            {"model": MODEL, "components": {"memory": {"name": "few_shot", "params": {"k": "3"}}}},
            "memory__k",
        ),
        (
            {"model": MODEL, "components": {"tool": {"name": "calculator", "params": {"x": 1}}}},
            "tool__x",
        ),
        ({"model": "", "components": {}}, "model"),
        ({"model": MODEL, "extra": 1}, "unknown spec field"),
    ],
)
def test_bad_specs_are_refused_with_the_field_named(data: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_spec(data)


def test_malformed_json_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="not valid JSON"):
        parse_spec("{not json")


def test_registry_refuses_a_second_component_under_a_taken_name() -> None:
    registry = Registry(["workflow"])

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Once(Workflow):
        name: ClassVar[str] = "once"

    registry.register(Once)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Once)
    with pytest.raises(ValueError, match="already registered"):
        REGISTRY.register(REGISTRY.get("workflow", "single"))


def test_component_params_are_introspectable() -> None:
    infos = {i.name: i for i in REGISTRY.get("workflow", "self_consistency").param_info()}
    assert infos["n_samples"].kind == "int" and infos["n_samples"].low == 2
    assert not {i.name: i for i in REGISTRY.get("reasoning", "cot").param_info()}[
        "instruction"
    ].searchable
    assert all(issubclass(cls, Component) for cls in REGISTRY)


def test_single_pass_makes_one_greedy_call() -> None:
    llm = constant("Step one.\nAnswer: 42")
    result = build_agent(AgentSpec.create(model=MODEL), llm=llm).run("What?")
    assert result.answer == "42" and result.error_kind is None
    assert len(llm.calls) == 1 and llm.calls[0].temperature == 0.0


def test_self_consistency_makes_n_calls_and_returns_the_majority() -> None:
    answers = {0: "Answer: 7", 1: "Answer: 9", 2: "Answer: 9.0", 3: "Answer: 7", 4: "Answer: 9"}
    llm = FakeChatModel(lambda model, messages, temperature, seed: answers[seed or 0])
    spec = AgentSpec.create(
        model=MODEL, workflow={"name": "self_consistency", "params": {"n_samples": 5}}
    )
    result = build_agent(spec, llm=llm).run("Q")
    assert len(llm.calls) == 5
    assert sorted(c.seed for c in llm.calls) == [0, 1, 2, 3, 4]
    assert {c.temperature for c in llm.calls} == {0.7}
    assert result.answer == "9"


def test_calculator_observation_is_fed_back_to_the_model() -> None:
    def respond(
        model: str, messages: Sequence[Message], temperature: float, seed: int | None
    ) -> str:
        last = messages[-1]["content"]
        if last.startswith("RESULT:"):
            value = last.split(":")[1].strip()
            return f"So the total is {value}.\nAnswer: {value}"
        return "I need 17 * 23.\nCALC: 17 * 23\nRESULT: 999 (made up)\nAnswer: 999"

    llm = FakeChatModel(respond)
    spec = AgentSpec.create(model=MODEL, tool="calculator")
    result = build_agent(spec, llm=llm).run("What is 17 times 23?")
    assert result.answer == "391"
    assert [r.kind for r in result.trace] == ["llm", "tool", "llm"]
    second_call = llm.calls[1].messages
    assert dict(second_call[-2])["content"].endswith("CALC: 17 * 23")  # invented result cut off
    assert dict(second_call[-1])["content"] == "RESULT: 391"
    assert "CALC:" in dict(llm.calls[0].messages[0])["content"]  # the protocol is shown


def test_few_shot_examples_come_before_the_question() -> None:
    pool = [Example(question=f"q{i}", answer=str(i), rationale=f"because {i}") for i in range(10)]
    llm = constant("Answer: 1")
    spec = AgentSpec.create(model=MODEL, memory={"name": "few_shot", "params": {"k": 3}})
    agent = build_agent(spec, llm=llm, train_examples=pool)
    agent.run("real question")
    roles = [dict(m)["role"] for m in llm.calls[0].messages]
    assert roles == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    shown = [dict(m)["content"] for m in llm.calls[0].messages]
    assert shown[-1] == "real question" and "Answer:" in shown[2] and "because" in shown[2]
    assert agent.examples == build_agent(spec, llm=llm, train_examples=pool[::-1]).examples


def test_budget_stops_a_runaway_tool_loop() -> None:
    llm = constant("CALC: 1 + 1")
    spec = AgentSpec.create(
        model=MODEL,
        workflow={"name": "self_consistency", "params": {"n_samples": 9}},
        tool={"name": "calculator", "params": {"max_uses": 8}},
    )
    result = build_agent(spec, llm=llm, budget=TaskBudget(max_calls=10)).run("Q")
    assert result.error_kind == "budget"
    assert len(llm.calls) == 10


def test_provider_failure_and_empty_output_are_recorded_not_raised() -> None:
    failed = build_agent(
        AgentSpec.create(model=MODEL), llm=FakeChatModel(failing_responder("503 upstream"))
    ).run("Q")
    assert failed.error_kind == "llm" and "503" in (failed.error or "")
    empty = build_agent(AgentSpec.create(model=MODEL), llm=constant("   ")).run("Q")
    assert empty.error_kind == "empty_output"
    with pytest.raises(LLMCallError):
        failing_responder("x")(MODEL, [], 0.0, None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Answer: 42", "42"),
        ("The result is \\boxed{1,234}.", "1,234"),
        ("blah\n#### 17", "17"),
        ("```\nAnswer: **$5.50**.\n```", "5.50"),
        ("first line\nlast line 8", "last line 8"),
        ("Final answer: 3/4", "3/4"),
    ],
)
def test_extract_answer(text: str, expected: str) -> None:
    assert extract_answer(text) == expected


def test_safe_eval_does_arithmetic_and_nothing_else() -> None:
    assert safe_eval("2 * (3 + 4) ** 2") == 98
    assert safe_eval("1,000 / 8") == 125
    for bad in ("__import__('os')", "2 ** 1000", "open('x')", "[1] * 3"):
        with pytest.raises((ValueError, SyntaxError)):
            safe_eval(bad)
