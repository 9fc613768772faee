"""Exported agents run the engine's own code: same calls, same tool calls, same answers."""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentdesign.components import (
    REGISTRY,
    SLOTS,
    AgentDesignError,
    AgentSpec,
    Example,
    Message,
    build_agent,
    render_standalone,
    write_agent_files,
)
from agentdesign.components._export import _INLINED
from agentdesign.components.testing import FakeChatModel

MODEL = "fake/model"
COMPONENTS = Path(__file__).resolve().parents[1] / "components"


def scripted(model: str, messages: Sequence[Message], temperature: float, seed: int | None) -> str:
    """A deterministic model that plays every role and protocol, so every code path runs."""
    system, last, turn = messages[0]["content"], messages[-1]["content"], len(messages)
    if "BEST:" in system:
        return f"Looks right.\nBEST: {turn % 3 + 1}"
    if "VERDICT:" in system:  # a critic or verifier: rejects first drafts, accepts revisions
        return "VERDICT: ACCEPT\nVERDICT: CORRECT" if "revised" in last else "Step 2 is wrong."
    if "numbered plan" in system or "step back" in system:
        return f"1. Think ({seed})."
    if "Thought:" in system:  # ReAct
        if last.startswith("Observation"):
            return f"Thought: done\nAction: finish[{len(last) % 7}]"
        if "calculate[" in system:
            return "Thought: compute\nAction: calculate[6 * 7]"
        if "python[" in system:
            return "Thought: run it\nAction: python[print(6 * 7)]"
        return "Thought: easy\nAction: finish[3]"
    if "Write a Python program" in system:  # program of thought: the first program fails
        code = "print(6 * 7)" if "failed" in last else "print(1 / 0)"
        return f"```python\n{code}\n```"
    if not last.startswith("RESULT"):
        if "CALC:" in system:
            return "CALC: 6 * 7"
        if "```python block" in system:
            return "```python\nprint(6 * 7)\n```"
    revised = "revised " if "reviewer" in last or "other agents" in last else ""
    return f"{revised}Working ({seed}, {turn}).\nAnswer: {len(last) % 5}"


# Together these specs use every registered component (test_export_specs_cover_every_component).
EXPORT_SPECS = [
    AgentSpec.create(model=MODEL),
    AgentSpec.create(
        model=MODEL, reasoning="direct", memory={"name": "few_shot", "params": {"k": 2}}
    ),
    AgentSpec.create(
        model=MODEL,
        workflow={"name": "self_consistency", "params": {"n_samples": 3, "aggregate": "judge"}},
        planning="step_back",
        tool="calculator",
    ),
    AgentSpec.create(
        model=MODEL,
        workflow={"name": "self_consistency", "params": {"n_samples": 2}},
        tool="python",
        reflection="self_critique",
    ),
    AgentSpec.create(
        model=MODEL,
        workflow={"name": "debate", "params": {"n_agents": 2, "rounds": 2}},
        reasoning="scratchpad",
        memory={"name": "retrieval", "params": {"k": 2}},
        tool="python",
    ),
    AgentSpec.create(
        model=MODEL,
        workflow="plan_solve_verify",
        memory="experience",
        reflection="self_critique",
    ),
    AgentSpec.create(
        model=MODEL, workflow="self_refine", planning="plan_and_solve", memory="experience"
    ),
    AgentSpec.create(model=MODEL, workflow="react", memory="retrieval", tool="calculator"),
    AgentSpec.create(model=MODEL, workflow="react", memory="few_shot", tool="python"),
    AgentSpec.create(model=MODEL, workflow="react"),
    AgentSpec.create(
        model=MODEL, workflow="program_of_thought", planning="step_back", memory="retrieval"
    ),
    AgentSpec.create(model=MODEL, workflow="code", tool="calculator"),  # the default program
    AgentSpec.create(  # a program that uses the model, the solver and the tool
        model=MODEL,
        workflow={
            "name": "code",
            "params": {
                "source": "def run(question, agent):\n"
                "    first = agent.attempt(question)\n"
                "    seen = agent.tool('6 * 7')\n"
                "    note = agent.call([{'role': 'user', 'content': question + seen}])\n"
                "    return note + '\\n' + first['output']\n"
            },
        },
        tool="python",
        reasoning="direct",
    ),
]
POOL = [
    Example(question=f"How many apples are in {i} baskets of {i + 2}?", answer=str(i * (i + 2)))
    for i in range(8)
] + [Example(question="What is six times six?", answer="36", rationale="6 * 6 = 36")]
QUESTIONS = ("What is six times seven?", "What is six times seven plus one?")


def test_export_specs_cover_every_component() -> None:
    used = {(slot, spec[slot].name) for spec in EXPORT_SPECS for slot in SLOTS}
    registered = {(slot, name) for slot in SLOTS for name in REGISTRY.names(slot)}
    assert registered - used == set()


def _load_exported(tmp_path: Path, source: str) -> Any:
    path = tmp_path / "exported_agent.py"
    path.write_text(source)
    module_spec = importlib.util.spec_from_file_location("exported_agent", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules["exported_agent"] = module  # dataclasses look their module up while defining
    module_spec.loader.exec_module(module)
    return module


def _steps(records: Sequence[Any]) -> list[tuple[object, ...]]:
    return [
        (r.kind, r.role, r.input, r.output, r.error, r.prompt_tokens, r.completion_tokens)
        for r in records
    ]


@pytest.mark.parametrize("spec", EXPORT_SPECS, ids=lambda s: s.describe())
def test_exported_agent_makes_the_same_calls_and_answers(spec: AgentSpec, tmp_path: Path) -> None:
    engine_llm = FakeChatModel(scripted)
    engine = build_agent(spec, llm=engine_llm, train_examples=POOL)
    module = _load_exported(tmp_path, render_standalone(spec, train_examples=POOL))
    assert module.SPEC.to_json() == spec.to_json()
    assert len(module.EXAMPLES) == len(engine.examples)  # what the memory keeps, nothing more
    exported_llm = FakeChatModel(scripted)
    exported = module.Agent(module.SPEC, llm=exported_llm, train_examples=module.EXAMPLES)
    # Several questions on one agent: an experience memory carries lessons between them.
    for question in QUESTIONS:
        mine, theirs = engine.run(question), exported.run(question)
        assert (theirs.answer, theirs.output, theirs.error) == (
            mine.answer,
            mine.output,
            mine.error,
        )
        assert _steps(theirs.trace) == _steps(mine.trace)
        assert mine.answer and mine.error is None
    assert exported_llm.calls == engine_llm.calls


def test_the_file_carries_only_what_the_memory_keeps() -> None:
    def carried(memory: str) -> int:
        source = render_standalone(
            AgentSpec.create(model=MODEL, memory=memory), train_examples=POOL
        )
        return sum(source.count(ex.question) for ex in POOL)

    assert carried("none") == carried("experience") == 0
    assert carried("few_shot") == 3
    assert carried("retrieval") == len(POOL)  # BM25 ranks the whole pool per question


def test_inlined_modules_import_nothing_of_the_package_and_share_no_names() -> None:
    owners: dict[str, str] = {}
    for filename in _INLINED:
        tree = ast.parse((COMPONENTS / filename).read_text())
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            else:
                continue
            for name in names:
                if name != "__all__":
                    assert owners.setdefault(name, filename) == filename, name
    exported = ast.parse(render_standalone(AgentSpec.create(model=MODEL), train_examples=()))
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
        for node in ast.walk(exported)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    }
    assert not {m for m in imported if (m or "").startswith("agentdesign")}


# --- writing the files: both or neither, never half an export -------------------------------------


def test_agent_files_are_written_together(tmp_path: Path) -> None:
    spec = EXPORT_SPECS[1]
    spec_json, py = write_agent_files(spec, train_examples=POOL, out=tmp_path / "out")
    assert spec_json.name == f"agent_{spec.spec_hash[:10]}.json"
    assert py == spec_json.with_suffix(".py")
    assert AgentSpec.from_json(spec_json.read_text()) == spec
    assert py.read_text() == render_standalone(spec, train_examples=POOL, filename=py.name)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [spec_json.name, py.name]


@pytest.mark.parametrize("failing_call", [1, 2, 3, 4])
@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failure_between_the_writes_leaves_no_json_without_its_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_call: int, failure: BaseException
) -> None:
    """Each write and each rename in turn fails (a full disk, or the process interrupted): an
    agent's .json is never left without its .py, and no temporary is left behind."""
    out = tmp_path / "out"
    calls = 0

    def failing_at(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Path, *args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == failing_call:
                raise failure
            return real(self, *args, **kwargs)

        return call

    monkeypatch.setattr(Path, "write_text", failing_at(Path.write_text))
    monkeypatch.setattr(Path, "replace", failing_at(Path.replace))
    if isinstance(failure, OSError):
        with pytest.raises(AgentDesignError, match="No space left on device"):
            write_agent_files(EXPORT_SPECS[0], train_examples=POOL, out=out)
    else:
        with pytest.raises(KeyboardInterrupt):
            write_agent_files(EXPORT_SPECS[0], train_examples=POOL, out=out)
    monkeypatch.undo()
    names = {p.name for p in out.iterdir()}
    assert not {n for n in names if n.endswith(".tmp")}, names
    assert all(n.removesuffix(".json") + ".py" in names for n in names if n.endswith(".json"))


def test_an_export_removes_the_temporaries_killed_exports_left(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    left = [out / ".agent_0123456789.py.4242.tmp", out / ".agent_0123456789.json.4242.tmp"]
    running = out / ".agent_9876543210.py.4343.tmp"  # another export's, being written now
    for temporary in [*left, running]:
        temporary.write_text("half an agent")
    for temporary in left:
        os.utime(temporary, (time.time() - 3600,) * 2)
    spec_json, py = write_agent_files(EXPORT_SPECS[0], train_examples=POOL, out=out)
    assert sorted(p.name for p in out.iterdir()) == sorted([spec_json.name, py.name, running.name])


def test_an_export_into_a_file_or_an_impossible_folder_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("kept\n")
    for out, reason in [
        (tmp_path / "afile", "it is not a directory"),
        (tmp_path / "afile" / "sub", "Not a directory"),
        (Path("/proc/agentdesign-export"), "No such file or directory"),
    ]:
        with pytest.raises(AgentDesignError, match=f"cannot export into {out}: {reason}"):
            write_agent_files(EXPORT_SPECS[0], train_examples=POOL, out=out)
    assert (tmp_path / "afile").read_text() == "kept\n"
