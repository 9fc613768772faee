"""Workflows: how the calls of one task are orchestrated (level 1 of the design space).

A workflow drives the `Solver`, which brings in the functional components (planning, reasoning,
memory, tool, reflection); a docstring says which of them a workflow uses when it does not use
them all, and `unused_slots` names the slots it never calls. Standard library only, like the
runtime: export copies this file verbatim.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from agentdesign.components._environment import EnvState
from agentdesign.components._parsing import extract_answer, output_key
from agentdesign.components._registry import param, register
from agentdesign.components._slots import Attempt, Solver, Workflow
from agentdesign.components.library._functional import (
    NoPlanning,
    PlanAndSolve,
    Review,
    SelfCritique,
)
from agentdesign.components.library._memory import Example
from agentdesign.components.library._tools import PythonTool, program_in, timeout_param


def majority(attempts: Sequence[Attempt], key: Callable[[str], str] = output_key) -> Attempt:
    """The attempt with the most common answer, outputs counted alike under `key` (the solver's
    `answer_key`); ties go to the earliest answer seen, and an output whose key is empty has no
    vote."""
    keys = [key(a.output) for a in attempts]
    voted = [k for k in keys if k]
    if not voted:
        return attempts[-1]
    best_key, _ = Counter(voted).most_common(1)[0]
    return attempts[keys.index(best_key)]


@register
@dataclass(frozen=True, kw_only=True)
class SinglePass(Workflow):
    """One greedy attempt: the baseline every other workflow must beat on score per token."""

    name: ClassVar[str] = "single"

    def run(self, solver: Solver, question: str) -> Attempt:
        return solver.attempt(question, temperature=0.0, seed=0)


_BEST = re.compile(r"BEST:\W*(\d+)", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class _Ensemble(Workflow):
    """A workflow that samples several attempts and may have a judge choose among them."""

    temperature: float = param(0.7, low=0.1, high=1.2, doc="sampling temperature")
    judge_prompt: str = param(
        "You are given a problem and numbered candidate solutions. Work out briefly which "
        "candidate is correct. End with a line 'BEST: <number of the best candidate>'.",
        doc="judge's system instruction",
    )
    judge_max_tokens: int = param(
        256, low=64, high=1024, log=True, doc="judge's completion token cap"
    )

    def judge(self, solver: Solver, question: str, attempts: Sequence[Attempt]) -> Attempt:
        """One greedy call (role 'judge') choosing a candidate; the majority if it names none."""
        listing = "\n\n".join(
            f"Candidate {i}:\n{a.output.strip()}" for i, a in enumerate(attempts, start=1)
        )
        messages = [
            {"role": "system", "content": self.judge_prompt},
            {"role": "user", "content": f"Problem:\n{question}\n\n{listing}"},
        ]
        reply = solver.call(
            "judge", messages, temperature=0.0, seed=0, max_tokens=self.judge_max_tokens
        )
        chosen = [int(n) for n in _BEST.findall(reply) if 1 <= int(n) <= len(attempts)]
        return attempts[chosen[-1] - 1] if chosen else majority(attempts, solver.answer_key)


@register
@dataclass(frozen=True, kw_only=True)
class SelfConsistency(_Ensemble):
    """Samples n attempts and returns the majority answer, or a judge's pick: about n times the
    cost of one pass (+1 call with a judge)."""

    name: ClassVar[str] = "self_consistency"
    n_samples: int = param(5, low=2, high=9, doc="attempts to vote over")
    aggregate: str = param(
        "majority", choices=("majority", "judge"), doc="how the answer is chosen"
    )

    def run(self, solver: Solver, question: str) -> Attempt:
        attempts = [
            solver.attempt(question, temperature=self.temperature, seed=i)
            for i in range(self.n_samples)
        ]
        if self.aggregate == "judge":
            return self.judge(solver, question, attempts)
        return majority(attempts, solver.answer_key)


@register
@dataclass(frozen=True, kw_only=True)
class Debate(_Ensemble):
    """n agents answer, then for rounds-1 rounds each sees the others' latest solutions and
    updates its own (role 'debater'); a judge picks the final answer: n x rounds + 1 calls.

    The first round's attempts use the planning and reflection components; later rounds do not.
    """

    name: ClassVar[str] = "debate"
    n_agents: int = param(3, low=2, high=4, doc="agents in the debate")
    rounds: int = param(2, low=2, high=3, doc="rounds, the independent first answers included")
    debate_prompt: str = param(
        "Consider their reasoning and give your updated solution. End with a final line "
        "'Answer: <answer>'.",
        doc="request to update, after the other agents' solutions",
    )

    def run(self, solver: Solver, question: str) -> Attempt:
        latest = [
            solver.attempt(question, temperature=self.temperature, seed=i)
            for i in range(self.n_agents)
        ]
        for _ in range(self.rounds - 1):
            latest = [
                solver.solve(
                    question,
                    temperature=self.temperature,
                    seed=i,
                    context=mine.context,
                    follow_up=(mine.output, self._others(latest, i)),
                    role="debater",
                )
                for i, mine in enumerate(latest)
            ]
        return self.judge(solver, question, latest)

    def _others(self, latest: Sequence[Attempt], me: int) -> str:
        shown = "\n\n".join(
            f"Agent {i + 1}:\n{a.output.strip()}" for i, a in enumerate(latest) if i != me
        )
        return f"The other agents' latest solutions:\n\n{shown}\n\n{self.debate_prompt}"


@register
@dataclass(frozen=True, kw_only=True)
class PlanSolveVerify(Workflow):
    """Plans, solves, then a verifier checks the solution and the solver re-solves with its
    correction until it is judged correct: 1 planning call + 1 solve + up to 2 x max_rounds calls.

    The plan comes from the planning component, or plan_and_solve's prompt when planning is none.
    """

    name: ClassVar[str] = "plan_solve_verify"
    reviews: ClassVar[bool] = True
    max_rounds: int = param(2, low=1, high=3, doc="verifications (each followed by a re-solve)")
    verify_prompt: str = param(
        "You are a careful verifier. Check every step and number of the proposed solution against "
        "the problem. If it is correct, reply with the line 'VERDICT: CORRECT'. Otherwise explain "
        "the error and give the correction.",
        doc="verifier's system instruction",
    )
    revise_prompt: str = param(
        "Solve the problem again using this feedback. End with a final line 'Answer: <answer>'.",
        doc="request to re-solve, after the verifier's feedback",
    )
    verifier_max_tokens: int = param(
        256, low=64, high=1024, log=True, doc="verifier's completion token cap"
    )

    def run(self, solver: Solver, question: str) -> Attempt:
        planning = PlanAndSolve() if isinstance(solver.planning, NoPlanning) else None
        attempt = solver.attempt(question, temperature=0.0, seed=0, planning=planning)
        review = Review(
            role="verifier",
            prompt=self.verify_prompt,
            verdict="CORRECT",
            revise_prompt=self.revise_prompt,
            reviser_role="solver",
            max_tokens=self.verifier_max_tokens,
            temperature=0.0,
        )
        return review.run(solver, question, attempt, rounds=self.max_rounds, seed=0)


@register
@dataclass(frozen=True, kw_only=True)
class SelfRefine(Workflow):
    """One attempt, then critique and revise it until the critic accepts: up to 2 x max_rounds
    extra calls. Uses the reflection component's prompts if it is self_critique (with this
    workflow's max_rounds), else self_critique's defaults."""

    name: ClassVar[str] = "self_refine"
    reviews: ClassVar[bool] = True
    max_rounds: int = param(2, low=1, high=3, doc="critiques (each followed by a revision)")

    def run(self, solver: Solver, question: str) -> Attempt:
        critique = solver.reflection
        if not isinstance(critique, SelfCritique):
            critique = SelfCritique()
        refine = dataclasses.replace(critique, max_rounds=self.max_rounds)
        return solver.attempt(question, temperature=0.0, seed=0, reflection=refine)


_ACTION = re.compile(r"Action:\W*(\w+)\s*\[", re.IGNORECASE)
# A turn ends at its action: without this, small models go on to invent the observation and
# further turns, hundreds of tokens the workflow throws away.
_REACT_STOP = ("\nObservation:",)


def _parse_action(text: str) -> tuple[str, str, str] | None:
    """(text up to the action's closing bracket, action name, argument), or None without one.

    The argument runs to the last ']' before any 'Observation:' the model invented, so code with
    brackets survives.
    """
    match = _ACTION.search(text)
    if match is None:
        return None
    rest = re.split(r"^\W*Observation:", text[match.end() :], maxsplit=1, flags=re.MULTILINE)[0]
    close = rest.rfind("]")
    if close < 0:
        return None
    return text[: match.end() + close + 1], match.group(1).lower(), rest[:close]


_BARE_ACTION = re.compile(r"^\W*Action:[ \t]*(.+?)[ \t.]*$", re.IGNORECASE | re.MULTILINE)


def _bare_env_action(text: str, valid_actions: Sequence[str]) -> tuple[str, str, str] | None:
    """An environment action written without act[...], as ("text up to it", "act", action).

    'Action: take coin' is played as written (the environment says if it is unknown: ScienceWorld
    lists only templates such as 'go to LOC'); 'Action: take[coin]' only if 'take coin' is one of
    `valid_actions`, since a bracket can be a misspelt protocol action, and 'Action: take
    coin[<answer>]' as 'take coin' if that is listed (small models put the listed action where the
    protocol's action name goes). A listed action's own spelling is used; 'finish' is never sent
    to the environment.
    """
    match = _BARE_ACTION.search(text)
    if match is None:
        return None
    line = match.group(1)
    written = re.sub(r"\s*\[\s*(.*?)\s*\]$", r" \1", line).strip()
    before_bracket = line.partition("[")[0].strip()
    listed = {action.lower(): action for action in valid_actions}
    for candidate in (written, before_bracket):
        if candidate.lower() in listed:
            return text[: match.end()], "act", listed[candidate.lower()]
    if "[" in line or not written or written.split()[0].lower() == "finish":
        return None
    return text[: match.end()], "act", written


def _react_example(example: Example) -> str:
    thought = f"Thought: {example.rationale}\n" if example.rationale else ""
    return f"{thought}Action: finish[{example.answer}]"


def _with_valid_actions(
    window: list[dict[str, str]], state: EnvState | None
) -> list[dict[str, str]]:
    """`window` with the environment's current actions after its last message only: the lists of
    earlier turns are stale, and repeating them in every turn of the history fills the prompt."""
    if state is None or not state.valid_actions:
        return window
    last = window[-1]
    listing = f"{last['content']}\n\nValid actions: {', '.join(state.valid_actions)}"
    return [*window[:-1], {**last, "content": listing}]


@register
@dataclass(frozen=True, kw_only=True)
class ReAct(Workflow):
    """Thought / Action / Observation turns: the model calls the tool component's action
    (calculate[...], python[...]) and sees its result, until finish[answer]: up to max_steps calls.

    Uses the planning, memory and tool components; the reasoning component only caps each turn's
    tokens (its instruction gives way to this protocol), and max_steps, not the tool's max_uses,
    bounds tool use. On an interactive task it plays the episode: act[...] steps the environment,
    whose first observation is the problem; the episode ends when the environment says it is
    done, at finish[...], or at the task's step limit or call budget, not at max_steps. Each call
    sees the problem and the last `history_turns` turns, so its prompt stops growing there, and
    the environment's valid actions only after the latest observation. Any task ends early after
    `give_up_after` turns in a row with the same action and result.
    """

    name: ClassVar[str] = "react"
    plays_episodes: ClassVar[bool] = True
    unused_slots: ClassVar[frozenset[str]] = frozenset({"reflection"})
    max_steps: int = param(5, low=2, high=8, doc="model turns before giving up")
    history_turns: int = param(
        8,
        low=2,
        high=16,
        doc="earlier turns each call sees again (the problem always): bounds every prompt, so "
        "a long episode neither outgrows the context nor pays for its whole past at every step",
    )
    instruction: str = param(
        "Solve the problem in turns. In each turn write one line 'Thought: <your reasoning>', then "
        "one line 'Action: <action>[<argument>]', and stop. After an action you get back "
        "'Observation: <result>'. When you know the final answer, use finish[<answer>].",
        doc="the protocol, as explained to the model",
    )
    repeat_note: str = param(
        "Nothing changed: you just did exactly that. Choose a different action.",
        doc="added to an observation that repeats the last one after the same action (small "
        "models otherwise loop, e.g. 'look around' until the step limit)",
    )
    give_up_after: int = param(
        4,
        low=2,
        high=16,
        doc="turns in a row with the same action and the same result that end the task: a model "
        "at temperature 0 that repeats itself rarely stops, and each repeat costs a whole call",
    )

    def run(self, solver: Solver, question: str) -> Attempt:
        tool = solver.tool
        actions = {tool.action: tool.action_doc} if tool.action else {}
        turns: Iterable[int]
        state: EnvState | None = None
        if solver.environment is None:
            problem, turns = question, range(self.max_steps)
            actions["finish"] = "ends the task with your final answer, e.g. finish[42]"
        else:
            state = solver.start_episode()
            problem, turns = state.observation, itertools.count()
            actions["act"] = "does one thing in the environment, e.g. act[look around]"
            actions["finish"] = "gives up the episode (it ends by itself when the task is done)"
        listing = "\n".join(f"- {name}[...]: {doc}" for name, doc in actions.items())
        context = solver.plan(problem, seed=0)
        messages = solver.messages(
            problem,
            system=f"{self.instruction}\n\nActions:\n{listing}",
            context=context,
            render=_react_example,
        )
        text = ""
        history: list[dict[str, str]] = []
        last: tuple[tuple[str, str] | None, str] | None = None  # the last turn's action and result
        repeats = 0  # turns in a row equal to `last`
        for _ in turns:
            text = solver.call(
                "solver",
                _with_valid_actions([*messages, *history[-2 * self.history_turns :]], state),
                temperature=0.0,
                seed=0,
                max_tokens=solver.reasoning.max_tokens,
                stop=_REACT_STOP,
            )
            step = _parse_action(text)
            if state is not None and (step is None or step[1] not in actions):
                step = _bare_env_action(text, state.valid_actions) or step
            if step is None:
                said, observation = text, "no action found; end each turn with 'Action: name[...]'"
            else:
                said, name, argument = step
                if name == "finish":
                    return Attempt(output=said, answer=argument.strip(), context=context)
                if name == "act" and state is not None:
                    state = solver.act(argument.strip())
                    if state.done:
                        return Attempt(output=said, answer=argument.strip(), context=context)
                    observation = state.observation
                elif name in actions:
                    observation = solver.use_tool(argument).text
                else:
                    observation = f"unknown action '{name}'; use one of: {', '.join(actions)}"
            turn = ((step[1], step[2].strip()) if step else None, observation)
            repeats = repeats + 1 if turn == last else 1
            if repeats >= self.give_up_after:
                break
            shown = f"{observation}\n\n{self.repeat_note}" if repeats > 1 else observation
            last = turn
            history += [
                {"role": "assistant", "content": said},
                {"role": "user", "content": f"Observation: {shown}"},
            ]
        return Attempt(output=text, answer=extract_answer(text), context=context)


@register
@dataclass(frozen=True, kw_only=True)
class ProgramOfThought(Workflow):
    """The model writes a Python program that prints the answer and the sandbox runs it; a failing
    program gets one retry with its error: 1-2 calls and sandboxed processes.

    Uses the planning and memory components (examples as reference text); the reasoning component
    only caps the program's tokens; the tool and reflection components are not used.
    """

    name: ClassVar[str] = "program_of_thought"
    unused_slots: ClassVar[frozenset[str]] = frozenset({"tool", "reflection"})
    timeout_s: float = timeout_param()
    instruction: str = param(
        "Write a Python program that solves the problem and prints only the final answer. Reply "
        "with the program in one ```python block.",
        doc="system instruction",
    )
    retry_prompt: str = param(
        "Fix the program. Reply with the corrected program in one ```python block.",
        doc="request to fix a failing program, after its error",
    )

    def run(self, solver: Solver, question: str) -> Attempt:
        python = PythonTool(timeout_s=self.timeout_s)
        context = solver.plan(question, seed=0)
        messages = solver.messages(question, system=self.instruction, context=context)
        for _ in range(2):
            text = solver.call(
                "solver", messages, temperature=0.0, seed=0, max_tokens=solver.reasoning.max_tokens
            )
            program = program_in(text)
            result = solver.use_tool(program, tool=python)
            if result.error is None:
                printed = result.text.splitlines()[-1].strip()
                output = f"```python\n{program.strip()}\n```\nAnswer: {printed}"
                return Attempt(output=output, answer=printed, context=context)
            messages = [
                *messages,
                {"role": "assistant", "content": text},
                {
                    "role": "user",
                    "content": f"The program failed:\n{result.text}\n\n{self.retry_prompt}",
                },
            ]
        return Attempt(output="", answer="", context=context)
