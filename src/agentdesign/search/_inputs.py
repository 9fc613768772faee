"""What the Python API accepts, made into the engine's own objects: a benchmark, model, strategy,
space, storage and options as `create_search` takes them; plain in-memory items with a scoring
function become a `Benchmark`, and a function from chat messages to reply text a `ChatModel`.

Both are named by what they are (a digest of the items and the scorer's code; the function's
name), since the archive keys every result by benchmark and model name: a changed item or scorer
makes a new benchmark and never reuses an old result.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, cast

from agentdesign.archive import Archive
from agentdesign.components import (
    AgentDesignError,
    ChatModel,
    Completion,
    LLMCallError,
    Message,
    check_unicode,
)
from agentdesign.evaluators import Benchmark, BenchmarkError, Score, Task, get_benchmark
from agentdesign.search.config import SETTINGS, RunConfig

# PYTHON_PREFIX, CallableModel, Scorer, items_benchmark
from agentdesign.search.space import SPACE_PRESETS
from agentdesign.search.strategies import Strategy

__all__ = [
    "PYTHON_PREFIX",
    "BenchmarkInput",
    "CallableModel",
    "ItemsBenchmark",
    "ModelInput",
    "benchmark_from",
    "from_python",
    "items_benchmark",
    "model_from",
    "open_archive",
    "run_config_from",
    "space_from",
    "stored_benchmark",
    "strategy_label",
]

# A scoring function: (the agent's final output, the item's gold answer) -> a score in [0, 1].
Scorer = Callable[[str, str], float | bool]
# The stored names of Python objects (a model function, a Strategy) start with it, so that
# `load_search` knows to ask for them again: the archive cannot store them.
PYTHON_PREFIX = "python/"


class ItemsBenchmark(Benchmark):  # type: ignore[misc, unused-ignore]  # see BenchmarkError
    """In-memory items scored by a Python function; `items_benchmark` names and builds one."""

    name: ClassVar[str] = "items"
    description: ClassVar[str] = "In-memory question-answer items."

    def __init__(self, *, tasks: Sequence[Task], scorer: Scorer, scorer_name: str) -> None:
        self._tasks = tuple(tasks)
        self._scorer = scorer
        self._scorer_name = scorer_name

    def tasks(self) -> Sequence[Task]:
        return self._tasks

    def score(self, task: Task, prediction: str) -> Score:
        try:
            value = self._scorer(prediction, task.answer)
        except Exception as error:  # the user's code: one line for them, no traceback of ours
            detail = " ".join(str(error).split())[:300]
            raise BenchmarkError(
                f"scorer {self._scorer_name} raised {type(error).__name__} on task {task.id}: "
                f"{detail}"
            ) from error
        if not isinstance(value, int | float) or not 0 <= value <= 1:  # bool is an int
            raise BenchmarkError(
                f"scorer {self._scorer_name} returned {value!r} on task {task.id}, not a number "
                "in [0, 1]"
            )
        return Score(float(value), {"scorer": self._scorer_name})


def items_benchmark(items: Iterable[Mapping[str, Any]], scorer: Scorer | None) -> Benchmark:
    """A benchmark of `items` (mappings with "question" and "answer"; any other keys are kept as
    the task's metadata), each reply scored by `scorer(output, answer)`."""
    if scorer is None or not callable(scorer):
        raise AgentDesignError(
            "in-memory items need a scorer: a function (output, answer) -> score in [0, 1]"
        )
    try:
        inspect.signature(scorer).bind("output", "answer")
    except (TypeError, ValueError) as error:
        raise AgentDesignError(
            f"the scorer must accept two arguments, (output, answer): {error}"
        ) from None
    records = [_record(item, number) for number, item in enumerate(items, start=1)]
    if not records:
        raise AgentDesignError("no items: give at least one {'question': ..., 'answer': ...}")
    scorer_name = f"{getattr(scorer, '__module__', '?')}.{getattr(scorer, '__qualname__', '?')}"
    digest = hashlib.sha256(
        json.dumps(records, sort_keys=True, default=str).encode()
        + scorer_name.encode()
        + _source(scorer).encode()
    ).hexdigest()
    name = f"items-{digest[:8]}"
    tasks = [
        Task(
            id=f"{name}/{number}",
            question=record["question"],
            answer=record["answer"],
            metadata={k: v for k, v in record.items() if k not in ("question", "answer")},
        )
        for number, record in enumerate(records, start=1)
    ]
    description = (
        f"{len(tasks)} in-memory questions; a reply is scored by the Python function "
        f"{scorer_name} against the gold answer."
    )
    cls = cast(
        type[ItemsBenchmark],
        type("ItemsBenchmark", (ItemsBenchmark,), {"name": name, "description": description}),
    )
    return cls(tasks=tasks, scorer=scorer, scorer_name=scorer_name)


def _record(item: object, number: int) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        raise AgentDesignError(f"item {number} is a {type(item).__name__}, not a mapping")
    for key in ("question", "answer"):
        if key not in item:
            raise AgentDesignError(f"item {number} has no {key!r}")
    question, answer = item["question"], item["answer"]
    if not isinstance(question, str) or not question.strip():
        raise AgentDesignError(f"item {number}: 'question' must be non-empty text")
    if isinstance(answer, bool) or not isinstance(answer, str | int | float):
        raise AgentDesignError(f"item {number}: 'answer' must be text or a number")
    for key, text in (("question", question), ("answer", str(answer))):
        try:
            check_unicode(text)  # or every call for it fails, and every resume the same way
        except ValueError as error:
            raise AgentDesignError(f"item {number}: {key!r} is {error}") from None
    return {**item, "question": question, "answer": str(answer)}


def _source(function: object) -> str:
    """The function's code, so that editing the scorer makes a new benchmark ("" where Python
    cannot read it, as for a builtin)."""
    try:
        return inspect.getsource(cast(Callable[..., Any], function))
    except (OSError, TypeError):
        return ""


class CallableModel:
    """A `ChatModel` over `reply(messages) -> text`, for any model the caller drives itself.

    The function cannot say what a call cost, so tokens are counted as words, as the fake model
    counts them: budgets and the cost-matched baseline then work on that estimate. A reply stops
    before the first stop string, as a provider's does. A function that raises, or returns no
    text, fails the call as a provider outage would: the task is not scored, the run stops and is
    kept, and resuming it runs the task again.
    """

    def __init__(self, reply: Callable[[Sequence[Message]], str]) -> None:
        self.reply = reply

    def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        max_tokens: int,
        seed: int | None,
        stop: Sequence[str] = (),
    ) -> Completion:
        start = time.monotonic()
        try:
            text = self.reply(messages)
        except Exception as error:  # the caller's code: its failure is no score of the design
            raise LLMCallError(
                f"the model function raised {type(error).__name__}: {error}", transient=True
            ) from error
        if not isinstance(text, str):
            raise LLMCallError(
                f"the model function returned {type(text).__name__}, not the reply's text",
                transient=True,
            )
        for marker in stop:
            text = text.split(marker, 1)[0]
        return Completion(
            text=text,
            prompt_tokens=sum(len(m["content"].split()) for m in messages),
            completion_tokens=len(text.split()),
            latency_s=time.monotonic() - start,
        )


BenchmarkInput = str | Benchmark | Iterable[Mapping[str, Any]]
ModelInput = str | ChatModel | Callable[[Sequence[Message]], str]


# -- turning the arguments into the engine's objects --


def benchmark_from(given: BenchmarkInput, scorer: Scorer | None) -> Benchmark:
    if isinstance(given, Benchmark | str) and scorer is not None:
        raise AgentDesignError("a scorer goes with in-memory items; a benchmark scores itself")
    if isinstance(given, Benchmark):
        return given
    if isinstance(given, str):
        return get_benchmark(given)
    if not isinstance(given, Iterable):
        raise AgentDesignError(
            f"benchmark must be a name, a Benchmark or items, not {type(given).__name__}"
        )
    return items_benchmark(given, scorer)


def stored_benchmark(
    config: RunConfig,
    given: Benchmark | Iterable[Mapping[str, Any]] | None,
    scorer: Scorer | None,
) -> Benchmark | None:
    """The run's benchmark: the one passed again (checked to be the same), else the stored
    reference reopened; None when only the caller has it."""
    if given is None:
        try:
            return get_benchmark(config.benchmark)
        except BenchmarkError:
            return None
    bench = benchmark_from(given, scorer)
    if bench.reference != config.benchmark:
        raise AgentDesignError(
            f"run {config.name} searched benchmark {config.benchmark!r}; the one passed is "
            f"{bench.reference!r} (other items, or another scorer)"
        )
    return bench


def model_from(model: ModelInput, model_name: str | None) -> tuple[ChatModel | None, str]:
    """The client (None: litellm's, with the response cache) and the model's name in the run."""
    if isinstance(model, str):
        if model_name is not None:
            raise AgentDesignError("model_name names a model function; a model string is its name")
        return None, model
    if hasattr(model, "complete"):
        llm: ChatModel = model
    elif callable(model):
        llm = CallableModel(model)
    else:
        raise AgentDesignError(
            f"model must be a model string, a ChatModel or a function, not {type(model).__name__}"
        )
    label = model_name or getattr(model, "__name__", None) or type(model).__name__
    return llm, f"{PYTHON_PREFIX}{label}"


def strategy_label(strategy: str | Strategy) -> str:
    if isinstance(strategy, str):
        return strategy
    if not isinstance(strategy, Strategy):
        raise AgentDesignError(
            f"strategy must be a name or a Strategy, not {type(strategy).__name__}"
        )
    cls = type(strategy)
    return f"{PYTHON_PREFIX}{cls.__module__}.{cls.__qualname__}"


def from_python(stored: str) -> bool:
    """Whether a run's stored model or strategy name stands for a Python object."""
    return stored.startswith(PYTHON_PREFIX)


def space_from(space: str | Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The run's space settings: a preset name or JSON file (by default the table's, "quick",
    which `resolve` narrows to the benchmark), or the choices and limits of a mapping."""
    if space is None or isinstance(space, str):
        return {"space": space or _SPACE.option_default}
    if not isinstance(space, Mapping) or set(space) - {"choices", "limits"}:
        raise AgentDesignError(
            f"space must be a preset ({', '.join(SPACE_PRESETS)}) or a mapping with 'choices' "
            "and/or 'limits'"
        )
    return space


def run_config_from(fields: Mapping[str, Any], options: Mapping[str, Any]) -> RunConfig:
    """The run's config from create_search's own arguments and its other `options`, any setting
    of the table (`SETTINGS`) but the space (given as `space`) and the budget (to `optimize`)."""
    own = {*fields, *_NOT_OPTIONS}
    known = sorted({s.name for s in SETTINGS} - own)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise AgentDesignError(
            f"create_search takes no option {', '.join(unknown)} here (its other options: "
            f"{', '.join(known)}; the space goes in space=, the budget in optimize())"
        )
    settings = {**fields, **options}
    return RunConfig.of(settings.pop("name"), **settings)


_SPACE = next(s for s in SETTINGS if s.name == "space")
# Settings create_search takes otherwise than as an option: the space and the budget.
_NOT_OPTIONS = frozenset(
    {"space", "choices", "limits", "grid", "budget", "max_agents", "max_tokens", "max_minutes"}
)


def open_archive(
    storage: str | os.PathLike[str] | Archive, *, create: bool
) -> tuple[Archive, bool]:
    """The archive, and whether this API opened it (and so closes it)."""
    if isinstance(storage, Archive):
        return storage, False
    return Archive(os.fspath(storage), create=create), True
