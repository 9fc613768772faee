"""The agent runtime: components, agent specs and the agent that runs them.

This module imports nothing but the standard library, on purpose: `agentdesign export` copies its
source verbatim into the standalone file it writes, so an exported agent runs exactly the code the
engine ran. Model calls go through a `ChatModel` handed in from outside (litellm in the engine and
in exported files, a fake in unit tests).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import math
import operator
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

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
    ) -> Completion: ...


class LLMCallError(Exception):
    """A model call failed for good (after any retries): the task fails, the run goes on."""


class TaskBudgetExceeded(Exception):
    """A task used more calls or tokens than its budget allows: a runaway loop, stopped."""


@dataclass(frozen=True)
class CallRecord:
    """One step of a task's trace: a model call or a tool call."""

    kind: str  # "llm" or "tool"
    role: str  # which part of the agent made the call, e.g. "solver" or "calculator"
    input: str
    output: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    error: str | None = None


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


SLOTS = ("workflow", "reasoning", "memory", "tool")
REGISTRY = Registry(SLOTS)
register = REGISTRY.register


@dataclass(frozen=True)
class Example:
    """A solved item shown to the model: question, optional worked solution, final answer."""

    question: str
    answer: str
    rationale: str = ""


# --- reasoning: how the model is asked to answer -------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Reasoning(Component):
    slot: ClassVar[str] = "reasoning"
    instruction: str = ""
    max_tokens: int = 512

    def render_example(self, example: Example) -> str:
        return f"Answer: {example.answer}"


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


# --- memory: what the model is shown besides the question ----------------------------------------


@dataclass(frozen=True, kw_only=True)
class Memory(Component):
    slot: ClassVar[str] = "memory"

    def select(self, pool: Sequence[Example]) -> tuple[Example, ...]:
        return ()


@register
@dataclass(frozen=True, kw_only=True)
class NoMemory(Memory):
    """Shows the question alone: no extra prompt tokens."""

    name: ClassVar[str] = "none"


@register
@dataclass(frozen=True, kw_only=True)
class FewShot(Memory):
    """Shows k solved training items before the question; costs their tokens on every call."""

    name: ClassVar[str] = "few_shot"
    k: int = param(3, low=1, high=8, doc="number of examples")
    seed: int = param(0, searchable=False, doc="which examples are drawn from the pool")

    def select(self, pool: Sequence[Example]) -> tuple[Example, ...]:
        if not pool:
            return ()
        # A fixed, seed-determined choice: a deterministic shuffle keyed on the question text.
        ranked = sorted(
            pool,
            key=lambda ex: hashlib.sha256(f"{self.seed}:{ex.question}".encode()).hexdigest(),
        )
        return tuple(ranked[: self.k])


# --- tools: what the model can call while it works -----------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Tool(Component):
    slot: ClassVar[str] = "tool"

    @property
    def protocol(self) -> str:
        """The text that teaches the model how to call the tool (empty for no tool)."""
        return ""

    def find_call(self, text: str) -> tuple[str, str] | None:
        """(text up to and including the call, the call's argument), or None if none is made."""
        return None

    def execute(self, argument: str) -> str:
        raise NotImplementedError


@register
@dataclass(frozen=True, kw_only=True)
class NoTool(Tool):
    """No tools: the model answers from its own computation."""

    name: ClassVar[str] = "none"


_CALC_LINE = re.compile(r"^\s*CALC:\s*(.+?)\s*$", re.MULTILINE)


@register
@dataclass(frozen=True, kw_only=True)
class Calculator(Tool):
    """A calculator the model calls by writing `CALC: <expression>`; each use costs a model call."""

    name: ClassVar[str] = "calculator"
    max_uses: int = param(4, low=1, high=8, doc="calculator calls allowed per attempt")
    instruction: str = param(
        "You have a calculator. To use it, write a line 'CALC: <arithmetic expression>' and stop; "
        "you will get back 'RESULT: <value>'. Example:\nCALC: 12 * (3 + 4)\nRESULT: 84",
        doc="how the tool is explained to the model",
    )

    @property
    def protocol(self) -> str:
        return self.instruction

    def find_call(self, text: str) -> tuple[str, str] | None:
        match = _CALC_LINE.search(text)
        if match is None:
            return None
        return text[: match.end()], match.group(1)

    def execute(self, argument: str) -> str:
        try:
            value = safe_eval(argument)
        except (ValueError, SyntaxError, ZeroDivisionError, OverflowError) as exc:
            return f"error: {exc}"
        return str(int(value)) if float(value).is_integer() else f"{value:.10g}"


_BINARY_OPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
}


def safe_eval(expression: str) -> float:
    """Evaluates plain arithmetic without `eval`: numbers, + - * / // % **, a few functions."""
    cleaned = expression.replace(",", "").replace("^", "**").replace("\u00d7", "*")
    cleaned = cleaned.rstrip("=").strip()
    if len(cleaned) > 200:
        raise ValueError("expression too long")
    return _eval_node(ast.parse(cleaned, mode="eval").body)


def _eval_node(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval_node(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPS:
        left, right = _eval_node(node.left), _eval_node(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponent too large")
        return float(_BINARY_OPS[type(node.op)](left, right))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return float(_FUNCTIONS[node.func.id](*(_eval_node(arg) for arg in node.args)))
    raise ValueError(f"not plain arithmetic: {ast.unparse(node)}")


# --- workflows: how the calls are orchestrated ---------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """One solution attempt: the model's last output and the answer parsed from it."""

    output: str
    answer: str


@dataclass(frozen=True, kw_only=True)
class Workflow(Component):
    slot: ClassVar[str] = "workflow"

    def run(self, solver: Solver, question: str) -> Attempt:
        raise NotImplementedError


@register
@dataclass(frozen=True, kw_only=True)
class SinglePass(Workflow):
    """One greedy attempt: the baseline every other workflow must beat on score per token."""

    name: ClassVar[str] = "single"

    def run(self, solver: Solver, question: str) -> Attempt:
        return solver.attempt(question, temperature=0.0, seed=0)


@register
@dataclass(frozen=True, kw_only=True)
class SelfConsistency(Workflow):
    """Samples n attempts and returns the majority answer: about n times the cost of one pass."""

    name: ClassVar[str] = "self_consistency"
    n_samples: int = param(5, low=2, high=9, doc="attempts to vote over")
    temperature: float = param(0.7, low=0.1, high=1.2, doc="sampling temperature")

    def run(self, solver: Solver, question: str) -> Attempt:
        attempts = [
            solver.attempt(question, temperature=self.temperature, seed=i)
            for i in range(self.n_samples)
        ]
        voted = [a for a in attempts if a.answer]
        if not voted:
            return attempts[-1]
        counts = Counter(answer_key(a.answer) for a in voted)
        best_key, _ = counts.most_common(1)[0]  # ties go to the earliest answer seen
        return next(a for a in voted if answer_key(a.answer) == best_key)


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

    @property
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
            defaults = {f.name: f.default for f in dataclasses.fields(comp)}
            changed = {
                k: v
                for k, v in comp.get_params().items()
                if v != defaults[k] and k != "instruction"
            }
            args = ", ".join(f"{k}={v}" for k, v in changed.items())
            parts.append(f"{comp.name}({args})" if args else comp.name)
        return " + ".join(parts)


_DEFAULTS = {"workflow": "single", "reasoning": "cot", "memory": "none", "tool": "none"}


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
    error_kind: str | None = None  # "llm", "budget" or "empty_output"
    error: str | None = None

    @property
    def prompt_tokens(self) -> int:
        return sum(r.prompt_tokens for r in self.trace)

    @property
    def completion_tokens(self) -> int:
        return sum(r.completion_tokens for r in self.trace)

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.trace)


class Solver:
    """Makes one solution attempt: prompt assembly, the model call and the tool loop."""

    def __init__(
        self, spec: AgentSpec, llm: ChatModel, examples: Sequence[Example], trace: Trace
    ) -> None:
        self.spec = spec
        self.llm = llm
        self.trace = trace
        reasoning = spec["reasoning"]
        tool = spec["tool"]
        assert isinstance(reasoning, Reasoning) and isinstance(tool, Tool)
        self.reasoning = reasoning
        self.tool = tool
        system = "\n\n".join(part for part in (reasoning.instruction, tool.protocol) if part)
        self.prefix: list[dict[str, str]] = [{"role": "system", "content": system}]
        for example in examples:
            self.prefix.append({"role": "user", "content": example.question})
            self.prefix.append({"role": "assistant", "content": reasoning.render_example(example)})

    def call(self, messages: Sequence[Message], *, temperature: float, seed: int) -> str:
        self.trace.check_before_call()
        try:
            done = self.llm.complete(
                model=self.spec.model,
                messages=messages,
                temperature=temperature,
                max_tokens=self.reasoning.max_tokens,
                seed=seed,
            )
        except LLMCallError as exc:
            self.trace.add(
                CallRecord(
                    kind="llm",
                    role="solver",
                    input=messages[-1]["content"],
                    output="",
                    error=str(exc),
                )
            )
            raise
        self.trace.add(
            CallRecord(
                kind="llm",
                role="solver",
                input=messages[-1]["content"],
                output=done.text,
                prompt_tokens=done.prompt_tokens,
                completion_tokens=done.completion_tokens,
                cost=done.cost,
                latency_s=done.latency_s,
                cached=done.cached,
            )
        )
        return done.text

    def attempt(self, question: str, *, temperature: float, seed: int) -> Attempt:
        messages = [*self.prefix, {"role": "user", "content": question}]
        uses = 0
        max_uses = getattr(self.tool, "max_uses", 0)
        while True:
            text = self.call(messages, temperature=temperature, seed=seed)
            tool_call = self.tool.find_call(text) if uses < max_uses else None
            if tool_call is None:
                return Attempt(output=text, answer=extract_answer(text))
            said, argument = tool_call
            started = time.perf_counter()
            result = self.tool.execute(argument)
            self.trace.add(
                CallRecord(
                    kind="tool",
                    role=self.tool.name,
                    input=argument,
                    output=result,
                    latency_s=time.perf_counter() - started,
                )
            )
            messages = [
                *messages,
                {"role": "assistant", "content": said},
                {"role": "user", "content": f"RESULT: {result}"},
            ]
            uses += 1


class Agent:
    """A runnable agent built from a spec; `run` never raises for model or budget failures."""

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
        memory = spec["memory"]
        assert isinstance(memory, Memory)
        self.examples = memory.select(train_examples)
        self.budget = budget or TaskBudget()

    def run(self, question: str) -> AgentResult:
        trace = Trace(budget=self.budget)
        solver = Solver(self.spec, self.llm, self.examples, trace)
        workflow = self.spec["workflow"]
        assert isinstance(workflow, Workflow)
        try:
            attempt = workflow.run(solver, question)
        except LLMCallError as exc:
            return AgentResult("", "", tuple(trace.records), "llm", str(exc))
        except TaskBudgetExceeded as exc:
            return AgentResult("", "", tuple(trace.records), "budget", str(exc))
        if not attempt.output.strip():
            return AgentResult(
                "", "", tuple(trace.records), "empty_output", "the model said nothing"
            )
        return AgentResult(attempt.answer, attempt.output, tuple(trace.records))
