"""The functional components plugged into a workflow's roles: planning, reasoning, memory and
reflection (the tools are in `_tools.py`). Standard library only, like the runtime: export copies
this file verbatim.

Each docstring's first line says what the component does and what it costs, as `agentdesign
components` shows it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from agentdesign.components._registry import param, register
from agentdesign.components._slots import Attempt, Memory, Planning, Reasoning, Reflection, Solver
from agentdesign.components.library._memory import Example, Lesson, MemoryStore, Recall

# --- planning: context worked out before solving -------------------------------------------------


@register
@dataclass(frozen=True, kw_only=True)
class NoPlanning(Planning):
    """Solves straight away: no extra call."""

    name: ClassVar[str] = "none"


@dataclass(frozen=True, kw_only=True)
class _PlannerCall(Planning):
    """A planning component that is one model call; its answer goes under `label`."""

    label: ClassVar[str]
    instruction: str
    max_tokens: int = param(128, low=32, high=512, log=True, doc="planner's completion token cap")
    temperature: float = param(
        0.0, low=0.0, high=1.2, searchable=False, doc="planner's sampling temperature"
    )

    def plan(self, solver: Solver, question: str, *, seed: int) -> str:
        messages = [
            {"role": "system", "content": self.instruction},
            {"role": "user", "content": question},
        ]
        text = solver.call(
            "planner",
            messages,
            temperature=self.temperature,
            seed=seed,
            max_tokens=self.max_tokens,
        ).strip()
        return f"{self.label}:\n{text}" if text else ""


@register
@dataclass(frozen=True, kw_only=True)
class PlanAndSolve(_PlannerCall):
    """Asks for a short numbered plan first, then solves following it: one extra, short call."""

    name: ClassVar[str] = "plan_and_solve"
    label: ClassVar[str] = "Plan"
    instruction: str = param(
        "Devise a short numbered plan (at most five steps) for solving the problem. Do not carry "
        "out the plan and do not give the answer.",
        doc="planner's system instruction",
    )


@register
@dataclass(frozen=True, kw_only=True)
class StepBack(_PlannerCall):
    """Asks for the principle behind the problem first (step-back prompting): one extra call."""

    name: ClassVar[str] = "step_back"
    label: ClassVar[str] = "Underlying principle"
    instruction: str = param(
        "Take a step back: state the general principle, formula or method this problem rests on, "
        "in one or two sentences. Do not solve the problem.",
        doc="planner's system instruction",
    )


# --- reasoning: how the solver is asked to answer ------------------------------------------------


@register
@dataclass(frozen=True, kw_only=True)
class Direct(Reasoning):
    """Asks for the final answer alone: one short call, cheapest, weakest on multi-step problems."""

    name: ClassVar[str] = "direct"
    instruction: str = param(
        "Reply with only the final answer, on one line, as 'Answer: <answer>'.",
        doc="system instruction",
    )
    max_tokens: int = param(64, low=16, high=256, log=True, doc="completion token cap")


@register
@dataclass(frozen=True, kw_only=True)
class ChainOfThought(Reasoning):
    """Asks the model to reason step by step first: several times the tokens of `direct`."""

    name: ClassVar[str] = "cot"
    instruction: str = param(
        "Solve the problem step by step, briefly and in plain text. "
        "End with a final line 'Answer: <answer>'.",
        doc="system instruction",
    )
    max_tokens: int = param(512, low=128, high=1024, log=True, doc="completion token cap")

    def render_example(self, example: Example) -> str:
        if not example.rationale:
            return f"Answer: {example.answer}"
        return f"{example.rationale}\nAnswer: {example.answer}"


@register
@dataclass(frozen=True, kw_only=True)
class Scratchpad(ChainOfThought):
    """Asks for labelled sections (Given, Steps, Check, Answer): chain of thought with a self-check,
    a few more tokens than `cot`."""

    name: ClassVar[str] = "scratchpad"
    instruction: str = param(
        "Work in four labelled sections:\nGiven: the facts and what is asked, briefly.\n"
        "Steps: numbered steps of the solution.\nCheck: a quick check of the result against the "
        "facts.\nAnswer: <answer>",
        doc="system instruction",
    )

    def render_example(self, example: Example) -> str:
        # Training items carry worked steps only; no Given or Check is invented for them.
        steps = f"Steps:\n{example.rationale}\n" if example.rationale else ""
        return f"{steps}Answer: {example.answer}"


# --- memory: what the model is shown besides the question ----------------------------------------


@register
@dataclass(frozen=True, kw_only=True)
class NoMemory(Memory):
    """Shows the question alone: no extra prompt tokens."""

    name: ClassVar[str] = "none"


@register
@dataclass(frozen=True, kw_only=True)
class FewShot(Memory):
    """Shows the same k solved training items before every question; costs their tokens per call."""

    name: ClassVar[str] = "few_shot"
    shows_examples: ClassVar[bool] = True
    k: int = param(3, low=1, high=8, doc="number of examples")
    seed: int = param(0, searchable=False, doc="which examples are drawn from the pool")

    def select(self, pool: Sequence[Example]) -> tuple[Example, ...]:
        # A fixed, seed-determined choice: a deterministic shuffle keyed on the question text.
        ranked = sorted(
            pool,
            key=lambda ex: hashlib.sha256(f"{self.seed}:{ex.question}".encode()).hexdigest(),
        )
        return tuple(ranked[: self.k])

    def recall(self, question: str, store: MemoryStore) -> Recall:
        return Recall(examples=store.examples)


@register
@dataclass(frozen=True, kw_only=True)
class Retrieval(Memory):
    """Shows the k training items most similar to each question (BM25, offline): the tokens of
    `few_shot` plus a ranking over the whole pool per task; an export carries the whole pool."""

    name: ClassVar[str] = "retrieval"
    shows_examples: ClassVar[bool] = True
    k: int = param(3, low=1, high=8, doc="number of examples")

    def select(self, pool: Sequence[Example]) -> tuple[Example, ...]:
        return tuple(pool)  # BM25's statistics depend on every item, so all of them are kept

    def recall(self, question: str, store: MemoryStore) -> Recall:
        return Recall(examples=store.similar_examples(question, self.k))


_LESSON_CHARS = 400


@register
@dataclass(frozen=True, kw_only=True)
class Experience(Memory):
    """Keeps what reviewers objected to in earlier tasks and shows the k most similar lessons
    (BM25) with later questions: their tokens per call, no extra calls.

    It learns only from a critic or verifier (reflection `self_critique`, workflows
    `plan_solve_verify` or `self_refine`): the agent has no gold answers while it runs, so a
    reviewer's first complaint about a task is the lesson; without a reviewer it stores nothing.
    Lessons stay within one agent's run, so a task's prompt depends on the tasks run before it:
    the runner runs tasks in a fixed order, but with concurrency above 1 the order in which earlier
    tasks finish, and after a resume the tasks already done (not rerun), change what is recalled.
    """

    name: ClassVar[str] = "experience"
    needs_reviewer: ClassVar[bool] = True
    k: int = param(2, low=1, high=5, doc="number of lessons shown")

    def recall(self, question: str, store: MemoryStore) -> Recall:
        return Recall(lessons=store.similar_lessons(question, self.k))

    def learn(self, store: MemoryStore, question: str, complaints: Sequence[str]) -> None:
        if complaints:
            store.add_lesson(Lesson(question, complaints[0][:_LESSON_CHARS]))


# --- reflection: what happens to a finished attempt ----------------------------------------------


@register
@dataclass(frozen=True, kw_only=True)
class NoReflection(Reflection):
    """Returns the attempt as it is: no extra call."""

    name: ClassVar[str] = "none"


@dataclass(frozen=True)
class Review:
    """A reviewer reads an attempt; unless it accepts (a line `VERDICT: <verdict>`), its comments go
    back to the solver for a revision. Repeated for at most `rounds` reviews.

    Rejections are collected in `solver.complaints`, for an experience memory to learn from.
    """

    role: str  # "critic" or "verifier"
    prompt: str
    verdict: str  # the word that accepts, e.g. "ACCEPT"
    revise_prompt: str
    reviser_role: str
    max_tokens: int  # of a review
    temperature: float  # of reviews and revisions

    def run(
        self, solver: Solver, question: str, attempt: Attempt, *, rounds: int, seed: int
    ) -> Attempt:
        accepts = re.compile(rf"VERDICT:\W*{re.escape(self.verdict)}", re.IGNORECASE)
        for _ in range(rounds):
            messages = [
                {"role": "system", "content": self.prompt},
                {
                    "role": "user",
                    "content": f"Problem:\n{question}\n\nProposed solution:\n{attempt.output}",
                },
            ]
            review = solver.call(
                self.role,
                messages,
                temperature=self.temperature,
                seed=seed,
                max_tokens=self.max_tokens,
            ).strip()
            if accepts.search(review):
                break
            if review:
                solver.complaints.append(review)
            request = f"A reviewer's comments on your solution:\n{review}\n\n{self.revise_prompt}"
            attempt = solver.solve(
                question,
                temperature=self.temperature,
                seed=seed,
                context=attempt.context,
                follow_up=(attempt.output, request),
                role=self.reviser_role,
            )
        return attempt


@register
@dataclass(frozen=True, kw_only=True)
class SelfCritique(Reflection):
    """A critic reviews each attempt and the solver revises until the critic accepts: up to
    2 x max_rounds extra calls per attempt (one when the first review accepts)."""

    name: ClassVar[str] = "self_critique"
    reviews: ClassVar[bool] = True
    max_rounds: int = param(1, low=1, high=3, doc="reviews (each followed by a revision)")
    critique_prompt: str = param(
        "Check the proposed solution step by step for errors in reasoning or arithmetic. If it is "
        "correct, reply with the line 'VERDICT: ACCEPT'. Otherwise list its problems briefly.",
        doc="critic's system instruction",
    )
    revise_prompt: str = param(
        "Solve the problem again, fixing these problems. End with a final line 'Answer: <answer>'.",
        doc="request to revise, after the critique",
    )
    max_tokens: int = param(256, low=64, high=1024, log=True, doc="critic's completion token cap")
    temperature: float = param(
        0.0, low=0.0, high=1.2, searchable=False, doc="critic's and reviser's temperature"
    )

    def review(self) -> Review:
        return Review(
            role="critic",
            prompt=self.critique_prompt,
            verdict="ACCEPT",
            revise_prompt=self.revise_prompt,
            reviser_role="reviser",
            max_tokens=self.max_tokens,
            temperature=self.temperature,
        )

    def reflect(self, solver: Solver, question: str, attempt: Attempt, *, seed: int) -> Attempt:
        return self.review().run(solver, question, attempt, rounds=self.max_rounds, seed=seed)
