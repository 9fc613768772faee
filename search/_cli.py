"""The `agentdesign` command line: run, resume, worker, finalize, show, export, evaluate, report,
benchmarks, components."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from agentdesign.archive import (
    Archive,
    EvaluationRecord,
    LeaderboardRow,
    RunRecord,
    evaluate_agent,
)
from agentdesign.components import (
    DEFAULT_LLM_TIMEOUT_S,
    REGISTRY,
    SLOTS,
    AgentDesignError,
    AgentSpec,
    ChatModel,
    Example,
    ProviderError,
    check_model,
    default_chat_model,
    parse_spec,
    write_agent_files,
)
from agentdesign.components._isolation import UNSAFE_ENV
from agentdesign.evaluators import (
    Benchmark,
    ScoreSummary,
    TaskOutcome,
    available_benchmarks,
    examples_from_tasks,
    get_benchmark,
    make_split,
    summarize,
)
from agentdesign.search._doctor import run_checks
from agentdesign.search._loop import (
    DEFAULT_HEARTBEAT_S,
    Budget,
    Reporter,
    RunConfig,
    RunSummary,
    finalize_run,
    resume_search,
    run_search,
    run_worker,
)
from agentdesign.search._report import write_report
from agentdesign.search._space import SPACE_PRESETS, space_from_option
from agentdesign.search._strategies import STRATEGIES
from agentdesign.search._verdict import BASELINES, run_verdict

__all__ = ["app", "main"]

app = typer.Typer(
    help="Search for the best LLM agent design for a benchmark, honestly scored.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()

DEFAULT_STORAGE = "agentdesign.db"
StorageOption = Annotated[
    str, typer.Option("--storage", "-s", help="archive: a file path or a database URL")
]


# Options that `run` and `worker` share (a worker that starts a run takes the same settings).
BenchmarkOption = Annotated[
    str, typer.Option(help="benchmark name, or jsonl:PATH for your own data (.jsonl or .yaml)")
]
ModelOption = Annotated[str, typer.Option(help="litellm model string")]
StrategyOption = Annotated[str, typer.Option(help=f"one of {', '.join(STRATEGIES)}")]
ObjectiveOption = Annotated[
    str, typer.Option(help="score, or score-cost (also minimize tokens per item)")
]
PruneOption = Annotated[
    bool, typer.Option(help="stop an agent early once it is clearly worse than the best")
]
MaxAgentsOption = Annotated[int | None, typer.Option(help="stop after this many agents")]
MaxTokensOption = Annotated[int | None, typer.Option(help="stop after this many tokens")]
MaxMinutesOption = Annotated[float | None, typer.Option(help="stop after this many minutes")]
NSearchOption = Annotated[int, typer.Option(help="items each agent is scored on")]
NHoldoutOption = Annotated[int, typer.Option(help="unseen items that confirm the winners")]
SeedOption = Annotated[int, typer.Option(help="seed of the strategy and the split")]
ConcurrencyOption = Annotated[int, typer.Option(help="tasks run at once (1 for embedded)")]
RefineEveryOption = Annotated[
    int,
    typer.Option(help="mcts/evolution: every n-th design rewrites a prompt from failures (0: off)"),
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


def _open(storage: str, *, create: bool = False) -> Archive:
    """The archive; only the commands that start work make one where there is none (a mistyped
    path for `show` says so instead of leaving an empty archive behind)."""
    return Archive(storage, create=create)


def _allow_unsafe_sandbox(allowed: bool) -> None:
    """--unsafe-sandbox: the sandbox reads it from the environment, as the workers it starts do."""
    if allowed:
        os.environ[UNSAFE_ENV] = "1"


def _chat_model(api_base: str | None, llm_timeout: float) -> ChatModel:
    if llm_timeout <= 0:
        raise AgentDesignError(f"--llm-timeout must be positive, got {llm_timeout}")
    return default_chat_model(api_base=api_base, timeout_s=llm_timeout)


def _config(
    *,
    name: str,
    benchmark: str,
    model: str,
    strategy: str,
    objective: str,
    prune: bool,
    max_agents: int | None,
    max_tokens: int | None,
    max_minutes: float | None,
    n_search: int,
    n_holdout: int,
    seed: int,
    concurrency: int,
    task_timeout: float | None,
    refine_every: int,
    api_base: str | None,
    llm_timeout: float,
    space: str,
    confirm_top: int,
    baselines: Sequence[str] | None,
) -> RunConfig:
    narrowing = space_from_option(space)
    if confirm_top < 0:
        raise AgentDesignError(f"--confirm-top must not be negative, got {confirm_top}")
    return RunConfig(
        name=name,
        benchmark=benchmark,
        model=model,
        strategy=strategy,
        objective=objective,
        prune=prune,
        budget=Budget(max_agents=max_agents, max_tokens=max_tokens, max_minutes=max_minutes),
        n_search=n_search,
        n_holdout=n_holdout,
        split_seed=seed,
        seed=seed,
        concurrency=concurrency,
        task_timeout_s=task_timeout,
        refine_every=refine_every,
        confirm_top=confirm_top,
        api_base=api_base,
        llm_timeout_s=llm_timeout,
        choices=narrowing.get("choices", {}),
        limits=narrowing.get("limits", {}),
        **({} if baselines is None else {"baselines": _baselines(baselines)}),
    )


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
            text = path.read_text()
        except OSError as err:
            raise AgentDesignError(
                f"--baseline {option!r} is neither {' nor '.join(BASELINES)} nor a readable "
                f"spec file ({err.strerror})"
            ) from None
        chosen.append({"label": path.stem, "spec": parse_spec(text).to_dict()})
    return chosen


class _ProgressReporter(Reporter):
    """Draws the run's progress: agents done, the current agent's tasks, best score, tokens, and
    the time left (rich's estimate from the pace so far)."""

    def __init__(
        self,
        progress: Progress,
        max_agents: int | None,
        done_agents: int,
        *,
        announce: Callable[[RunRecord], str] | None = None,
    ) -> None:
        self.progress = progress
        self.best = float("nan")
        self.tokens = 0
        self.max_agents = max_agents
        self.done_agents = done_agents
        self.announce = announce

    def run_started(self, run: RunRecord) -> None:
        # Drawn only now, once the run passed validation, so refused input prints nothing else.
        if self.announce is not None:
            self.progress.console.print(self.announce(run))
        self.agents: TaskID = self.progress.add_task(
            "agents", total=self.max_agents, completed=self.done_agents, best="-", tokens="0"
        )
        self.tasks: TaskID = self.progress.add_task(
            "tasks", total=None, best="", tokens="", visible=False
        )

    def agent_started(self, spec: AgentSpec, n_tasks: int, n_done: int, split: str) -> None:
        label = f"  {split}: {spec.describe()[:60]}"
        self.progress.reset(self.tasks, total=n_tasks, completed=n_done, visible=True)
        self.progress.update(self.tasks, description=label)

    def task_finished(self, outcome: TaskOutcome) -> None:
        self.tokens += outcome.prompt_tokens + outcome.completion_tokens
        self.progress.advance(self.tasks)
        self.progress.update(self.agents, tokens=f"{self.tokens:,}")

    def agent_finished(self, spec: AgentSpec, evaluation: EvaluationRecord, split: str) -> None:
        if split != "search" or evaluation.status != "complete":
            return
        mean = evaluation.mean if evaluation.mean is not None else 0.0
        if not self.best >= mean:  # also replaces the initial NaN
            self.best = mean
        self.progress.update(self.agents, best=f"{self.best:.3f}")
        self.progress.advance(self.agents)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("best {task.fields[best]}  tokens {task.fields[tokens]}"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),  # estimated from the pace so far
        console=console,
        transient=False,
    )


def _print_summary(archive: Archive, summary: RunSummary) -> None:
    run = summary.run
    console.print(
        f"\nrun [bold]{run.name}[/]: {summary.agents_done} agents, {summary.tokens:,} tokens, "
        f"${summary.cost:.4f}, {summary.elapsed_s / 60:.1f} min; stopped: {summary.stop_reason}"
    )
    _show(archive, run.name, limit=20)


def _show(
    archive: Archive,
    run_name: str | None,
    *,
    limit: int,
    benchmark: str | None = None,
    model: str | None = None,
) -> None:
    """A run's verdict, then its leaderboard on search scores with the holdout scores beside.

    The winner was recorded on search scores before the holdout was touched; a holdout score of
    any other design is exploratory and can never replace it.
    """
    rows = archive.leaderboard(run_name=run_name, benchmark=benchmark, model=model, limit=limit)
    holdout = {
        row.agent_hash: row
        for row in archive.leaderboard(
            run_name=run_name, benchmark=benchmark, model=model, split="holdout", limit=10_000
        )
    }
    winner_hash, roles = None, {}
    if run_name is not None:
        run = archive.get_run(run_name)
        winner_hash, roles = run.winner_hash, archive.run_roles(run_name)
        title = (
            f"{run.name}: {run.benchmark}, ranked on the search split "
            f"({len(run.search_task_ids)} items); holdout: {len(run.holdout_task_ids)} unseen items"
        )
        for line in run_verdict(archive, run_name).headline():
            console.print(escape(line))
    else:
        title = "all runs" + "".join(
            f", {what} {value}"
            for what, value in (("benchmark", benchmark), ("model", model))
            if value is not None
        )
    searched = [_summary(archive, row) for row in rows]
    confirmed = {h: _summary(archive, row) for h, row in holdout.items()}
    table = Table(title=title, caption=_interval_caption([*searched, *confirmed.values()]))
    for column in (
        "#", "agent", "design", "search (95% CI)", "holdout (95% CI)", "gap", "tokens/item",
        "s/item", "cost $",
    ):  # fmt: skip
        table.add_column(column, justify="left" if column in ("agent", "design") else "right")
    for row, summary in zip(rows, searched, strict=True):
        check = holdout.get(row.agent_hash)
        note = ""
        if check is not None and roles.get(check.evaluation_id) == "exploratory":
            note = " exploratory"
        n = max(row.n_tasks, 1)
        table.add_row(
            f"{row.rank} winner" if row.agent_hash == winner_hash else str(row.rank),
            row.agent_hash[:10],
            escape(AgentSpec.from_dict(row.spec).describe()),
            _interval(summary),
            _interval(confirmed[row.agent_hash]) + note if check else "-",
            f"{row.mean - check.mean:+.3f}" if check else "-",
            f"{(row.prompt_tokens + row.completion_tokens) / n:,.0f}",
            f"{row.wall_s / n:.1f}",
            f"{row.cost:.4f}",
        )
    console.print(table)
    if holdout:
        console.print(
            "gap = search - holdout; a large positive gap means the search overfit. "
            "An exploratory holdout score came after the winner was fixed: never a verdict."
        )


def _summary(archive: Archive, row: LeaderboardRow) -> ScoreSummary:
    """The row's interval, recomputed from its task scores, so that archives written before the
    intervals were mended show honest ones too."""
    return summarize([r.score for r in archive.task_results(row.evaluation_id).values()])


def _interval(summary: ScoreSummary) -> str:
    return f"{summary.mean:.3f} [{summary.ci_low:.2f}, {summary.ci_high:.2f}] n={summary.n}"


def _interval_caption(summaries: Sequence[ScoreSummary]) -> str:
    methods = sorted({s.method for s in summaries})
    return f"95% intervals: {', '.join(methods) or '-'}; n = items scored"


def _show_lineage(archive: Archive, target: str | None) -> None:
    """The ancestry of an agent (a hash prefix), or of a run's winner (a run name)."""
    runs = {run.name for run in archive.list_runs()}
    if target is None or target in runs:
        run_name = target or _latest_run(archive)
        winner = archive.get_run(run_name).winner_hash
        top = archive.leaderboard(run_name=run_name, limit=1)
        if winner is None and not top:
            raise AgentDesignError(f"run {run_name} has no finished agent yet")
        agent = archive.get_agent(winner or top[0].agent_hash)
    else:
        agent = archive.find_agent(target)
    table = Table(title=f"lineage of {agent.spec_hash[:10]}")
    for column in ("generation", "agent", "operator", "second parent", "design"):
        table.add_column(column)
    chain = archive.lineage(agent.spec_hash)
    for depth, ancestor in enumerate(chain):
        table.add_row(
            str(-depth),
            ancestor.spec_hash[:10],
            ancestor.operator or "-",
            (ancestor.co_parent_hash or "-")[:10],
            escape(AgentSpec.from_dict(ancestor.spec).describe()),
        )
    console.print(table)
    missing = chain[-1].parent_hash
    if missing is not None:
        console.print(f"(its parent {missing[:10]} is not in this archive)")


@app.command()
def run(
    name: Annotated[str | None, typer.Option(help="run name (default: run-<timestamp>)")] = None,
    benchmark: BenchmarkOption = "gsm8k",
    model: ModelOption = DEFAULT_MODEL,
    strategy: StrategyOption = "tpe",
    objective: ObjectiveOption = "score",
    prune: PruneOption = False,
    max_agents: MaxAgentsOption = 8,
    max_tokens: MaxTokensOption = None,
    max_minutes: MaxMinutesOption = None,
    n_search: NSearchOption = 10,
    n_holdout: NHoldoutOption = 10,
    seed: SeedOption = 0,
    concurrency: ConcurrencyOption = 1,
    task_timeout: TaskTimeoutOption = None,
    refine_every: RefineEveryOption = 0,
    api_base: ApiBaseOption = None,
    llm_timeout: LLMTimeoutOption = DEFAULT_LLM_TIMEOUT_S,
    space: SpaceOption = "quick",
    confirm_top: ConfirmTopOption = 1,
    baseline: BaselineOption = None,
    storage: StorageOption = DEFAULT_STORAGE,
    unsafe_sandbox: UnsafeSandboxOption = False,
) -> None:
    """Start a search and print its leaderboard."""
    _allow_unsafe_sandbox(unsafe_sandbox)
    config = _config(
        name=name or datetime.now().strftime("run-%Y%m%d-%H%M%S"),
        benchmark=benchmark,
        model=model,
        strategy=strategy,
        objective=objective,
        prune=prune,
        max_agents=max_agents,
        max_tokens=max_tokens,
        max_minutes=max_minutes,
        n_search=n_search,
        n_holdout=n_holdout,
        seed=seed,
        concurrency=concurrency,
        task_timeout=task_timeout,
        refine_every=refine_every,
        api_base=api_base,
        llm_timeout=llm_timeout,
        space=space,
        confirm_top=confirm_top,
        baselines=baseline,
    )
    with _open(storage, create=True) as archive:
        with _progress() as progress:
            reporter = _ProgressReporter(
                progress,
                config.budget.max_agents,
                0,
                announce=lambda run: (
                    f"run [bold]{run.name}[/] -> {archive.url}  (resume: agentdesign resume "
                    f"{run.name} --storage {storage})"
                ),
            )
            summary = run_search(archive, config, reporter=reporter)
        _print_summary(archive, summary)


@app.command()
def worker(
    run_name: Annotated[str, typer.Option("--run", help="the run to work on (made if missing)")],
    benchmark: BenchmarkOption = "gsm8k",
    model: ModelOption = DEFAULT_MODEL,
    strategy: StrategyOption = "tpe",
    objective: ObjectiveOption = "score",
    prune: PruneOption = False,
    max_agents: MaxAgentsOption = 8,
    max_tokens: MaxTokensOption = None,
    max_minutes: MaxMinutesOption = None,
    n_search: NSearchOption = 10,
    n_holdout: NHoldoutOption = 10,
    seed: SeedOption = 0,
    concurrency: ConcurrencyOption = 1,
    task_timeout: TaskTimeoutOption = None,
    refine_every: RefineEveryOption = 0,
    api_base: ApiBaseOption = None,
    llm_timeout: LLMTimeoutOption = DEFAULT_LLM_TIMEOUT_S,
    space: SpaceOption = "quick",
    confirm_top: ConfirmTopOption = 1,
    baseline: BaselineOption = None,
    heartbeat: Annotated[
        int, typer.Option(help="seconds between heartbeats; 3 missed ones mark a worker dead")
    ] = DEFAULT_HEARTBEAT_S,
    storage: StorageOption = DEFAULT_STORAGE,
    unsafe_sandbox: UnsafeSandboxOption = False,
) -> None:
    """Join a run as one of many workers sharing a PostgreSQL archive (SQLite: one at a time).

    The run options only apply if this worker is the one that starts the run.
    """
    _allow_unsafe_sandbox(unsafe_sandbox)
    if heartbeat < 1:
        raise AgentDesignError(f"--heartbeat must be at least 1 second, got {heartbeat}")
    config = _config(
        name=run_name,
        benchmark=benchmark,
        model=model,
        strategy=strategy,
        objective=objective,
        prune=prune,
        max_agents=max_agents,
        max_tokens=max_tokens,
        max_minutes=max_minutes,
        n_search=n_search,
        n_holdout=n_holdout,
        seed=seed,
        concurrency=concurrency,
        task_timeout=task_timeout,
        refine_every=refine_every,
        api_base=api_base,
        llm_timeout=llm_timeout,
        space=space,
        confirm_top=confirm_top,
        baselines=baseline,
    )
    with _open(storage, create=True) as archive:
        summary = run_worker(archive, config, heartbeat_s=heartbeat)
        console.print(
            f"worker done: run {run_name} has {summary.agents_done} agents; {summary.stop_reason}"
            + ("" if summary.holdout else " (holdout confirmation left to the last worker)")
        )


@app.command()
def finalize(
    name: Annotated[str, typer.Argument(help="the run whose winner to confirm")],
    top: Annotated[
        int | None,
        typer.Option(
            help="designs to score on the holdout: the recorded winner, then the next best as "
            "exploratory results (default: the run's --confirm-top)"
        ),
    ] = None,
    storage: StorageOption = DEFAULT_STORAGE,
    unsafe_sandbox: UnsafeSandboxOption = False,
) -> None:
    """Record a run's winner on search scores, then score it and the baselines on the holdout
    (resumable, never pays twice). More designs with --top are exploratory: never the winner."""
    _allow_unsafe_sandbox(unsafe_sandbox)
    with _open(storage) as archive:
        finalize_run(archive, name, top=top)
        _show(archive, name, limit=20)


@app.command()
def resume(
    name: Annotated[str, typer.Argument(help="the run to continue")],
    max_agents: Annotated[int | None, typer.Option(help="new agent budget")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="new token budget")] = None,
    max_minutes: Annotated[float | None, typer.Option(help="new time budget")] = None,
    llm_timeout: Annotated[
        float | None,
        typer.Option("--llm-timeout", help="seconds a model call may wait (default: the run's)"),
    ] = None,
    storage: StorageOption = DEFAULT_STORAGE,
    unsafe_sandbox: UnsafeSandboxOption = False,
) -> None:
    """Continue a run that was killed, stopped by its provider, or given a larger budget, without
    redoing finished tasks."""
    _allow_unsafe_sandbox(unsafe_sandbox)
    with _open(storage) as archive:
        stored = RunConfig.from_dict(archive.get_run(name).config)
        budget = stored.budget
        if max_agents is not None or max_tokens is not None or max_minutes is not None:
            budget = Budget(max_agents=max_agents, max_tokens=max_tokens, max_minutes=max_minutes)
        llm = None if llm_timeout is None else _chat_model(stored.api_base, llm_timeout)
        done = archive.run_totals(name).n_complete
        with _progress() as progress:
            reporter = _ProgressReporter(progress, budget.max_agents, done)
            summary = resume_search(archive, name, budget=budget, llm=llm, reporter=reporter)
        _print_summary(archive, summary)


@app.command()
def show(
    name: Annotated[
        str | None,
        typer.Argument(help="run name (default: the latest); with --lineage, a run or an agent"),
    ] = None,
    lineage: Annotated[bool, typer.Option(help="print an agent's ancestry instead")] = False,
    benchmark: Annotated[str | None, typer.Option(help="only this benchmark")] = None,
    model: Annotated[str | None, typer.Option(help="only agents on this model")] = None,
    limit: Annotated[int, typer.Option(help="rows to show")] = 20,
    storage: StorageOption = DEFAULT_STORAGE,
) -> None:
    """Print a leaderboard: search scores, the holdout confirmation and the gap between them.

    Without a run name but with --benchmark or --model, ranks agents across all runs.
    """
    with _open(storage) as archive:
        if lineage:
            _show_lineage(archive, name)
            return
        across_runs = name is None and (benchmark is not None or model is not None)
        run_name = None if across_runs else name or _latest_run(archive)
        _show(archive, run_name, limit=limit, benchmark=benchmark, model=model)


def _latest_run(archive: Archive) -> str:
    runs = archive.list_runs()
    if not runs:
        raise AgentDesignError(f"the archive {archive.url} holds no runs yet")
    return max(runs, key=lambda r: r.created_at).name


@app.command()
def export(
    name: Annotated[str | None, typer.Argument(help="run name (default: the latest)")] = None,
    agent: Annotated[
        str | None, typer.Option(help="agent hash prefix (default: the winner)")
    ] = None,
    pareto: Annotated[
        bool, typer.Option(help="every agent on the run's score-cost Pareto front")
    ] = False,
    out: Annotated[Path, typer.Option(help="directory to write into")] = Path("exported"),
    storage: StorageOption = DEFAULT_STORAGE,
) -> None:
    """Write agents as JSON specs plus standalone Python files that need only litellm."""
    if pareto and agent is not None:
        raise AgentDesignError("give --agent or --pareto, not both")
    with _open(storage) as archive:
        run_name = name or _latest_run(archive)
        run_record = archive.get_run(run_name)
        if agent is not None:
            specs = [AgentSpec.from_dict(archive.find_agent(agent).spec)]
        elif not pareto and run_record.winner_hash is not None:  # the recorded winner stands
            specs = [AgentSpec.from_dict(archive.get_agent(run_record.winner_hash).spec)]
        else:
            rows = (
                archive.pareto(run_name=run_name)
                if pareto
                else archive.leaderboard(run_name=run_name, limit=1)
            )
            if not rows:
                raise AgentDesignError(f"no finished agent to export in run {run_name}")
            specs = [AgentSpec.from_dict(row.spec) for row in rows]
        benchmark = get_benchmark(run_record.benchmark)
    pool = examples_from_tasks(benchmark.train_examples())
    for spec in specs:
        _export_one(spec, pool, out, benchmark)


def _export_one(spec: AgentSpec, pool: Sequence[Example], out: Path, benchmark: Benchmark) -> None:
    spec_json, py = write_agent_files(spec, train_examples=pool, out=out)
    console.print(escape(f"wrote {spec_json} and {py}  ({spec.describe()})"))
    question = benchmark.tasks()[0].question[:60]
    console.print(escape(f'  try it:   python {py} "{question}..."'))
    console.print(f"  or score it:  agentdesign evaluate {spec_json} --benchmark {benchmark.name}")


@app.command()
def evaluate(
    spec_file: Annotated[Path, typer.Argument(help="an agent spec: exported or hand-written JSON")],
    benchmark: Annotated[str, typer.Option(help="benchmark name")] = "gsm8k",
    run_name: Annotated[
        str | None,
        typer.Option("--run", help="score on this run's stored split (its benchmark and ids)"),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option(
            help="holdout or search: with --run, the run's (default holdout); without, search is "
            "a seeded draw (the default) and all the benchmark's first items"
        ),
    ] = None,
    items: Annotated[
        int | None, typer.Option(help="how many items (default: all of a run's split, else 10)")
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the split, as a run's --seed")] = 0,
    model: Annotated[str | None, typer.Option(help="run the spec on another model")] = None,
    concurrency: ConcurrencyOption = 1,
    task_timeout: TaskTimeoutOption = None,
    api_base: ApiBaseOption = None,
    llm_timeout: LLMTimeoutOption = DEFAULT_LLM_TIMEOUT_S,
    storage: StorageOption = DEFAULT_STORAGE,
    unsafe_sandbox: UnsafeSandboxOption = False,
) -> None:
    """Score any agent spec on a benchmark, with a 95% interval; results go to the archive.

    Tasks the provider fails are not scored: the same command runs them again later."""
    _allow_unsafe_sandbox(unsafe_sandbox)
    try:
        text = spec_file.read_text()
    except OSError as err:
        raise AgentDesignError(f"cannot read {spec_file}: {err.strerror}") from None
    spec = parse_spec(text)
    if model is not None:
        spec = spec.set_params(model=model)
    if items is not None and items < 1:
        raise AgentDesignError(f"--items must be at least 1, got {items}")
    if task_timeout is not None and task_timeout <= 0:
        raise AgentDesignError(f"--task-timeout must be positive, got {task_timeout}")
    split = split or ("holdout" if run_name is not None else "search")
    if split not in ("search", "holdout", "all"):
        raise AgentDesignError(f"--split must be search, holdout or all, not {split!r}")
    if run_name is None and split == "holdout":
        raise AgentDesignError(
            "--split holdout needs --run NAME: a holdout is a run's stored, unseen items"
        )
    if run_name is not None and split == "all":
        raise AgentDesignError("--run takes --split search or holdout, not all")
    llm = _chat_model(api_base, llm_timeout)
    check_model(spec.model, api_base=api_base)
    with _open(storage, create=True) as archive:
        bench, chosen = _evaluation_items(archive, run_name, benchmark, split, items, seed)
        try:
            evaluation = evaluate_agent(
                archive,
                spec,
                bench,
                bench.tasks_by_ids(chosen),
                llm=llm,
                split=split,
                train_examples=examples_from_tasks(bench.train_examples()),
                concurrency=concurrency,
                timeout_s=task_timeout,
                seed=seed,
            )
        except ProviderError as exc:
            raise ProviderError(
                f"{exc}; the tasks finished are kept: the same command runs the others once the "
                "provider answers"
            ) from exc
        assert evaluation is not None  # nothing asked it to stop
        summary = summarize([r.score for r in archive.task_results(evaluation.id).values()])
    tokens = evaluation.prompt_tokens + evaluation.completion_tokens
    console.print(
        escape(
            f"{spec.spec_hash[:10]} {spec.describe()}\n{bench.name} {split} "
            f"({len(chosen)} items): score {summary.mean:.3f} [95% CI {summary.ci_low:.2f}, "
            f"{summary.ci_high:.2f}, {summary.method}, n={summary.n}], {tokens:,} tokens, "
            f"${evaluation.cost:.4f}"
        )
    )


def _evaluation_items(
    archive: Archive,
    run_name: str | None,
    benchmark: str,
    split: str,
    items: int | None,
    seed: int,
) -> tuple[Benchmark, list[str]]:
    """The benchmark and task ids `evaluate` scores: a run's stored split, or a fresh draw of
    search items, or the benchmark's first items. (A holdout exists only as a run's: a fresh draw
    of "holdout" items could overlap the search items of any run.)"""
    if run_name is not None:
        run_record = archive.get_run(run_name)
        ids = list(
            run_record.holdout_task_ids if split == "holdout" else run_record.search_task_ids
        )
        if not ids:
            raise AgentDesignError(f"run {run_name} has no {split} items")
        return get_benchmark(run_record.benchmark), ids[:items]
    bench = get_benchmark(benchmark)
    ids = [t.id for t in bench.tasks()]
    count = items or 10
    if split == "all":
        return bench, ids[:count]
    return bench, list(make_split(ids, seed=seed, n_search=count, n_holdout=0).search_ids)


@app.command()
def report(
    name: Annotated[str | None, typer.Argument(help="run name (default: the latest)")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="HTML file")] = None,
    storage: StorageOption = DEFAULT_STORAGE,
) -> None:
    """Write a self-contained HTML report of a run (plots inline, viewable offline)."""
    with _open(storage) as archive:
        run_name = name or _latest_run(archive)
        path = output or Path(f"report-{run_name}.html")
        try:
            write_report(archive, run_name, path)
        except OSError as err:  # e.g. -o /proc/x.html, or a folder
            raise AgentDesignError(f"cannot write the report to {path}: {err.strerror}") from None
    console.print(f"wrote {path}")


@app.command()
def benchmarks() -> None:
    """List the benchmarks a run can use."""
    table = Table(
        title="benchmarks",
        caption="or your own data: --benchmark jsonl:data.jsonl (settings in data.yaml beside it)",
    )
    table.add_column("name")
    table.add_column("tasks", justify="right")
    table.add_column("description")
    for bench_name in available_benchmarks():
        bench = get_benchmark(bench_name)
        table.add_row(bench_name, str(len(bench.tasks())), escape(bench.description))
    console.print(table)


@app.command()
def components() -> None:
    """List every component by slot, with its parameters, ranges and defaults."""
    table = Table(title="components (flat names: slot, slot__param)")
    for column in ("slot", "component", "parameter", "default", "range", "what it does"):
        table.add_column(column)
    for slot in SLOTS:
        for comp_name in REGISTRY.names(slot):
            cls = REGISTRY.get(slot, comp_name)
            doc = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
            table.add_row(slot, comp_name, "", "", "", escape(doc))
            for info in cls.param_info():
                if info.choices is not None:
                    span = ", ".join(map(str, info.choices))
                elif info.low is not None:
                    span = f"{info.low} .. {info.high}" + (" (log)" if info.log else "")
                else:
                    span = "fixed" if not info.searchable else ""
                default = repr(info.default) if len(repr(info.default)) < 40 else "(text)"
                table.add_row(
                    "", "", f"{slot}__{info.name}", escape(default), span, escape(info.doc)
                )
    console.print(table)


@app.command()
def doctor(
    postgres: Annotated[
        str | None,
        typer.Option(help="PostgreSQL URL to try (default: $AGENTDESIGN_TEST_POSTGRES_URL)"),
    ] = None,
) -> None:
    """Check this machine: the sandbox's isolation, embedded threads, PostgreSQL (always exit 0)."""
    for check in run_checks(postgres):
        mark = "[green]ok[/]     " if check.ok else "[yellow]missing[/]"
        console.print(f"{check.name:<11} {mark} {escape(check.detail)}", soft_wrap=True)


def main() -> None:
    """Entry point: user errors print one line and exit 2, a provider that fails tasks even after
    the retries one line and exit 3 (the work is kept: retry later), never a traceback."""
    try:
        app()
    except ProviderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(3)
    except AgentDesignError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print(
            "interrupted: everything finished so far is saved; continue with "
            "`agentdesign resume NAME`",
            file=sys.stderr,
        )
        sys.exit(130)
