"""HumanEval: packaged data, code extraction from replies, and pass@1 scoring in the sandbox."""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from importlib.resources import files
from pathlib import Path

import pytest

from agentdesign.components import SandboxLimits, current_isolation
from agentdesign.evaluators import BenchmarkError, Score, Task, get_benchmark
from agentdesign.evaluators import HumanEval as ExportedHumanEval
from agentdesign.evaluators._humaneval import (
    HumanEval,
    build_program,
    extract_code,
    load_humaneval_tasks,
)

DATA_SHA256 = "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef"


@pytest.fixture(scope="module")
def humaneval() -> HumanEval:
    benchmark = get_benchmark("humaneval")
    assert isinstance(benchmark, HumanEval)
    return benchmark


@pytest.fixture(scope="module")
def task0(humaneval: HumanEval) -> Task:
    return humaneval.task("humaneval/0")


# --- data ---------------------------------------------------------------------------------------


def test_packaged_data_is_the_upstream_file() -> None:
    folder = files("agentdesign.evaluators") / "data" / "humaneval"
    data = (folder / "HumanEval.jsonl.gz").read_bytes()
    assert hashlib.sha256(data).hexdigest() == DATA_SHA256
    assert "MIT" in (folder / "LICENSE").read_text(encoding="utf-8")


def test_tasks(humaneval: HumanEval, task0: Task) -> None:
    tasks = humaneval.tasks()
    assert [t.id for t in tasks] == [f"humaneval/{n}" for n in range(164)]
    assert humaneval.train_examples() == ()
    assert task0.metadata["task_id"] == "HumanEval/0"
    assert task0.metadata["entry_point"] == "has_close_elements"
    assert "def check(candidate)" in task0.metadata["test"]
    assert task0.question.endswith(f"```python\n{task0.metadata['prompt']}```")
    assert "```python code block" in task0.question
    assert task0.answer == task0.metadata["prompt"] + task0.metadata["canonical_solution"]


def test_registered_and_exported(humaneval: HumanEval) -> None:
    assert ExportedHumanEval is HumanEval
    assert "pass@1" in humaneval.description
    assert "unit tests" in humaneval.description


def test_malformed_files_raise(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(b"not gzip")
    with pytest.raises(BenchmarkError, match="cannot read"):
        load_humaneval_tasks(broken)
    record = {"task_id": "HumanEval/0", "prompt": "x = 1\n", "entry_point": "f"}
    record |= {"test": "", "canonical_solution": ""}
    missing_def = tmp_path / "missing_def.jsonl.gz"
    missing_def.write_bytes(gzip.compress(json.dumps(record).encode()))
    with pytest.raises(BenchmarkError, match=r"missing_def.jsonl.gz:1: the prompt does not define"):
        load_humaneval_tasks(missing_def)
    no_test = tmp_path / "no_test.jsonl.gz"
    no_test.write_bytes(gzip.compress(json.dumps({"task_id": "HumanEval/0"}).encode()))
    with pytest.raises(BenchmarkError, match="needs string fields"):
        load_humaneval_tasks(no_test)


# --- scoring ------------------------------------------------------------------------------------


def test_all_canonical_solutions_pass(humaneval: HumanEval) -> None:
    # Half as the authors complete the prompt (body only), half as a model replies (a fenced
    # complete function); each path on 82 problems. Two at a time (the sandbox is safe to call
    # from several threads), as a run at concurrency 2 scores them; each takes its own time,
    # about 12 s in all on 2 busy cores.
    def scored(index: int, task: Task) -> tuple[int, Task, Score, float]:
        if index % 2 == 0:
            prediction = task.metadata["canonical_solution"]
        else:
            prediction = f"Here is the function:\n\n```python\n{task.answer}```\n"
        started = time.monotonic()
        score = humaneval.score(task, prediction)
        return index, task, score, time.monotonic() - started

    tasks = humaneval.tasks()
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(scored, range(len(tasks)), tasks))
    failures = {}
    for index, task, score, _ in results:
        if score.value != 1.0:
            failures[task.id] = score.details
        assert score.details["mode"] == ("body" if index % 2 == 0 else "function")
    assert failures == {}
    assert sum(seconds for *_, seconds in results) < 60


def test_votes_count_programs_not_their_last_number(humaneval: HumanEval, task0: Task) -> None:
    fenced = "Here:\n```python\ndef has_close_elements(numbers, threshold):\n    return 1\n```"
    spaced = "```python\ndef has_close_elements(numbers,  threshold):\n\n    return 1\n```"
    other = (
        "```python\ndef has_close_elements(numbers, threshold):\n    return len(numbers) > 1\n```"
    )
    key = functools.partial(humaneval.answer_key, task0)
    assert key(fenced) == key(spaced) != key(other)  # both end in 1; only spaces tell two apart
    assert key("I cannot help with that.") == ""  # no program: no vote


def test_a_wrong_solution_fails(humaneval: HumanEval, task0: Task) -> None:
    score = humaneval.score(
        task0, "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"
    )
    assert score.value == 0.0
    assert score.details["kind"] == "error"
    assert "AssertionError" in score.details["stderr"]
    assert score.details["isolation"] == current_isolation().level


def test_an_endless_solution_times_out(task0: Task) -> None:
    quick = HumanEval(limits=SandboxLimits(wall_s=1.5, cpu_s=1.5))
    score = quick.score(task0, "    while True:\n        pass\n")
    assert score.value == 0.0
    assert score.details["kind"] == "timeout"


def test_a_solution_that_escapes_is_a_violation(humaneval: HumanEval, task0: Task) -> None:
    score = humaneval.score(task0, "    import os\n    os.system('true')\n    return True\n")
    assert score.value == 0.0
    assert score.details["kind"] == "violation"
    assert score.details["detail"].startswith("os.system")


def test_empty_and_codeless_replies_score_zero(humaneval: HumanEval, task0: Task) -> None:
    assert humaneval.score(task0, "  \n").details == {"error": "empty"}
    assert humaneval.score(task0, "I am not sure how to do this.").details == {"error": "no_code"}


def test_a_full_function_keeps_the_prompts_helpers(humaneval: HumanEval) -> None:
    # decode_cyclic's prompt defines encode_cyclic first; a reply with only decode_cyclic works.
    task = humaneval.task("humaneval/38")
    reply = "```python\ndef decode_cyclic(s: str):\n    return encode_cyclic(encode_cyclic(s))\n```"
    assert humaneval.score(task, reply).value == 1.0


# --- extraction ---------------------------------------------------------------------------------

FUNCTION = "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize(
    "reply, expected",
    [
        (f"```python\n{FUNCTION}```", FUNCTION),
        (f"Sure! Here it is:\n\n```python\n{FUNCTION}```\n\nIt adds.", FUNCTION),
        (f"```Python3\n{FUNCTION}```", FUNCTION),
        (f"```\n{FUNCTION}```", FUNCTION),
        # Cut off by the token limit: no closing fence.
        (f"```python\n{FUNCTION}", FUNCTION),
        # A usage block after the solution, and a corrected version: the last definition wins.
        (f"```python\n{FUNCTION}```\nUsage:\n```python\nprint(add(1, 2))\n```", FUNCTION),
        (
            "```python\ndef add(a, b):\n    return a - b\n```\nOops, fixed:\n"
            f"```python\n{FUNCTION}```",
            FUNCTION,
        ),
        # Output blocks are not code when a Python block exists.
        (f"```text\n3\n```\n```python\n{FUNCTION}```", FUNCTION),
        # Without a definition, the longest block (a body).
        ("```python\n    return a + b\n```\n```python\nx\n```", "return a + b\n"),
        # A block indented as a whole inside a markdown list.
        ("1. The code:\n   ```python\n   def add(a, b):\n       return a + b\n   ```", FUNCTION),
        # Unfenced: the function with its imports and helpers, without prose or demo calls.
        (f"Here is my solution.\n\n{FUNCTION}\nThis returns the sum.", FUNCTION),
        (
            f"Solution:\nimport math\n\nLIMIT = 10\n\n@cache\n{FUNCTION}\n"
            "def helper():\n    pass\n\nprint(add(1, 2))\nDone.",
            f"import math\n\nLIMIT = 10\n\n@cache\n{FUNCTION}\ndef helper():\n    pass\n",
        ),
        # Unfenced bodies: indented (ended at column 0, as HumanEval stops completions) or not.
        ("    return a + b\n\ndef main():\n    pass\n", "    return a + b\n"),
        (
            "The body is:\n    total = a + b\n    return total\n",
            "    total = a + b\n    return total\n",
        ),
        ("Just do this:\nreturn a + b\nThat is all.", "return a + b\n"),
        ("I cannot help with that.", ""),
    ],
)
def test_extract_code(reply: str, expected: str) -> None:
    assert extract_code(reply, "add") == expected


def test_build_program_modes(task0: Task) -> None:
    prompt, test = task0.metadata["prompt"], task0.metadata["test"]
    tail = f"\n{test}\ncheck(has_close_elements)\n"
    body = "    return True\n"
    assert build_program(task0, body) == (prompt + body + tail, "body")
    assert build_program(task0, "return True\n") == (prompt + body + tail, "body")
    function = "def has_close_elements(numbers, threshold):\n    return True\n"
    header = "from typing import List\n\n\n"
    assert build_program(task0, function) == (header + function + tail, "function")
