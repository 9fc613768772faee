"""BFCL: the Berkeley Function Calling Leaderboard's single-turn Python categories, our own checker.

The data ships with the package (evaluators/data/bfcl, Apache-2.0, from the `bfcl-eval` 2026.3.23
wheel; the package itself is not a dependency): `simple_python` (one function, one call),
`multiple` (several functions, call the right one) and `irrelevance` (no function fits: make no
call). A task shows the functions' JSON schemas and asks for the call(s) in Python syntax, as
BFCL's own prompting does. The checker follows BFCL's AST checker (`ast_checker.py`): the
function name, required parameters present, no unexpected ones, each value's type and value among
the possible answers (strings compared without case, spaces and ",./-_*^"), optional parameters
omitted only where "" is a possible answer.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any, ClassVar

from agentdesign.components import safe_eval
from agentdesign.evaluators._benchmark import (
    Benchmark,
    BenchmarkError,
    Score,
    Task,
    load_jsonl,
    register_benchmark,
)

__all__ = [
    "BFCL",
    "BFCLIrrelevance",
    "BFCLMultiple",
    "BFCLSimple",
    "check_call",
    "load_bfcl_tasks",
    "parse_calls",
]

CATEGORIES = ("simple_python", "multiple", "irrelevance")

_INSTRUCTION = (
    "You are given a question and a set of possible functions. Based on the question, you will "
    "need to make one or more function/tool calls to achieve the purpose. If none of the "
    "functions can be used, point it out and make no call. If the given question lacks the "
    "parameters required by the function, also point it out.\n\n"
    "Give the call(s) as your answer in Python syntax with keyword arguments: "
    "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]"
    "\n\nHere is a list of functions in JSON format that you can invoke.\n"
)

# BFCL's type names and the Python types their values must have.
_PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
# Where a reply starts a call or a list of calls; the first bracket is matched by `_balanced_end`.
_CALL_START = re.compile(r"\[|(?<![\w.])[A-Za-z_][\w.]*\(")
# An answer marker: what follows the last one is the answer, and prose before it is reasoning.
_ANSWER = re.compile(r"\banswer\b[\s*_]*:", re.IGNORECASE)
_CLOSERS = {"(": ")", "[": "]", "{": "}"}


@dataclass(frozen=True)
class Check:
    """The checker's verdict on one reply: `error_type` names the BFCL check that failed."""

    ok: bool
    error_type: str = ""
    error: str = ""


_OK = Check(ok=True)


# --------------------------------------------------------------------------------------------------
# Parsing replies
# --------------------------------------------------------------------------------------------------


def parse_calls(text: str) -> tuple[list[dict[str, dict[str, Any]]], str] | None:
    """The call(s) a reply makes, as BFCL decodes them ([{name: {param: value}}]), and their text.

    The answer is what follows the last "Answer:" marker if the reply has one, else the whole
    reply; in it, the first (after a marker) or last list of calls, or call with keyword arguments
    only, that parses as Python, in a code fence or among prose ("f(x, y)" in a sentence is not a
    call). Returns None when there is none: for an irrelevance task that means no call was made.
    Positional arguments in a list, "[f(1)]", are kept under "*args" for the checker to refuse.
    """
    markers = list(_ANSWER.finditer(text))
    segment = text[markers[-1].end() :] if markers else text
    found = None
    position = 0
    while (start := _CALL_START.search(segment, position)) is not None:
        end = _balanced_end(segment, start.end() - 1)
        fragment = segment[start.start() : end] if end is not None else ""
        calls = _decode(fragment) if fragment else None
        if calls is None:
            position = start.end()
            continue
        found = (calls, fragment)
        if markers:
            break
        position = end or start.end()
    return found


def _balanced_end(text: str, open_at: int) -> int | None:
    """The index after the bracket that closes the one at `open_at`, skipping string literals."""
    stack = [_CLOSERS[text[open_at]]]
    quote = ""
    index = open_at + 1
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in _CLOSERS:
            stack.append(_CLOSERS[char])
        elif char in ")]}":
            if char != stack.pop():
                return None
            if not stack:
                return index + 1
        index += 1
    return None


def _decode(fragment: str) -> list[dict[str, dict[str, Any]]] | None:
    try:
        body = ast.parse(fragment.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if isinstance(body, ast.Call):
        if body.args:  # "f(x, y)" in prose names a function; a call gives keyword arguments
            return None
        nodes: list[ast.expr] = [body]
    elif isinstance(body, ast.List | ast.Tuple):
        nodes = list(body.elts)
    else:
        return None
    if not all(isinstance(node, ast.Call) for node in nodes):
        return None
    return [_call(node) for node in nodes if isinstance(node, ast.Call)]


def _call(node: ast.Call) -> dict[str, dict[str, Any]]:
    """{name: {param: value}}, with a dotted name ("math.factorial") as BFCL resolves it."""
    arguments = {kw.arg: _value(kw.value) for kw in node.keywords if kw.arg is not None}
    if node.args:
        arguments["*args"] = [_value(arg) for arg in node.args]
    return {ast.unparse(node.func): arguments}


def _value(node: ast.expr) -> Any:
    """A literal argument as BFCL's decoder reads it; arithmetic is evaluated, never code."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.List):
        return [_value(item) for item in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(item) for item in node.elts)
    if isinstance(node, ast.Dict):
        return {
            _value(key) if key is not None else "**": _value(value)
            for key, value in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, ast.UnaryOp | ast.BinOp):
        return _arithmetic(node)
    if isinstance(node, ast.Name):  # a variable: BFCL compares its name as a string
        return node.id
    if isinstance(node, ast.Call) and node.keywords:
        return _call(node)
    return ast.unparse(node)


def _arithmetic(node: ast.UnaryOp | ast.BinOp) -> Any:
    """`3 * 10**8` as a number, an int when Python's own result would be one; else its text."""
    try:
        value = safe_eval(ast.unparse(node))
    except (ValueError, SyntaxError, ArithmeticError, TypeError):
        return ast.unparse(node)
    integral = all(
        not isinstance(n, ast.Div) and not (isinstance(n, ast.Constant) and type(n.value) is float)
        for n in ast.walk(node)
    )
    return int(value) if integral and float(value).is_integer() else value


# --------------------------------------------------------------------------------------------------
# Checking calls (BFCL's simple_function_checker, Python only)
# --------------------------------------------------------------------------------------------------


def check_call(
    function: Mapping[str, Any], call: Mapping[str, Mapping[str, Any]], possible: Mapping[str, Any]
) -> Check:
    """Checks one call against one function's schema and its possible answers.

    `possible` is BFCL's ground truth entry, {name: {param: [allowed values, "" if optional]}}.
    """
    name = function["name"]
    if name not in call:
        return Check(False, "wrong_func_name", f"function {name!r} not called")
    arguments = call[name]
    allowed = possible[name]
    properties = function["parameters"]["properties"]
    if "*args" in arguments:
        return Check(False, "positional_args", "arguments must be given by keyword")
    for param in function["parameters"].get("required", ()):
        if param not in arguments:
            return Check(False, "missing_required", f"missing required parameter {param!r}")
    for param, value in arguments.items():
        if param not in properties or param not in allowed:
            return Check(False, "unexpected_param", f"unexpected parameter {param!r}")
        verdict = _check_value(param, value, properties[param], allowed[param])
        if not verdict.ok:
            return verdict
    for param, options in allowed.items():
        if param not in arguments and "" not in options:
            return Check(False, "missing_optional", f"parameter {param!r} must be given")
    return _OK


def _check_value(param: str, value: Any, schema: Mapping[str, Any], options: list[Any]) -> Check:
    kind = schema["type"]
    expected = _PYTHON_TYPES[kind]
    nested = _PYTHON_TYPES[schema["items"]["type"]] if kind in ("array", "tuple") else None
    if kind == "tuple" and type(value) is tuple:
        value = list(value)  # JSON has no tuples: the possible answers hold lists
    if kind == "float" and type(value) is int:
        value = float(value)
    verdict, is_variable = _check_type(param, value, options, expected, nested)
    if not verdict.ok:
        return verdict
    if not is_variable:
        if expected is dict:
            return _check_dict(param, value, options)
        if expected is list and nested is dict:
            return _check_dict_list(param, value, options)
        if expected is str:
            ok = _standardize(value) in [_standardize(o) for o in options if isinstance(o, str)]
            return _OK if ok else _wrong_value(param, value, options, "string")
        if expected is list:  # "" (optional) stands for an empty list, as in BFCL
            ok = _standard_list(value) in [_standard_list(o) for o in options]
            return _OK if ok else _wrong_value(param, value, options, "list")
    return _OK if value in options else _wrong_value(param, value, options, "others")


def _check_type(
    param: str, value: Any, options: list[Any], expected: type, nested: type | None
) -> tuple[Check, bool]:
    """BFCL's type_checker: the schema's type, or the possible answers' (a variable's name)."""
    answer_type = next((type(o) for o in options if o != ""), None)
    is_variable = answer_type is not None and answer_type is not expected
    value_type = type(value)  # exact: a bool is not an integer here, as in BFCL
    if value_type is expected:
        if nested is None:
            return _OK, is_variable
        for option in options:
            if not isinstance(option, list) or all(
                _check_type(param, item, option, nested, None)[0].ok for item in value
            ):
                return _OK, is_variable
        return Check(False, "type_error:nested", f"wrong item type in {param!r}"), False
    if answer_type is not None and value_type is answer_type:
        return _OK, True
    message = f"{param!r} should be {expected.__name__}, got {type(value).__name__}"
    return Check(False, "type_error:simple", message), False


def _standardize(value: Any) -> Any:
    """BFCL's string normalization: lowercase, without spaces and ",./-_*^", ' as "."""
    if isinstance(value, str):
        return re.sub(r"[ ,./\-_*^]", "", value).lower().replace("'", '"')
    return value


def _standard_list(value: Any) -> list[Any]:
    """A list with its strings (not those in nested lists) normalized, as BFCL compares lists."""
    return [_standardize(item) for item in value] if isinstance(value, list | str) else [value]


def _check_dict(param: str, value: Mapping[Any, Any], options: list[Any]) -> Check:
    """A dict matches if one possible dict accepts every key and value and misses no key."""
    failure = _wrong_value(param, value, options, "dict")
    for option in options:
        if option == "":
            continue
        unknown = [key for key in value if key not in option]
        wrong = [
            key
            for key in value
            if key in option
            and _standardize(value[key]) not in [_standardize(o) for o in option[key]]
        ]
        missing = [key for key, allowed in option.items() if key not in value and "" not in allowed]
        if not unknown and not wrong and not missing:
            return _OK
    return failure


def _check_dict_list(param: str, value: list[Any], options: list[Any]) -> Check:
    for option in options:
        option = option or []  # "" (optional) stands for an empty list, as in BFCL
        if len(option) == len(value) and all(
            isinstance(item, dict) and _check_dict(param, item, [allowed]).ok
            for item, allowed in zip(value, option, strict=True)
        ):
            return _OK
    return _wrong_value(param, value, options, "list_dict")


def _wrong_value(param: str, value: Any, options: list[Any], kind: str) -> Check:
    return Check(False, f"value_error:{kind}", f"{param}={value!r} is not one of {options!r}")


# --------------------------------------------------------------------------------------------------
# Data and the benchmarks
# --------------------------------------------------------------------------------------------------


def load_bfcl_tasks(
    questions: Traversable, possible_answers: Traversable | None, *, category: str
) -> list[Task]:
    """Tasks from a BFCL category file and its possible answers (none for irrelevance).

    Ids are "bfcl/<BFCL id>"; metadata keeps the `category`, the `functions` and the
    `possible_answer`. The answer is a call with the first possible value of each parameter
    ("[]", no call, for irrelevance).
    """
    truth: dict[str, list[Any]] = {}
    if possible_answers is not None:
        for record in load_jsonl(possible_answers):
            truth[str(record.get("id"))] = record.get("ground_truth", [])
    tasks = []
    for number, record in enumerate(load_jsonl(questions), start=1):
        where = f"{questions}:{number}"
        try:
            bfcl_id = record["id"]
            question = "\n".join(m["content"] for turn in record["question"] for m in turn)
            functions = record["function"]
            answer = _reference_answer(functions, truth.get(bfcl_id, []))
        except (KeyError, TypeError, IndexError) as error:
            raise BenchmarkError(f"{where}: not a BFCL task ({error!r})") from error
        if possible_answers is not None and bfcl_id not in truth:
            raise BenchmarkError(f"{where}: no possible answer for {bfcl_id!r}")
        tasks.append(
            Task(
                id=f"bfcl/{bfcl_id}",
                question=f"{_INSTRUCTION}{json.dumps(functions)}\n\nQuestion: {question}",
                answer=answer,
                metadata={
                    "category": category,
                    "functions": functions,
                    "possible_answer": truth.get(bfcl_id, []),
                },
            )
        )
    return tasks


def _reference_answer(functions: list[dict[str, Any]], ground_truth: list[Any]) -> str:
    calls = []
    for entry in ground_truth:
        ((name, params),) = entry.items()
        schema = next(f for f in functions if f["name"] == name)["parameters"]["properties"]
        arguments = [
            f"{param}={_first(options, schema[param])!r}"
            for param, options in params.items()
            if any(option != "" for option in options)
        ]
        calls.append(f"{name}({', '.join(arguments)})")
    return f"[{', '.join(calls)}]"


def _first(options: list[Any], schema: Mapping[str, Any]) -> Any:
    """The first possible value given, with each key of a dict (or of dicts in a list) too."""
    value = next(option for option in options if option != "")
    if schema["type"] == "dict":
        return {
            key: _first(allowed, {"type": "any"})
            for key, allowed in value.items()
            if any(option != "" for option in allowed)
        }
    if schema.get("items", {}).get("type") == "dict":
        return [_first([item], {"type": "dict"}) for item in value]
    return value


@functools.cache
def _category_tasks(category: str) -> tuple[Task, ...]:
    folder = files("agentdesign.evaluators") / "data" / "bfcl"
    filename = f"BFCL_v4_{category}.json"
    possible = None if category == "irrelevance" else folder / "possible_answer" / filename
    return tuple(load_bfcl_tasks(folder / filename, possible, category=category))


@register_benchmark
class BFCL(Benchmark):  # type: ignore[misc, unused-ignore]  # see BenchmarkError
    """BFCL's simple (Python), multiple and irrelevance categories in one pool."""

    name: ClassVar[str] = "bfcl"
    categories: ClassVar[tuple[str, ...]] = CATEGORIES
    unsuited_components: ClassVar[frozenset[str]] = frozenset({"program_of_thought"})
    description: ClassVar[str] = (
        "BFCL function calling (Berkeley Function Calling Leaderboard v4): 400 simple (one "
        "function), 200 multiple (pick one of 2-4 functions) and 240 irrelevance tasks. Each "
        "task shows functions as JSON schemas and a request; the answer is the call in Python "
        "syntax with keyword arguments, [func(a=1, b='x')]. A call scores 1 if its function "
        "name, required parameters and every value match the possible answers (BFCL's AST "
        "checker; strings ignore case, spaces and punctuation), else 0. Irrelevance tasks "
        "have no fitting function: a reply scores 1 only if it makes no call."
    )

    def tasks(self) -> Sequence[Task]:
        return tuple(task for category in self.categories for task in _category_tasks(category))

    def answer_key(self, task: Task, output: str) -> str:
        """The call(s) the output makes, as the checker decodes them ("no call" for none, itself
        an answer: the right one on an irrelevance task), so a vote counts calls, not numbers."""
        parsed = parse_calls(output)
        if parsed is None or not parsed[0]:
            return "no call"
        return json.dumps(parsed[0], sort_keys=True, default=repr)

    def score(self, task: Task, prediction: str) -> Score:
        category = task.metadata["category"]
        parsed = parse_calls(prediction)
        if category == "irrelevance":
            if parsed is None or not parsed[0]:
                return Score(1.0, {"category": category, "call": None})
            check = Check(False, "irrelevance:made_a_call", "no function fits, but one was called")
            return Score(0.0, _details(category, parsed[1], check))
        if parsed is None:
            details = {"category": category, "call": None, "error": "no call found"}
            return Score(0.0, details, error_kind="parse")
        calls, text = parsed
        possible = task.metadata["possible_answer"]
        if len(calls) != len(possible):
            check = Check(False, "wrong_count", f"{len(calls)} calls, expected {len(possible)}")
        else:
            ((name, _),) = possible[0].items()
            function = next(f for f in task.metadata["functions"] if f["name"] == name)
            check = check_call(function, calls[0], possible[0])
        return Score(1.0 if check.ok else 0.0, _details(category, text, check))


def _details(category: str, call: str, check: Check) -> dict[str, Any]:
    details: dict[str, Any] = {"category": category, "call": call}
    if not check.ok:
        details.update(check=check.error_type, error=check.error)
    return details


@register_benchmark
class BFCLSimple(BFCL):  # type: ignore[misc, unused-ignore]  # see BenchmarkError
    """BFCL's simple_python category alone: one function, one call."""

    name: ClassVar[str] = "bfcl-simple"
    categories: ClassVar[tuple[str, ...]] = ("simple_python",)
    description: ClassVar[str] = (
        "BFCL simple: 400 requests, each with one function given as a JSON schema; the answer "
        "is one call in Python syntax with keyword arguments, [func(a=1, b='x')], scored 1 if "
        "the name and every argument match the possible answers (BFCL's AST checker), else 0."
    )


@register_benchmark
class BFCLMultiple(BFCL):  # type: ignore[misc, unused-ignore]  # see BenchmarkError
    """BFCL's multiple category alone: pick the right one of several functions."""

    name: ClassVar[str] = "bfcl-multiple"
    categories: ClassVar[tuple[str, ...]] = ("multiple",)
    description: ClassVar[str] = (
        "BFCL multiple: 200 requests, each with 2-4 functions given as JSON schemas; the answer "
        "is one call of the right function in Python syntax with keyword arguments, "
        "[func(a=1, b='x')], scored 1 if the name and every argument match the possible "
        "answers (BFCL's AST checker), else 0."
    )


@register_benchmark
class BFCLIrrelevance(BFCL):  # type: ignore[misc, unused-ignore]  # see BenchmarkError
    """BFCL's irrelevance category alone: no function fits, so the right answer is no call."""

    name: ClassVar[str] = "bfcl-irrelevance"
    categories: ClassVar[tuple[str, ...]] = ("irrelevance",)
    description: ClassVar[str] = (
        "BFCL irrelevance: 240 requests that none of the given functions (JSON schemas) can "
        "serve. A reply scores 1 if it makes no function call (saying why is fine), 0 if it "
        "calls anything."
    )
