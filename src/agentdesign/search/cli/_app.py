"""The `agentdesign` command line: run, resume, worker, finalize, show, export, evaluate, report,
benchmarks, components, strategies, doctor. Each command checks its input, then calls the search
package; what it prints lives beside it (`_leaderboard`, `_listings`, `_progress`)."""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from agentdesign.components import (
    DEFAULT_LLM_TIMEOUT_S,
    DEFAULT_RETRY_BUDGET_S,
    MAX_DATA_BYTES,
    UNSAFE_ENV,
    AgentDesignError,
    ChatModel,
    ProviderError,
    check_model,
    default_chat_model,
    parse_spec,
    read_text_file,
    start_tracing_from_environment,
)
from agentdesign.evaluators import (
    check_concurrency,
    examples_from_tasks,
    get_benchmark,
    summarize,
)
from agentdesign.search.cli._disk import full_disk_error, open_archive
from agentdesign.search.cli._doctor import run_checks
from agentdesign.search.cli._estimate import estimate_archive, print_estimate
from agentdesign.search.cli._evaluate import evaluation_items, evaluation_split
from agentdesign.search.cli._export import designs_to_export
from agentdesign.search.cli._format import print_json
from agentdesign.search.cli._leaderboard import (
    latest_run,
    leaderboard_json,
    print_leaderboard,
    print_lineage,
    print_summary,
)
from agentdesign.search.cli._listings import list_benchmarks, list_components, list_strategies
from agentdesign.search.cli._options import (
    DEFAULT_STORAGE,
    ApiBaseOption,
    ConcurrencyOption,
    EstimateOption,
    JsonOption,
    LLMTimeoutOption,
    MaxCostOption,
    RetryBudgetOption,
    RpmOption,
    RunOptions,
    StorageOption,
    TaskTimeoutOption,
    TpmOption,
    UnsafeSandboxOption,
    with_run_options,
)
from agentdesign.search.cli._progress import ProgressReporter, progress_bars
from agentdesign.search.config import (
    MAX_WAIT_S,
    Budget,
    check_rate_limits,
    check_seconds,
    check_seed,
    default_run_note,
    holdout_looker,
    holdout_reuse,
)
from agentdesign.search.report import write_report
from agentdesign.search.study import (
    DEFAULT_HEARTBEAT_S,
    estimate_run,
    evaluate_agent,
    export_design,
    finalize_run,
    resume_search,
    run_search,
    run_worker,
)
from agentdesign.search.verdict import check_selection, holdout_choice

__all__ = ["app", "main"]

app = typer.Typer(
    help="Search for the best LLM agent design for a benchmark, honestly scored.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()


def _allow_unsafe_sandbox(allowed: bool) -> None:
    """--unsafe-sandbox: the sandbox reads it from the environment, as the workers it starts do."""
    if allowed:
        os.environ[UNSAFE_ENV] = "1"


def _chat_model(
    api_base: str | None,
    llm_timeout: float,
    *,
    retry_budget_s: float = DEFAULT_RETRY_BUDGET_S,
    rpm: float | None = None,
    tpm: float | None = None,
) -> ChatModel:
    check_seconds(llm_timeout, name="--llm-timeout")
    check_rate_limits(retry_budget_s, rpm, tpm)
    return default_chat_model(
        api_base=api_base, timeout_s=llm_timeout, retry_budget_s=retry_budget_s, rpm=rpm, tpm=tpm
    )


@app.command()
@with_run_options
def run(
    name: Annotated[str | None, typer.Option(help="run name (default: run-<timestamp>)")] = None,
    *,
    options: RunOptions,
    estimate: EstimateOption = False,
    storage: StorageOption = DEFAULT_STORAGE,
    unsafe_sandbox: UnsafeSandboxOption = False,
) -> None:
    """Start a search and print its leaderboard."""
    _allow_unsafe_sandbox(unsafe_sandbox)
    config = options.config(name or datetime.now().strftime("run-%Y%m%d-%H%M%S"))
    if estimate:
        with estimate_archive(storage) as history:
            print_estimate(console, estimate_run(config, history))
        return
    note = default_run_note(options.values, options.given)
    with open_archive(storage, create=True) as archive:
        with progress_bars(console) as progress:
            reporter = ProgressReporter(
                progress,
                archive,
                config.budget,
                announce=lambda run: (
                    f"run [bold]{run.name}[/] -> {archive.url}  (resume: agentdesign resume "
                    f"{run.name} --storage {storage})" + ("" if note is None else f"\n{note}")
                ),
            )
            summary = run_search(archive, config, reporter=reporter)
        print_summary(console, archive, summary)


@app.command()
@with_run_options
def worker(
    run_name: Annotated[str, typer.Option("--run", help="the run to work on (made if missing)")],
    options: RunOptions,
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
    if not 1 <= heartbeat <= MAX_WAIT_S:
        raise AgentDesignError(
            f"--heartbeat must be from 1 to {MAX_WAIT_S:,} seconds, got {heartbeat}"
        )
    config = options.config(run_name)
    with open_archive(storage, create=True) as archive:
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
    select_on: Annotated[
        int | None,
        typer.Option(
            help="choose among the designs scored on the holdout by its first N items only, and "
            "report the chosen one's score on the other holdout items (the final test); the "
            "recorded winner stays the winner"
        ),
    ] = None,
    storage: StorageOption = DEFAULT_STORAGE,
    unsafe_sandbox: UnsafeSandboxOption = False,
) -> None:
    """Record a run's winner on search scores, then score it and the baselines on the holdout
    (resumable, never pays twice). More designs with --top are exploratory: never the winner."""
    _allow_unsafe_sandbox(unsafe_sandbox)
    with open_archive(storage) as archive:
        if select_on is not None:  # refused before anything is spent
            check_selection(select_on, n_holdout=len(archive.get_run(name).holdout_task_ids))
        finalize_run(archive, name, top=top)
        print_leaderboard(console, archive, name, limit=20)
        if select_on is not None:
            console.print(escape(holdout_choice(archive, name, n_selection=select_on).sentence()))


@app.command()
def resume(
    name: Annotated[str, typer.Argument(help="the run to continue")],
    max_agents: Annotated[int | None, typer.Option(help="new agent budget")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="new token budget")] = None,
    max_minutes: Annotated[float | None, typer.Option(help="new time budget")] = None,
    max_cost: MaxCostOption = None,
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
    with open_archive(storage) as archive:
        budget = None  # the run's own
        if any(v is not None for v in (max_agents, max_tokens, max_minutes, max_cost)):
            budget = Budget(max_agents, max_tokens, max_minutes, max_cost)
        if llm_timeout is not None:
            check_seconds(llm_timeout, name="--llm-timeout")
        with progress_bars(console) as progress:
            reporter = ProgressReporter(progress, archive, budget)
            summary = resume_search(
                archive, name, budget=budget, llm_timeout_s=llm_timeout, reporter=reporter
            )
        print_summary(console, archive, summary)


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
    as_json: JsonOption = False,
    storage: StorageOption = DEFAULT_STORAGE,
) -> None:
    """Print a leaderboard: search scores, the holdout confirmation and the gap between them.

    Without a run name but with --benchmark or --model, ranks agents across all runs.
    """
    if lineage and as_json:
        raise AgentDesignError("--json prints the leaderboard; it does not combine with --lineage")
    with open_archive(storage) as archive:
        if lineage:
            print_lineage(console, archive, name)
            return
        across_runs = name is None and (benchmark is not None or model is not None)
        run_name = None if across_runs else name or latest_run(archive)
        if as_json:
            print_json(
                leaderboard_json(archive, run_name, limit=limit, benchmark=benchmark, model=model)
            )
        else:
            print_leaderboard(
                console, archive, run_name, limit=limit, benchmark=benchmark, model=model
            )


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
    """Write each agent as a folder to read and ship: a short agent file with its prompts, the
    prompts as the model gets them, the evidence, and the runtime (needs only litellm)."""
    if pareto and agent is not None:
        raise AgentDesignError("give --agent or --pareto, not both")
    with open_archive(storage) as archive:
        run_name = name or latest_run(archive)
        run_record = archive.get_run(run_name)
        chosen = designs_to_export(archive, run_record, agent=agent, pareto=pareto)
        benchmark = get_benchmark(run_record.benchmark)
        pool = examples_from_tasks(benchmark.train_examples())
        question = benchmark.tasks()[0].question
        for spec, why in chosen:
            if spec.spec_hash == run_record.winner_hash:
                why = "its recorded winner"
            exported = export_design(
                archive,
                run_name,
                spec,
                out=out,
                train_examples=pool,
                question=question,
                chosen_as=why,
            )
            console.print(escape(f"wrote {exported.folder}/  ({spec.describe()})"))
            console.print(escape(f'  try it:   python {exported.agent_file} "{question[:60]}..."'))
            console.print(escape(f"  read it:  {exported.agent_file}, {exported.prompts_file}"))
            console.print(
                escape(
                    f"  score it: agentdesign evaluate {exported.spec_file} "
                    f"--benchmark {benchmark.name}"
                )
            )


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
    seed: Annotated[
        int, typer.Option(help="seed of the drawn items, as a run's --split-seed, and of the agent")
    ] = 0,
    model: Annotated[str | None, typer.Option(help="run the spec on another model")] = None,
    concurrency: ConcurrencyOption = 1,
    task_timeout: TaskTimeoutOption = None,
    api_base: ApiBaseOption = None,
    llm_timeout: LLMTimeoutOption = DEFAULT_LLM_TIMEOUT_S,
    storage: StorageOption = DEFAULT_STORAGE,
    unsafe_sandbox: UnsafeSandboxOption = False,
    retry_budget: RetryBudgetOption = DEFAULT_RETRY_BUDGET_S,
    rpm: RpmOption = None,
    tpm: TpmOption = None,
) -> None:
    """Score any agent spec on a benchmark, with a 95% interval; results go to the archive.

    Tasks the provider fails are not scored: the same command runs them again later."""
    _allow_unsafe_sandbox(unsafe_sandbox)
    try:
        text = read_text_file(spec_file, limit=MAX_DATA_BYTES)
    except ValueError as err:
        raise AgentDesignError(f"cannot read {spec_file}: {err}") from None
    spec = parse_spec(text)
    if model is not None:
        spec = spec.set_params(model=model)
    if items is not None and items < 1:
        raise AgentDesignError(f"--items must be at least 1, got {items}")
    if task_timeout is not None:
        check_seconds(task_timeout, name="--task-timeout")
    check_seed(seed, name="--seed")
    check_concurrency(concurrency)  # here too, before the archive is opened (or made)
    split = evaluation_split(split, run_name=run_name)
    llm = _chat_model(api_base, llm_timeout, retry_budget_s=retry_budget, rpm=rpm, tpm=tpm)
    check_model(spec.model, api_base=api_base)
    with open_archive(storage, create=True) as archive:
        bench, chosen = evaluation_items(archive, run_name, benchmark, split, items, seed)
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
                on_start=holdout_looker(archive, bench.reference, chosen, run_name=run_name),
            )
        except ProviderError as exc:
            raise ProviderError(
                f"{exc}; the tasks finished are kept: the same command runs the others once the "
                "provider answers"
            ) from exc
        assert evaluation is not None  # nothing asked it to stop
        summary = summarize([r.score for r in archive.task_results(evaluation.id).values()])
        reuse = None if run_name is None else holdout_reuse(archive, run_name)
    tokens = evaluation.prompt_tokens + evaluation.completion_tokens
    console.print(
        escape(
            f"{spec.spec_hash[:10]} {spec.describe()}\n{bench.name} {split} "
            f"({len(chosen)} items): score {summary.mean:.3f} [95% CI {summary.ci_low:.2f}, "
            f"{summary.ci_high:.2f}, {summary.method}, n={summary.n}], {tokens:,} tokens, "
            f"${evaluation.cost:.4f}"
        )
    )
    if reuse is not None:
        console.print(escape(reuse))


@app.command()
def report(
    name: Annotated[str | None, typer.Argument(help="run name (default: the latest)")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="HTML file")] = None,
    storage: StorageOption = DEFAULT_STORAGE,
) -> None:
    """Write a self-contained HTML report of a run (plots inline, viewable offline)."""
    with open_archive(storage) as archive:
        run_name = name or latest_run(archive)
        path = output or Path(f"report-{run_name}.html")
        try:
            write_report(archive, run_name, path)
        except OSError as err:  # e.g. -o /proc/x.html, or a folder
            raise AgentDesignError(f"cannot write the report to {path}: {err.strerror}") from None
    console.print(f"wrote {path}")


@app.command()
def benchmarks(as_json: JsonOption = False) -> None:
    """List the benchmarks a run can use."""
    list_benchmarks(console, as_json=as_json)


@app.command()
def components(as_json: JsonOption = False) -> None:
    """List every component by slot, with its parameters, ranges and defaults."""
    list_components(console, as_json=as_json)


@app.command()
def strategies(as_json: JsonOption = False) -> None:
    """List the search strategies a run can use (--strategy)."""
    list_strategies(console, as_json=as_json)


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
        start_tracing_from_environment()  # AGENTDESIGN_OTEL=1: a bad setting is said at once
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
    except Exception as exc:  # a full disk before an archive was open: the response cache's
        full = full_disk_error(exc, archive=None)
        if full is None:
            raise
        print(f"error: {full}", file=sys.stderr)
        sys.exit(2)
