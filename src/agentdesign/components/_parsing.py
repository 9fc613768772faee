"""Answer parsing: the final answer in a model's output, and a key under which equal answers
agree.

Standard library only, like every module export inlines.
"""

from __future__ import annotations

import re

__all__ = [
    "answer_key",
    "extract_answer",
    "output_key",
]


_BOXED = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")
_ANSWER_LINE = re.compile(r"(?:final answer|answer)\s*(?:is)?\s*[:=]\s*(.+)", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def extract_answer(text: str) -> str:
    """The final answer in a model's output, however a small model chose to mark it.

    Tries, in order: the last \\boxed{...}, the last "Answer: ..." line, the last "#### ..." line,
    and finally the last non-empty line. Markdown emphasis and a trailing full stop are removed.
    """
    cleaned = text.replace("```", "\n").strip()
    candidate = ""
    boxed = _BOXED.findall(cleaned)
    if boxed:
        candidate = boxed[-1]
    else:
        answer_lines = [m.group(1) for m in _ANSWER_LINE.finditer(cleaned)]
        hash_lines = re.findall(r"####\s*(.+)", cleaned)
        lines = [line.strip() for line in cleaned.splitlines() if line.strip()]
        if answer_lines:
            candidate = answer_lines[-1]
        elif hash_lines:
            candidate = hash_lines[-1]
        elif lines:
            candidate = lines[-1]
    candidate = candidate.replace("**", "").replace("$", "").strip()
    return candidate.rstrip(".").strip()


def answer_key(answer: str) -> str:
    """A normalized form of an answer, so that votes for "1,000" and "1000.0" agree."""
    numbers = _NUMBER.findall(answer)
    if numbers:
        value = float(numbers[-1].replace(",", ""))
        return str(int(value)) if value.is_integer() else repr(value)
    return " ".join(answer.lower().split())


def output_key(output: str) -> str:
    """The key under which two outputs give the same answer, where the task names none: the
    `answer_key` of the `extract_answer`; empty for an output without an answer (it gets no vote).
    A benchmark whose answers are not numbers gives its own (`Benchmark.answer_key`)."""
    return answer_key(extract_answer(output))
