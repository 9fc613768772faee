"""Workflows written as code: a Python function, run in the sandbox, that orchestrates the calls.

The meta agent (`agentdesign.search.strategies`) may write a workflow instead of choosing one. Its
source is a parameter of the `code` workflow, so the spec, its hash, the archive and an exported
agent all carry it. It runs in the sandbox of `_sandbox.py` (OS namespaces, audit hooks, CPU, memory
and wall limits), never in the engine's process; the model, the design's other components and its
tool are reached only through the sandbox's request channel, answered here by the task's `Solver`,
so every call is traced and counted against the task's budget. A program that fails to load, raises,
loops past its limits, floods the channel or breaks a sandbox rule gives an attempt with no answer,
and the trace says which.

The API a workflow is written against (the `_PRELUDE` below defines it inside the sandbox):

    def run(question, agent) -> str:  # the final reply; its 'Answer: <answer>' line is parsed
        agent.attempt(question, temperature=0.0)  # {"output", "answer"}: one solver attempt
        agent.call(messages, max_tokens=256, temperature=0.0)  # one model call: its text
        agent.tool(argument)  # the design's tool (calculator, python) on `argument`: its text

Standard library only, like every module export inlines.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from agentdesign.components._parsing import extract_answer
from agentdesign.components._registry import param, register
from agentdesign.components._slots import Attempt, Solver, Workflow
from agentdesign.components.llm._trace import CallRecord, Message
from agentdesign.components.sandbox._channel import REQUEST_MARK, ChannelRefusal
from agentdesign.components.sandbox._sandbox import SandboxLimits, run_python

__all__ = ["CodeWorkflow", "check_workflow_source"]

_MAX_SOURCE_CHARS = 8000
_MAX_CALL_TOKENS = 2048
_ROLES = ("system", "user", "assistant")

DEFAULT_SOURCE = '''def run(question, agent):
    """One attempt, then one check of it: the model is asked whether the answer holds."""
    first = agent.attempt(question)
    check = agent.call(
        [
            {"role": "user", "content": question + "\\n\\nProposed solution:\\n" + first["output"]
             + "\\n\\nIs the final answer correct? Reply 'yes' or give the correct final answer "
             "on a last line 'Answer: <answer>'."},
        ],
        max_tokens=256,
    )
    if "Answer:" in check and "yes" not in check.lower().split("answer:")[0][-20:]:
        return check
    return first["output"]
'''

# Defines the agent a workflow is handed, inside the sandbox: each method is one request on the
# channel. Names start with _agentdesign_ so that a workflow's own names cannot clash with them.
_PRELUDE = f"""import json as _agentdesign_json
import os as _agentdesign_os
import sys as _agentdesign_sys


def _agentdesign_request(kind, **fields):
    fields["kind"] = kind
    line = _agentdesign_json.dumps(fields).encode() + b"\\n"
    _agentdesign_os.write(1, {REQUEST_MARK!r} + line)
    reply = _agentdesign_sys.stdin.buffer.readline()
    if not reply:
        raise SystemExit("the engine closed the channel")
    reply = _agentdesign_json.loads(reply)
    if "error" in reply:
        raise RuntimeError(reply["error"])
    return reply["value"]


class _AgentdesignAgent:
    def attempt(self, question, temperature=0.0):
        return _agentdesign_request("attempt", question=str(question), temperature=temperature)

    def call(self, messages, max_tokens=256, temperature=0.0):
        return _agentdesign_request(
            "call", messages=messages, max_tokens=max_tokens, temperature=temperature
        )

    def tool(self, argument):
        return _agentdesign_request("tool", argument=str(argument))

"""


def check_workflow_source(source: str) -> str:
    """`source` if it can be a workflow (it parses, and defines `run(question, agent)` at its top
    level), with one trailing newline; ValueError with a one-line reason if not."""
    source = source.strip("\n") + "\n"
    if len(source) > _MAX_SOURCE_CHARS:
        raise ValueError(f"the workflow's code is over {_MAX_SOURCE_CHARS} characters")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(
            f"the workflow's code does not parse: {exc.msg} (line {exc.lineno})"
        ) from None
    runs = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "run"]
    if not runs:
        raise ValueError("the workflow's code defines no top-level function run(question, agent)")
    arguments = runs[-1].args
    if len(arguments.posonlyargs) + len(arguments.args) < 2 and arguments.vararg is None:
        raise ValueError("the workflow's run must take two arguments: question and agent")
    return source


@register
@dataclass(frozen=True, kw_only=True)
class CodeWorkflow(Workflow):
    """A workflow written as Python, run(question, agent), executed in the sandbox; each of its
    model, solver and tool requests is a traced call of the task.

    Opt-in: only in a space whose choices name it, since a search cannot vary code by itself.
    """

    name: ClassVar[str] = "code"
    opt_in: ClassVar[bool] = True
    source: str = param(
        DEFAULT_SOURCE, code=True, doc="the workflow's Python: defines run(question, agent)"
    )
    timeout_s: float = param(
        20.0,
        low=1.0,
        high=120.0,
        searchable=False,
        doc="CPU and wall seconds of the program itself (time waiting on the model not counted)",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_workflow_source(self.source)

    @property
    def source_hash(self) -> str:
        """The first 12 hex digits of the source's SHA-256: how listings name this code."""
        return hashlib.sha256(self.source.encode()).hexdigest()[:12]

    def run(self, solver: Solver, question: str) -> Attempt:
        seeds = itertools.count()
        final: list[str] = []

        def serve(request: Any) -> Any:
            if not isinstance(request, Mapping):
                raise ChannelRefusal("a request must be a JSON object")
            kind = request.get("kind")
            temperature = _number(request.get("temperature", 0.0), 0.0, 1.5, "temperature")
            if kind == "attempt":
                attempt = solver.attempt(
                    str(request.get("question", question)),
                    temperature=temperature,
                    seed=next(seeds),
                )
                return {"output": attempt.output, "answer": attempt.answer}
            if kind == "call":
                max_tokens = int(
                    _number(request.get("max_tokens", 256), 1, _MAX_CALL_TOKENS, "max_tokens")
                )
                return solver.call(
                    "workflow",
                    _messages(request.get("messages")),
                    temperature=temperature,
                    seed=next(seeds),
                    max_tokens=max_tokens,
                )
            if kind == "tool":
                if not solver.tool.action and not solver.tool.protocol:
                    raise ChannelRefusal("the design has no tool")
                return solver.use_tool(str(request.get("argument", ""))).text
            if kind == "result":  # the last one counts: only it is kept
                final[:] = [str(request.get("value", ""))]
                return None
            raise ChannelRefusal(f"unknown request {kind!r} (attempt, call, tool)")

        program = (
            _PRELUDE
            + self.source
            + "\n_agentdesign_request('result', "
            + f"value=str(run({question!r}, _AgentdesignAgent())))\n"
        )
        limits = SandboxLimits(wall_s=self.timeout_s, cpu_s=self.timeout_s)
        result = run_python(program, limits=limits, serve=serve)
        error = None if result.ok and final else (result.detail or "the program returned nothing")
        solver.trace.add(
            CallRecord(
                "tool",
                "code",
                f"workflow code {self.source_hash}",
                (result.stderr.strip()[-2000:] if error else final[-1][-2000:]),
                latency_s=result.wall_s,
                error=None if error is None else f"{result.kind or 'error'}: {error}",
                isolation=result.isolation,
            )
        )
        if error is not None:
            return Attempt(output="", answer="")
        return Attempt(output=final[-1], answer=extract_answer(final[-1]))


def _number(value: Any, low: float, high: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ChannelRefusal(f"{name} must be a number, got {value!r}"[:200])
    return float(min(max(value, low), high))


def _messages(raw: Any) -> Sequence[Message]:
    """The chat messages of a model request: a list of {'role', 'content'} with known roles."""
    if not isinstance(raw, list) or not raw:
        raise ChannelRefusal("messages must be a non-empty list of {'role', 'content'} objects")
    messages: list[Message] = []
    for message in raw:
        if not isinstance(message, Mapping):
            raise ChannelRefusal("each message must be an object with 'role' and 'content'")
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES or not isinstance(content, str):
            raise ChannelRefusal(f"a message needs a role in {_ROLES} and a text content")
        messages.append({"role": role, "content": content})
    return messages
