"""Exported agents run the engine's own code: same calls, same tool calls, same answers; and the
exported folder reads as the design it is, with every prompt as text."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from conftest import chat_completion, send_json, serving

from agentdesign.components import (
    REGISTRY,
    SLOTS,
    AgentDesignError,
    AgentSpec,
    Example,
    Memory,
    Message,
    build_agent,
    render_export,
    write_export,
)
from agentdesign.components.export._export import _INLINED, load_exported_agent, render_runtime
from agentdesign.components.export._export_text import rehearse
from agentdesign.components.testing import FakeChatModel

MODEL = "fake/model"
COMPONENTS = Path(__file__).resolve().parents[1] / "src" / "agentdesign" / "components"
FILES = ["agent.py", "agentdesign_runtime.py", "examples.json", "prompts.md", "spec.json"]


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


# The default run's kind of winner (a program of thought on the quick space), and large designs:
# a workflow with several prompts, planning, memory, a tool and reflection.
SHORT_SPECS = [
    AgentSpec.create(
        model="embedded/qwen2.5-coder-1.5b",
        workflow="program_of_thought",
        reasoning={"name": "direct", "params": {"max_tokens": 256}},
        tool={"name": "calculator", "params": {"max_uses": 2}},
    ),
    AgentSpec.create(
        model="embedded/qwen2.5-coder-1.5b",
        workflow="program_of_thought",
        reasoning="scratchpad",
        memory={"name": "few_shot", "params": {"k": 1}},
    ),
    AgentSpec.create(
        model=MODEL,
        workflow="plan_solve_verify",
        planning="plan_and_solve",
        reasoning="scratchpad",
        memory="few_shot",
        tool="python",
        reflection="self_critique",
    ),
    AgentSpec.create(
        model=MODEL,
        workflow={"name": "debate", "params": {"n_agents": 3, "rounds": 3}},
        planning="step_back",
        reasoning="scratchpad",
        memory="retrieval",
        tool="calculator",
        reflection="self_critique",
    ),
    AgentSpec.create(
        model=MODEL,
        workflow={"name": "react", "params": {"max_steps": 8}},
        planning="plan_and_solve",
        memory="experience",
        tool="python",
    ),
]


def test_export_specs_cover_every_component() -> None:
    used = {(slot, spec[slot].name) for spec in EXPORT_SPECS for slot in SLOTS}
    registered = {(slot, name) for slot in SLOTS for name in REGISTRY.names(slot)}
    assert registered - used == set()


_loaded = iter(range(10**6))


def exported(spec: AgentSpec, out: Path, **options: Any) -> Any:
    """`spec` exported into `out` and its agent file imported, on its own runtime."""
    folder = write_export(spec, train_examples=POOL, out=out, **options).folder
    return load_exported_agent(folder, name=f"exported_agent_{next(_loaded)}")


def _steps(records: Sequence[Any]) -> list[tuple[object, ...]]:
    return [
        (r.kind, r.role, r.input, r.output, r.error, r.prompt_tokens, r.completion_tokens)
        for r in records
    ]


@pytest.mark.parametrize("spec", EXPORT_SPECS, ids=lambda s: s.describe())
def test_exported_agent_makes_the_same_calls_and_answers(spec: AgentSpec, tmp_path: Path) -> None:
    engine_llm = FakeChatModel(scripted)
    engine = build_agent(spec, llm=engine_llm, train_examples=POOL)
    module = exported(spec, tmp_path)
    assert module.SPEC.to_json() == spec.to_json()
    assert len(module.EXAMPLES) == len(engine.examples)  # what the memory keeps, nothing more
    exported_llm = FakeChatModel(scripted)
    exported_agent = module.runtime.Agent(
        module.SPEC, llm=exported_llm, train_examples=module.EXAMPLES
    )
    # Several questions on one agent: an experience memory carries lessons between them.
    for question in QUESTIONS:
        mine, theirs = engine.run(question), exported_agent.run(question)
        assert (theirs.answer, theirs.output, theirs.error) == (
            mine.answer,
            mine.output,
            mine.error,
        )
        assert _steps(theirs.trace) == _steps(mine.trace)
        assert mine.answer and mine.error is None
    assert exported_llm.calls == engine_llm.calls


def test_the_folder_carries_only_what_the_memory_keeps() -> None:
    def carried(memory: str) -> int:
        files = render_export(AgentSpec.create(model=MODEL, memory=memory), train_examples=POOL)
        return len(json.loads(files["examples.json"]))

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
    files = render_export(AgentSpec.create(model=MODEL), train_examples=())
    for name in ("agent.py", "agentdesign_runtime.py"):
        imported = {
            node.module or "" if isinstance(node, ast.ImportFrom) else node.names[0].name
            for node in ast.walk(ast.parse(files[name]))
            if isinstance(node, (ast.Import, ast.ImportFrom))
        }
        assert not {m for m in imported if m == "agentdesign" or m.startswith("agentdesign.")}
        if name == "agent.py":  # the standard library and the runtime beside it
            assert imported == {"__future__", "functools", "os", "sys", "agentdesign_runtime"}


def test_the_runtime_is_the_engines_code_verbatim() -> None:
    """Every top-level statement of every inlined module is in the runtime as it is written,
    but for the imports of the package that are cut (a block holding one keeps the rest)."""
    runtime, _ = render_runtime(EXPORT_SPECS[0])
    for filename in _INLINED:
        source = (COMPONENTS / filename).read_text()
        for node in ast.parse(source).body:
            segment = ast.get_source_segment(source, node)
            assert segment is not None
            if "from agentdesign" not in segment and "from __future__" not in segment:
                assert segment in runtime, f"{filename}: line {node.lineno}"


# --- reading it: a short agent file, every prompt as text, the calls as the model gets them -------


@pytest.mark.parametrize("spec", SHORT_SPECS + EXPORT_SPECS, ids=lambda s: s.describe())
def test_the_agent_file_is_short_and_every_prompt_is_text(spec: AgentSpec) -> None:
    files = render_export(spec, train_examples=POOL, question=QUESTIONS[0])
    agent = files["agent.py"].splitlines()
    assert len(agent) < 150
    assert all(len(line) <= 100 for line in agent[1:])  # the first: the design's one-line summary
    for slot in SLOTS:
        component = spec[slot]
        for info in component.param_info():
            if info.kind == "text":  # exactly as sent, as plain text in the prompts file
                assert getattr(component, info.name) in files["prompts.md"], (slot, info.name)


def placeholder_model() -> FakeChatModel:
    """Answers as the rehearsal's stand-in does: `[reply N]` for the N-th call."""
    count = iter(range(1, 10**6))
    return FakeChatModel(lambda model, messages, temperature, seed: f"[reply {next(count)}]")


@pytest.mark.parametrize("spec", SHORT_SPECS + EXPORT_SPECS, ids=lambda s: s.describe())
def test_the_prompts_file_shows_what_the_engine_sends(spec: AgentSpec) -> None:
    """The rehearsed calls are the engine's own: a real agent answered as the rehearsal answers
    sends the same messages with the same settings (all of them, where no tool runs on a
    placeholder; the first, where the workflow runs programs), and the prompts file shows them."""
    memory = spec["memory"]
    assert isinstance(memory, Memory)
    rehearsal = rehearse(spec, examples=memory.select(POOL), question=QUESTIONS[0])
    model = placeholder_model()
    build_agent(spec, llm=model, train_examples=POOL).run(QUESTIONS[0])
    sent = [(c.messages, c.temperature, c.max_tokens, c.seed, c.stop) for c in model.calls]
    rehearsed = [
        (
            tuple(tuple(sorted({"role": r, "content": t}.items())) for r, t in c.messages),
            c.temperature,
            c.max_tokens,
            c.seed,
            c.stop,
        )
        for c in rehearsal.calls
    ]
    runs_programs = spec["workflow"].name in ("program_of_thought", "code")
    assert rehearsed and (rehearsed[:1] == sent[:1] if runs_programs else rehearsed == sent)
    prompts = render_export(spec, train_examples=POOL, question=QUESTIONS[0])["prompts.md"]
    for call in rehearsal.calls:
        assert all(content in prompts for _, content in call.messages)
    for example in rehearsal.recalled:
        assert example.question in prompts and example.answer in prompts


def test_a_workflow_that_fails_on_placeholders_still_exports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plugin's workflow may expect real replies: the prompts file keeps the calls it made
    and says where and why the rehearsal stopped."""
    from agentdesign.components.library._workflows import SinglePass

    def fails(self: SinglePass, solver: Any, question: str) -> Any:
        solver.call(
            "solver", [{"role": "user", "content": question}], temperature=0.0, seed=0, max_tokens=8
        )
        raise ValueError("wants a real reply")

    monkeypatch.setattr(SinglePass, "run", fails)
    prompts = render_export(AgentSpec.create(model=MODEL), train_examples=())["prompts.md"]
    assert "### Call 1: solver" in prompts
    assert "The rehearsal stopped here: ValueError: wants a real reply." in " ".join(
        prompts.split()
    )


# --- running it elsewhere, with only litellm ----------------------------------------------------


class ScriptedProvider:
    """An OpenAI-compatible server on 127.0.0.1 whose replies are `scripted`'s."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = scripted(
                    asked["model"],
                    asked["messages"],
                    asked.get("temperature", 0.0),
                    asked.get("seed"),
                )
                for marker in asked.get("stop") or ():
                    text = text.split(marker, 1)[0]
                answer = chat_completion(
                    text, model=asked["model"], prompt_tokens=1, completion_tokens=1
                )
                send_json(self, answer)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def only_litellm(tmp_path: Path) -> Path:
    """A Python with the standard library and litellm (with what litellm imports) and not
    agentdesign: a virtual environment whose one path entry is litellm's site-packages, read as
    a plain folder, so that the editable install of agentdesign there is not set up."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    litellm = find_spec("litellm")
    assert litellm is not None and litellm.origin is not None
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "litellm_only.pth").write_text(f"{Path(litellm.origin).parents[1]}\n")
    python = venv / "bin" / "python"
    missing = subprocess.run(
        [python, "-I", "-c", "import agentdesign"], capture_output=True, text=True, check=False
    )
    assert missing.returncode == 1 and "No module named 'agentdesign'" in missing.stderr
    return python


def test_the_folder_runs_elsewhere_with_python_isolated_and_only_litellm(
    tmp_path: Path, only_litellm: Path
) -> None:
    """`python -I path/to/agent.py` from another directory, on litellm and a loopback provider,
    answers as the engine's agent does with the same replies."""
    spec = AgentSpec.create(
        model="openai/scripted",
        memory={"name": "few_shot", "params": {"k": 2}},
        tool="calculator",
        reflection="self_critique",
    )
    folder = write_export(spec, train_examples=POOL, out=tmp_path / "shipped").folder
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    engine = build_agent(spec, llm=FakeChatModel(scripted), train_examples=POOL).run(QUESTIONS[0])
    provider = ScriptedProvider()
    with serving(provider.server):
        ran = subprocess.run(
            [only_litellm, "-I", folder / "agent.py", "--api-base", provider.url, "--json"],
            input=QUESTIONS[0],
            cwd=elsewhere,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "OPENAI_API_KEY": "sk-test"},
            check=False,
        )
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert (result["answer"], result["output"]) == (engine.answer, engine.output)
    assert [(r["kind"], r["role"], r["output"]) for r in result["trace"]] == [
        (r.kind, r.role, r.output) for r in engine.trace
    ]
    assert sorted(p.name for p in elsewhere.iterdir()) == []  # nothing written where it ran


# --- writing the folder: in one step, never half of one ----------------------------------------


def test_the_folder_holds_the_readable_parts(tmp_path: Path) -> None:
    spec = EXPORT_SPECS[1]
    written = write_export(
        spec, train_examples=POOL, out=tmp_path / "out", evidence={"n": 3}, origin="from run r"
    )
    assert written.folder == tmp_path / "out" / f"agent_{spec.spec_hash[:10]}"
    assert sorted(p.name for p in written.folder.iterdir()) == sorted([*FILES, "evidence.json"])
    assert AgentSpec.from_json(written.spec_file.read_text()) == spec
    assert json.loads(written.evidence_file.read_text()) == {"n": 3}
    assert "Exported by agentdesign from run r." in written.agent_file.read_text()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [written.folder.name]


def _export_state(out: Path) -> dict[str, str]:
    """Every file under `out`, by relative path, with its text."""
    return {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*")) if p.is_file()}


def test_re_exporting_replaces_an_earlier_export_in_one_step(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = write_export(EXPORT_SPECS[0], train_examples=POOL, out=out, evidence={"run": 1})
    (first.folder / "__pycache__").mkdir()  # what running the agent leaves beside it
    (first.folder / "__pycache__" / "agentdesign_runtime.cpython-311.pyc").write_bytes(b"\0")
    again = write_export(EXPORT_SPECS[0], train_examples=POOL, out=out, evidence={"run": 2})
    assert again.folder == first.folder
    assert json.loads(again.evidence_file.read_text()) == {"run": 2}
    assert sorted(p.name for p in out.iterdir()) == [again.folder.name]  # no temporary left
    assert sorted(p.name for p in again.folder.iterdir()) == sorted([*FILES, "evidence.json"])


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (lambda folder: folder.write_text("mine\n"), "it is there and not a folder"),
        (lambda folder: folder.symlink_to(folder.parent), "it is there and not a folder"),
        (
            lambda folder: (folder.mkdir(), (folder / "notes.txt").write_text("mine\n")),
            r"it holds files an export did not write \(notes.txt\)",
        ),
    ],
    ids=["a file", "a link", "a folder of other files"],
)
def test_what_an_export_did_not_write_is_never_replaced(
    tmp_path: Path, setup: Callable[[Path], object], reason: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    folder = out / f"agent_{EXPORT_SPECS[0].spec_hash[:10]}"
    setup(folder)
    before = _export_state(out)
    with pytest.raises(AgentDesignError, match=f"cannot export into {folder}: {reason}"):
        write_export(EXPORT_SPECS[0], train_examples=POOL, out=out)
    assert _export_state(out) == before and sorted(p.name for p in out.iterdir()) == [folder.name]


def test_where_folders_cannot_be_swapped_re_exporting_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    write_export(EXPORT_SPECS[0], train_examples=POOL, out=out, evidence={"run": 1})
    before = _export_state(out)

    class NoExchange:  # a C library without renameat2 (not Linux, or an old one)
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

    monkeypatch.setattr("agentdesign.components.export._export.ctypes.CDLL", NoExchange)
    with pytest.raises(AgentDesignError, match="in one step here: remove it first"):
        write_export(EXPORT_SPECS[0], train_examples=POOL, out=out, evidence={"run": 2})
    assert _export_state(out) == before


@pytest.mark.parametrize("earlier", [False, True], ids=["first export", "re-export"])
@pytest.mark.parametrize("failing_call", [1, 3, 6, 7])
@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failure_while_writing_leaves_the_earlier_folder_or_none(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    failing_call: int,
    failure: BaseException,
    earlier: bool,
) -> None:
    """A write (the 1st, 3rd and 6th file) or the rename into place (the 7th call) fails (a full
    disk, or the process interrupted): the earlier export is left whole, or no folder at all,
    and no temporary is left behind."""
    out = tmp_path / "out"
    if earlier:
        write_export(EXPORT_SPECS[0], train_examples=POOL, out=out, evidence={"run": 1})
    before = _export_state(out) if earlier else {}
    calls = 0

    def failing_at(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == failing_call:
                raise failure
            return real(*args, **kwargs)

        return call

    from agentdesign.components.export import _export

    monkeypatch.setattr(Path, "write_text", failing_at(Path.write_text))
    monkeypatch.setattr(Path, "rename", failing_at(Path.rename))
    monkeypatch.setattr(_export, "_exchange", failing_at(_export._exchange))
    expected = pytest.raises(
        AgentDesignError if isinstance(failure, OSError) else KeyboardInterrupt
    )
    with expected:
        write_export(EXPORT_SPECS[0], train_examples=POOL, out=out, evidence={"run": 2})
    monkeypatch.undo()
    assert _export_state(out) == before


_KILLED_EXPORT = """
import sys, time
from pathlib import Path
from agentdesign.components import AgentSpec, write_export

real, written = Path.write_text, []

def slow_write(self, *args, **kwargs):  # a slow disk: the kill lands between two writes
    written.append(real(self, *args, **kwargs))
    if len(written) == 2:
        print("staging", flush=True)
        time.sleep(60)
    return written[-1]

Path.write_text = slow_write
write_export(AgentSpec.create(model="fake/model"), train_examples=(), out=Path(sys.argv[1]),
             evidence={"run": 2})
"""


def test_a_killed_export_leaves_no_half_folder_and_the_next_one_sweeps_up(tmp_path: Path) -> None:
    out = tmp_path / "out"
    spec = AgentSpec.create(model=MODEL)
    write_export(spec, train_examples=(), out=out, evidence={"run": 1})
    before = _export_state(out)
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_EXPORT, str(out)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "staging\n"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    left = [p for p in out.iterdir() if p.name.endswith(".tmp")]
    assert len(left) == 1 and {p: t for p, t in _export_state(out).items() if ".tmp" not in p} == (
        before
    )
    os.utime(left[0], (time.time() - 3600,) * 2)  # a minute on, no running export's
    write_export(spec, train_examples=(), out=out, evidence={"run": 3})
    assert sorted(p.name for p in out.iterdir()) == [f"agent_{spec.spec_hash[:10]}"]


def test_an_export_removes_the_temporaries_killed_exports_left(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    left = [out / ".agent_0123456789.py.4242.tmp", out / ".agent_0123456789.4242.tmp"]
    left[1].mkdir()
    (left[1] / "agent.py").write_text("half an agent")
    running = out / ".agent_9876543210.4343.tmp"  # another export's, being written now
    left[0].write_text("half an agent")
    running.mkdir()
    for temporary in left:
        os.utime(temporary, (time.time() - 3600,) * 2)
    written = write_export(EXPORT_SPECS[0], train_examples=POOL, out=out)
    assert sorted(p.name for p in out.iterdir()) == sorted([written.folder.name, running.name])


def test_an_export_into_a_file_or_an_impossible_folder_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("kept\n")
    for out, reason in [
        (tmp_path / "afile", "it is not a directory"),
        (tmp_path / "afile" / "sub", "Not a directory"),
        (Path("/proc/agentdesign-export"), "No such file or directory"),
        (Path("/proc/self"), "No such file or directory"),  # there, but no folder can be made
    ]:
        with pytest.raises(AgentDesignError, match=f"cannot export into {out}: {reason}"):
            write_export(EXPORT_SPECS[0], train_examples=POOL, out=out)
    assert (tmp_path / "afile").read_text() == "kept\n"


def test_killed_after_the_swap_the_new_folder_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed while it removes the earlier export it swapped out: the new folder is in place,
    whole, and the earlier one is a temporary that a later export sweeps up."""
    out = tmp_path / "out"
    write_export(EXPORT_SPECS[0], train_examples=POOL, out=out, evidence={"run": 1})
    from agentdesign.components.export import _export

    def killed(path: Path, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_export.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        write_export(EXPORT_SPECS[0], train_examples=POOL, out=out, evidence={"run": 2})
    monkeypatch.undo()
    folder = out / f"agent_{EXPORT_SPECS[0].spec_hash[:10]}"
    assert json.loads((folder / "evidence.json").read_text()) == {"run": 2}
    assert sorted(p.name for p in folder.iterdir()) == sorted([*FILES, "evidence.json"])
    (left,) = (p for p in out.iterdir() if p.name.endswith(".tmp"))
    assert json.loads((left / "evidence.json").read_text()) == {"run": 1}


# --- the command: the winner's folder with the run's evidence; bad input in one line ------------


def test_the_command_exports_the_winner_with_its_evidence(tmp_path: Path) -> None:
    from test_cli import agentdesign, make_archive_with_a_run

    from agentdesign.archive import Archive
    from agentdesign.search import run_verdict

    db = make_archive_with_a_run(tmp_path)
    for _ in range(2):  # the second time over the first export
        done = agentdesign("export", "--storage", str(db), "--out", "out", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    with Archive(str(db)) as archive:
        verdict = run_verdict(archive, "kept")
        run = archive.get_run("kept")
    assert run.winner_hash is not None and verdict.baselines
    (folder,) = (tmp_path / "out").iterdir()
    assert folder.name == f"agent_{run.winner_hash[:10]}"
    assert sorted(p.name for p in folder.iterdir()) == sorted([*FILES, "evidence.json"])
    evidence = json.loads((folder / "evidence.json").read_text())
    assert evidence["agent"] == run.winner_hash and evidence["chosen_as"] == "its recorded winner"
    assert evidence["run"]["name"] == "kept" and evidence["archive"] == f"sqlite:///{db}"
    assert {(s["split"], s["n"]) for s in evidence["scores"]} == {("search", 3), ("holdout", 2)}
    assert evidence["verdict"]["winner"] == run.winner_hash
    assert [
        (b["label"], b["mean_difference"], b["ci_low"], b["ci_high"], b["p_value"], b["n"])
        for b in evidence["verdict"]["baselines"]
    ] == [
        (
            b.label,
            b.comparison.mean_diff,
            b.comparison.ci_low,
            b.comparison.ci_high,
            b.comparison.p_value,
            b.comparison.n,
        )
        for b in verdict.baselines
    ]
    assert f"from run kept ({run.benchmark}) in sqlite:///{db}, its recorded winner" in " ".join(
        (folder / "agent.py").read_text().split()
    )
    assert f"python out/{folder.name}/agent.py" in done.stdout
    assert f"agentdesign evaluate out/{folder.name}/spec.json" in done.stdout


def test_bad_input_to_the_command_is_one_line(tmp_path: Path) -> None:
    from test_cli import agentdesign, assert_one_line_error, make_archive_with_a_run

    from agentdesign.search import create_search

    db = make_archive_with_a_run(tmp_path)
    with create_search(
        [{"question": "What is 1 plus 1?", "answer": "2"}] * 2,
        scorer=lambda output, answer: 1.0,
        name="empty",
        storage=db,
        model=lambda messages: "Answer: 2",
        model_name="fake",
        n_search=1,
        n_holdout=1,
    ):
        pass  # a run with no design scored yet
    common = ["--storage", str(db)]
    assert_one_line_error(
        agentdesign("export", *common, cwd=tmp_path), "no finished agent to export in run empty"
    )
    common = ["kept", *common]  # the run with a winner
    assert_one_line_error(agentdesign("export", "--agent", "zzzz", *common, cwd=tmp_path), "zzzz")
    assert_one_line_error(
        agentdesign("export", *common, "--out", "/proc/agentdesign-export", cwd=tmp_path),
        "cannot export into /proc/agentdesign-export: No such file or directory",
    )
    (tmp_path / "mine").mkdir()
    done = agentdesign("export", *common, "--out", "mine", cwd=tmp_path)
    (folder,) = (tmp_path / "mine").iterdir()
    (folder / "notes.txt").write_text("mine\n")
    assert_one_line_error(
        agentdesign("export", *common, "--out", "mine", cwd=tmp_path),
        "it holds files an export did not write (notes.txt)",
    )
    assert done.returncode == 0 and (folder / "notes.txt").read_text() == "mine\n"
