"""BFCL: packaged data, call parsing, and our port of BFCL's AST checker."""

from __future__ import annotations

import hashlib
from importlib.resources import files
from typing import Any

import pytest

from agentdesign.components import AgentSpec, build_agent
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import BFCL, Task, available_benchmarks, get_benchmark, run_task
from agentdesign.evaluators import BFCL as ExportedBFCL
from agentdesign.evaluators._bfcl import check_call, parse_calls

# Pinned: the files are copied unchanged from the bfcl-eval 2026.3.23 wheel.
_SHA256 = {
    "BFCL_v4_simple_python.json": (
        "82dd63ba502eb2520c6b5d1d9a5c4b590e03ff261565175561f6228a367d1991"
    ),
    "BFCL_v4_multiple.json": "aef168155ebd74b7ac2401198b201343bc7d16d7a3d7e0d4e6d8ee82c6969b2a",
    "BFCL_v4_irrelevance.json": "2b6ed4c2e992cdcf5f1678a701851f944bef7550ee026ed1ddb89efed5be01a6",
    "possible_answer/BFCL_v4_simple_python.json": (
        "90cd5bc653690ee8e459b5b3f3fc9458606f7f3fcbf795bb51b7dc581f8c86dc"
    ),
    "possible_answer/BFCL_v4_multiple.json": (
        "244e00ce9395df948bcafc7bee64e8f9c87ef70887587d83cae45b13699f3047"
    ),
}


@pytest.fixture(scope="module")
def bfcl() -> BFCL:
    benchmark = get_benchmark("bfcl")
    assert isinstance(benchmark, BFCL)
    return benchmark


@pytest.fixture(scope="module")
def triangle(bfcl: BFCL) -> Task:
    return bfcl.task("bfcl/simple_python_0")


def score(bfcl: BFCL, task: Task, reply: str) -> tuple[float, str | None, str | None]:
    result = bfcl.score(task, reply)
    return result.value, result.details.get("check"), result.error_kind


# --- data ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(_SHA256))
def test_packaged_data_is_unmodified(name: str) -> None:
    folder = files("agentdesign.evaluators") / "data" / "bfcl"
    data = folder.joinpath(*name.split("/")).read_bytes()
    assert hashlib.sha256(data).hexdigest() == _SHA256[name]
    assert "Apache License" in (folder / "LICENSE").read_text(encoding="utf-8")
    assert "`bfcl-eval` 2026.3.23" in (folder / "NOTICE").read_text(encoding="utf-8")


def test_tasks_categories_and_registry(bfcl: BFCL, triangle: Task) -> None:
    assert ExportedBFCL is BFCL
    counts = {
        name: len(get_benchmark(name).tasks())
        for name in ("bfcl", "bfcl-simple", "bfcl-multiple", "bfcl-irrelevance")
    }
    assert counts == {
        "bfcl": 840,
        "bfcl-simple": 400,
        "bfcl-multiple": 200,
        "bfcl-irrelevance": 240,
    }
    assert set(available_benchmarks()) >= set(counts)
    categories = {t.metadata["category"] for t in bfcl.tasks()}
    assert categories == {"simple_python", "multiple", "irrelevance"}
    # The same task has the same id in the pooled and the per-category benchmark.
    assert get_benchmark("bfcl-multiple").task("bfcl/multiple_7") == bfcl.task("bfcl/multiple_7")
    assert '"name": "calculate_triangle_area"' in triangle.question
    assert triangle.question.endswith(
        "Question: Find the area of a triangle with a base of 10 units and height of 5 units."
    )
    assert "[func_name1(params_name1=params_value1" in triangle.question
    assert triangle.answer == "[calculate_triangle_area(base=10, height=5, unit='units')]"


# --- the canonical answers score 1 ---------------------------------------------------------------


def test_every_reference_answer_scores_one(bfcl: BFCL) -> None:
    failures = {t.id: bfcl.score(t, t.answer).details for t in bfcl.tasks()}
    assert {k: v for k, v in failures.items() if "check" in v} == {}
    assert all(bfcl.score(t, t.answer).value == 1.0 for t in bfcl.tasks())


def _call_text(task: Task, choose: Any) -> str:
    """The task's call with each parameter's value picked by `choose` (None: leave it out)."""
    ((name, params),) = task.metadata["possible_answer"][0].items()
    function = next(f for f in task.metadata["functions"] if f["name"] == name)
    required = function["parameters"].get("required", [])
    arguments = []
    for param, options in params.items():
        value = choose(options, param in required, function["parameters"]["properties"][param])
        if value is not None:
            arguments.append(f"{param}={value!r}")
    return f"{name}({', '.join(arguments)})"


def _last_plain_option(options: list[Any], required: bool, schema: dict[str, Any]) -> Any:
    plain = [o for o in options if o != ""]
    if not plain or schema["type"] == "dict" or schema.get("items", {}).get("type") == "dict":
        return None if not plain else _resolved(plain[0])
    return plain[-1]


def _resolved(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: next(o for o in v if o != "") for k, v in value.items() if v[0] != ""}
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [_resolved(item) for item in value]
    return value


def _omit_optional(options: list[Any], required: bool, schema: dict[str, Any]) -> Any:
    if "" in options and not required:
        return None
    return _resolved(next(o for o in options if o != ""))


@pytest.mark.parametrize("choose", [_last_plain_option, _omit_optional])
def test_every_possible_answer_variant_scores_one(bfcl: BFCL, choose: Any) -> None:
    """Other allowed values (the last one listed) and leaving optional parameters out pass too."""
    failures = {}
    for task in bfcl.tasks():
        if task.metadata["category"] == "irrelevance":
            continue
        reply = f"Answer: [{_call_text(task, choose)}]"
        result = bfcl.score(task, reply)
        if result.value != 1.0:
            failures[task.id] = (reply, dict(result.details))
    assert failures == {}


# --- the checker's rules -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "check"),
    [
        ("[triangle_area(base=10, height=5)]", "wrong_func_name"),
        ("[calculate_triangle_area(base=10)]", "missing_required"),
        ("[calculate_triangle_area(base=10, height=5, color='red')]", "unexpected_param"),
        ("[calculate_triangle_area(base=10, height=6)]", "value_error:others"),
        ("[calculate_triangle_area(base=10.0, height=5)]", "type_error:simple"),
        ("[calculate_triangle_area(base=True, height=5)]", "type_error:simple"),
        ("[calculate_triangle_area(base=10, height=5, unit='meters')]", "value_error:string"),
        ("[calculate_triangle_area(10, 5)]", "positional_args"),
        ("[calculate_triangle_area(base=10, height=5), other(x=1)]", "wrong_count"),
        ("[]", "wrong_count"),
    ],
)
def test_wrong_calls_score_zero(bfcl: BFCL, triangle: Task, reply: str, check: str) -> None:
    assert score(bfcl, triangle, reply) == (0.0, check, None)


@pytest.mark.parametrize(
    "reply",
    [
        "[calculate_triangle_area(base=10, height=5)]",  # optional unit left out ("" allowed)
        "[calculate_triangle_area(base=10, height=5, unit='Units')]",  # strings ignore case
        "calculate_triangle_area(height=5, base=2 * 5)",  # no brackets; arithmetic evaluated
        "The area is half base times height.\n\nAnswer:\n```python\n"
        "[calculate_triangle_area(base=10, height=5)]\n```\nThis computes the area.",
        "I could call calculate_triangle_area(base=1, height=1) but the right call is "
        "[calculate_triangle_area(base=10, height=5)]",  # without a marker, the last call
        "Answer: [calculate_triangle_area(base=10, height=5)] (or area(base=1) otherwise)",
    ],
)
def test_right_calls_in_many_shapes_score_one(bfcl: BFCL, triangle: Task, reply: str) -> None:
    assert score(bfcl, triangle, reply) == (1.0, None, None)


def test_a_reply_without_a_call_is_a_parse_error(bfcl: BFCL, triangle: Task) -> None:
    assert score(bfcl, triangle, "The area is 25 square units.") == (0.0, None, "parse")
    assert bfcl.score(triangle, "Answer: 25").details["error"] == "no call found"


def test_multiple_needs_the_right_function(bfcl: BFCL) -> None:
    task = bfcl.task("bfcl/multiple_0")
    names = [f["name"] for f in task.metadata["functions"]]
    assert names == ["triangle_properties.get", "circle_properties.get"]
    right = "[triangle_properties.get(side1=5, side2=4, side3=3)]"
    assert score(bfcl, task, right) == (1.0, None, None)
    wrong = "[circle_properties.get(radius=5.0)]"
    assert score(bfcl, task, wrong) == (0.0, "wrong_func_name", None)


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("None of the functions can compute a triangle's area.", 1.0),
        ("Answer: []", 1.0),
        ("Answer: no function applies. determine_body_mass_index(weight, height) is for BMI.", 1.0),
        ("I can't (sorry): it needs a geometry function (none given).", 1.0),
        ("Answer: determine_body_mass_index(weight=70.0, height=1.8)", 0.0),
        ("[determine_body_mass_index(weight=70.0, height=1.8)]", 0.0),
        ("[area(base=10, height=5)]", 0.0),  # a made-up function is a call too
    ],
)
def test_irrelevance_scores_one_only_without_a_call(bfcl: BFCL, reply: str, value: float) -> None:
    task = bfcl.task("bfcl/irrelevance_0")
    result = bfcl.score(task, reply)
    assert result.value == value and result.error_kind is None
    if value == 0.0:
        assert result.details["check"] == "irrelevance:made_a_call"


def test_nested_values_dicts_and_lists() -> None:
    function = {
        "name": "f",
        "parameters": {
            "type": "dict",
            "properties": {
                "where": {"type": "dict"},
                "rows": {"type": "array", "items": {"type": "dict"}},
                "point": {"type": "tuple", "items": {"type": "float"}},
            },
            "required": ["where"],
        },
    }
    possible = {
        "f": {
            "where": [{"city": ["New York", "NYC"], "zip": ["", "10001"]}],
            "rows": [[{"a": [1]}, {"a": [2]}], ""],
            "point": [[1.5, 2.5], ""],
        }
    }

    def check(text: str) -> str:
        parsed = parse_calls(text)
        assert parsed is not None
        verdict = check_call(function, parsed[0][0], possible)
        return "ok" if verdict.ok else verdict.error_type

    assert check("f(where={'city': 'new-york'})") == "ok"
    assert check("f(where={'city': 'NYC', 'zip': '10001'}, rows=[{'a': 1}, {'a': 2}])") == "ok"
    assert check("f(where={'city': 'NYC'}, point=(1.5, 2.5), rows=[])") == "ok"
    assert check("f(where={'city': 'Boston'})") == "value_error:dict"
    assert check("f(where={'city': 'NYC', 'state': 'NY'})") == "value_error:dict"
    assert check("f(where={'zip': '10001'})") == "value_error:dict"
    assert check("f(where={'city': 'NYC'}, rows=[{'a': 2}, {'a': 1}])") == "value_error:list_dict"
    # An optional value ("" listed) skips BFCL's nested type check; the value check still fails.
    assert check("f(where={'city': 'NYC'}, point=[1, 2])") == "value_error:list"
    assert check("f(where='NYC')") == "type_error:simple"


def test_tuple_items_are_type_checked(bfcl: BFCL) -> None:
    task = bfcl.task("bfcl/simple_python_83")
    call = "calculate_distance(coord1=(33.4484, -112.074), coord2={}, unit='miles')"
    assert score(bfcl, task, call.format("(34.0522, -118.2437)")) == (1.0, None, None)
    assert score(bfcl, task, call.format("[34.0522, -118.2437]")) == (1.0, None, None)
    assert score(bfcl, task, call.format("(34, -118)")) == (0.0, "type_error:nested", None)


def test_parse_calls_finds_the_answer_and_ignores_prose() -> None:
    assert parse_calls("no calls (really) [1, 2] here, f(x, y) names f") is None
    parsed = parse_calls("Answer: math.factorial(number=5)")
    assert parsed == ([{"math.factorial": {"number": 5}}], "math.factorial(number=5)")
    assert parse_calls("[f(x=-3, y=None, z=[1, 'a'], w=g(k=1))]") == (
        [{"f": {"x": -3, "y": None, "z": [1, "a"], "w": {"g": {"k": 1}}}}],
        "[f(x=-3, y=None, z=[1, 'a'], w=g(k=1))]",
    )
    # Quotes and brackets inside strings do not end the call early.
    assert parse_calls("f(s='a ) ] \\' b')") == ([{"f": {"s": "a ) ] ' b"}}], "f(s='a ) ] \\' b')")
    # An unparsable answer after the marker is no call, whatever the reasoning mentioned.
    assert parse_calls("Maybe f(x=1).\nAnswer: none fits") is None


# --- votes ---------------------------------------------------------------------------------------


def test_self_consistency_votes_on_the_calls_not_on_their_last_number(
    bfcl: BFCL, triangle: Task
) -> None:
    """Two samples make the right call; the first, prose with the same last number, makes none.
    Voting on the last number made all three one answer and returned the first: a 0."""
    samples = {
        0: "The area of a triangle with base 10 and height 5 is base * height / 2",
        1: "[calculate_triangle_area(base=10, height=5)]",
        2: "Answer: [calculate_triangle_area(height=5, base=10)]",
    }
    llm = FakeChatModel(lambda model, messages, temperature, seed: samples[seed or 0])
    spec = AgentSpec.create(
        model="fake/model", workflow={"name": "self_consistency", "params": {"n_samples": 3}}
    )
    outcome = run_task(build_agent(spec, llm=llm), bfcl, triangle)
    assert (outcome.score, outcome.output) == (1.0, samples[1])
    # the same keys: the calls as the checker decodes them, whatever their order; "no call"
    keys = {bfcl.answer_key(triangle, text) for text in samples.values()}
    assert keys == {"no call", '[{"calculate_triangle_area": {"base": 10, "height": 5}}]'}
    # a benchmark without a reading of its own votes as before: on the final number
    gsm8k = get_benchmark("gsm8k")
    assert gsm8k.answer_key(triangle, samples[0]) == "2"
    assert gsm8k.answer_key(triangle, "no answer here") == "no answer here"
