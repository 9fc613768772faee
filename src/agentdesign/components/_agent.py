"""The agent runtime: the solver that components call, and the agent that runs a spec on tasks.

The runtime modules (`_trace`, `_environment`, `_parsing`, `_registry`, `_memory`, `_slots`,
`_spec`, this one) and the components (`_functional.py`, `_workflows.py`) and the `_sandbox.py`
they run Python in import nothing but the standard library, on purpose: `agentdesign export`
copies their source verbatim into the standalone file it writes, so an exported agent runs
exactly the code the engine ran. Model calls go through a `ChatModel` handed in from outside
(litellm in the engine and in exported files, a fake in unit tests).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from agentdesign.components._environment import Environment, EnvironmentFailed, EnvState, Episode
from agentdesign.components._parsing import extract_answer, output_key
from agentdesign.components._registry import Component
from agentdesign.components._slots import (
    Attempt,
    Memory,
    Observation,
    Planning,
    Reasoning,
    Reflection,
    Tool,
    Workflow,
)
from agentdesign.components._spec import AgentSpec
from agentdesign.components.library._memory import Example, MemoryStore, Recall
from agentdesign.components.llm._trace import (
    CallRecord,
    ChatModel,
    LLMCallError,
    Message,
    TaskBudget,
    TaskBudgetExceeded,
    Trace,
)

__all__ = [
    "Agent",
    "AgentResult",
    "TaskSolver",
]


@dataclass(frozen=True)
class AgentResult:
    """What an agent produced for one task, with its full trace; errors are data, not exceptions."""

    answer: str
    output: str
    trace: tuple[CallRecord, ...]
    error_kind: str | None = None  # "llm", "provider", "budget", "environment" or "empty_output"
    error: str | None = None
    episode: Episode | None = None  # how the task's episode ended, for an interactive task

    @property
    def prompt_tokens(self) -> int:
        return sum(r.prompt_tokens for r in self.trace)

    @property
    def completion_tokens(self) -> int:
        return sum(r.completion_tokens for r in self.trace)

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.trace)


C = TypeVar("C", bound=Component)


def _slot(spec: AgentSpec, slot: str, cls: type[C]) -> C:
    component = spec[slot]
    assert isinstance(component, cls)
    return component


class TaskSolver:
    """The runtime's `Solver`: recorded model and tool calls, and the plan -> solve -> reflect
    attempt, for the components of one spec.

    One solver serves one task. Every call is recorded in the task's trace with the role that made
    it; `complaints` collects what reviewers objected to, for an experience memory to learn from.
    An interactive task's `environment` is played through `start_episode` and `act`.
    """

    def __init__(
        self,
        spec: AgentSpec,
        llm: ChatModel,
        trace: Trace,
        recall: Recall,
        *,
        environment: Environment | None = None,
        answer_key: Callable[[str], str] = output_key,
    ) -> None:
        self.spec = spec
        self.llm = llm
        self.trace = trace
        self.recall = recall
        self.environment = environment
        self.answer_key = answer_key
        self.env_state: EnvState | None = None  # None until the episode starts
        self.env_steps = 0
        self.planning = _slot(spec, "planning", Planning)
        self.reasoning = _slot(spec, "reasoning", Reasoning)
        self.tool = _slot(spec, "tool", Tool)
        self.reflection = _slot(spec, "reflection", Reflection)
        self.complaints: list[str] = []

    def call(
        self,
        role: str,
        messages: Sequence[Message],
        *,
        temperature: float,
        seed: int,
        max_tokens: int,
        stop: Sequence[str] = (),
    ) -> str:
        """One model call, recorded (failed ones too) and checked against the task's budget;
        generation ends before any of the `stop` strings."""
        self.trace.check_before_call()
        prompt = messages[-1]["content"]
        try:
            done = self.llm.complete(
                model=self.spec.model,
                messages=messages,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=seed,
                stop=stop,
            )
        except LLMCallError as exc:
            self.trace.add(CallRecord("llm", role, prompt, "", error=str(exc)))
            raise
        self.trace.add(
            CallRecord(
                kind="llm",
                role=role,
                input=prompt,
                output=done.text,
                prompt_tokens=done.prompt_tokens,
                completion_tokens=done.completion_tokens,
                cost=done.cost,
                latency_s=done.latency_s,
                cached=done.cached,
            )
        )
        return done.text

    def use_tool(self, argument: str, tool: Tool | None = None) -> Observation:
        """Runs the spec's tool (or `tool`) on `argument`, recorded with the tool's name as role."""
        tool = self.tool if tool is None else tool
        started = time.perf_counter()
        observation = tool.execute(argument)
        self.trace.add(
            CallRecord(
                kind="tool",
                role=tool.name,
                input=argument,
                output=observation.text,
                latency_s=time.perf_counter() - started,
                error=observation.error,
                isolation=observation.isolation,
            )
        )
        return observation

    def start_episode(self) -> EnvState:
        """Resets the environment; its first observation is the problem to solve."""
        if self.environment is None:
            raise ValueError("this task has no environment to play")
        self.env_state = self._env_call("reset", "", self.environment.reset)
        return self.env_state

    def act(self, action: str) -> EnvState:
        """One step of the episode, recorded with the action and the observation it got back.

        Raises TaskBudgetExceeded when the step limit is reached and the episode is not done.
        """
        if self.environment is None or self.env_state is None:
            raise ValueError("act() needs a started episode")
        environment = self.environment
        self.env_state = self._env_call("step", action, lambda: environment.step(action))
        self.env_steps += 1
        if not self.env_state.done and self.env_steps >= environment.max_steps:
            raise TaskBudgetExceeded(f"step limit: {environment.max_steps} environment steps")
        return self.env_state

    def _env_call(self, role: str, action: str, call: Callable[[], EnvState]) -> EnvState:
        started = time.perf_counter()
        try:
            state = call()
        except EnvironmentFailed as exc:
            self.trace.add(CallRecord("env", role, action, "", error=str(exc)))
            raise
        latency = time.perf_counter() - started
        self.trace.add(CallRecord("env", role, action, state.observation, latency_s=latency))
        return state

    def episode(self) -> Episode | None:
        """How the episode stands (None if none was started)."""
        if self.env_state is None:
            return None
        return Episode(score=self.env_state.score, steps=self.env_steps, done=self.env_state.done)

    def messages(
        self,
        question: str,
        *,
        system: str,
        context: str = "",
        render: Callable[[Example], str] | None = None,
    ) -> list[dict[str, str]]:
        """A conversation: `system`, the recalled lessons and examples, then the question.

        Examples become chat turns answered with `render`, or, without it, reference text in the
        system message.
        """
        parts = [system]
        if self.recall.lessons:
            notes = "\n".join(
                f"- On a problem like {ls.question[:160]!r}, a reviewer said: {ls.text}"
                for ls in self.recall.lessons
            )
            parts.append(f"Lessons from earlier problems:\n{notes}")
        if render is None and self.recall.examples:
            solved = "\n\n".join(
                f"Problem: {ex.question}\nSolution: {ex.rationale}\nAnswer: {ex.answer}"
                for ex in self.recall.examples
            )
            parts.append(f"Solved examples:\n\n{solved}")
        messages = [{"role": "system", "content": "\n\n".join(p for p in parts if p)}]
        if render is not None:
            for example in self.recall.examples:
                messages.append({"role": "user", "content": example.question})
                messages.append({"role": "assistant", "content": render(example)})
        messages.append(
            {"role": "user", "content": f"{question}\n\n{context}" if context else question}
        )
        return messages

    def plan(self, question: str, *, seed: int, planning: Planning | None = None) -> str:
        """The planning component's (or `planning`'s) context for `question`."""
        return (self.planning if planning is None else planning).plan(self, question, seed=seed)

    def solve(
        self,
        question: str,
        *,
        temperature: float,
        seed: int,
        context: str = "",
        follow_up: tuple[str, str] | None = None,
        role: str = "solver",
    ) -> Attempt:
        """One answer in the reasoning component's style, calling the tool as often as allowed.

        `follow_up` (an earlier output, a new request about it) continues a conversation: a
        revision after a review, or a debate round.
        """
        system = "\n\n".join(p for p in (self.reasoning.instruction, self.tool.protocol) if p)
        messages = self.messages(
            question, system=system, context=context, render=self.reasoning.render_example
        )
        if follow_up is not None:
            earlier, request = follow_up
            messages += [
                {"role": "assistant", "content": earlier},
                {"role": "user", "content": request},
            ]
        uses = 0
        while True:
            text = self.call(
                role,
                messages,
                temperature=temperature,
                seed=seed,
                max_tokens=self.reasoning.max_tokens,
            )
            tool_call = self.tool.find_call(text) if uses < self.tool.call_limit else None
            if tool_call is None:
                return Attempt(output=text, answer=extract_answer(text), context=context)
            said, argument = tool_call
            result = self.use_tool(argument)
            messages = [
                *messages,
                {"role": "assistant", "content": said},
                {"role": "user", "content": f"RESULT: {result.text}"},
            ]
            uses += 1

    def attempt(
        self,
        question: str,
        *,
        temperature: float,
        seed: int,
        planning: Planning | None = None,
        reflection: Reflection | None = None,
    ) -> Attempt:
        """Plan, solve, reflect: with the spec's components, or the planning/reflection given."""
        context = self.plan(question, seed=seed, planning=planning)
        first = self.solve(question, temperature=temperature, seed=seed, context=context)
        reflection = self.reflection if reflection is None else reflection
        return reflection.reflect(self, question, first, seed=seed)


class Agent:
    """A runnable agent built from a spec; `run` never raises for model or budget failures.

    An agent keeps a memory across the tasks it runs (an experience memory learns from them), so
    run one agent per evaluation, over the tasks in a fixed order.
    """

    def __init__(
        self,
        spec: AgentSpec,
        *,
        llm: ChatModel,
        train_examples: Sequence[Example] = (),
        budget: TaskBudget | None = None,
    ) -> None:
        self.spec = spec
        self.llm = llm
        self.memory = _slot(spec, "memory", Memory)
        self.workflow = _slot(spec, "workflow", Workflow)
        self.examples = self.memory.select(train_examples)
        self.store = MemoryStore(self.examples)
        self.budget = budget or TaskBudget()

    def run(
        self,
        question: str,
        *,
        environment: Environment | None = None,
        answer_key: Callable[[str], str] = output_key,
    ) -> AgentResult:
        """Runs one task; an interactive task's `environment` is played as an episode, and a vote
        among attempts counts outputs alike under `answer_key` (the benchmark's, where it has
        one)."""
        if environment is not None and not self.workflow.plays_episodes:
            raise ValueError(f"workflow '{self.workflow.name}' cannot play an environment")
        trace = Trace(budget=self.budget)
        recall = self.memory.recall(question, self.store)
        solver = TaskSolver(
            self.spec, self.llm, trace, recall, environment=environment, answer_key=answer_key
        )
        attempt, error_kind, error = Attempt("", ""), None, None
        try:
            attempt = self.workflow.run(solver, question)
        except LLMCallError as exc:  # "provider": the provider's failure, not the design's
            error_kind, error = "provider" if exc.transient else "llm", str(exc)
        except TaskBudgetExceeded as exc:
            error_kind, error = "budget", str(exc)
        except EnvironmentFailed as exc:
            error_kind, error = "environment", str(exc)
        finally:
            self.memory.learn(self.store, question, solver.complaints)
        episode = solver.episode()
        if error_kind is None and episode is None and not attempt.output.strip():
            error_kind, error = "empty_output", "no output to score"
        if error_kind is not None:
            return AgentResult("", "", tuple(trace.records), error_kind, error, episode)
        return AgentResult(attempt.answer, attempt.output, tuple(trace.records), episode=episode)

    async def arun(
        self,
        question: str,
        *,
        environment: Environment | None = None,
        answer_key: Callable[[str], str] = output_key,
    ) -> AgentResult:
        """`run` in a worker thread, for callers that run many tasks from an event loop."""
        return await asyncio.to_thread(
            self.run, question, environment=environment, answer_key=answer_key
        )
