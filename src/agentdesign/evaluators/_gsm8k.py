"""GSM8K: grade-school math word problems, scored by exact match of the final number.

The data ships with the package (evaluators/data/gsm8k, MIT, from openai/grade-school-math). The
test split (1,319 problems) is the pool for search and holdout; the train split (7,473) supplies
few-shot examples, so no task a search is scored on ever appears in a prompt.
"""

from __future__ import annotations

import functools
import os
import re
from collections import deque
from collections.abc import Iterator, Sequence
from decimal import Decimal
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import ClassVar

from agentdesign.evaluators._benchmark import (
    Benchmark,
    BenchmarkError,
    Score,
    Task,
    load_jsonl,
    register_benchmark,
)

__all__ = ["GSM8K", "extract_final_number", "load_gsm8k_tasks"]

# Scores compare numerically; this absorbs "0.333333" style rounding noise, nothing more.
_TOLERANCE = Decimal("1e-6")

# A number as models write it: optional minus (not the minus of "5-3"), thousands commas, decimals,
# a bare ".5", and an optional "/denominator". Not glued to a word ("python3", "x2") or a number.
_NUMBER = re.compile(
    r"(?<![^\W_])(?<!\.)(-?)"
    r"((?:[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+)"
    r"(?:/([0-9]+(?:\.[0-9]+)?))?"
)
_GOLD = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_LETTER = re.compile(r"[A-Za-z]")
_DIGIT = re.compile(r"[0-9]")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
# "answer:" opening a line, a capitalized "Answer:" label anywhere, or "the answer is"; but not
# prose such as "to find the answer: first 3 + 4 ...".
_ANSWER = re.compile(
    r"^[ \t*#_>-]*(?i:(?:the\s+)?(?:final\s+)?answer)\b[\s*_]*:"
    r"|\b(?:Answer|ANSWER)\b[\s*_]*:"
    r"|(?i:\banswer\b[\s*_]*is\b)",
    re.MULTILINE,
)
# A leading "x = 5 + 3 =" in an answer line: the result is what follows the last "=".
# Possessive quantifiers keep this linear on long lines.
_EQUATION_PREFIX = re.compile(r"[^0-9=]*+[0-9.,\s+\-*/\u00d7\u00f7\u00b7()^]*+=")
_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_CALCULATOR = re.compile(r"<<[^<>]*>>")
_REPLACEMENTS = (
    ("\u2212", "-"),
    ("\\times", "*"),
    ("\\cdot", "*"),
    ("\\div", "/"),
    ("{,}", ","),
    ("\\,", ""),
    ("$", ""),
)


def extract_final_number(text: str) -> str | None:
    """The final numeric answer in a model's output, normalized ("1,234.50" -> "1234.5").

    Small models mark answers inconsistently, so this is lenient: the last \\boxed{...} wins, then
    the last "#### <number>" line, then the last "Answer:" line or "answer is"; in the marked text
    a leading equation is skipped ("Answer: 5 + 3 = 8" -> "8"). Without a usable marker, the last
    number in the text. $, commas, % and units are ignored; "3/4" and \\frac{3}{4} become "0.75".
    """
    cleaned = _FRAC.sub(r"\1/\2", text)
    for old, new in _REPLACEMENTS:
        cleaned = cleaned.replace(old, new)
    for segment in _marked_segments(cleaned):
        while (equation := _EQUATION_PREFIX.match(segment)) is not None:
            segment = segment[equation.end() :]
        match = _NUMBER.search(segment)
        if match is not None:
            return _match_value(match)
    last = _last_match(_NUMBER, cleaned)
    return None if last is None else _match_value(last)


def _marked_segments(text: str) -> Iterator[str]:
    """The text each explicit answer marker points at, most explicit marker first."""
    boxed = _last_match(_BOXED, text)
    if boxed is not None:
        yield _braced(text, boxed.end())
    # "#### 18" marks an answer only on a line without letters: "#### Step 1" is a markdown heading.
    for line in reversed(text.splitlines()):
        after = line.rpartition("####")[2]
        if after != line and _LETTER.search(after) is None and _DIGIT.search(after) is not None:
            yield after
            break
    found = _last_match(_ANSWER, text)
    if found is not None:
        yield text[found.end() :].lstrip().partition("\n")[0]


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match: a reply that restates or corrects its answer means the later one."""
    last = deque(pattern.finditer(text), maxlen=1)
    return last[0] if last else None


def _braced(text: str, start: int) -> str:
    """The contents of the brace group opened just before `start`, or the rest if unclosed."""
    depth = 1
    for index in range(start, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return text[start:index]
    return text[start:]


def _match_value(match: re.Match[str]) -> str:
    sign, digits, denominator = match.groups()
    value = Decimal(digits.replace(",", ""))
    if denominator is not None and Decimal(denominator) != 0:
        value /= Decimal(denominator)
    return _format(-value if sign else value)


def _format(value: Decimal) -> str:
    """One spelling per number, so "42", "42.0" and "-0" compare and cache as equal strings."""
    return "0" if value == 0 else format(value.normalize(), "f")


def load_gsm8k_tasks(path: str | os.PathLike[str] | Traversable, *, split: str) -> list[Task]:
    """Tasks from a JSONL file in GSM8K's format (other GSM8K-style sets use it too).

    Task ids are "gsm8k/<split>/<0-based line index>"; metadata holds the reference `solution`
    and a `rationale` (the solution without calculator annotations and final line) for few-shot.
    """
    tasks = []
    for index, record in enumerate(load_jsonl(path)):
        where = f"{path}:{index + 1}"
        question, solution = record.get("question"), record.get("answer")
        if not isinstance(question, str) or not isinstance(solution, str):
            raise BenchmarkError(f"{where}: needs string fields 'question' and 'answer'")
        rationale, hashes, final = solution.rpartition("####")
        gold = final.strip().replace(",", "")
        if not hashes or _GOLD.fullmatch(gold) is None:
            raise BenchmarkError(f"{where}: answer must end with '#### <number>'")
        tasks.append(
            Task(
                id=f"gsm8k/{split}/{index}",
                question=question,
                answer=_format(Decimal(gold)),
                metadata={
                    "solution": solution,
                    "rationale": _CALCULATOR.sub("", rationale).strip(),
                },
            )
        )
    return tasks


@functools.cache
def _packaged_split(split: str) -> tuple[Task, ...]:
    path = files("agentdesign.evaluators") / "data" / "gsm8k" / f"{split}.jsonl"
    return tuple(load_gsm8k_tasks(path, split=split))


@register_benchmark
class GSM8K(Benchmark):  # type: ignore[misc, unused-ignore]  # see BenchmarkError
    """OpenAI's GSM8K test set as the task pool, its train set as few-shot examples."""

    name: ClassVar[str] = "gsm8k"
    description: ClassVar[str] = (
        "GSM8K: grade-school math word problems in English needing 2 to 8 steps of basic "
        "arithmetic. The answer is a single number, usually an integer. A reply scores 1 if its "
        "final number (after 'Answer:' or '####', inside \\boxed{}, or else the last number) "
        "equals the gold answer, otherwise 0; commas, $, % and units are ignored."
    )

    def tasks(self) -> Sequence[Task]:
        return _packaged_split("test")

    def train_examples(self) -> Sequence[Task]:
        return _packaged_split("train")

    def score(self, task: Task, prediction: str) -> Score:
        if not prediction.strip():
            return Score(0.0, {"error": "empty"})
        gold = extract_final_number(task.answer)
        if gold is None:
            raise BenchmarkError(f"task {task.id!r} has a non-numeric gold answer {task.answer!r}")
        predicted = extract_final_number(prediction)
        if predicted is None:
            return Score(
                0.0, {"prediction": None, "gold": gold, "error": "no_number"}, error_kind="parse"
            )
        correct = abs(Decimal(predicted) - Decimal(gold)) < _TOLERANCE
        return Score(1.0 if correct else 0.0, {"prediction": predicted, "gold": gold})
