"""Retrieval and what an agent remembers: training examples, BM25 ranking, lessons learned.

Standard library only, like every module export inlines.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BM25",
    "Example",
    "Lesson",
    "MemoryStore",
    "Recall",
]


@dataclass(frozen=True)
class Example:
    """A solved item shown to the model: question, optional worked solution, final answer."""

    question: str
    answer: str
    rationale: str = ""


_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    """Okapi BM25 ranking over a fixed list of texts: offline, deterministic, standard library only.

    Ties keep the documents' order, so the same query over the same texts always ranks the same way.
    """

    def __init__(self, documents: Sequence[str], *, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.size = len(documents)
        counts = [Counter(_words(doc)) for doc in documents]
        self.lengths = [sum(c.values()) for c in counts]
        self.mean_length = sum(self.lengths) / self.size if self.size else 0.0
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for index, doc in enumerate(counts):
            for word, count in doc.items():
                self.postings.setdefault(word, []).append((index, count))

    def top(self, query: str, k: int) -> list[int]:
        """Indices of the (at most) k documents that best match `query`, best first."""
        scores: dict[int, float] = {}
        for word in sorted(set(_words(query))):
            postings = self.postings.get(word, [])
            idf = math.log(1 + (self.size - len(postings) + 0.5) / (len(postings) + 0.5))
            for index, count in postings:
                norm = self.k1 * (1 - self.b + self.b * self.lengths[index] / self.mean_length)
                scores[index] = scores.get(index, 0.0) + idf * count * (self.k1 + 1) / (
                    count + norm
                )
        return sorted(scores, key=lambda index: (-scores[index], index))[:k]


@dataclass(frozen=True)
class Lesson:
    """A reviewer's complaint about an earlier task's solution, kept for similar later tasks."""

    question: str
    text: str


@dataclass(frozen=True)
class Recall:
    """What memory adds to one task's prompts: worked examples and lessons from earlier tasks."""

    examples: tuple[Example, ...] = ()
    lessons: tuple[Lesson, ...] = ()


class MemoryStore:
    """What one agent remembers across its tasks: the training items its memory kept, and lessons.

    Shared by the tasks an agent runs, possibly from several threads at once.
    """

    def __init__(self, examples: Sequence[Example]) -> None:
        self.examples = tuple(examples)
        self._lessons: list[Lesson] = []
        self._index: BM25 | None = None
        self._lock = threading.Lock()

    def similar_examples(self, question: str, k: int) -> tuple[Example, ...]:
        """The k examples whose questions best match `question` (never the question itself)."""
        with self._lock:
            if self._index is None:
                self._index = BM25([ex.question for ex in self.examples])
            index = self._index
        ranked = (self.examples[i] for i in index.top(question, k + 1))
        return tuple(ex for ex in ranked if ex.question != question)[:k]

    def similar_lessons(self, question: str, k: int) -> tuple[Lesson, ...]:
        with self._lock:
            lessons = tuple(self._lessons)
        if not lessons:
            return ()
        return tuple(lessons[i] for i in BM25([ls.question for ls in lessons]).top(question, k))

    def add_lesson(self, lesson: Lesson) -> None:
        with self._lock:
            self._lessons.append(lesson)

    @property
    def lessons(self) -> tuple[Lesson, ...]:
        with self._lock:
            return tuple(self._lessons)
