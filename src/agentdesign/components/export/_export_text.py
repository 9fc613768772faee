"""The parts of an export a person reads: the short agent file and the prompts file.

The prompts are shown as the engine itself builds them: the design is rehearsed on one question
with a stand-in model that records every request and answers each with a placeholder, and a
solver whose tools answer with placeholders too, so nothing runs and nothing is paid for.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentdesign.components._agent import Agent, TaskSolver
from agentdesign.components._registry import SLOTS, Component
from agentdesign.components._slots import Observation, Tool
from agentdesign.components._spec import AgentSpec
from agentdesign.components.export._standalone import EXAMPLES_FILE
from agentdesign.components.library._code import CodeWorkflow
from agentdesign.components.library._memory import Example
from agentdesign.components.llm._trace import (
    CallRecord,
    Completion,
    Message,
    TaskBudget,
    TaskBudgetExceeded,
    Trace,
)

__all__ = ["Rehearsal", "examples_json", "rehearse", "render_agent_file", "render_prompts"]

_WIDTH = 96  # of the agent file's lines, and of the prompts file's prose
PLACEHOLDER_QUESTION = "<the question>"


@dataclass(frozen=True)
class RehearsedCall:
    """One model request of the rehearsal, as the model would receive it."""

    messages: tuple[tuple[str, str], ...]  # (role, content)
    temperature: float
    max_tokens: int
    seed: int | None
    stop: tuple[str, ...]


@dataclass(frozen=True)
class Rehearsal:
    """The calls one question makes when every reply and tool result is a placeholder: the
    trace (model and tool calls, in order), each model call's request, and how it stopped if
    not by itself."""

    question: str
    trace: tuple[CallRecord, ...]
    calls: tuple[RehearsedCall, ...]
    recalled: tuple[Example, ...]  # the training items the memory shows for `question`
    note: str = ""


class _StandIn:
    """A `ChatModel` that records each request and answers `[reply N]`."""

    def __init__(self) -> None:
        self.calls: list[RehearsedCall] = []

    def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        max_tokens: int,
        seed: int | None,
        stop: Sequence[str] = (),
    ) -> Completion:
        shown = tuple((m["role"], m["content"]) for m in messages)
        self.calls.append(RehearsedCall(shown, temperature, max_tokens, seed, tuple(stop)))
        return Completion(text=f"[reply {len(self.calls)}]")


class _RehearsalSolver(TaskSolver):
    """The engine's solver, except that a tool or program answers `[result N]` unrun."""

    def use_tool(self, argument: str, tool: Tool | None = None) -> Observation:
        used = self.tool if tool is None else tool
        text = f"[result {sum(r.kind == 'tool' for r in self.trace.records) + 1}]"
        self.trace.add(CallRecord("tool", used.name, argument, text))
        return Observation(text)


def rehearse(spec: AgentSpec, *, examples: Sequence[Example], question: str | None) -> Rehearsal:
    """The design's calls for `question` (a placeholder if None), through the engine's own code.

    A workflow written as code runs only in the sandbox, so it is not rehearsed: one solver
    attempt is, which is what the program's `agent.attempt` makes. A plugin's component that
    fails on placeholders leaves the calls made before, and says why.
    """
    asked = question if question is not None else PLACEHOLDER_QUESTION
    model = _StandIn()
    agent = Agent(spec, llm=model, train_examples=examples)
    trace = Trace(budget=TaskBudget())
    recalled: tuple[Example, ...] = ()
    note = ""
    try:
        recall = agent.memory.recall(asked, agent.store)
        recalled = recall.examples
        solver = _RehearsalSolver(spec, model, trace, recall)
        if isinstance(agent.workflow, CodeWorkflow):
            note = (
                "The workflow is a program (the workflow's `source` in agent.py), run in the "
                "sandbox; shown here is one solver attempt, what its `agent.attempt` makes. Its "
                "`agent.call` requests are the messages the program writes."
            )
            solver.attempt(asked, temperature=0.0, seed=0)
        else:
            agent.workflow.run(solver, asked)
    except TaskBudgetExceeded as exc:
        note = f"The task's budget ends the question here: {exc}."
    except Exception as exc:  # a plugin's component may expect real replies
        note = f"The rehearsal stopped here: {type(exc).__name__}: {exc}."
    return Rehearsal(asked, tuple(trace.records), tuple(model.calls), recalled, note)


# --- the agent file ------------------------------------------------------------------------------

_AGENT_HEADER = '''\
"""Agent {short}: {describe}

{about}

    python agent.py "A question"            # prints the answer
    python agent.py --json "A question"     # the answer with its full trace
    python agent.py --model openai/gpt-4o-mini --api-base URL "A question"   # another model

Needs only `pip install litellm` (an `embedded/...` model also needs agentdesign's embedded
extra).{plugins}
"""

from __future__ import annotations

import functools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # the runtime beside this file, also under `python -I`
import {module} as runtime  # noqa: E402

if os.path.dirname(os.path.abspath(runtime.__file__)) != HERE:
    raise ImportError(f"{{runtime.__file__}} is loaded already: one exported agent per process")

'''

_AGENT_FOOTER = '''
SPEC = runtime.AgentSpec.from_dict(DESIGN)
# The training items the memory keeps (few_shot: its examples; retrieval: the pool it ranks).
EXAMPLES = runtime.load_examples(HERE)


def build_agent(*, model: str | None = None, api_base: str | None = None) -> runtime.Agent:
    """The agent as exported, or the same design on another model (any litellm model string)."""
    return runtime.exported_agent(SPEC, EXAMPLES, model=model, api_base=api_base)


@functools.cache
def _shared_agent(model: str | None, api_base: str | None) -> runtime.Agent:
    return build_agent(model=model, api_base=api_base)


def answer(question: str, *, model: str | None = None, api_base: str | None = None) -> str:
    """The agent's final answer. Calls on one model share an agent, so an experience memory
    carries its lessons from one question to the next."""
    return _shared_agent(model, api_base).run(question).answer


if __name__ == "__main__":
    raise SystemExit(
        runtime.command_line(build_agent, spec=SPEC, description=__doc__.splitlines()[0])
    )
'''


def render_agent_file(
    spec: AgentSpec,
    *,
    rehearsal: Rehearsal,
    runtime_file: str,
    origin: str = "",
    evidence: bool = False,
    plugin_notes: Sequence[str] = (),
) -> str:
    """The short agent file: the design as a literal (every prompt as text), the steps of one
    question, and the entry points, all running on the runtime module `runtime_file`; `origin`
    says where it was exported from, `evidence` whether evidence.json is beside it."""
    files = [
        "prompts.md, what it sends the model, call by call",
        "spec.json, the design as JSON (for `agentdesign evaluate`)",
        *(
            ["evidence.json, why it was chosen: its scores and verdict, with intervals and n"]
            if evidence
            else []
        ),
        f"{runtime_file}, the runtime the search ran it on, copied from agentdesign",
    ]
    about = (
        f"Exported by agentdesign{f' {origin}' if origin else ''}. Beside this file: "
        f"{'; '.join(files)}. The design below is all that is particular to this agent."
    )
    header = _AGENT_HEADER.format(
        short=spec.spec_hash[:10],
        describe=_in_docstring(spec.describe()),
        about=_in_docstring("\n".join(_prose(about))),
        module=runtime_file.removesuffix(".py"),
        plugins=_in_docstring("".join(f"\n{ln}" for note in plugin_notes for ln in _prose(note))),
    )
    steps = (
        " -> ".join(r.role if r.kind == "llm" else f"({r.role})" for r in rehearsal.trace)
        or "(no call)"
    )
    lines = _comment(
        "One question, step by step: the model calls by role, a tool's use in brackets, as the "
        "design makes them when every reply is a placeholder, so that no reply calls a tool and "
        f"no reviewer accepts (prompts.md shows each call's messages): {steps}."
    )
    lines += ["DESIGN = {", f'    "model": {_quoted(spec.model)},', '    "components": {']
    for slot in SLOTS:
        lines += _component_lines(slot, spec[slot])
    lines += ["    },", "}"]
    return header + "\n".join(lines) + "\n" + _AGENT_FOOTER


def _in_docstring(text: str) -> str:
    """`text` as it must be written inside a docstring to read as itself (a path may hold a
    backslash, a name a quote)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _component_lines(slot: str, component: Component) -> list[str]:
    """The slot's entry of DESIGN, under its component's own summary: on one line where it fits,
    else its short parameters packed on lines and each long text as lines of its own."""
    lines = _comment(_summary(component), indent=8)
    entries = [
        (f'"{key}": ', _literal(value, indent=16, lead=len(key) + 4))
        for key, value in component.get_params().items()
    ]
    short = [key + value[0] for key, value in entries if len(value) == 1]
    name = _quoted(component.name)
    one_line = f'        "{slot}": {{"name": {name}, "params": {{{", ".join(short)}}}}},'
    if len(short) == len(entries) and len(one_line) <= _WIDTH:
        return [*lines, one_line]
    lines += [f'        "{slot}": {{', f'            "name": {name},', '            "params": {']
    packed = ""
    for entry in short:
        if packed and len(packed) + len(entry) + 2 > _WIDTH:
            lines.append(packed)
            packed = ""
        packed = f"{packed} {entry}," if packed else f"                {entry},"
    lines += [packed] if packed else []
    for key, value in entries:
        if len(value) > 1:
            lines += [f"                {key}{value[0]}", *value[1:-1], f"{value[-1]},"]
    return [*lines, "            },", "        },"]


def _literal(value: Any, *, indent: int, lead: int) -> list[str]:
    """`value` as Python source, to follow `lead` characters on a line indented by `indent`; a
    long text as adjacent string literals broken after its line ends and spaces, so that a prompt
    reads as text and is still exactly what it was."""
    if not isinstance(value, str):
        return [repr(value)]
    text = _quoted(value)
    if indent + lead + len(text) + 1 <= _WIDTH:
        return [text]
    pad = " " * (indent + 4)
    room = _WIDTH - len(pad) - 2  # the quotes
    pieces = [piece for line in value.splitlines(keepends=True) for piece in _pieces(line, room)]
    return ["(", *(pad + _quoted(piece) for piece in pieces), " " * indent + ")"]


def _quoted(text: str) -> str:
    """`text` as a Python string literal, in double quotes unless it holds some itself."""
    literal = repr(text)
    # repr chose single quotes although the text has no double quote: it has no single one either
    if literal.startswith("'") and '"' not in text:
        return f'"{literal[1:-1]}"'
    return literal


def _pieces(line: str, width: int) -> list[str]:
    """`line` cut after spaces into pieces of at most `width` characters (a longer word stays
    whole); joined, they are `line` again."""
    pieces, current = [], ""
    for word in re.findall(r"\S+\s*|\s+", line):
        if current and len(current) + len(word) > width:
            pieces.append(current)
            current = ""
        current += word
    return [*pieces, current] if current else pieces


def _summary(component: Component) -> str:
    """The first paragraph of the component's docstring: what it does and what it costs."""
    doc = inspect.getdoc(type(component)) or component.name
    return f"{component.slot} {component.name}: " + " ".join(doc.split("\n\n")[0].split())


def _comment(text: str, *, indent: int = 0) -> list[str]:
    prefix = " " * indent + "# "
    return _prose(text, prefix=prefix)


# --- the prompts file ----------------------------------------------------------------------------


def render_prompts(spec: AgentSpec, *, examples: Sequence[Example], rehearsal: Rehearsal) -> str:
    """The prompts file: one question's calls as the model receives them, the examples the
    memory shows, and every prompt of the design, each exactly as sent."""
    out = [
        f"# What agent {spec.spec_hash[:10]} sends the model",
        "",
        f"{spec.describe()}, on `{spec.model}`.",
        "",
        "## One question, call by call",
        "",
        *_prose(
            "The messages the design sends for the question below, built by the same code as in "
            "the search. Each reply stands in as [reply N], and each tool's or program's result "
            "as [result N]: a real reply that calls a tool, or a reviewer that accepts, changes "
            "which calls follow. Sampling settings are shown with each call."
        ),
        "",
        "Question:",
        "",
        *_fenced(rehearsal.question),
    ]
    calls = iter(enumerate(rehearsal.calls, start=1))
    for record in rehearsal.trace:
        if record.kind != "llm":
            out += [
                "",
                f"Then the {record.role} tool runs on that reply; its result: {record.output}",
            ]
            continue
        number, call = next(calls)
        out += ["", *_call_lines(number, call, rehearsal.calls[: number - 1], record.role)]
    if rehearsal.note:
        out += ["", *_prose(rehearsal.note)]
    out += ["", "## The examples it shows", "", *_examples_lines(spec, examples, rehearsal)]
    out += ["", "## Every prompt of the design", ""]
    out += _prose(
        "Each text parameter of the design, exactly as DESIGN in agent.py holds it. A workflow "
        "may use only some of the components (its summary in agent.py says which), so a prompt "
        "here may never be sent: the calls above are what is."
    )
    for slot in SLOTS:
        component = spec[slot]
        for info in component.param_info():
            if info.kind == "text":
                title = f"### {slot} {component.name}: {info.name}"
                out += [
                    "",
                    title,
                    "",
                    *_prose(info.doc),
                    "",
                    *_fenced(getattr(component, info.name)),
                ]
    return "\n".join(out) + "\n"


def _call_lines(
    number: int, call: RehearsedCall, earlier: Sequence[RehearsedCall], role: str
) -> list[str]:
    """One call: its settings, then its messages, those it shares with an earlier call named."""
    settings = f"temperature {call.temperature}, seed {call.seed}, at most {call.max_tokens} tokens"
    if call.stop:
        settings += ", ends before " + ", ".join(repr(s) for s in call.stop)
    lines = [f"### Call {number}: {role}", "", f"{settings}."]
    shared, source = 0, 0
    for index, other in enumerate(earlier, start=1):
        common = _common_prefix(call.messages, other.messages)
        if common > shared:
            shared, source = common, index
    if shared:
        which = "Message 1 is" if shared == 1 else f"Messages 1-{shared} are"
        lines += ["", f"{which} as in call {source}; then:"]
    for position, (role_name, content) in enumerate(call.messages[shared:], start=shared + 1):
        lines += ["", f"{position}. **{role_name}**", "", *_fenced(content)]
    return lines


def _common_prefix(a: Sequence[tuple[str, str]], b: Sequence[tuple[str, str]]) -> int:
    count = 0
    for mine, theirs in zip(a, b, strict=False):
        if mine != theirs:
            break
        count += 1
    return min(count, len(a) - 1)  # a call's last message is always shown


def _examples_lines(
    spec: AgentSpec, examples: Sequence[Example], rehearsal: Rehearsal
) -> list[str]:
    memory = spec["memory"]
    lines = _prose(_summary(memory))
    shown = rehearsal.recalled
    if not shown:
        kept = f" ({len(examples)} kept in {EXAMPLES_FILE})" if examples else ""
        return [*lines, "", f"For the question above it shows no training example{kept}."]
    if list(shown) == list(examples):
        these = "This one is" if len(shown) == 1 else f"These {len(shown)} are"
        where = f"{these} the same for every question ({EXAMPLES_FILE} holds them):"
    else:
        where = (
            f"For the question above it shows these {len(shown)} of the {len(examples)} items "
            f"in {EXAMPLES_FILE}; another question can get others:"
        )
    lines += ["", *_prose(where)]
    for index, example in enumerate(shown, start=1):
        lines += ["", f"Example {index}, question:", "", *_fenced(example.question)]
        if example.rationale:
            lines += ["", "worked solution:", "", *_fenced(example.rationale)]
        lines += ["", "answer:", "", *_fenced(example.answer)]
    return lines


def _prose(text: str, *, prefix: str = "") -> list[str]:
    """`text` wrapped at spaces only, so that a path or a hyphenated name stays whole; each line
    starts with `prefix`."""
    wrapped = textwrap.wrap(
        text,
        _WIDTH,
        initial_indent=prefix,
        subsequent_indent=prefix,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return wrapped or [""]


def _fenced(text: str) -> list[str]:
    """`text` verbatim in a Markdown code block whose fence is longer than any run of backticks
    in it (a prompt may itself mention ```python blocks)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, text, fence]


def examples_json(examples: Sequence[Example]) -> list[dict[str, str]]:
    """The examples file's content: each kept training item's fields."""
    return [dataclasses.asdict(example) for example in examples]
