"""Meta agent search: proposals parsed, validated against the space, refused with a reason,
deduplicated, screened, recorded; and workflows written as code, run in the sandbox."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import optuna
import pytest
from test_strategies import GOLD, Killed, config, cot_is_right

from agentdesign.archive import Archive
from agentdesign.components import (
    AgentDesignError,
    AgentSpec,
    CodeWorkflow,
    Completion,
    LLMCallError,
    Message,
    build_agent,
    check_workflow_source,
    write_export,
)
from agentdesign.components.export._export import load_exported_agent
from agentdesign.components.testing import FakeChatModel, failing_responder
from agentdesign.evaluators import examples_from_tasks, get_benchmark
from agentdesign.search import (
    Budget,
    Failure,
    History,
    MetaAgent,
    MetaOutcome,
    SearchSpace,
    Trial,
    item_front,
    merge_prompts,
    parse_designs,
    resume_search,
    run_search,
)
from agentdesign.search.strategies import DesignReader

MODEL = "fake/model"
SPACE = SearchSpace(model=MODEL, grid=True)
CODE_SPACE = SearchSpace(
    model=MODEL,
    grid=True,
    choices={"workflow": ("single", "self_consistency", "code")},
)
# Designs of SPACE: each number on its grid
BEST = AgentSpec.create(model=MODEL, reasoning={"name": "cot", "params": {"max_tokens": 576}})
WORSE = AgentSpec.create(model=MODEL, reasoning={"name": "direct", "params": {"max_tokens": 256}})
FAILED = [Failure(question="What is 17 + 25?", output="Answer: 41", expected="42")]
RUN_CODE = """def run(question, agent):
    first = agent.attempt(question)
    return "Checked. Answer: " + first["answer"]
"""


def history(*specs: AgentSpec, scores: Sequence[float] = (0.8, 0.3)) -> History:
    return History(
        description="gsm8k: grade-school math",
        trials=tuple(
            Trial(spec=s, state="complete", score=score, n_items=6)
            for s, score in zip(specs, scores, strict=False)
        ),
    )


class Run:
    """The run as these tests' meta agent sees it (a `RunView`): FAILED for any design, no
    tokens per item, the `front` given; the outcomes it records are kept."""

    def __init__(self, front: Mapping[str, int] | None = None) -> None:
        self.outcomes: list[MetaOutcome] = []
        self._front = dict(front or {})

    def failures(self, spec: AgentSpec) -> Sequence[Failure]:
        return FAILED

    def tokens_per_item(self) -> Mapping[str, float]:
        return {}

    def front(self) -> Mapping[str, int]:
        return self._front

    def call_started(self, purpose: str) -> None:
        pass

    def call_finished(self, completion: Completion, purpose: str, model: str) -> None:
        pass

    def record(self, outcomes: Sequence[MetaOutcome]) -> None:
        self.outcomes.extend(outcomes)


def meta(
    reply: str | Callable[[Sequence[Message]], str],
    *,
    space: SearchSpace = SPACE,
    front: Mapping[str, int] | None = None,
    **kwargs: object,
) -> tuple[MetaAgent, list[MetaOutcome], FakeChatModel]:
    def respond(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
        return reply(messages) if callable(reply) else reply

    llm = FakeChatModel(respond)
    run = Run(front)
    agent = MetaAgent(llm=llm, model=MODEL, space=space, run=run, **kwargs)  # type: ignore[arg-type]
    return agent, run.outcomes, llm


def first_wins(specs: list[AgentSpec]) -> np.ndarray:
    return -np.arange(len(specs), dtype=float)


def propose(agent: MetaAgent, past: History | None = None) -> object:
    past = past or history(BEST, WORSE)
    fitness = {o.spec.spec_hash: float(o.score or 0.0) for o in past.complete}
    return agent.propose(past, np.random.default_rng(0), fitness, first_wins)


def test_designs_are_found_in_prose_fences_and_lists() -> None:
    one = {"workflow": "single"}
    assert parse_designs(json.dumps(one)) == [one]
    assert parse_designs(f"Here:\n```json\n{json.dumps([one, one])}\n```\nDone.") == [one, one]
    assert parse_designs("I think {not json} but then " + json.dumps(one)) == [one]
    with pytest.raises(ValueError, match="no JSON design"):
        parse_designs("Use self-consistency with five samples.")
    with pytest.raises(ValueError, match="no JSON design"):
        parse_designs("[1, 2, 3]")


def test_a_valid_design_is_proposed_from_the_best_with_its_changes() -> None:
    reply = json.dumps([{"workflow": {"name": "self_consistency", "n_samples": 4}}])
    agent, outcomes, _ = meta(reply)
    proposal = propose(agent)
    assert proposal is not None
    spec = proposal.spec  # type: ignore[attr-defined]
    assert spec["workflow"].name == "self_consistency" and spec["workflow"].n_samples == 4
    # exactly the design a trial enqueued with it rebuilds (every number on the grid)
    assert SPACE.suggest(optuna.trial.FixedTrial(SPACE.trial_params(spec))) == spec
    assert spec["reasoning"].name == "cot"  # copied from the best design shown
    assert proposal.operator == "meta" and proposal.parents == (BEST.spec_hash,)  # type: ignore[attr-defined]
    assert [o.status for o in outcomes] == ["accepted"]
    assert outcomes[0].spec == spec and outcomes[0].prompt_tokens > 0


def test_numbers_are_snapped_onto_the_space_grid() -> None:
    reply = json.dumps(
        {"workflow": {"name": "self_consistency", "n_samples": 40, "temperature": 0.33}}
    )
    agent, _, _ = meta(reply)
    proposal = propose(agent)
    assert proposal is not None
    workflow = proposal.spec["workflow"]  # type: ignore[attr-defined]
    assert SPACE.contains(proposal.spec)  # type: ignore[attr-defined]
    assert workflow.n_samples == 8  # 40 clipped to the range 2-9, on the grid 2, 4, 6, 8
    assert workflow.temperature == pytest.approx(0.375)  # grid 0.1, 0.375, 0.65, ...


def test_a_reply_keeps_the_parents_none_only_where_the_design_cannot_use_the_slot() -> None:
    """A program of thought never calls a tool, so its canonical parent holds "none" there though
    this space offers no "none"; a reply that makes the design call a tool must name one."""
    space = SearchSpace(
        model=MODEL,
        choices={"workflow": ["program_of_thought", "single"], "tool": ["calculator", "python"]},
    )
    parent = space.sample(np.random.default_rng(0), components={"workflow": "program_of_thought"})
    assert parent["tool"].name == "none"
    reader = DesignReader(space=space, max_designs=3, max_prompt_chars=2000)
    kept, moved, named = reader.read(
        '[{"reasoning": "direct"}, {"workflow": "single"}, '
        '{"workflow": "single", "tool": "python"}]',
        parent=parent,
        failed=(),
        seen=(),
    )
    assert kept.status == "accepted" and kept.spec is not None and space.contains(kept.spec)
    assert moved.status == "invalid" and "tool must be set: 'none'" in str(moved.reason)
    assert named.status == "accepted" and named.spec is not None
    assert named.spec["tool"].name == "python"


@pytest.mark.parametrize(
    ("design", "reason"),
    [
        ({"workflow": "tree_of_thoughts"}, "not in the run's space"),
        ({"brain": "big"}, "unknown slot"),
        ({"workflow": {"name": "self_consistency", "n_samples": "five"}}, "must be a number"),
        ({"workflow": {"name": "self_consistency", "aggregate": "median"}}, "must be one of"),
        ({"workflow": "code"}, "not in the run's space"),
    ],
)
def test_an_invalid_design_is_refused_and_recorded_with_its_reason(
    design: dict[str, object], reason: str
) -> None:
    agent, outcomes, _ = meta(json.dumps(design))
    assert propose(agent) is None
    assert [o.status for o in outcomes] == ["invalid"]
    assert reason in (outcomes[0].reason or ""), outcomes[0].reason
    assert outcomes[0].response == json.dumps(design) and outcomes[0].spec is None


def test_slips_of_a_small_model_are_repaired_and_noted() -> None:
    design = {
        "workflow": {"name": "Self_Consistency", "n_samples": 4, "n_votes": 3},
        "reasoning": {"name": "cot", "instruction": "Think hard."},  # drops 'Answer: <answer>'
        "planning": {"name": "none", "instruction": "Remember 42. 'Answer: <answer>'"},
    }
    agent, outcomes, _ = meta(json.dumps(design))
    proposal = propose(agent)
    assert proposal is not None
    spec = proposal.spec  # type: ignore[attr-defined]
    assert spec["workflow"].name == "self_consistency" and spec["workflow"].n_samples == 4
    assert spec["reasoning"].instruction == BEST["reasoning"].instruction  # original kept
    reason = outcomes[0].reason or ""
    assert outcomes[0].status == "accepted" and reason.startswith("repaired: ")
    assert "n_votes" in reason and "output format" in reason and "planning 'none'" in reason


def test_a_leaking_prompt_keeps_its_original() -> None:
    leak = "Remember 42. End with 'Answer: <answer>'."
    agent, outcomes, _ = meta(json.dumps({"reasoning": {"name": "cot", "instruction": leak}}))
    proposal = propose(agent)
    assert proposal is None  # the repaired design is BEST itself, which the run has
    assert outcomes[0].status == "duplicate"


def test_a_reply_without_a_design_and_a_failed_call_are_recorded_as_failed() -> None:
    agent, outcomes, _ = meta("I would use more samples.")
    assert propose(agent) is None
    assert [(o.status, o.reason) for o in outcomes] == [
        ("failed", "the reply holds no JSON design")
    ]

    def fails(messages: Sequence[Message]) -> str:
        raise LLMCallError("rate limited")

    agent, outcomes, _ = meta(fails)
    assert propose(agent) is None
    assert outcomes[0].status == "failed" and "rate limited" in (outcomes[0].reason or "")


def test_duplicates_of_the_run_and_of_the_reply_are_refused() -> None:
    again = {"reasoning": {"name": "direct", "max_tokens": 250}}  # WORSE, which the run has
    fresh = {"workflow": {"name": "self_consistency", "n_samples": 4}}
    agent, outcomes, _ = meta(json.dumps([again, fresh, fresh]))
    proposal = propose(agent)
    assert proposal is not None
    assert [o.status for o in outcomes] == ["duplicate", "accepted", "duplicate"]
    assert outcomes[0].spec == WORSE and "the run" in (outcomes[0].reason or "")
    assert "this reply" in (outcomes[2].reason or "")


def test_the_value_model_screens_the_valid_designs_of_a_reply() -> None:
    designs = [{"workflow": {"name": "self_consistency", "n_samples": n}} for n in (2, 4, 6)]
    agent, outcomes, _ = meta(json.dumps(designs))
    fitness = {BEST.spec_hash: 0.8, WORSE.spec_hash: 0.3}
    proposal = agent.propose(
        history(BEST, WORSE),
        np.random.default_rng(0),
        fitness,
        lambda specs: np.array([float(s["workflow"].n_samples == 4) for s in specs]),
    )
    assert proposal is not None and proposal.spec["workflow"].n_samples == 4
    assert [o.status for o in outcomes] == ["screened", "accepted", "screened"]
    # the call's tokens are counted once, on its first outcome
    assert outcomes[0].prompt_tokens > 0 and outcomes[1].prompt_tokens == 0


def test_the_view_is_bounded_and_n_view_zero_shows_no_designs() -> None:
    prompts: list[str] = []

    def capture(messages: Sequence[Message]) -> str:
        prompts.append(messages[-1]["content"])
        return "{}"

    many = [
        AgentSpec.create(
            model=MODEL,
            workflow={"name": "self_consistency", "params": {"n_samples": 2 + i % 8}},
            memory={"name": "few_shot", "params": {"k": 1 + i // 8}},
        )
        for i in range(64)
    ]
    scores = [i / 64 for i in range(64)]
    for n_view in (2, 0):
        agent, _, _ = meta(capture, n_view=n_view)
        propose(agent, history(*many[:8], scores=scores[:8]))
        propose(agent, history(*many, scores=scores))
    small_eight, small_all, none_eight, none_all = prompts
    assert len(small_all) < len(small_eight) * 1.2  # the view does not grow with the archive
    assert small_all.count("score 0.") == 3  # two best, one contrast
    assert "Designs tried" not in none_all and "Task:" not in none_all
    assert len(none_all) == len(none_eight)
    assert "score 0.98" in small_all  # the best design is shown first


def test_bad_settings_are_one_clear_error() -> None:
    with pytest.raises(AgentDesignError, match="n >= 1"):
        meta("{}", every=0)
    with pytest.raises(AgentDesignError, match="'code' workflow"):
        meta("{}", code=True)


# -- workflows written as code --------------------------------------------------------------------


def test_a_code_workflow_is_proposed_from_a_python_block() -> None:
    reply = f'{{"workflow": "code"}}\n```python\n{RUN_CODE}```'
    agent, outcomes, _ = meta(reply, space=CODE_SPACE, code=True)
    proposal = propose(agent)
    assert proposal is not None, outcomes
    assert proposal.operator == "meta-code"  # type: ignore[attr-defined]
    assert proposal.spec["workflow"].source == RUN_CODE  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("def run(question, agent)\n    return 1\n", "does not parse"),
        ("def solve(question, agent):\n    return 1\n", "defines no top-level function run"),
        ("def run(question):\n    return 1\n", "two arguments"),
    ],
)
def test_code_that_cannot_be_a_workflow_is_refused(code: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        check_workflow_source(code)
    agent, outcomes, _ = meta(
        f'{{"workflow": "code"}}\n```python\n{code}```', space=CODE_SPACE, code=True
    )
    assert propose(agent) is None
    assert outcomes[0].status == "invalid" and reason in (outcomes[0].reason or "")


def answers_42(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
    return "Adding up. Answer: 42"


def test_a_code_workflow_runs_in_the_sandbox_through_the_channel() -> None:
    code = """def run(question, agent):
    first = agent.attempt(question)
    check = agent.call([{"role": "user", "content": "Check: " + first["output"]}], max_tokens=9)
    print("anything the program prints is not the answer")
    return "Checked. Answer: " + first["answer"] + "!" + str(len(check))
"""
    spec = AgentSpec.create(model=MODEL, workflow={"name": "code", "params": {"source": code}})
    llm = FakeChatModel(answers_42)
    result = build_agent(spec, llm=llm).run("What is 17 + 25?")
    assert result.answer == "42!21" and result.error is None
    assert [(r.kind, r.role) for r in result.trace] == [
        ("llm", "solver"),
        ("llm", "workflow"),
        ("tool", "code"),
    ]
    assert llm.calls[1].max_tokens == 9
    assert result.trace[-1].isolation  # says what confined it


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("def run(question, agent):\n    while True:\n        pass\n", "timeout"),
        (
            "import socket\ndef run(question, agent):\n"
            "    socket.create_connection(('10.0.0.1', 80))\n",
            "violation",
        ),
        ("def run(question, agent):\n    return agent.tool('1 + 1')\n", "has no tool"),
        ("def run(question, agent):\n    return agent.call('hello')\n", "non-empty list"),
        ("raise ImportError('no numpy here')\ndef run(question, agent):\n    pass\n", "numpy"),
    ],
)
def test_code_that_loops_breaks_the_rules_or_fails_gives_no_answer(code: str, error: str) -> None:
    spec = AgentSpec.create(
        model=MODEL, workflow={"name": "code", "params": {"source": code, "timeout_s": 2.0}}
    )
    result = build_agent(spec, llm=FakeChatModel(answers_42)).run("q")
    assert result.answer == ""
    assert error in (result.trace[-1].error or ""), result.trace[-1]


def test_model_calls_of_code_count_against_the_task_budget() -> None:
    code = """def run(question, agent):
    while True:
        agent.call([{"role": "user", "content": "again"}])
"""
    spec = AgentSpec.create(model=MODEL, workflow={"name": "code", "params": {"source": code}})
    result = build_agent(spec, llm=FakeChatModel(answers_42)).run("q")
    assert result.error_kind == "budget"
    assert sum(r.kind == "llm" for r in result.trace) == 32  # TaskBudget.max_calls


# -- in a run -------------------------------------------------------------------------------------


# A workflow the fake model below answers right, and nothing else: the meta run's winner.
SOLVE_EXACTLY = "Solve exactly: "
EXACT_CODE = f"""def run(question, agent):
    reply = agent.call([{{"role": "user", "content": "{SOLVE_EXACTLY}" + question}}], max_tokens=64)
    return "Checked. " + reply
"""


def designs_and_answers(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
    """A model that, asked as the meta agent, writes two designs (one of them invalid) and a
    workflow in code (EXACT_CODE); asked as an agent, it is right only through that code."""
    if messages[0]["content"].startswith("You design LLM agents"):
        designs = [
            {"workflow": "code", "reasoning": "cot"},
            {"workflow": "tree_of_thoughts"},
        ]
        return json.dumps(designs) + f"\n```python\n{EXACT_CODE}```"
    asked = messages[-1]["content"]
    if asked.startswith(SOLVE_EXACTLY):
        return f"Answer: {GOLD.get(asked.removeprefix(SOLVE_EXACTLY), '0')}"
    return "Answer: -1"


def test_a_meta_run_records_every_proposal_and_pays_for_its_calls(tmp_path: Path) -> None:
    with Archive(str(tmp_path / "m.db")) as archive:
        run_search(
            archive,
            config("meta", "meta", meta_code=True, budget=Budget(max_agents=5)),
            llm=FakeChatModel(designs_and_answers),
        )
        proposals = archive.proposals("meta")
        counts = archive.proposal_counts("meta")
        assert counts["invalid"] >= 1 and counts["accepted"] == 1  # then a duplicate each time
        assert counts["duplicate"] >= 1
        accepted = archive.proposals("meta", status="accepted")[0]
        agent = archive.get_agent(accepted.spec_hash)  # type: ignore[arg-type]
        assert agent.operator == "meta-code" and agent.parent_hash == accepted.parents[0]
        spec = AgentSpec.from_dict(agent.spec)
        assert spec["workflow"].source == EXACT_CODE  # the code went through the trial intact
        evaluation = next(
            e for e in archive.run_evaluations("meta") if e.agent_hash == spec.spec_hash
        )
        assert evaluation.mean == 1.0  # the code workflow ran in the sandbox, its call right
        invalid = next(p for p in proposals if p.status == "invalid")
        assert re.search(r"score \d\.\d\d on 6 items, \d+ tokens per item", invalid.prompt)
        assert "tree_of_thoughts" in (invalid.reason or "") and invalid.response
        # every meta call is a search call: in the run's tokens, in no agent's
        totals = archive.run_totals("meta")
        assert totals.n_search_calls == len(
            {(p.prompt, p.response, p.created_at) for p in proposals if p.prompt_tokens}
        )
        assert totals.prompt_tokens >= sum(p.prompt_tokens for p in proposals) + sum(
            e.prompt_tokens for e in archive.run_evaluations("meta")
        )


def test_a_code_workflow_exports_and_answers_as_in_the_archive(tmp_path: Path) -> None:
    with Archive(str(tmp_path / "e.db")) as archive:
        run_search(
            archive,
            config("export", "meta", meta_code=True, budget=Budget(max_agents=3)),
            llm=FakeChatModel(designs_and_answers),
        )
        accepted = archive.proposals("export", status="accepted")[0]
        spec = AgentSpec.from_dict(archive.get_agent(accepted.spec_hash).spec)  # type: ignore[arg-type]
        evaluation = next(
            e for e in archive.run_evaluations("export") if e.agent_hash == spec.spec_hash
        )
        recorded = archive.task_results(evaluation.id)
    gsm8k = get_benchmark("gsm8k")
    folder = write_export(
        spec, train_examples=examples_from_tasks(gsm8k.train_examples()), out=tmp_path
    ).folder
    module = load_exported_agent(folder, name="code_agent")
    assert module.SPEC.to_json() == spec.to_json()  # the agent file carries the workflow's code
    source = spec["workflow"].get_params()["source"]
    assert source in (folder / "prompts.md").read_text()
    exported = module.runtime.Agent(
        module.SPEC, llm=FakeChatModel(designs_and_answers), train_examples=module.EXAMPLES
    )
    questions = {t.question: t.id for t in gsm8k.tasks()}
    tasks = {task_id: q for q, task_id in questions.items() if task_id in recorded}
    assert len(tasks) == len(recorded) > 0
    for task_id, question in tasks.items():
        result = exported.run(question)
        assert (result.answer, result.output) == (
            recorded[task_id].answer,
            recorded[task_id].output,
        )


def test_meta_calls_count_against_the_token_budget(tmp_path: Path) -> None:
    def verbose_designer(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
        if messages[0]["content"].startswith("You design LLM agents"):
            return "word " * 5000 + "{}"
        return cot_is_right(model, messages, t, s)

    with Archive(str(tmp_path / "b.db")) as archive:
        summary = run_search(
            archive,
            config("budget", "meta", budget=Budget(max_agents=20, max_tokens=12_000)),
            llm=FakeChatModel(verbose_designer),
        )
        assert summary.stop_reason.endswith("tokens"), summary.stop_reason
        totals = archive.run_totals("budget")
        assert totals.n_search_calls >= 1
        # the budget stopped the search although the agents' own tokens were far below it
        agents_tokens = sum(
            e.prompt_tokens + e.completion_tokens for e in archive.run_evaluations("budget")
        )
        assert agents_tokens < 12_000 <= totals.prompt_tokens + totals.completion_tokens


def test_the_meta_agent_needs_a_value_guided_strategy() -> None:
    with pytest.raises(AgentDesignError, match="the meta agent needs a value-guided strategy"):
        config("x", "tpe", meta_every=2)


def test_the_per_item_front_keeps_designs_best_somewhere_and_drops_dominated_ones() -> None:
    scores = {
        "a": {"1": 1.0, "2": 1.0, "3": 0.0, "4": 0.0},
        "b": {"1": 1.0, "2": 0.0, "3": 1.0, "4": 0.0},  # the only one right on item 3
        "c": {"1": 1.0, "2": 1.0, "3": 0.0, "4": 0.0},  # ties with a: both stay
        "d": {"1": 1.0, "2": 0.0, "3": 0.0, "4": 0.0},  # best only where a is: dominated
    }
    assert item_front(scores) == {"a": 2, "b": 2, "c": 2}  # item 4: nobody scores, left out


def test_the_parent_is_drawn_from_the_front() -> None:
    parents = set()
    for seed in range(12):
        agent, outcomes, _ = meta(
            json.dumps({"workflow": {"name": "self_consistency", "n_samples": 4}}),
            front={WORSE.spec_hash: 3, BEST.spec_hash: 1},
        )
        past = history(BEST, WORSE)
        fitness = {BEST.spec_hash: 0.8, WORSE.spec_hash: 0.3}
        agent.propose(past, np.random.default_rng(seed), fitness, first_wins)
        parents.add(outcomes[0].parents)
    assert parents == {(BEST.spec_hash,), (WORSE.spec_hash,)}  # the weaker mean is drawn too


def test_merge_takes_the_prompts_the_other_parent_rewrote() -> None:
    hint = "Reason step by step. Check every sum twice. End with 'Answer: <answer>'."
    mine = BEST
    theirs = BEST.set_params(reasoning__instruction=hint)
    merged = merge_prompts(mine, theirs)
    assert merged["reasoning"].instruction == hint
    assert merge_prompts(theirs, mine) == theirs  # nothing rewritten to take
    assert merge_prompts(mine, WORSE) == mine  # other components: nothing to take


def test_code_in_the_json_or_from_the_parent_is_taken() -> None:
    in_json = json.dumps({"workflow": {"name": "code", "source": RUN_CODE}})
    agent, _, _ = meta(in_json, space=CODE_SPACE, code=True)
    proposal = propose(agent)
    assert proposal is not None and proposal.spec["workflow"].source == RUN_CODE  # type: ignore[attr-defined]
    parent = AgentSpec(
        model=MODEL, components={**BEST.components, "workflow": CodeWorkflow(source=RUN_CODE)}
    )
    prompts: list[str] = []

    def keeps_code(messages: Sequence[Message]) -> str:
        prompts.append(messages[-1]["content"])
        return json.dumps({"workflow": "code", "reasoning": "scratchpad"})

    agent, outcomes, _ = meta(keeps_code, space=CODE_SPACE, code=True)
    proposal = propose(agent, history(parent, WORSE))
    assert proposal is not None, outcomes
    assert proposal.spec["workflow"].source == RUN_CODE  # type: ignore[attr-defined]
    assert f"```python\n{RUN_CODE}```" in prompts[0]  # the parent's code is shown once


def test_mcts_takes_meta_proposals_during_its_cold_start(tmp_path: Path) -> None:
    def writes_a_design(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
        if messages[0]["content"].startswith("You design LLM agents"):
            return json.dumps(
                [
                    {"reasoning": "scratchpad", "memory": {"name": "few_shot", "k": 2}},
                    {"reasoning": "cot", "memory": {"name": "few_shot", "k": 1}},
                ]
            )
        return cot_is_right(model, messages, t, s)

    with Archive(str(tmp_path / "c.db")) as archive:
        run_search(
            archive,
            config("cold", "mcts", meta_every=2, budget=Budget(max_agents=4)),
            llm=FakeChatModel(writes_a_design),
        )
        operators = [
            archive.get_agent(e.agent_hash).operator
            for e in archive.run_evaluations("cold", split="search")
            if set(e.task_ids) == set(archive.get_run("cold").search_task_ids)
        ]
        screened = archive.proposals("cold", status="screened")
    assert operators[0] == "initial" and "meta" in operators  # within mcts's 8-design start
    assert screened and "screened better" in (screened[0].reason or "")  # archived, with why


def test_a_provider_failure_inside_code_is_the_agent_s_error_not_the_code_s() -> None:
    spec = AgentSpec.create(model=MODEL, workflow={"name": "code", "params": {"source": RUN_CODE}})
    llm = FakeChatModel(failing_responder("503 from the provider", transient=True))
    result = build_agent(spec, llm=llm).run("q")
    assert result.error_kind == "provider" and "503" in (result.error or "")
    assert all(r.role != "code" for r in result.trace)  # the program was stopped, not failed


def test_a_run_killed_while_recording_a_reply_records_each_design_once(tmp_path: Path) -> None:
    def two_designs(model: str, messages: Sequence[Message], t: float, s: int | None) -> str:
        if messages[0]["content"].startswith("You design LLM agents"):
            return json.dumps([{"workflow": "tree_of_thoughts"}, {"brain": "big"}])
        return cot_is_right(model, messages, t, s)

    with Archive(str(tmp_path / "k.db")) as archive:
        record = archive.add_proposal
        calls = 0

        def dies_on_the_second(**fields: object) -> object:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise Killed
            return record(**fields)  # type: ignore[arg-type]

        archive.add_proposal = dies_on_the_second  # type: ignore[method-assign]
        with pytest.raises(Killed):
            run_search(
                archive,
                config("k", "meta", budget=Budget(max_agents=3)),
                llm=FakeChatModel(two_designs),
            )
        archive.add_proposal = record  # type: ignore[method-assign]
        resume_search(archive, "k", llm=FakeChatModel(two_designs))
        proposals = archive.proposals("k")
    first_call = [p.reason or "" for p in proposals if p.prompt == proposals[0].prompt]
    assert len(first_call) == 2  # the one recorded before the kill, and the other after
    assert "tree_of_thoughts" in first_call[0] and "unknown slot" in first_call[1]


def test_negative_meta_settings_are_one_clear_error() -> None:
    with pytest.raises(AgentDesignError, match="meta_view must not be negative, got -1"):
        config("x", "meta", meta_view=-1)
    with pytest.raises(AgentDesignError, match="meta_every must not be negative, got -2"):
        config("x", "mcts", meta_every=-2)
