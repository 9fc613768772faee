"""The `agentdesign` command line: run, resume, show, export, benchmarks, components."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
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

from agentdesign.archive import Archive, EvaluationRecord, LeaderboardRow
from agentdesign.components import (
    REGISTRY,
    SLOTS,
    AgentDesignError,
    AgentSpec,
    render_standalone,
)
from agentdesign.evaluators import (
    TaskOutcome,
    available_benchmarks,
    examples_from_tasks,
    get_benchmark,
)
from agentdesign.search._loop import Budget, RunConfig, RunSummary, resume_search, run_search
from agentdesign.search._space import SPACE_PRESETS, space_from_option
from agentdesign.search._strategies import STRATEGIES

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


def _open(storage: str) -> Archive:
    return Archive(storage)


class _ProgressReporter:
    """Draws the run's progress: agents done, the current agent's tasks, best score, tokens, and
    the time left (rich's estimate from the pace so far)."""

    def __init__(self, progress: Progress, max_agents: int | None, done_agents: int) -> None:
        self.progress = progress
        self.best = float("nan")
        self.tokens = 0
        self.agents: TaskID = progress.add_task(
            "agents", total=max_agents, completed=done_agents, best="-", tokens="0"
        )
        self.tasks: TaskID = progress.add_task(
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


def _leaderboard_table(rows: list[LeaderboardRow], title: str) -> Table:
    table = Table(title=title)
    for column in (
        "#",
        "agent",
        "design",
        "score (95% CI)",
        "n",
        "tokens/item",
        "s/item",
        "cost $",
    ):
        table.add_column(column, justify="left" if column in ("agent", "design") else "right")
    for row in rows:
        spec = AgentSpec.from_dict(row.spec)
        n = max(row.n_tasks, 1)
        table.add_row(
            str(row.rank),
            row.agent_hash[:10],
            spec.describe(),
            f"{row.mean:.3f} [{row.ci_low:.2f}, {row.ci_high:.2f}]",
            str(row.n_tasks),
            f"{(row.prompt_tokens + row.completion_tokens) / n:,.0f}",
            f"{row.wall_s / n:.1f}",
            f"{row.cost:.4f}",
        )
    return table


def _print_summary(archive: Archive, summary: RunSummary) -> None:
    run = summary.run
    console.print(
        f"\nrun [bold]{run.name}[/]: {summary.agents_done} agents, {summary.tokens:,} tokens, "
        f"${summary.cost:.4f}, {summary.elapsed_s / 60:.1f} min; stopped: {summary.stop_reason}"
    )
    _show(archive, run.name, limit=20)


def _show(archive: Archive, run_name: str, *, limit: int) -> None:
    run = archive.get_run(run_name)
    rows = archive.leaderboard(run_name=run.name, limit=limit)
    title = f"{run.name}: {run.benchmark}, search split ({len(run.search_task_ids)} items)"
    console.print(_leaderboard_table(rows, title))
    holdout = archive.leaderboard(run_name=run.name, split="holdout", limit=limit)
    if holdout:
        title = f"holdout confirmation ({len(run.holdout_task_ids)} unseen items)"
        console.print(_leaderboard_table(holdout, title))


@app.command()
def run(
    name: Annotated[str | None, typer.Option(help="run name (default: run-<timestamp>)")] = None,
    benchmark: Annotated[str, typer.Option(help="benchmark name")] = "gsm8k",
    model: Annotated[
        str, typer.Option(help="litellm model string")
    ] = "embedded/qwen2.5-coder-1.5b",
    strategy: Annotated[str, typer.Option(help=f"one of {', '.join(STRATEGIES)}")] = "tpe",
    objective: Annotated[
        str, typer.Option(help="score, or score-cost (also minimize tokens per item)")
    ] = "score",
    prune: Annotated[
        bool, typer.Option(help="stop an agent early once it is clearly worse than the best")
    ] = False,
    max_agents: Annotated[int | None, typer.Option(help="stop after this many agents")] = 8,
    max_tokens: Annotated[int | None, typer.Option(help="stop after this many tokens")] = None,
    max_minutes: Annotated[float | None, typer.Option(help="stop after this many minutes")] = None,
    n_search: Annotated[int, typer.Option(help="items each agent is scored on")] = 10,
    n_holdout: Annotated[int, typer.Option(help="unseen items that confirm the winner")] = 10,
    seed: Annotated[int, typer.Option(help="seed of the strategy and the split")] = 0,
    concurrency: Annotated[int, typer.Option(help="tasks run at once (1 for embedded)")] = 1,
    api_base: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL")] = None,
    space: Annotated[
        str, typer.Option(help=f"design space: {', '.join(SPACE_PRESETS)} or a JSON file")
    ] = "quick",
    storage: StorageOption = DEFAULT_STORAGE,
) -> None:
    """Start a search and print its leaderboard."""
    narrowing = space_from_option(space)
    config = RunConfig(
        name=name or datetime.now().strftime("run-%Y%m%d-%H%M%S"),
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
        api_base=api_base,
        choices=narrowing.get("choices", {}),
        limits=narrowing.get("limits", {}),
    )
    with _open(storage) as archive:
        console.print(
            f"run [bold]{config.name}[/] -> {archive.url}  (resume: agentdesign resume "
            f"{config.name} --storage {storage})"
        )
        with _progress() as progress:
            reporter = _ProgressReporter(progress, config.budget.max_agents, 0)
            summary = run_search(archive, config, reporter=reporter)
        _print_summary(archive, summary)


@app.command()
def resume(
    name: Annotated[str, typer.Argument(help="the run to continue")],
    max_agents: Annotated[int | None, typer.Option(help="new agent budget")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="new token budget")] = None,
    max_minutes: Annotated[float | None, typer.Option(help="new time budget")] = None,
    storage: StorageOption = DEFAULT_STORAGE,
) -> None:
    """Continue a run that was killed (or raise its budget) without redoing finished tasks."""
    with _open(storage) as archive:
        stored = RunConfig.from_dict(archive.get_run(name).config)
        budget = stored.budget
        if max_agents is not None or max_tokens is not None or max_minutes is not None:
            budget = Budget(max_agents=max_agents, max_tokens=max_tokens, max_minutes=max_minutes)
        done = archive.run_totals(name).n_complete
        with _progress() as progress:
            reporter = _ProgressReporter(progress, budget.max_agents, done)
            summary = resume_search(archive, name, budget=budget, reporter=reporter)
        _print_summary(archive, summary)


@app.command()
def show(
    name: Annotated[str | None, typer.Argument(help="run name (default: the latest)")] = None,
    limit: Annotated[int, typer.Option(help="rows to show")] = 20,
    storage: StorageOption = DEFAULT_STORAGE,
) -> None:
    """Print a run's leaderboard, with the holdout confirmation of its winner."""
    with _open(storage) as archive:
        _show(archive, name or _latest_run(archive), limit=limit)


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
    out: Annotated[Path, typer.Option(help="directory to write into")] = Path("exported"),
    storage: StorageOption = DEFAULT_STORAGE,
) -> None:
    """Write an agent as a JSON spec plus a standalone Python file that needs only litellm."""
    with _open(storage) as archive:
        run_name = name or _latest_run(archive)
        run_record = archive.get_run(run_name)
        rows = archive.leaderboard(run_name=run_name, limit=10_000)
        if agent is not None:
            rows = [r for r in rows if r.agent_hash.startswith(agent)]
        if not rows:
            raise AgentDesignError(
                f"no finished agent to export in run {run_name}"
                + (f" matching '{agent}'" if agent else "")
            )
        spec = AgentSpec.from_dict(rows[0].spec)
        benchmark = get_benchmark(run_record.benchmark)
    pool = examples_from_tasks(benchmark.train_examples())
    out.mkdir(parents=True, exist_ok=True)
    stem = f"agent_{spec.spec_hash[:10]}"
    (out / f"{stem}.json").write_text(json.dumps(spec.to_dict(), indent=2) + "\n")
    source = render_standalone(spec, train_examples=pool, filename=f"{stem}.py")
    (out / f"{stem}.py").write_text(source)
    console.print(f"wrote {out / (stem + '.json')} and {out / (stem + '.py')}")
    console.print(
        f'try it:  python {out / (stem + ".py")} "{benchmark.tasks()[0].question[:60]}..."'
    )


@app.command()
def benchmarks() -> None:
    """List the benchmarks a run can use."""
    table = Table(title="benchmarks")
    table.add_column("name")
    table.add_column("tasks", justify="right")
    table.add_column("description")
    for bench_name in available_benchmarks():
        bench = get_benchmark(bench_name)
        table.add_row(bench_name, str(len(bench.tasks())), bench.description)
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
            table.add_row(slot, comp_name, "", "", "", doc)
            for info in cls.param_info():
                if info.choices is not None:
                    span = ", ".join(map(str, info.choices))
                elif info.low is not None:
                    span = f"{info.low} .. {info.high}" + (" (log)" if info.log else "")
                else:
                    span = "fixed" if not info.searchable else ""
                default = repr(info.default) if len(repr(info.default)) < 40 else "(text)"
                table.add_row("", "", f"{slot}__{info.name}", default, span, info.doc)
    console.print(table)


def main() -> None:
    """Entry point: user errors print one line and exit 2, never a traceback."""
    try:
        app()
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
