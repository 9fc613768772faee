"""Prompt refinement: a model rewrites one prompt of a good design from the tasks it failed.

The value model sees a design's components and parameters, not what its prompts say, so it cannot
screen a rewritten prompt: a refinement is proposed as it is and the real benchmark judges it. A
rewrite must keep the prompt's output contract (its quoted format lines such as 'Answer: <answer>'
and its code fences), which the workflow parses; a rewrite that drops any of it is refused, and so
is one that copies a shown task's question or gold answer into the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from agentdesign.components import (
    AgentDesignError,
    AgentSpec,
    ChatModel,
    Completion,
    LLMCallError,
)
from agentdesign.search.space import prompt_params

__all__ = ["Failure", "PromptRefiner", "Refinement"]

_QUOTED = re.compile(r"'[^'\n]+'")
_MARKERS = ("```python", "Answer:")
_FENCE = re.compile(r"^```([a-z]*)\n(.*)\n```$", re.DOTALL)

_REFINER_SYSTEM = (
    "You improve the prompts of an LLM agent. You are shown one of its prompts and tasks the "
    "agent got wrong with it. Write an improved version of the prompt that would help the agent "
    "get such tasks right: name the kind of mistake to avoid, stay short and general, do not "
    "mention the particular tasks. Keep every phrase in single quotes and every ```python "
    "exactly as the original has it: the agent's replies are parsed by them. Reply with the new "
    "prompt only."
)


@dataclass(frozen=True)
class Failure:
    """A task a design got wrong: what was asked, what the agent said, what was expected."""

    question: str
    output: str
    expected: str


@dataclass(frozen=True)
class Refinement:
    """A design with one prompt rewritten; `param` is its nested name (`reasoning__instruction`)."""

    spec: AgentSpec
    param: str


class PromptRefiner:
    """Rewrites one prompt of a design with one model call, from up to `n_failures` failed tasks.

    A strategy holding it makes every `every`-th proposal a refinement. `failures` tells which
    tasks a design failed (the search loop reads them from the archive); `on_start` is called
    before each call and `on_call` receives every completion, so the run shows the wait and
    records what searching itself cost. A call that fails, or a rewrite that
    is empty, unchanged, longer than `max_chars` or breaks the prompt's output contract, gives no
    refinement.
    """

    def __init__(
        self,
        *,
        llm: ChatModel,
        model: str,
        failures: Callable[[AgentSpec], Sequence[Failure]],
        on_call: Callable[[Completion], None] | None = None,
        on_start: Callable[[], None] | None = None,
        every: int = 4,
        n_failures: int = 3,
        max_tokens: int = 256,
        temperature: float = 0.7,
        max_chars: int = 1200,
    ) -> None:
        if every < 1:
            raise AgentDesignError(f"refinement every n-th proposal needs n >= 1, got {every}")
        self.llm = llm
        self.model = model
        self.failures = failures
        self.on_call = on_call
        self.on_start = on_start
        self.every = every
        self.n_failures = n_failures
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.max_chars = max_chars

    def request_bound(self) -> tuple[int, int]:
        """The most tokens one refinement call can use, prompt and reply: a prompt at the longest
        a rewrite may make it, `n_failures` failures at their clips (about four characters a
        token), the reply at its cap. A cost estimate prices refinements by it."""
        longest = Failure("x" * _QUESTION_CHARS, "x" * _QUESTION_CHARS, "x" * _EXPECTED_CHARS)
        request = _request("x" * self.max_chars, [longest] * self.n_failures)
        return (len(_REFINER_SYSTEM) + len(request)) // 4, self.max_tokens

    def failures_of(self, spec: AgentSpec) -> list[Failure]:
        """The failed tasks a refinement of `spec` would learn from; none if it has no prompt."""
        return list(self.failures(spec)) if prompt_params(spec, code=False) else []

    def refine(
        self, spec: AgentSpec, failed: Sequence[Failure], rng: np.random.Generator
    ) -> Refinement | None:
        """`spec` with one of its prompts, chosen by `rng`, rewritten from `failed` (see
        `failures_of`); None without failures or prompts, or if the rewrite failed."""
        prompts = prompt_params(spec, code=False)
        if not failed or not prompts:
            return None
        names = sorted(prompts)
        param = names[int(rng.integers(len(names)))]
        shown = [failed[int(i)] for i in sorted(rng.permutation(len(failed))[: self.n_failures])]
        if self.on_start is not None:
            self.on_start()
        try:
            completion = self.llm.complete(
                model=self.model,
                messages=[
                    {"role": "system", "content": _REFINER_SYSTEM},
                    {"role": "user", "content": _request(prompts[param], shown)},
                ],
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                seed=int(rng.integers(2**31)),
            )
        except LLMCallError:
            return None
        if self.on_call is not None:
            self.on_call(completion)
        rewrite = _clean(completion.text)
        original = prompts[param]
        if not acceptable_rewrite(original, rewrite, self.max_chars) or leaks_failures(
            original, rewrite, shown
        ):
            return None
        return Refinement(spec=spec.set_params(**{param: rewrite}), param=param)


_QUESTION_CHARS = 600  # of a failed task's question, and of the agent's reply, shown
_EXPECTED_CHARS = 200  # of its expected answer


def _request(prompt: str, failures: Sequence[Failure]) -> str:
    shown = "\n\n".join(
        f"Task {n}: {clip(f.question, _QUESTION_CHARS)}\nAgent's reply: "
        f"{clip(f.output, _QUESTION_CHARS)}\nExpected answer: {clip(f.expected, _EXPECTED_CHARS)}"
        for n, f in enumerate(failures, start=1)
    )
    return f"The prompt:\n<<<\n{prompt}\n>>>\n\nTasks it got wrong:\n\n{shown}\n\nThe new prompt:"


def clip(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def _clean(text: str) -> str:
    """The rewrite without what small models wrap it in: a fence, the <<< >>> markers, quotes."""
    text = text.strip()
    fenced = _FENCE.match(text)
    # A bare fence wraps the reply; a language fence is the prompt's own code block, unless the
    # prompt inside has no code block of its own.
    if fenced and (not fenced.group(1) or "```python" not in fenced.group(2)):
        text = fenced.group(2).strip()
    text = text.removeprefix("<<<").removesuffix(">>>").strip()
    if len(text) > 1 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    return text


def acceptable_rewrite(original: str, rewrite: str, max_chars: int) -> bool:
    if not rewrite or rewrite == original or len(rewrite) > max_chars:
        return False
    contract = set(_QUOTED.findall(original)) | {m for m in _MARKERS if m in original}
    return all(phrase in rewrite for phrase in contract)


_WORDS = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
_LEAK_NGRAM = 6  # this many words in a row, shared with a shown question, is a copy of it


def leaks_failures(original: str, rewrite: str, shown: Sequence[Failure]) -> bool:
    """Whether the rewrite carries a shown task into the prompt: any of its gold answers (as a
    whole word or number, unless the original prompt had it too) or a run of `_LEAK_NGRAM` words
    of its question. A prompt that holds them would score the tasks it learnt from by heart."""
    words = _WORDS.findall(rewrite.lower())
    before = _WORDS.findall(original.lower())
    grams = {tuple(words[i : i + _LEAK_NGRAM]) for i in range(len(words) - _LEAK_NGRAM + 1)}
    for failure in shown:
        answer = _WORDS.findall(failure.expected.lower())
        if answer and _contains_run(words, answer) and not _contains_run(before, answer):
            return True
        question = _WORDS.findall(failure.question.lower())
        if any(
            tuple(question[i : i + _LEAK_NGRAM]) in grams
            for i in range(len(question) - _LEAK_NGRAM + 1)
        ):
            return True
    return False


def _contains_run(words: Sequence[str], run: Sequence[str]) -> bool:
    return any(list(words[i : i + len(run)]) == list(run) for i in range(len(words) - len(run) + 1))
