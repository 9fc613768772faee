"""Meta agent search: a model reads a compact view of the run and proposes new designs (ADAS).

The view is bounded and chosen, because ADAS's archive in the prompt grew to about 32k tokens and
a later study found the full archive did worse than none: the space's catalogue, the `n_view` best
designs with their search scores and tokens per item, a few weaker ones for contrast, and tasks
the best design got wrong on the run's development items (never scored items, never the holdout).

Every design the model writes is validated against the run's space (components, parameter
ranges, snapped onto its grid), its rewritten prompts must keep their output contract and must not
copy a shown task, it is deduplicated against the run, and the value model screens the valid ones.
Each outcome, refused ones with their reason, is handed to the run (`RunView.record`), so that
nothing the meta agent does is silently dropped; its calls too, so they count in the run's budget.
With `code`, the model may also write a new workflow as a Python function (`CodeWorkflow`),
which runs in the sandbox.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from agentdesign.components import (
    REGISTRY,
    SLOTS,
    AgentDesignError,
    AgentSpec,
    ChatModel,
    CodeWorkflow,
    Completion,
    LLMCallError,
    ParamInfo,
)
from agentdesign.search.space import SearchSpace
from agentdesign.search.strategies._base import History, Proposal
from agentdesign.search.strategies._refine import Failure, clip
from agentdesign.search.strategies._reply import DesignReader

__all__ = ["META_STATUSES", "MetaAgent", "MetaOutcome", "RunView", "item_front"]

# What became of a design the meta agent wrote: evaluated ("accepted"), valid but another one of
# the same reply screened better ("screened"), refused ("invalid", "duplicate"), or no reply
# ("failed": the call failed or held no design).
META_STATUSES = ("accepted", "screened", "invalid", "duplicate", "failed")

_DOC_CHARS = 70  # of a component's description in the catalogue
_SHOWN_PROMPT_CHARS = 300  # of a rewritten prompt in a shown design
# Of a failed task shown: its question, the design's reply, the expected answer.
_FAILED_CHARS = (500, 400, 100)

_SYSTEM = (
    "You design LLM agents for a benchmark. An agent has one component in each slot: "
    "workflow, planning, reasoning, memory, tool, reflection. Reply with a JSON list of up to "
    "{n} new designs. Each design is an object with a key for each slot you set, for example "
    '{{"workflow": {{"name": "self_consistency", "n_samples": 5}}, "reasoning": "cot"}}. '
    "Slots you leave out are copied from the design to improve. Each slot takes only the "
    "components listed for it, and a component only the parameters listed after it, in their "
    "ranges. A component's text parameter (a prompt) may be given a new text; "
    "keep every phrase in single quotes exactly, since replies are parsed by them.{code}"
)
_CODE_HELP = (
    ' You may also write a new workflow in Python: set "workflow": "code" and, after the '
    "JSON, give one ```python block defining run(question, agent) that returns the agent's "
    "final reply. agent.attempt(question) solves once with the design's other components and "
    "returns a dict with 'output' and 'answer'; agent.call(messages, max_tokens=256, "
    "temperature=0.0) sends chat messages (a list of dicts with 'role' and 'content') to the "
    "model and returns its text; agent.tool(argument) uses the design's tool. The reply you "
    "return should end with a line 'Answer: <answer>'. Standard library only; no files, no "
    "network."
)


@dataclass(frozen=True)
class MetaOutcome:
    """One design the meta agent proposed (or one call that gave none) and what became of it.

    `prompt` and `response` are the call's, shared by every design of one reply; the tokens are
    the call's too, on its first outcome only, so that summing outcomes counts each call once.
    """

    operator: str
    parents: tuple[str, ...]
    prompt: str
    response: str
    status: str
    reason: str | None = None
    spec: AgentSpec | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


class RunView(Protocol):
    """What the meta agent reads of the run it designs for, and what it tells the run; the run
    engine implements it (a prompt refiner takes `failures` and the calls too)."""

    def failures(self, spec: AgentSpec) -> Sequence[Failure]:
        """Tasks `spec` got wrong on the run's development items (none without them)."""
        ...

    def tokens_per_item(self) -> Mapping[str, float]:
        """The run's fully scored designs' tokens per item, by hash."""
        ...

    def front(self) -> Mapping[str, int]:
        """The per-item Pareto front (`item_front`) of the run's fully scored designs."""
        ...

    def call_started(self, purpose: str) -> None:
        """A model call of the search itself ("meta", "refinement") starts."""
        ...

    def call_finished(self, completion: Completion, purpose: str, model: str) -> None:
        """That call returned `completion`, from `model`: the run records its cost."""
        ...

    def record(self, outcomes: Sequence[MetaOutcome]) -> None:
        """The outcomes of one meta agent call, each design with what became of it."""
        ...


@dataclass(frozen=True)
class _Shown:
    """A design as the meta agent sees it."""

    spec: AgentSpec
    score: float
    n_items: int | None
    tokens_per_item: float | None


class MetaAgent:
    """Proposes designs with one call of `model` (any litellm model string) per proposal.

    `n_view` is how many of the run's best designs the model sees (0: none, and no failures
    either: it designs from the catalogue alone); half as many weaker ones are shown for contrast.
    `run` (see `RunView`) gives tasks a design got wrong on development items, the run's designs'
    tokens per item, and the per-item Pareto front (each design best on at least one search item,
    with how many), from which the parent is drawn as GEPA does; it is told of each call (the run
    records its cost) and receives the outcomes of each. Without it the meta agent designs from
    what the history holds alone, and records nothing.
    A strategy holding it makes every `every`-th proposal a meta proposal.
    """

    def __init__(
        self,
        *,
        llm: ChatModel,
        model: str,
        space: SearchSpace,
        run: RunView | None = None,
        every: int = 1,
        n_view: int = 4,
        n_designs: int = 3,
        n_failures: int = 2,
        code: bool = False,
        max_tokens: int = 700,
        temperature: float = 0.7,
        max_prompt_chars: int = 1200,
    ) -> None:
        if every < 1:
            raise AgentDesignError(f"a meta proposal every n-th proposal needs n >= 1, got {every}")
        if n_view < 0 or n_designs < 1:
            raise AgentDesignError(
                f"the meta agent needs n_view >= 0 and n_designs >= 1, got {n_view}, {n_designs}"
            )
        if code and CodeWorkflow.name not in space.components("workflow"):
            raise AgentDesignError(
                "code workflows need the 'code' workflow in the run's space (--choices)"
            )
        self.llm = llm
        self.model = model
        self.space = space
        self.run = run
        self.every = every
        self.n_view = n_view
        self.n_designs = n_designs
        self.n_failures = n_failures
        self.code = code
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.max_prompt_chars = max_prompt_chars
        self._reader = DesignReader(
            space=space, max_designs=n_designs, max_prompt_chars=max_prompt_chars
        )

    def request_bound(self, description: str, designs: Sequence[AgentSpec]) -> tuple[int, int]:
        """The most tokens one call can use, prompt and reply, in a run of `designs` (drawn from
        its space): its catalogue, as many of them shown as it shows, `n_failures` failures at
        their clips (about four characters a token), the reply at its cap. A cost estimate
        prices the meta agent's calls by it."""
        n_shown = self.n_view + max(1, self.n_view // 2) if self.n_view else 0
        shown = [
            _Shown(spec=designs[i % len(designs)], score=1.0, n_items=999, tokens_per_item=9999.0)
            for i in range(n_shown if designs else 0)
        ]
        failed = [Failure(*("x" * n for n in _FAILED_CHARS))] * self.n_failures
        prompt = self._prompt(description, shown, failed if shown else [])
        return (len(self._system()) + len(prompt)) // 4, self.max_tokens

    def propose(
        self,
        history: History,
        rng: np.random.Generator,
        fitness: Mapping[str, float],
        screen: Callable[[list[AgentSpec]], np.ndarray],
    ) -> Proposal | None:
        """The best-screened valid design of one meta-agent reply (`screen` gives each design's
        optimistic bound), or None when the reply held none; every outcome is recorded."""
        shown = self._view(history, rng, fitness)
        parent = shown[0].spec if shown else None
        failed = self._failures_of(parent)
        prompt = self._prompt(history.description, shown, failed)
        parents = (parent.spec_hash,) if parent is not None else ()
        if self.run is not None:
            self.run.call_started("meta")
        try:
            completion = self.llm.complete(
                model=self.model,
                messages=[
                    {"role": "system", "content": self._system()},
                    {"role": "user", "content": prompt},
                ],
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                seed=int(rng.integers(2**31)),
            )
        except LLMCallError as exc:
            self._record(
                [MetaOutcome("meta", parents, prompt, "", "failed", f"call failed: {exc}")]
            )
            return None
        if self.run is not None:
            self.run.call_finished(completion, "meta", self.model)
        outcomes = self._judge(completion.text, parent, failed, history, parents, prompt)
        valid = [i for i, o in enumerate(outcomes) if o.status == "accepted"]
        chosen = None
        if valid:
            bounds = screen([outcomes[i].spec for i in valid])  # type: ignore[misc]
            chosen = valid[int(np.argmax(bounds))]
            outcomes = [
                o
                if i == chosen or o.status != "accepted"
                else replace(
                    o,
                    status="screened",
                    reason="; ".join(
                        filter(None, ["another design of the reply screened better", o.reason])
                    ),
                )
                for i, o in enumerate(outcomes)
            ]
        self._record(  # the call's tokens once, on its first outcome
            [
                replace(
                    outcome,
                    prompt_tokens=completion.prompt_tokens if n == 0 else 0,
                    completion_tokens=completion.completion_tokens if n == 0 else 0,
                )
                for n, outcome in enumerate(outcomes)
            ]
        )
        if chosen is None:
            return None
        spec = outcomes[chosen].spec
        assert spec is not None
        return Proposal(spec=spec, parents=parents, operator=outcomes[chosen].operator)

    def _record(self, outcomes: Sequence[MetaOutcome]) -> None:
        if self.run is not None:
            self.run.record(outcomes)

    # -- the view --

    def _view(
        self, history: History, rng: np.random.Generator, fitness: Mapping[str, float]
    ) -> list[_Shown]:
        """The parent to improve, then the fittest others up to `n_view`, then up to half as many
        drawn from the rest. The parent is the fittest design, or with `front` GEPA's choice: a
        design best on some search item, drawn in proportion to how many items it is best on."""
        if not self.n_view:
            return []
        ranked = sorted(history.complete, key=lambda o: -fitness.get(o.spec.spec_hash, 0.0))
        wins = dict(self.run.front()) if self.run is not None else {}
        on_front = [o for o in ranked if wins.get(o.spec.spec_hash, 0) > 0]
        if on_front:
            odds = np.array([wins[o.spec.spec_hash] for o in on_front], dtype=float)
            parent = on_front[int(rng.choice(len(on_front), p=odds / odds.sum()))]
            ranked = [parent, *(o for o in ranked if o is not parent)]
        rest = ranked[self.n_view :]
        n_contrast = min(len(rest), max(1, self.n_view // 2))
        drawn = sorted(rng.choice(len(rest), size=n_contrast, replace=False)) if rest else []
        chosen = ranked[: self.n_view] + [rest[int(i)] for i in drawn]
        tokens = self.run.tokens_per_item() if self.run is not None else {}
        return [
            _Shown(
                spec=o.spec,
                score=float(o.score or 0.0),
                n_items=o.n_items,
                tokens_per_item=tokens.get(o.spec.spec_hash),
            )
            for o in chosen
        ]

    def _failures_of(self, parent: AgentSpec | None) -> list[Failure]:
        if parent is None or self.run is None:
            return []
        return list(self.run.failures(parent))[: self.n_failures]

    def _system(self) -> str:
        return _SYSTEM.format(n=self.n_designs, code=_CODE_HELP if self.code else "")

    def _prompt(self, description: str, shown: Sequence[_Shown], failed: Sequence[Failure]) -> str:
        parts = [f"Benchmark: {description}", "Components (parameter ranges):", self._catalogue()]
        if shown:
            parts.append(
                "Designs tried: 1 is the one to improve, then the best others, then weaker ones "
                "(search score on its items, tokens per item):"
            )
            with_model = self.space.searches_models
            parts += [f"{n}. {_shown_line(s, with_model)}" for n, s in enumerate(shown, start=1)]
            parent = shown[0].spec["workflow"]
            if parent.name == CodeWorkflow.name:
                parts.append(
                    f"Design 1's workflow code:\n```python\n{parent.get_params()['source']}```"
                )
        if failed:
            parts.append("Tasks design 1 got wrong:")
            question, reply, expected = _FAILED_CHARS
            parts += [
                f"Task: {clip(f.question, question)}\nIts reply: {clip(f.output, reply)}\n"
                f"Expected: {clip(f.expected, expected)}"
                for f in failed
            ]
        goal = "better than design 1, and different from every design shown" if shown else "good"
        ask = f"Propose {self.n_designs} new designs likely to score {goal}."
        if self.code:  # small models name the code workflow and forget its code (live runs)
            ask += (
                ' A design whose workflow is "code" needs its program: after the JSON, write '
                "one ```python block defining run(question, agent)."
            )
        parts.append(ask + (" JSON only." if not self.code else ""))
        return "\n\n".join(parts)

    def _catalogue(self) -> str:
        lines = []
        for slot in SLOTS:
            entries = []
            for name in self.space.components(slot):
                cls = REGISTRY.get(slot, name)
                about = clip((inspect.getdoc(cls) or "").split(". ")[0].split("\n")[0], _DOC_CHARS)
                params = [self._param_range(slot, info) for info in cls.param_info()]
                listed = "; ".join(p for p in params if p)
                entries.append(f"{name} ({about})" + (f" [{listed}]" if listed else ""))
            lines.append(f"{slot}: " + " | ".join(entries))
        if self.space.searches_models:
            lines.append("model (the model the agent calls): " + " | ".join(self.space.models))
        return "\n".join(lines)

    def _param_range(self, slot: str, info: ParamInfo) -> str:
        if info.kind == "text":
            return "" if info.code else f"{info.name}: text"
        if not info.searchable:
            return ""
        if info.kind == "bool":
            return f"{info.name}: true|false"
        if info.kind == "choice":
            return f"{info.name}: {'|'.join(str(c) for c in info.choices or ())}"
        low, high = self.space.param_range(slot, info)
        return f"{info.name}: {_number(low)}-{_number(high)}"

    # -- judging the reply --

    def _judge(
        self,
        text: str,
        parent: AgentSpec | None,
        failed: Sequence[Failure],
        history: History,
        parents: tuple[str, ...],
        prompt: str,
    ) -> list[MetaOutcome]:
        """Each design of the reply, read (see `DesignReader`), as an outcome of this call;
        "meta-code" for a design whose workflow is code (written here or kept from the parent)."""
        return [
            MetaOutcome(
                "meta-code"
                if read.spec is not None and read.spec["workflow"].name == CodeWorkflow.name
                else "meta",
                parents,
                prompt,
                text,
                read.status,
                read.reason,
                read.spec,
            )
            for read in self._reader.read(text, parent=parent, failed=failed, seen=history.seen)
        ]


def item_front(scores: Mapping[str, Mapping[str, float]]) -> dict[str, int]:
    """GEPA's per-instance Pareto front: each design (by hash) that scores best on at least one
    item, with how many items; items no design scores on are left out, and so is a design whose
    items are a strict subset of another's (it is dominated)."""
    wins: dict[str, set[str]] = {}
    items = {item for by_item in scores.values() for item in by_item}
    for item in items:
        best = max(by_item.get(item, 0.0) for by_item in scores.values())
        if best <= 0:
            continue
        for design, by_item in scores.items():
            if by_item.get(item, 0.0) == best:
                wins.setdefault(design, set()).add(item)
    return {
        design: len(won)
        for design, won in wins.items()
        if not any(won < other for other in wins.values())
    }


def _shown_line(shown: _Shown, with_model: bool) -> str:
    items = f" on {shown.n_items} items" if shown.n_items else ""
    tokens = (
        f", {shown.tokens_per_item:.0f} tokens per item"
        if shown.tokens_per_item is not None
        else ""
    )
    design = _compact(shown.spec)
    if with_model:  # the run searches models: each design names its own
        design["model"] = shown.spec.model
    return f"score {shown.score:.2f}{items}{tokens}: {json.dumps(design)}"


def _compact(spec: AgentSpec) -> dict[str, Any]:
    """A spec as the meta agent writes one: per slot the name and what differs from defaults."""
    compact: dict[str, Any] = {}
    for slot in SLOTS:
        component = spec[slot]
        changed = {
            info.name: clip(value, _SHOWN_PROMPT_CHARS) if isinstance(value, str) else value
            for info in component.param_info()
            if (value := getattr(component, info.name)) != info.default and not info.code
        }
        compact[slot] = {"name": component.name, **changed} if changed else component.name
    return compact


def _number(value: float) -> str:
    return f"{value:g}"
