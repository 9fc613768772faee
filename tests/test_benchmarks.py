"""Benchmark data layer: splits, the registry, GSM8K loading, answer extraction and scoring."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from decimal import Decimal
from importlib.resources import files
from pathlib import Path
from typing import ClassVar

import pytest

from agentdesign.components import AgentDesignError
from agentdesign.evaluators import (
    GSM8K,
    Benchmark,
    BenchmarkError,
    Score,
    Split,
    Task,
    _benchmark,
    available_benchmarks,
    extract_final_number,
    get_benchmark,
    load_jsonl,
    make_split,
    register_benchmark,
)
from agentdesign.evaluators._gsm8k import load_gsm8k_tasks

IDS = [f"toy/{i}" for i in range(100)]


# --- splits -------------------------------------------------------------------------------------


def test_split_is_deterministic_and_disjoint() -> None:
    split = make_split(IDS, seed=3, n_search=30, n_holdout=50)
    assert split == make_split(IDS, seed=3, n_search=30, n_holdout=50)
    assert split.seed == 3
    assert len(split.search_ids) == 30
    assert len(split.holdout_ids) == 50
    assert not set(split.search_ids) & set(split.holdout_ids)
    assert set(split.search_ids) | set(split.holdout_ids) <= set(IDS)


def test_split_ignores_input_order() -> None:
    shuffled = list(IDS)
    random.Random(1).shuffle(shuffled)
    assert make_split(shuffled, seed=5, n_search=10, n_holdout=10) == make_split(
        IDS, seed=5, n_search=10, n_holdout=10
    )


def test_split_depends_on_seed_and_is_shuffled() -> None:
    a = make_split(IDS, seed=0, n_search=20, n_holdout=0)
    b = make_split(IDS, seed=1, n_search=20, n_holdout=0)
    assert a.search_ids != b.search_ids
    assert list(a.search_ids) != sorted(a.search_ids)
    assert a.holdout_ids == ()


def test_split_is_pinned_across_versions_and_platforms() -> None:
    # Archived results name their split by seed: this order must never change.
    split = make_split([f"t{i}" for i in range(10)], seed=0, n_search=3, n_holdout=2)
    assert split == Split(seed=0, search_ids=("t4", "t6", "t3"), holdout_ids=("t5", "t7"))


@pytest.mark.parametrize(
    ("n_search", "n_holdout", "message"),
    [
        (0, 10, "n_search must be at least 1"),
        (10, -1, "n_holdout must be at least 0"),
        (60, 41, r"needs 60 search \+ 41 holdout tasks but the pool has only 100"),
    ],
)
def test_split_errors(n_search: int, n_holdout: int, message: str) -> None:
    with pytest.raises(BenchmarkError, match=message):
        make_split(IDS, seed=0, n_search=n_search, n_holdout=n_holdout)


def test_split_rejects_duplicate_ids() -> None:
    with pytest.raises(BenchmarkError, match="unique"):
        make_split(["a", "b", "a"], seed=0, n_search=1, n_holdout=1)


def test_split_can_use_the_whole_pool() -> None:
    split = make_split(IDS, seed=0, n_search=40, n_holdout=60)
    assert sorted(split.search_ids + split.holdout_ids) == sorted(IDS)


# --- registry and the Benchmark base ------------------------------------------------------------


class _Toy(Benchmark):
    name: ClassVar[str] = "toy"
    description: ClassVar[str] = "Echo the question."

    def tasks(self) -> Sequence[Task]:
        return [Task(id=f"toy/{i}", question=str(i), answer=str(i)) for i in range(3)]

    def score(self, task: Task, prediction: str) -> Score:
        return Score(float(prediction == task.answer))


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Isolates tests that register benchmarks from the process-wide registry."""
    monkeypatch.setattr(_benchmark.BENCHMARKS, "_objects", dict(_benchmark.BENCHMARKS._objects))
    monkeypatch.setattr(_benchmark, "_INSTANCES", {})


def test_registry_knows_gsm8k() -> None:
    benchmarks = available_benchmarks()
    assert "gsm8k" in benchmarks
    assert "arithmetic" in benchmarks["gsm8k"]
    assert isinstance(get_benchmark("gsm8k"), GSM8K)
    assert get_benchmark("gsm8k") is get_benchmark("gsm8k")


def test_unknown_benchmark_lists_the_available_ones() -> None:
    with pytest.raises(BenchmarkError, match=r"unknown benchmark 'nope' \(available: .*gsm8k"):
        get_benchmark("nope")


@pytest.mark.usefixtures("registry")
def test_register_and_refuse_duplicates() -> None:
    assert register_benchmark(_Toy) is _Toy
    assert available_benchmarks()["toy"] == "Echo the question."
    assert get_benchmark("toy").score(Task("toy/1", "1", "1"), "1").value == 1.0
    with pytest.raises(ValueError, match="'toy' is already registered"):
        register_benchmark(_Toy)
    with pytest.raises(ValueError, match="'gsm8k' is already registered"):
        register_benchmark(GSM8K)


@pytest.mark.usefixtures("registry")
def test_register_needs_a_name() -> None:
    class Nameless(_Toy):
        name: ClassVar[str] = ""

    with pytest.raises(ValueError, match="name"):
        register_benchmark(Nameless)


def test_task_lookup() -> None:
    toy = _Toy()
    assert toy.task("toy/2").question == "2"
    assert [t.id for t in toy.tasks_by_ids(["toy/2", "toy/0"])] == ["toy/2", "toy/0"]
    assert toy.train_examples() == ()
    with pytest.raises(BenchmarkError, match="unknown task id 'toy/9' in benchmark 'toy'"):
        toy.task("toy/9")
    with pytest.raises(BenchmarkError, match="'toy/7', 'toy/8'"):
        toy.tasks_by_ids(["toy/1", "toy/7", "toy/8"])


def test_duplicate_task_ids_are_reported() -> None:
    class Doubled(_Toy):
        def tasks(self) -> Sequence[Task]:
            return [Task("same", "q", "1"), Task("same", "q", "2")]

    with pytest.raises(BenchmarkError, match="duplicate task id 'same'"):
        Doubled().task("same")


def test_records_are_frozen_hashable_and_validated() -> None:
    task = Task("t", "q", "1", metadata={"solution": "..."})
    assert hash(task) == hash(Task("t", "q", "1", metadata={"solution": "other"}))
    with pytest.raises(AttributeError):
        task.answer = "2"  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Score(1.5)
    with pytest.raises(ValueError):
        Score(float("nan"))
    assert issubclass(BenchmarkError, AgentDesignError)


# --- JSONL loading ------------------------------------------------------------------------------


def test_load_jsonl_reads_objects(tmp_path: Path) -> None:
    path = tmp_path / "ok.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n', encoding="utf-8")
    assert load_jsonl(path) == [{"a": 1}, {"a": 2}]
    assert load_jsonl(str(path)) == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize(
    ("third_line", "message"),
    [('{"a": ', "invalid JSON"), ("", "invalid JSON"), ("[1, 2]", "expected a JSON object")],
)
def test_load_jsonl_names_file_and_line(tmp_path: Path, third_line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(f'{{"a": 1}}\n{{"a": 2}}\n{third_line}\n{{"a": 4}}\n', encoding="utf-8")
    with pytest.raises(BenchmarkError, match=rf"bad\.jsonl:3: {message}"):
        load_jsonl(path)


def test_load_jsonl_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match=r"cannot read .*missing\.jsonl"):
        load_jsonl(tmp_path / "missing.jsonl")


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ('{"question": "q", "answer": "no final line"}', "answer must end with '#### <number>'"),
        ('{"question": "q", "answer": "#### many"}', "answer must end with '#### <number>'"),
        ('{"question": "q"}', "needs string fields"),
    ],
)
def test_gsm8k_loader_names_file_and_line(tmp_path: Path, record: str, message: str) -> None:
    path = tmp_path / "gsm.jsonl"
    path.write_text('{"question": "q", "answer": "1+1=<<1+1=2>>2\\n#### 2"}\n' + record + "\n")
    with pytest.raises(BenchmarkError, match=rf"gsm\.jsonl:2: {message}"):
        load_gsm8k_tasks(path, split="custom")


def test_gsm8k_loader_parses_a_record(tmp_path: Path) -> None:
    path = tmp_path / "gsm.jsonl"
    path.write_text('{"question": "q", "answer": "10*150=<<10*150=1500>>1500\\n#### 1,500.0"}\n')
    (task,) = load_gsm8k_tasks(path, split="custom")
    assert task.id == "gsm8k/custom/0"
    assert task.answer == "1500"
    assert task.metadata["rationale"] == "10*150=1500"


# --- GSM8K data ---------------------------------------------------------------------------------

_SHA256 = {
    "test.jsonl": "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
    "train.jsonl": "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465",
}


@pytest.mark.parametrize("name", sorted(_SHA256))
def test_packaged_data_is_unmodified(name: str) -> None:
    data = (files("agentdesign.evaluators") / "data" / "gsm8k" / name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == _SHA256[name]


def test_gsm8k_tasks_and_examples() -> None:
    gsm8k = get_benchmark("gsm8k")
    tasks, train = gsm8k.tasks(), gsm8k.train_examples()
    assert (len(tasks), len(train)) == (1319, 7473)
    assert tasks[17].id == "gsm8k/test/17"
    assert train[0].id == "gsm8k/train/0"
    first = gsm8k.task("gsm8k/test/0")
    assert first.question.startswith("Janet")
    assert first.answer == "18"
    assert first.metadata["solution"].endswith("#### 18")
    assert "<<" not in first.metadata["rationale"]
    assert "####" not in first.metadata["rationale"]


def test_every_gsm8k_gold_is_a_normalized_number() -> None:
    gsm8k = get_benchmark("gsm8k")
    for task in [*gsm8k.tasks(), *gsm8k.train_examples()]:
        assert extract_final_number(task.answer) == task.answer, task.id
        Decimal(task.answer)  # raises if not a plain number
        assert "," not in task.answer


def test_gsm8k_gold_drops_thousands_commas() -> None:
    answers = {task.answer for task in get_benchmark("gsm8k").tasks()}
    assert "1450000" in answers


# --- answer extraction --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Answer: 42", "42"),
        ("#### 42", "42"),
        ("\\boxed{42}", "42"),
        ("The answer is $1,234.50.", "1234.5"),
        ("**42**", "42"),
        ("```\n42\n```", "42"),
        ("```python3\nprint(6 * 7)\n```\nOutput: 42", "42"),
        ("Answer: 42. I hope this helps! Ask me 3 more.", "42"),
        ("She makes 9 * 2 = $18 every day.", "18"),
        ("The temperature falls to -5 degrees.", "-5"),
        ("We get \u22127", "-7"),
        ("So 10-3 = 7, then 7-3", "3"),
        ("It is 42.0", "42"),
        ("0.50 of the cake", "0.5"),
        ("The rate is .5 per hour", "0.5"),
        ("Answer: 50%", "50"),
        ("It weighs 12kg", "12"),
        ("1,000,000 dollars", "1000000"),
        ("Answer: 5 + 3 = 8", "8"),
        ("The answer is: 20 - 5 = 15", "15"),
        ("Answer: 42 (since x = 6*7)", "42"),
        ("Answer: total = 17 apples", "17"),
        ("Answer:\n\n  17 apples", "17"),
        ("**Final Answer:** 99", "99"),
        ("First 3 + 4 = 7. Answer: 10. Check: 10 - 3 = 7", "10"),
        ("Answer: 3. No wait, Answer: 4", "4"),
        ("#### 12\nSome trailing prose with 99", "12"),
        ("The final answer is $\\boxed{1{,}234}$. Steps: 1, 2", "1234"),
        ("\\boxed{\\frac{3}{4}}", "0.75"),
        ("\\boxed{x = 2 \\times 3 = 6}", "6"),
        ("3/4", "0.75"),
        ("Answer: -0", "0"),
        ("#### Step 1: eggs\n16 - 3 - 4 = 9\n#### Step 2: money\n9 * 2 = 18", "18"),
        ("#### 1. Eggs\n16 - 3 - 4 = 9\n#### 2. Money\n9 * 2 = 18", "18"),
        ("Let's find the answer: first 16-3-4 = 9.\nThen 9*2 = 18.", "18"),
        ("final answer: 18\nCheck: 9 * 2", "18"),
        ("THE ANSWER IS 18, from 9 * 2", "18"),
        ("> **The final answer:** 18", "18"),
        ("\\boxed{-3}", "-3"),
        ("H2O and python3", None),
        ("no numbers here", None),
        ("", None),
    ],
)
def test_extract_final_number(text: str, expected: str | None) -> None:
    assert extract_final_number(text) == expected


def test_extraction_is_linear_on_long_lines() -> None:
    # A backtracking equation pattern would take minutes on this line.
    assert extract_final_number("Answer: " + "( " * 50_000 + "7") == "7"


# --- scoring ------------------------------------------------------------------------------------


@pytest.fixture
def janet() -> Task:
    return get_benchmark("gsm8k").task("gsm8k/test/0")


@pytest.mark.parametrize(
    ("prediction", "value"),
    [
        ("She makes $18 a day.\nAnswer: 18", 1.0),
        ("#### 18.0", 1.0),
        ("\\boxed{18}", 1.0),
        ("18.0000000001", 1.0),
        ("Answer: 19", 0.0),
        ("Answer: 18.01", 0.0),
        ("Answer: 180", 0.0),
    ],
)
def test_gsm8k_scores_by_numeric_match(janet: Task, prediction: str, value: float) -> None:
    assert get_benchmark("gsm8k").score(janet, prediction).value == value


def test_gsm8k_score_details(janet: Task) -> None:
    gsm8k = get_benchmark("gsm8k")
    assert gsm8k.score(janet, "so $18.00").details == {"prediction": "18", "gold": "18"}
    assert gsm8k.score(janet, "  \n").details == {"error": "empty"}
    assert gsm8k.score(janet, "  \n").value == 0.0
    no_number = gsm8k.score(janet, "I don't know")
    assert no_number.value == 0.0
    assert no_number.details == {"prediction": None, "gold": "18", "error": "no_number"}


def test_every_reference_solution_scores_one() -> None:
    gsm8k = get_benchmark("gsm8k")
    for task in [*gsm8k.tasks(), *gsm8k.train_examples()]:
        assert gsm8k.score(task, task.metadata["solution"]).value == 1.0, task.id


def test_gsm8k_scores_tasks_built_by_hand() -> None:
    gsm8k = get_benchmark("gsm8k")
    assert gsm8k.score(Task("x", "q", "1,234"), "Answer: 1234").value == 1.0
    with pytest.raises(BenchmarkError, match="non-numeric gold"):
        gsm8k.score(Task("x", "q", "many"), "Answer: 3")
