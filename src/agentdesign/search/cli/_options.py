"""The command line's shared options: the storage and output switches, and the run settings that
`run` and `worker` both take (a worker that starts a run takes the same ones), declared once in
`RunOptions` and turned into a `RunConfig` by one method."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer

from agentdesign.components import (
    DEFAULT_LLM_TIMEOUT_S,
    DEFAULT_RETRY_BUDGET_S,
    MAX_DATA_BYTES,
    AgentDesignError,
    parse_spec,
    read_text_file,
)
from agentdesign.evaluators import get_benchmark
from agentdesign.search.space import SPACE_PRESETS, space_from_option, unsuited_components
from agentdesign.search.strategies import STRATEGIES
from agentdesign.search.study import Budget, RunConfig, default_baselines
from agentdesign.search.verdict import BASELINES

__all__ = [
    "DEFAULT_STORAGE",
    "ApiBaseOption",
    "ConcurrencyOption",
    "JsonOption",
    "LLMTimeoutOption",
    "RetryBudgetOption",
    "RpmOption",
    "RunOptions",
    "StorageOption",
    "TaskTimeoutOption",
    "TpmOption",
    "UnsafeSandboxOption",
    "with_run_options",
]

DEFAULT_STORAGE = "agentdesign.db"
StorageOption = Annotated[
    str, typer.Option("--storage", "-s", help="archive: a file path or a database URL")
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="print JSON for scripts instead of a table")
]


# The run settings: `RunOptions` below gives them to `run` and `worker`.
BenchmarkOption = Annotated[
    str, typer.Option(help="benchmark name, or jsonl:PATH for your own data (.jsonl or .yaml)")
]
ModelOption = Annotated[str, typer.Option(help="litellm model string")]
StrategyOption = Annotated[str, typer.Option(help=f"one of {', '.join(STRATEGIES)}")]
ObjectiveOption = Annotated[
    str, typer.Option(help="score, or score-cost (also minimize tokens per item)")
]
RaceOption = Annotated[
    bool,
    typer.Option(
        help="racing: a design earns more search items only while it is not clearly worse "
        "than the best so far (see docs/racing.md)"
    ),
]
RaceAlphaOption = Annotated[
    float,
    typer.Option(help="racing drops a design as good as the best so far with this chance at most"),
]
MaxAgentsOption = Annotated[int | None, typer.Option(help="stop after this many agents")]
MaxTokensOption = Annotated[int | None, typer.Option(help="stop after this many tokens")]
MaxMinutesOption = Annotated[float | None, typer.Option(help="stop after this many minutes")]
NSearchOption = Annotated[int, typer.Option(help="items each agent is scored on")]
NHoldoutOption = Annotated[int, typer.Option(help="unseen items that confirm the winners")]
SeedOption = Annotated[int, typer.Option(help="seed of the strategy (the split has its own)")]
SplitSeedOption = Annotated[
    int,
    typer.Option(
        help="seed of the split into search, holdout and dev items; another one draws a fresh "
        "holdout"
    ),
]
AllowSplitOverlapOption = Annotated[
    bool,
    typer.Option(
        "--allow-split-overlap",
        help="start the run even if its search sees another run's holdout items here, or its "
        "holdout holds items another run searched (refused otherwise)",
    ),
]
ConcurrencyOption = Annotated[int, typer.Option(help="tasks run at once (1 for embedded)")]
RefineEveryOption = Annotated[
    int,
    typer.Option(help="mcts/evolution: every n-th design rewrites a prompt from failures (0: off)"),
]
MetaEveryOption = Annotated[
    int,
    typer.Option(
        help="mcts/evolution: every n-th design is written by the meta agent (0: off; "
        "--strategy meta: every design)"
    ),
]
MetaModelOption = Annotated[
    str | None,
    typer.Option(help="the meta agent's model, any litellm model string (default: --model)"),
]
MetaViewOption = Annotated[
    int, typer.Option(help="how many of the run's best designs the meta agent sees (0: none)")
]
MetaCodeOption = Annotated[
    bool, typer.Option(help="the meta agent may write workflows as Python, run in the sandbox")
]
TaskTimeoutOption = Annotated[
    float | None,
    typer.Option(help="seconds a task may take; past it the task scores 0 as a timeout"),
]
ApiBaseOption = Annotated[str | None, typer.Option(help="OpenAI-compatible server URL")]
LLMTimeoutOption = Annotated[
    float,
    typer.Option(
        "--llm-timeout", help="seconds a model call may wait for its reply before it is retried"
    ),
]
RetryBudgetOption = Annotated[
    float,
    typer.Option(
        "--retry-budget",
        help="minutes a model call the provider rate-limits keeps trying, waiting as it asks "
        "(0: tried as any failure)",
    ),
]
RpmOption = Annotated[
    float | None, typer.Option("--rpm", help="at most this many model requests a minute")
]
TpmOption = Annotated[
    float | None,
    typer.Option("--tpm", help="at most this many model tokens a minute (estimated before a call)"),
]
SpaceOption = Annotated[
    str, typer.Option(help=f"design space: {', '.join(SPACE_PRESETS)} or a JSON file")
]
ConfirmTopOption = Annotated[
    int,
    typer.Option(
        help="designs scored on the holdout at the end: the recorded winner, then the next "
        "best as exploratory results that never replace it"
    ),
]
BaselineOption = Annotated[
    list[str] | None,
    typer.Option(
        help="hand-designed agent the winner is compared with on the holdout: cot, cot-sc or a "
        "spec JSON file; repeat for several, 'none' for none (default: cot and cot-sc)"
    ),
]
UnsafeSandboxOption = Annotated[
    bool,
    typer.Option(
        "--unsafe-sandbox",
        help="run model-written code under audit hooks only where no OS sandbox works",
    ),
]
DEFAULT_MODEL = "embedded/qwen2.5-coder-1.5b"
# The default run aims at 15 minutes on 2 CPU cores with no response cached (the README has the
# measured runs). GSM8K: the quick space's designs differ there (0.00-0.62 on 8 items) and its
# program-of-thought designs answer in 7-16 s an item; 4 designs x 6 search items, then the winner
# and chain of thought (6-45 s an item) on 8 unseen items; CoT-SC runs only when the winner's
# tokens buy 2 or more CoT samples. With 8 search and 10 holdout items it took 14.3 and 15.3
# minutes. BFCL multiple (the default before) has no use for a program, and its function schemas
# make every prompt long.
DEFAULT_BENCHMARK = "gsm8k"
DEFAULT_MAX_AGENTS = 4
DEFAULT_N_SEARCH = 6
DEFAULT_N_HOLDOUT = 8


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """The run settings of `run` and `worker`, as options: each field is one, named after it."""

    benchmark: BenchmarkOption = DEFAULT_BENCHMARK
    model: ModelOption = DEFAULT_MODEL
    strategy: StrategyOption = "tpe"
    objective: ObjectiveOption = "score"
    race: RaceOption = True
    race_alpha: RaceAlphaOption = 0.1
    max_agents: MaxAgentsOption = DEFAULT_MAX_AGENTS
    max_tokens: MaxTokensOption = None
    max_minutes: MaxMinutesOption = None
    n_search: NSearchOption = DEFAULT_N_SEARCH
    n_holdout: NHoldoutOption = DEFAULT_N_HOLDOUT
    seed: SeedOption = 0
    split_seed: SplitSeedOption = 0
    allow_split_overlap: AllowSplitOverlapOption = False
    concurrency: ConcurrencyOption = 1
    task_timeout: TaskTimeoutOption = None
    refine_every: RefineEveryOption = 0
    meta_every: MetaEveryOption = 0
    meta_model: MetaModelOption = None
    meta_view: MetaViewOption = 4
    meta_code: MetaCodeOption = False
    api_base: ApiBaseOption = None
    llm_timeout: LLMTimeoutOption = DEFAULT_LLM_TIMEOUT_S
    space: SpaceOption = "quick"
    confirm_top: ConfirmTopOption = 1
    baseline: BaselineOption = None
    retry_budget: RetryBudgetOption = DEFAULT_RETRY_BUDGET_S / 60
    rpm: RpmOption = None
    tpm: TpmOption = None

    def config(self, name: str) -> RunConfig:
        """The run these options start; refuses a bad space, --confirm-top or --baseline."""
        bench = get_benchmark(self.benchmark)
        narrowing = space_from_option(self.space, unsuited=unsuited_components(bench))
        if self.confirm_top < 0:
            raise AgentDesignError(f"--confirm-top must not be negative, got {self.confirm_top}")
        budget = Budget(
            max_agents=self.max_agents, max_tokens=self.max_tokens, max_minutes=self.max_minutes
        )
        return RunConfig(
            name=name,
            benchmark=self.benchmark,
            model=self.model,
            strategy=self.strategy,
            objective=self.objective,
            race=self.race,
            race_alpha=self.race_alpha,
            budget=budget,
            n_search=self.n_search,
            n_holdout=self.n_holdout,
            split_seed=self.split_seed,
            allow_split_overlap=self.allow_split_overlap,
            seed=self.seed,
            concurrency=self.concurrency,
            task_timeout_s=self.task_timeout,
            refine_every=self.refine_every,
            meta_every=self.meta_every,
            meta_model=self.meta_model,
            meta_view=self.meta_view,
            meta_code=self.meta_code,
            confirm_top=self.confirm_top,
            api_base=self.api_base,
            llm_timeout_s=self.llm_timeout,
            choices=narrowing.get("choices", {}),
            limits=narrowing.get("limits", {}),
            baselines=default_baselines() if self.baseline is None else _baselines(self.baseline),
            retry_budget_s=self.retry_budget * 60,
            rpm=self.rpm,
            tpm=self.tpm,
        )


_KEYWORD = inspect.Parameter.KEYWORD_ONLY  # typer passes every option by name


def with_run_options(command: Callable[..., None]) -> Callable[..., None]:
    """Gives a command the fields of `RunOptions` as options, where its parameter `options` stands
    (so `--help` lists them in that place), and calls it with them gathered into one."""
    hints = get_type_hints(command, include_extras=True)
    fields = get_type_hints(RunOptions, include_extras=True)
    params: list[inspect.Parameter] = []
    for param in inspect.signature(command).parameters.values():
        if param.name != "options":
            params.append(param.replace(kind=_KEYWORD, annotation=hints[param.name]))
            continue
        params.extend(
            inspect.Parameter(f.name, _KEYWORD, default=f.default, annotation=fields[f.name])
            for f in dataclasses.fields(RunOptions)
        )

    @functools.wraps(command)
    def with_options(**values: Any) -> None:
        shared = {f.name: values.pop(f.name) for f in dataclasses.fields(RunOptions)}
        command(options=RunOptions(**shared), **values)

    with_options.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    with_options.__annotations__ = {p.name: p.annotation for p in params}
    return with_options


def _baselines(options: Sequence[str]) -> list[dict[str, Any]]:
    """`--baseline` values as a run stores them: built-ins by name, files as their spec."""
    if list(options) == ["none"]:
        return []
    chosen: list[dict[str, Any]] = []
    for option in options:
        if option in BASELINES:
            chosen.append({"label": option, "spec": None})
            continue
        path = Path(option)
        try:
            text = read_text_file(path, limit=MAX_DATA_BYTES)
        except ValueError as err:
            raise AgentDesignError(
                f"--baseline {option!r} is neither {' nor '.join(BASELINES)} nor a readable "
                f"spec file ({err})"
            ) from None
        chosen.append({"label": path.stem, "spec": parse_spec(text).to_dict()})
    return chosen
