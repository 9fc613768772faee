"""Custom benchmarks from a user's JSONL file (and YAML settings): scorers and bad input."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentdesign.evaluators import (
    BenchmarkError,
    FileBenchmark,
    Task,
    get_benchmark,
    open_file_benchmark,
)


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def one_task(tmp_path: Path, scorer: str, record: dict[str, Any], **settings: Any) -> Any:
    """The benchmark and its only task, for a one-line data file scored by `scorer`."""
    write_jsonl(tmp_path / "data.jsonl", [record])
    settings = {"scorer": scorer, **settings}
    (tmp_path / "data.yaml").write_text(json.dumps(settings), encoding="utf-8")  # JSON is YAML
    benchmark = open_file_benchmark(str(tmp_path / "data.jsonl"))
    return benchmark, benchmark.tasks()[0]


# --- loading ------------------------------------------------------------------------------------


def test_a_plain_jsonl_file_needs_no_settings(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "capitals.jsonl",
        [{"question": "Capital of France?", "answer": "Paris"}, {"question": "2+2?", "answer": 4}],
    )
    benchmark = get_benchmark(f"jsonl:{path}")
    assert isinstance(benchmark, FileBenchmark)
    assert get_benchmark(f"jsonl:{path}") is benchmark
    assert benchmark.name.startswith("capitals-") and len(benchmark.name) == len("capitals-") + 8
    assert [t.id for t in benchmark.tasks()] == [f"{benchmark.name}/1", f"{benchmark.name}/2"]
    assert benchmark.tasks()[1].answer == "4"
    assert benchmark.train_examples() == ()
    assert "capitals.jsonl (2 items)" in benchmark.description
    assert benchmark.reference == f"jsonl:{path.resolve()}"
    assert benchmark.score(benchmark.tasks()[0], "Answer: paris.").value == 1.0


def test_the_name_changes_with_the_data(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", [{"question": "q", "answer": "a"}])
    first = open_file_benchmark(str(path)).name
    assert open_file_benchmark(str(path)).name == first
    write_jsonl(path, [{"question": "q", "answer": "b"}])
    assert open_file_benchmark(str(path)).name != first


def test_a_yaml_file_renames_fields_and_adds_train_and_description(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "pool.jsonl", [{"q": "Capital of Peru?", "a": "Lima"}])
    write_jsonl(tmp_path / "shots.jsonl", [{"q": "Capital of Chile?", "a": "Santiago"}])
    (tmp_path / "bench.yaml").write_text(
        "name: capitals\ndescription: Capital cities of South America.\ndata: pool.jsonl\n"
        "train: shots.jsonl\nquestion_field: q\nanswer_field: a\nscorer: contains\n",
        encoding="utf-8",
    )
    benchmark = get_benchmark(f"jsonl:{tmp_path / 'bench.yaml'}")
    assert benchmark.name.startswith("capitals-")
    assert benchmark.description == "Capital cities of South America."
    (task,) = benchmark.tasks()
    assert (task.question, task.answer) == ("Capital of Peru?", "Lima")
    assert [t.answer for t in benchmark.train_examples()] == ["Santiago"]
    assert benchmark.reference == f"jsonl:{(tmp_path / 'bench.yaml').resolve()}"


def test_a_relative_path_is_stored_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_jsonl(tmp_path / "qa.jsonl", [{"question": "q", "answer": "a"}])
    monkeypatch.chdir(tmp_path)
    benchmark = open_file_benchmark("qa.jsonl")
    monkeypatch.chdir(os.sep)
    assert get_benchmark(benchmark.reference).name == benchmark.name


# --- scorers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scorer", "answer", "reply", "value"),
    [
        ("exact", "Paris", "It is the capital.\nAnswer: PARIS", 1.0),
        ("exact", "Paris", "Answer: Paris, France", 0.0),
        ("numeric", "1,000", "So the total is $1000.00", 1.0),
        ("numeric", 12, "Answer: 13", 0.0),
        ("contains", "Paris", "Answer: the city of Paris, France", 1.0),
        ("contains", "Paris", "Answer: Lyon", 0.0),
        ("regex", r"^(?i:paris)(, france)?$", "Answer: paris, france", 1.0),
        ("regex", r"^(?i:paris)$", "Answer: Paris is the capital", 0.0),
    ],
)
def test_scorers(tmp_path: Path, scorer: str, answer: Any, reply: str, value: float) -> None:
    benchmark, task = one_task(tmp_path, scorer, {"question": "Capital?", "answer": answer})
    result = benchmark.score(task, reply)
    assert result.value == value and result.error_kind is None


def test_votes_count_text_answers_as_their_scorer_compares_them(tmp_path: Path) -> None:
    """A vote among attempts counts text answers as text: "Room 12" and "Floor 12" are two
    answers, not one number; a numeric scorer's answers are counted by their number."""
    for folder in ("text", "number"):
        (tmp_path / folder).mkdir()
    text, task = one_task(tmp_path / "text", "exact", {"question": "Q", "answer": "Paris"})
    key = functools.partial(text.answer_key, task)
    assert key("So it is Paris.\nAnswer: Paris.") == key("answer: **paris**") == "paris"
    assert key("Answer: Room 12") != key("Answer: Floor 12")
    numeric, task = one_task(tmp_path / "number", "numeric", {"question": "Q", "answer": "12"})
    assert numeric.answer_key(task, "Answer: 12.0") == numeric.answer_key(task, "so 12") == "12"


def test_numeric_without_a_number_is_a_parse_error(tmp_path: Path) -> None:
    benchmark, task = one_task(tmp_path, "numeric", {"question": "How many?", "answer": "3"})
    assert benchmark.score(task, "Answer: several").error_kind == "parse"
    assert benchmark.score(task, "  ").details == {"error": "empty"}


@pytest.mark.parametrize("gold", ["B", 1, "Lima"])
@pytest.mark.parametrize(
    ("reply", "value"),
    [("Answer: B", 1.0), ("Answer: (B) Lima", 1.0), ("Answer: lima", 1.0), ("Answer: A", 0.0)],
)
def test_multiple_choice(tmp_path: Path, gold: Any, reply: str, value: float) -> None:
    record = {"question": "Capital of Peru?", "answer": gold, "choices": ["Quito", "Lima", "Cusco"]}
    benchmark, task = one_task(tmp_path, "multiple_choice", record)
    assert task.answer == "B"
    assert task.question.endswith(
        "A. Quito\nB. Lima\nC. Cusco\n\nAnswer with the letter of the correct option."
    )
    assert benchmark.score(task, reply).value == value


def test_multiple_choice_without_choices_field(tmp_path: Path) -> None:
    record = {"question": "Capital of Peru? A) Quito B) Lima", "answer": "B"}
    benchmark, task = one_task(tmp_path, "multiple_choice", record)
    assert task.question == record["question"]
    assert benchmark.score(task, "Answer: B").value == 1.0
    unparsed = benchmark.score(task, "Answer: neither")
    assert (unparsed.value, unparsed.error_kind) == (0.0, "parse")


def test_a_python_function_scorer_beside_the_yaml(tmp_path: Path) -> None:
    (tmp_path / "my_scoring.py").write_text(
        "def overlap(*, prediction, answer):\n"
        "    words = set(answer.lower().split())\n"
        "    return len(words & set(prediction.lower().split())) / len(words)\n",
        encoding="utf-8",
    )
    benchmark, task = one_task(
        tmp_path, "my_scoring:overlap", {"question": "Name two colors.", "answer": "red blue"}
    )
    assert benchmark.score(task, "red and green").value == 0.5
    assert "my_scoring:overlap" in benchmark.description


def test_a_function_scorer_out_of_range_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "bad_scoring.py").write_text(
        "def score(prediction, answer):\n    return 2\n", encoding="utf-8"
    )
    benchmark, task = one_task(tmp_path, "bad_scoring:score", {"question": "q", "answer": "a"})
    with pytest.raises(
        BenchmarkError, match=r"bad_scoring:score returned 2, not a number in \[0, 1\]"
    ):
        benchmark.score(task, "x")


# --- bad input: one clear line each -----------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"question": "q", "answer": "a"}', '{"question": "q",'], r"data\.jsonl:2: invalid JSON"),
        (
            ['{"question": "q", "answer": "a"}', '{"question": "q"}'],
            r"data\.jsonl:2: missing field 'answer'",
        ),
        (['{"answer": "a"}'], r"data\.jsonl:1: missing field 'question'"),
        (['{"question": ["q"], "answer": "a"}'], r"data\.jsonl:1: field 'question' must be text"),
        (
            ['{"question": "q", "answer": null}'],
            r"data\.jsonl:1: field 'answer' must be text or a number",
        ),
        ([], r"data\.jsonl: no questions \(the file is empty\)"),
    ],
)
def test_malformed_data_names_file_line_and_field(
    tmp_path: Path, lines: list[str], message: str
) -> None:
    (tmp_path / "data.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(BenchmarkError, match=message):
        get_benchmark(f"jsonl:{tmp_path / 'data.jsonl'}")


@pytest.mark.parametrize(
    ("settings", "record", "message"),
    [
        ("scorer: fuzzy", {}, r"data\.yaml: unknown scorer 'fuzzy' \(choose exact, numeric"),
        ("scorer: no_such_module:f", {}, r"cannot import scorer module 'no_such_module'"),
        ("scorer: json:no_such_function", {}, r"scorer module 'json' has no no_such_function\(\)"),
        (
            "scorer: numeric",
            {"answer": "many"},
            r"data\.jsonl:1: field 'answer' must hold a number",
        ),
        (
            "scorer: regex",
            {"answer": "(unclosed"},
            r"data\.jsonl:1: field 'answer' is not a valid regex",
        ),
        ("scorer: multiple_choice", {"answer": "Lima"}, r"must be a letter A-Z without choices"),
        ("scorer: multiple_choice", {"choices": ["x"]}, r"'choices' must be a list of 2 to 26"),
        ("colour: blue", {}, r"data\.yaml: unknown setting\(s\) colour \(known: name"),
        ("scorer: [exact]", {}, r"data\.yaml: scorer must be a non-empty string"),
        ("scorer: 'exact", {}, r"data\.yaml: invalid YAML"),
        ("- exact", {}, r"data\.yaml: expected a mapping of settings"),
        ("train: missing.jsonl", {}, r"cannot read .*missing\.jsonl"),
        ("data: other.jsonl", {}, r"'data' belongs in a YAML given as jsonl:FILE\.yaml"),
    ],
)
def test_bad_settings_are_one_clear_error(
    tmp_path: Path, settings: str, record: dict[str, Any], message: str
) -> None:
    write_jsonl(tmp_path / "data.jsonl", [{"question": "q", "answer": "a", **record}])
    (tmp_path / "data.yaml").write_text(settings + "\n", encoding="utf-8")
    with pytest.raises(BenchmarkError, match=message):
        open_file_benchmark(str(tmp_path / "data.jsonl"))


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match=r"cannot read .*nowhere\.jsonl"):
        get_benchmark(f"jsonl:{tmp_path / 'nowhere.jsonl'}")
    with pytest.raises(BenchmarkError, match=r"cannot read .*nowhere\.yaml"):
        get_benchmark(f"jsonl:{tmp_path / 'nowhere.yaml'}")
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(BenchmarkError, match=r"binary\.jsonl:1: not UTF-8 text \(byte 0xff at 0\)"):
        get_benchmark(f"jsonl:{tmp_path / 'binary.jsonl'}")


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_a_line_ends_at_a_newline_only(tmp_path: Path, separator: str) -> None:
    """JSON allows these raw in a string, and `str.splitlines` would end a line at each."""
    question = f"First line{separator}second line?"
    raw = json.dumps({"question": question, "answer": "a"}, ensure_ascii=False)
    assert separator in raw
    (tmp_path / "data.jsonl").write_text(raw + "\r\n", encoding="utf-8")  # CRLF is fine too
    (task,) = open_file_benchmark(str(tmp_path / "data.jsonl")).tasks()
    assert task.question == question


def test_a_task_from_the_file_is_a_plain_task(tmp_path: Path) -> None:
    benchmark, task = one_task(tmp_path, "exact", {"question": "q", "answer": "a"})
    assert isinstance(task, Task) and task.metadata["line"] == 1
    assert benchmark.task(task.id) == task
