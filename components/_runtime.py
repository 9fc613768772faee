"""The agent runtime: the component slots, agent specs, and the solver and agent that run them.

The components themselves live in `_functional.py` (planning, reasoning, memory, tools, reflection)
and `_workflows.py` (how calls are orchestrated). These modules, and the `_sandbox.py` they run
Python in, import nothing but the standard library, on purpose: `agentdesign export` copies their
source verbatim into the standalone file it writes, so an exported agent runs exactly the code the
engine ran. Model calls go through a `ChatModel` handed in from outside (litellm in the engine and
in exported files, a fake in unit tests).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

# --------------------------------------------------------------------------------------------------
# Model calls and traces
# --------------------------------------------------------------------------------------------------

Message = Mapping[str, str]


@dataclass(frozen=True)
class Completion:
    """One model answer with what it cost; `cached` answers were paid for by an earlier call."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    cached: bool = False


class ChatModel(Protocol):
    """Anything that answers chat messages; raises `LLMCallError` when it cannot."""

    def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        max_tokens: int,
        seed: int | None,
        stop: Sequence[str] = (),
    ) -> Completion: ...


class LLMCallError(Exception):
    """A model call failed for good (after any retries).

    `transient` says the provider failed, not the design (a rate limit, a server error, a timeout,
    a garbled or empty reply, a refused key): the same call may work later, so the task is not
    scored and runs again. Otherwise (a request the provider rejects, say) the task fails and
    scores 0, as any design that makes such a request deserves.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class TaskBudgetExceeded(Exception):
    """A task used more calls or tokens than its budget allows: a runaway loop, stopped."""


@dataclass(frozen=True)
class CallRecord:
    """One step of a task's trace: a model call or a tool call."""

    kind: str  # "llm", "tool" or "env" (an environment's reset or step)
    role: str  # which part made the call, e.g. "solver", "calculator"; "reset" or "step" for env
    input: str
    output: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    error: str | None = None
    isolation: str | None = None  # for a tool call that ran code: the sandbox's isolation level


@dataclass(frozen=True)
class TaskBudget:
    """Per-task limits; generous enough for any sane design, tight enough to stop loops."""

    max_calls: int = 32
    max_tokens: int = 32_000


class Trace:
    """The calls one task made, checked against its budget as they happen."""

    def __init__(self, *, budget: TaskBudget) -> None:
        self.budget = budget
        self.records: list[CallRecord] = []

    @property
    def llm_calls(self) -> int:
        return sum(1 for r in self.records if r.kind == "llm")

    @property
    def tokens(self) -> int:
        return sum(r.prompt_tokens + r.completion_tokens for r in self.records)

    def add(self, record: CallRecord) -> None:
        self.records.append(record)
        if self.llm_calls > self.budget.max_calls:
            raise TaskBudgetExceeded(f"more than {self.budget.max_calls} model calls")
        if self.tokens > self.budget.max_tokens:
            raise TaskBudgetExceeded(f"more than {self.budget.max_tokens} tokens")

    def check_before_call(self) -> None:
        if self.llm_calls >= self.budget.max_calls:
            raise TaskBudgetExceeded(f"more than {self.budget.max_calls} model calls")


# --------------------------------------------------------------------------------------------------
# Interactive environments
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvState:
    """What an environment shows after a reset or a step: the observation, the actions it offers
    now, whether the episode is over, and the episode's score so far, in [0, 1]."""

    observation: str
    valid_actions: tuple[str, ...] = ()
    done: bool = False
    score: float = 0.0


class Environment(Protocol):
    """An interactive task (a text game, a simulated lab) that an agent plays one action at a time.

    The benchmark that owns the task builds it; the runtime only resets it and steps it.
    `max_steps` is the task's step limit: an episode not done after that many steps is stopped and
    recorded as a budget stop.
    """

    max_steps: int

    def reset(self) -> EnvState: ...

    def step(self, action: str) -> EnvState: ...


class EnvironmentFailed(Exception):
    """The environment itself broke (e.g. its simulator died): the task fails, the run goes on."""


@dataclass(frozen=True)
class Episode:
    """How an episode ended: the environment's score, the steps taken, and whether it finished.

    An episode cut short (step limit, call budget, a failed model call) keeps the score it reached:
    the environment measured it, not a parse of the agent's output.
    """

    score: float
    steps: int
    done: bool


# --------------------------------------------------------------------------------------------------
# Answer parsing
# --------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------
# Components and their registry
# --------------------------------------------------------------------------------------------------


def param(
    default: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    choices: Sequence[Any] | None = None,
    log: bool = False,
    searchable: bool = True,
    doc: str = "",
) -> Any:
    """Declares a component parameter with the range a search may explore."""
    meta = {
        "low": low,
        "high": high,
        "choices": tuple(choices) if choices is not None else None,
        "log": log,
        "searchable": searchable,
        "doc": doc,
    }
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ParamInfo:
    """A component parameter as a search space sees it."""

    name: str
    kind: str  # "int", "float", "bool", "choice" or "text"
    default: Any
    low: float | None
    high: float | None
    choices: tuple[Any, ...] | None
    log: bool
    searchable: bool
    doc: str


@dataclass(frozen=True, kw_only=True)
class Component:
    """Base of every pluggable part of an agent.

    Subclasses are frozen keyword-only dataclasses whose fields are their parameters (declared with
    `param`), so `get_params`, validation and cloning come for free.
    """

    slot: ClassVar[str]
    name: ClassVar[str]

    def __post_init__(self) -> None:
        for info in self.param_info():
            _check_param(self.slot, self.name, info, getattr(self, info.name))

    @classmethod
    def param_info(cls) -> tuple[ParamInfo, ...]:
        infos = []
        for f in dataclasses.fields(cls):
            meta = f.metadata
            kind = {int: "int", float: "float", bool: "bool", str: "text"}.get(
                type(f.default), "text"
            )
            if meta.get("choices") is not None:
                kind = "choice"
            infos.append(
                ParamInfo(
                    name=f.name,
                    kind=kind,
                    default=f.default,
                    low=meta.get("low"),
                    high=meta.get("high"),
                    choices=meta.get("choices"),
                    log=bool(meta.get("log", False)),
                    searchable=bool(meta.get("searchable", True)) and kind != "text",
                    doc=str(meta.get("doc", "")),
                )
            )
        return tuple(infos)

    def get_params(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def set_params(self, **params: Any) -> Component:
        """A copy with some parameters changed (components are immutable)."""
        unknown = sorted(set(params) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ValueError(f"{self.slot} '{self.name}' has no parameter(s) {', '.join(unknown)}")
        return dataclasses.replace(self, **params)


def _check_param(slot: str, name: str, info: ParamInfo, value: Any) -> None:
    where = f"{slot}__{info.name} (component '{name}')"
    if info.kind == "int" and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError(f"{where} must be an integer, got {value!r}")
    if info.kind == "float" and (not isinstance(value, (int, float)) or isinstance(value, bool)):
        raise ValueError(f"{where} must be a number, got {value!r}")
    if info.kind == "bool" and not isinstance(value, bool):
        raise ValueError(f"{where} must be true or false, got {value!r}")
    if info.kind == "text" and not isinstance(value, str):
        raise ValueError(f"{where} must be a string, got {value!r}")
    if info.kind == "choice" and info.choices is not None and value not in info.choices:
        raise ValueError(f"{where} must be one of {list(info.choices)}, got {value!r}")
    if info.low is not None and value < info.low:
        raise ValueError(f"{where} must be >= {info.low}, got {value!r}")
    if info.high is not None and value > info.high:
        raise ValueError(f"{where} must be <= {info.high}, got {value!r}")


class Registry:
    """Component classes by slot and name; refuses a second class under a taken name."""

    def __init__(self, slots: Sequence[str]) -> None:
        self._classes: dict[str, dict[str, type[Component]]] = {slot: {} for slot in slots}

    def register(self, cls: type[Component]) -> type[Component]:
        if cls.slot not in self._classes:
            raise ValueError(f"unknown slot '{cls.slot}' (slots: {', '.join(self._classes)})")
        taken = self._classes[cls.slot]
        if cls.name in taken:
            raise ValueError(f"a {cls.slot} component named '{cls.name}' is already registered")
        taken[cls.name] = cls
        return cls

    def slots(self) -> tuple[str, ...]:
        return tuple(self._classes)

    def names(self, slot: str) -> tuple[str, ...]:
        return tuple(self._classes[slot])

    def get(self, slot: str, name: str) -> type[Component]:
        if slot not in self._classes:
            raise ValueError(f"unknown slot '{slot}' (slots: {', '.join(self._classes)})")
        try:
            return self._classes[slot][name]
        except KeyError:
            known = ", ".join(self._classes[slot])
            raise ValueError(f"unknown {slot} component '{name}' (known: {known})") from None

    def __iter__(self) -> Iterator[type[Component]]:
        for by_name in self._classes.values():
            yield from by_name.values()


SLOTS = ("workflow", "planning", "reasoning", "memory", "tool", "reflection")
REGISTRY = Registry(SLOTS)
register = REGISTRY.register


@dataclass(frozen=True)
class Example:
    """A solved item shown to the model: question, optional worked solution, final answer."""

    question: str
    answer: str
    rationale: str = ""


# --------------------------------------------------------------------------------------------------
# Retrieval and what an agent remembers
# --------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------
# The slots: what each kind of component does (the components themselves are in _functional.py and
# _workflows.py)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """One solution attempt: the last output, the answer parsed from it, and the planning context it
    was solved with (revisions reuse it)."""

    output: str
    answer: str
    context: str = ""


@dataclass(frozen=True)
class Observation:
    """What a tool returned, as shown to the model; `error` says why it failed, if it did, and
    `isolation` what confined the code it ran, if any."""

    text: str
    error: str | None = None
    isolation: str | None = None


@dataclass(frozen=True, kw_only=True)
class Planning(Component):
    """Works out context for the solver before it solves: a plan, a principle, or nothing."""

    slot: ClassVar[str] = "planning"

    def plan(self, solver: Solver, question: str, *, seed: int) -> str:
        """The text added to the question (empty for none); calls are made with role 'planner'."""
        return ""


@dataclass(frozen=True, kw_only=True)
class Reasoning(Component):
    """How the solver is asked to answer; `max_tokens` caps every solver call."""

    slot: ClassVar[str] = "reasoning"
    instruction: str = ""
    max_tokens: int = 512

    def render_example(self, example: Example) -> str:
        return f"Answer: {example.answer}"


@dataclass(frozen=True, kw_only=True)
class Memory(Component):
    """What the model is shown besides the question, and what the agent learns while it runs."""

    slot: ClassVar[str] = "memory"
    # True for memories that only show training examples: on a benchmark without any they are
    # the same design as no memory, so narrowed design spaces leave them out there.
    shows_examples: ClassVar[bool] = False

    def select(self, pool: Sequence[Example]) -> tuple[Example, ...]:
        """The training items kept from `pool`: all this memory reads later, all an export carries.

        Selecting again from the kept items keeps them all, in the same order.
        """
        return ()

    def recall(self, question: str, store: MemoryStore) -> Recall:
        return Recall()

    def learn(self, store: MemoryStore, question: str, complaints: Sequence[str]) -> None:
        """Called after each task with the complaints its reviewers made (none if they accepted)."""


@dataclass(frozen=True, kw_only=True)
class Tool(Component):
    """Something the model can call while it works; `action` names it in ReAct's protocol."""

    slot: ClassVar[str] = "tool"
    action: ClassVar[str] = ""
    action_doc: ClassVar[str] = ""

    @property
    def protocol(self) -> str:
        """The text that teaches the model how to call the tool (empty for no tool)."""
        return ""

    @property
    def call_limit(self) -> int:
        """Tool calls allowed per solver attempt."""
        return 0

    def find_call(self, text: str) -> tuple[str, str] | None:
        """(text up to and including the call, the call's argument), or None if none is made."""
        return None

    def execute(self, argument: str) -> Observation:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class Reflection(Component):
    """What happens to a finished attempt: returned as it is, or reviewed and revised."""

    slot: ClassVar[str] = "reflection"

    def reflect(self, solver: Solver, question: str, attempt: Attempt, *, seed: int) -> Attempt:
        return attempt


@dataclass(frozen=True, kw_only=True)
class Workflow(Component):
    """How the calls of one task are orchestrated; `plays_episodes` if it can play an
    environment's episode (the solver then holds the environment)."""

    slot: ClassVar[str] = "workflow"
    plays_episodes: ClassVar[bool] = False

    def run(self, solver: Solver, question: str) -> Attempt:
        raise NotImplementedError


# --------------------------------------------------------------------------------------------------
# Agent specs
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentSpec:
    """A complete agent design: the model and one configured component per slot.

    Frozen and canonical: every slot is present and every parameter is filled in, so two specs that
    build the same agent have the same JSON and the same hash.
    """

    model: str
    components: Mapping[str, Component]

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("model must be a non-empty model string, e.g. 'openai/gpt-4o-mini'")
        missing = [slot for slot in SLOTS if slot not in self.components]
        extra = sorted(set(self.components) - set(SLOTS))
        if missing or extra:
            raise ValueError(f"spec must have exactly the slots {list(SLOTS)}")
        for slot, component in self.components.items():
            if component.slot != slot:
                raise ValueError(f"slot '{slot}' holds a {component.slot} component")
        object.__setattr__(self, "components", dict(self.components))

    def __hash__(self) -> int:
        return hash(self.spec_hash)

    def __getitem__(self, slot: str) -> Component:
        return self.components[slot]

    @classmethod
    def create(cls, *, model: str, **slots: str | Mapping[str, Any] | Component) -> AgentSpec:
        """Builds a spec from names or {name, params} per slot; omitted slots take their default."""
        return cls.from_dict({"model": model, "components": slots})

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "components": {
                slot: {"name": comp.name, "params": comp.get_params()}
                for slot, comp in self.components.items()
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @functools.cached_property  # a frozen spec's hash never changes; searches hash thousands
    def spec_hash(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:20]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentSpec:
        if not isinstance(data, Mapping):
            raise ValueError("an agent spec must be a JSON object")
        unknown = sorted(set(data) - {"model", "components"})
        if unknown:
            raise ValueError(f"unknown spec field(s): {', '.join(unknown)}")
        raw = data.get("components", {})
        if not isinstance(raw, Mapping):
            raise ValueError("'components' must be an object of slot -> component")
        unknown_slots = sorted(set(raw) - set(SLOTS))
        if unknown_slots:
            raise ValueError(
                f"unknown slot(s) {', '.join(unknown_slots)} (slots: {', '.join(SLOTS)})"
            )
        components = {slot: _component_from(slot, raw.get(slot)) for slot in SLOTS}
        return cls(model=data.get("model", ""), components=components)

    @classmethod
    def from_json(cls, text: str) -> AgentSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"spec is not valid JSON: {exc}") from None
        return cls.from_dict(data)

    def to_flat(self) -> dict[str, Any]:
        """The spec as `slot`, `slot__param` pairs: the form optuna trials and set_params use."""
        flat: dict[str, Any] = {"model": self.model}
        for slot, comp in self.components.items():
            flat[slot] = comp.name
            flat.update({f"{slot}__{k}": v for k, v in comp.get_params().items()})
        return flat

    @classmethod
    def from_flat(cls, flat: Mapping[str, Any]) -> AgentSpec:
        components: dict[str, dict[str, Any]] = {}
        for key, value in flat.items():
            if key == "model":
                continue
            slot, sep, name = key.partition("__")
            entry = components.setdefault(slot, {"params": {}})
            if sep:
                entry["params"][name] = value
            else:
                entry["name"] = value
        return cls.from_dict({"model": flat.get("model", ""), "components": components})

    def set_params(self, **params: Any) -> AgentSpec:
        """A copy with `model`, `slot` (a component name) or `slot__param` values changed."""
        flat = self.to_flat()
        for key, value in params.items():
            slot = key.partition("__")[0]
            if key in SLOTS and value != flat[key]:
                # A new component starts from its own defaults, not the old one's parameters.
                flat = {k: v for k, v in flat.items() if not k.startswith(f"{slot}__")}
            elif key not in flat and key != "model":
                raise ValueError(f"unknown parameter '{key}'")
        flat.update(params)
        return AgentSpec.from_flat(flat)

    def describe(self) -> str:
        """A short human-readable summary, e.g. 'self_consistency(n_samples=5) + cot + ...'."""
        parts = []
        for slot in SLOTS:
            comp = self.components[slot]
            changed = [  # prompt texts are left out: too long for a summary
                f"{info.name}={getattr(comp, info.name)}"
                for info in comp.param_info()
                if info.kind != "text" and getattr(comp, info.name) != info.default
            ]
            args = ", ".join(changed)
            parts.append(f"{comp.name}({args})" if args else comp.name)
        return " + ".join(parts)


_DEFAULTS = {
    "workflow": "single",
    "planning": "none",
    "reasoning": "cot",
    "memory": "none",
    "tool": "none",
    "reflection": "none",
}


def _component_from(slot: str, raw: Any) -> Component:
    if raw is None:
        raw = _DEFAULTS[slot]
    if isinstance(raw, Component):
        return raw
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise ValueError(f"slot '{slot}' needs a component name, got {raw!r}")
    cls = REGISTRY.get(slot, raw["name"])
    params = raw.get("params", {})
    if not isinstance(params, Mapping):
        raise ValueError(f"{slot} params must be an object, got {params!r}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - known)
    if unknown:
        names = ", ".join(f"{slot}__{p}" for p in unknown)
        raise ValueError(f"unknown parameter(s) {names} for {slot} '{raw['name']}'")
    return cls(**params)


# --------------------------------------------------------------------------------------------------
# The agent
# --------------------------------------------------------------------------------------------------


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


class Solver:
    """What workflows call: recorded model and tool calls, and the plan -> solve -> reflect attempt.

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
    ) -> None:
        self.spec = spec
        self.llm = llm
        self.trace = trace
        self.recall = recall
        self.environment = environment
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

    def run(self, question: str, *, environment: Environment | None = None) -> AgentResult:
        """Runs one task; an interactive task's `environment` is played as an episode."""
        if environment is not None and not self.workflow.plays_episodes:
            raise ValueError(f"workflow '{self.workflow.name}' cannot play an environment")
        trace = Trace(budget=self.budget)
        recall = self.memory.recall(question, self.store)
        solver = Solver(self.spec, self.llm, trace, recall, environment=environment)
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

    async def arun(self, question: str, *, environment: Environment | None = None) -> AgentResult:
        """`run` in a worker thread, for callers that run many tasks from an event loop."""
        return await asyncio.to_thread(self.run, question, environment=environment)
