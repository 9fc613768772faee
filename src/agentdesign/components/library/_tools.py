"""The tools a model can call while it works: none, a calculator, and Python run in the sandbox.
Standard library only, like the runtime: export copies this file verbatim.

Each docstring's first line says what the component does and what it costs, as `agentdesign
components` shows it.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from agentdesign.components._registry import param, register
from agentdesign.components._slots import (
    Observation,
    Tool,
)
from agentdesign.components.sandbox._sandbox import SandboxLimits, run_python

# --- tools: what the model can call while it works -----------------------------------------------


@register
@dataclass(frozen=True, kw_only=True)
class NoTool(Tool):
    """No tools: the model answers from its own computation."""

    name: ClassVar[str] = "none"


@dataclass(frozen=True, kw_only=True)
class _ProtocolTool(Tool):
    """A tool the solver calls by writing a marked span, explained by `instruction`."""

    max_uses: int
    instruction: str

    @property
    def protocol(self) -> str:
        return self.instruction

    @property
    def call_limit(self) -> int:
        return self.max_uses


_CALC_LINE = re.compile(r"^\s*CALC:\s*(.+?)\s*$", re.MULTILINE)


@register
@dataclass(frozen=True, kw_only=True)
class Calculator(_ProtocolTool):
    """A calculator the model calls by writing `CALC: <expression>`; each use costs a model call."""

    name: ClassVar[str] = "calculator"
    action: ClassVar[str] = "calculate"
    action_doc: ClassVar[str] = "evaluates an arithmetic expression, e.g. calculate[12 * (3 + 4)]"
    max_uses: int = param(4, low=1, high=8, doc="calculator calls allowed per attempt")
    instruction: str = param(
        "You have a calculator. To use it, write a line 'CALC: <arithmetic expression>' and stop; "
        "you will get back 'RESULT: <value>'. Example:\nCALC: 12 * (3 + 4)\nRESULT: 84",
        doc="how the tool is explained to the model",
    )

    def find_call(self, text: str) -> tuple[str, str] | None:
        match = _CALC_LINE.search(text)
        if match is None:
            return None
        return text[: match.end()], match.group(1)

    def execute(self, argument: str) -> Observation:
        try:
            value = safe_eval(argument)
        except (ValueError, SyntaxError, ZeroDivisionError, OverflowError) as exc:
            return Observation(f"error: {exc}", str(exc))
        return Observation(str(int(value)) if float(value).is_integer() else f"{value:.10g}")


_PYTHON_FENCE = re.compile(r"```(?:python|py)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
_ANY_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PYTHON_MARK = re.compile(r"^[ \t]*PYTHON:[ \t]*", re.MULTILINE)
_SHOWN_CHARS = 2000  # of a program's output or errors, shown to the model


def find_python(text: str) -> tuple[str, str] | None:
    """(text up to the end of the program, the program) for a ```python block or a `PYTHON:`
    block (which runs to the end of the text, or to a `RESULT:` line the model invented)."""
    fence = _PYTHON_FENCE.search(text)
    if fence is not None:
        return text[: fence.end()], fence.group(1)
    mark = _PYTHON_MARK.search(text)
    if mark is None:
        return None
    code = re.split(r"^[ \t]*RESULT:", text[mark.end() :], maxsplit=1, flags=re.MULTILINE)[0]
    return text[: mark.end() + len(code)].rstrip(), code


def program_in(text: str) -> str:
    """The program in a reply that should be nothing but one: its code block, else the text."""
    found = find_python(text)
    if found is not None:
        return found[1]
    fence = _ANY_FENCE.search(text)
    return fence.group(1) if fence is not None else text


def timeout_param() -> Any:
    """The `timeout_s` parameter of a component that runs programs: not searched, since a longer
    limit changes only what a runaway program costs."""
    return param(10.0, low=1.0, high=60.0, searchable=False, doc="wall and CPU seconds per program")


def run_program(code: str, *, timeout_s: float) -> Observation:
    """Runs `code` in the sandbox; the observation is what it printed, or how it failed."""
    result = run_python(code, limits=SandboxLimits(wall_s=timeout_s, cpu_s=timeout_s))
    if not result.ok:
        detail = result.detail or str(result.kind)
        shown = f"error ({result.kind}): {detail}\n{result.stderr.strip()[-_SHOWN_CHARS:]}"
        return Observation(shown.strip(), detail, isolation=result.isolation)
    printed = result.stdout.strip()
    if not printed:
        return Observation(
            "(the program printed nothing)", "nothing printed", isolation=result.isolation
        )
    return Observation(printed[-_SHOWN_CHARS:], isolation=result.isolation)


@register
@dataclass(frozen=True, kw_only=True)
class PythonTool(_ProtocolTool):
    """A Python sandbox the model calls by writing a ```python block; each use costs a model call
    and a sandboxed process (about 0.1 s)."""

    name: ClassVar[str] = "python"
    action: ClassVar[str] = "python"
    action_doc: ClassVar[str] = (
        "runs a Python program and returns what it prints, e.g. python[print(12 * 7)]"
    )
    max_uses: int = param(3, low=1, high=8, doc="programs run per attempt")
    timeout_s: float = timeout_param()
    instruction: str = param(
        "You can run Python. To do so, write a ```python block that prints what you need and stop; "
        "you will get back 'RESULT: <what it printed>'.",
        doc="how the tool is explained to the model",
    )

    def find_call(self, text: str) -> tuple[str, str] | None:
        return find_python(text)

    def execute(self, argument: str) -> Observation:
        return run_program(program_in(argument), timeout_s=self.timeout_s)


_BINARY_OPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
}


def safe_eval(expression: str) -> float:
    """Evaluates plain arithmetic without `eval`: numbers, + - * / // % **, a few functions."""
    cleaned = expression.replace(",", "").replace("^", "**").replace("\u00d7", "*")
    cleaned = cleaned.rstrip("=").strip()
    if len(cleaned) > 200:
        raise ValueError("expression too long")
    return _eval_node(ast.parse(cleaned, mode="eval").body)


def _eval_node(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval_node(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPS:
        left, right = _eval_node(node.left), _eval_node(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponent too large")
        return float(_BINARY_OPS[type(node.op)](left, right))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return float(_FUNCTIONS[node.func.id](*(_eval_node(arg) for arg in node.args)))
    raise ValueError(f"not plain arithmetic: {ast.unparse(node)}")
