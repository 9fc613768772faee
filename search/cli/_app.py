"""The `agentdesign` command line: run, resume, worker, finalize, show, export, evaluate, report,
benchmarks, components, strategies."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
)
from rich.table import Column, Table
from rich.text import Text

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
    Component,
    Example,
    ParamInfo,
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
    check_concurrency,
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
    default_baselines,
    finalize_run,
    resume_search,
    run_search,
    run_worker,
)
from agentdesign.search._report import write_report
from agentdesign.search._space import SPACE_PRESETS, space_from_option, unsuited_components
from agentdesign.search._strategies import STRATEGIES
from agentdesign.search._verdict import BASELINES, check_selection, holdout_choice, run_verdict

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
JsonOption = Annotated[
    bool, typer.Option("--json", help="print JSON for scripts instead of a table")
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
RaceOption = Annotated[
    bool,
    typer.Option(
        help="racing: a design earns more search items only while a paired test does not show "
        "it clearly worse than the best so far"
    ),
]
RaceAlphaOption = Annotated[
    float, typer.Option(help="racing drops a design at a one-sided p-value below this")
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
    race: bool,
    race_alpha: float,
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
    narrowing = space_from_option(space, unsuited=unsuited_components(get_benchmark(benchmark)))
    if confirm_top < 0:
        raise AgentDesignError(f"--confirm-top must not be negative, got {confirm_top}")
    return RunConfig(
        name=name,
        benchmark=benchmark,
        model=model,
        strategy=strategy,
        objective=objective,
        race=race,
        race_alpha=race_alpha,
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
        baselines=default_baselines() if baselines is None else _baselines(baselines),
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
    """Draws a run's progress: designs done and to go, the best design so far with its interval,
    an ETA, the current design's items, then the holdout phase with a line per result.

    Counts and the best come from the archive (search candidates only, other workers' included),
    so a resume starts where the run stands and a refiner's development items never count.
    """

    def __init__(
        self,
        progress: Progress,
        archive: Archive,
        budget: Budget,
        *,
        announce: Callable[[RunRecord], str] | None = None,
    ) -> None:
        self.progress = progress
        self.archive = archive
        self.budget = budget
        self.announce = announce
        self.tokens = 0
        self.items_run = 0  # by this process: the pace of the ETA
        self.items_left = 0  # of the evaluation running now
        # Why the evaluation running now is run: "candidate" or "dev" on the search split, the
        # run's role for it ("winner", "baseline", "exploratory") on the holdout; "" between.
        self.running = ""
        self.holdout = False  # the search is over: the winner and the baselines are scored
        self.holdout_done = 0
        self.done = 0
        self.best: LeaderboardRow | None = None

    def run_started(self, run: RunRecord) -> None:
        # Drawn only now, once the run passed validation, so refused input prints nothing else.
        if self.announce is not None:
            self.progress.console.print(self.announce(run))
        self.run = run
        config = RunConfig.from_dict(run.config)
        built_in = {b["label"] for b in config.baselines if b.get("spec") is None}
        # cot-sc takes its samples from CoT's cost, so CoT is scored too even when not asked for.
        extra_cot = "cot-sc" in built_in and "cot" not in built_in
        self.holdout_asked = config.confirm_top + len(config.baselines) + extra_cot
        self.holdout_planned = self.holdout_asked  # less the baselines the run will not score
        self.started_at = time.monotonic()
        self.overall: TaskID = self.progress.add_task(
            "designs", total=self.budget.max_agents, info="", deadline=None
        )
        self.current: TaskID = self.progress.add_task(
            "", total=None, visible=False, info="", tail=""
        )
        self._count_designs()

    def agent_started(self, spec: AgentSpec, n_tasks: int, n_done: int, split: str) -> None:
        if split == "holdout":
            if not self.holdout:
                self._start_holdout()
            self.running = self._holdout_role(spec)
            label = f"  {self.running}"
        elif n_tasks == len(self.run.search_task_ids):
            self.running = "candidate"
            self._count_designs()  # designs reused whole from the archive report nothing
            label = f"  design {self.done + 1}{self._of_max()}"
        else:  # a prompt refiner scores a parent on its own development items
            self.running = "dev"
            label = "  dev items"
        self.items_left = n_tasks - n_done
        self.progress.reset(
            self.current, total=n_tasks, completed=n_done, visible=True, description=label
        )
        self.progress.update(self.current, info=spec.describe(), tail=f"{self.tokens:,} tokens")
        self._update_eta()

    def task_finished(self, outcome: TaskOutcome) -> None:
        self.tokens += outcome.prompt_tokens + outcome.completion_tokens
        self.items_run += 1
        self.items_left = max(self.items_left - 1, 0)
        self.progress.advance(self.current)
        self.progress.update(self.current, tail=f"{self.tokens:,} tokens")
        self._update_eta()

    def agent_finished(self, spec: AgentSpec, evaluation: EvaluationRecord, split: str) -> None:
        role, self.running, self.items_left = self.running, "", 0
        # A refiner's development items are never the search items (see `dev_task_ids`).
        searched = split == "search" and set(evaluation.task_ids) == set(self.run.search_task_ids)
        if split == "holdout" or searched:
            scored = summarize([r.score for r in self.archive.task_results(evaluation.id).values()])
            agent = spec.spec_hash[:10]
            if split == "holdout":
                self.holdout_done += 1
                # a baseline the run will not score (cot-sc below 2 samples' worth of the
                # winner's tokens) leaves the plan once the verdict knows it
                skipped = len(run_verdict(self.archive, self.run.name).unscored)
                self.holdout_planned = max(self.holdout_asked - skipped, self.holdout_done)
                self.progress.update(
                    self.overall, completed=self.holdout_done, total=self.holdout_planned
                )
                line = f"holdout {role} {agent}: {_interval(scored)}"
            else:
                self._count_designs()
                line = f"design {self.done}{self._of_max()} {agent}: {_interval(scored)}"
                if evaluation.status == "pruned":
                    line += ", dropped by racing"
                elif self.best is not None and self.best.agent_hash == spec.spec_hash:
                    line += ", best so far"
            self.progress.console.print(line)
        self._update_eta()

    def _of_max(self) -> str:
        return "" if self.budget.max_agents is None else f"/{self.budget.max_agents}"

    def _count_designs(self) -> None:
        """Designs finished and the best of them, ranked as the run's winner will be."""
        self.done = self.archive.run_totals(self.run.name).n_finished
        top = self.archive.leaderboard(run_name=self.run.name, limit=1)
        self.best = top[0] if top else None
        best = "-" if self.best is None else _ci(_summary(self.archive, self.best))
        max_agents = self.budget.max_agents
        to_go = "" if max_agents is None else f"{max(max_agents - self.done, 0)} to go, "
        self.progress.update(self.overall, completed=self.done, info=f"{to_go}best {best}")

    def _start_holdout(self) -> None:
        """The winner is recorded now, on search scores alone: says so before any holdout item."""
        self.holdout = True
        self.run = self.archive.get_run(self.run.name)
        winner = (self.run.winner_hash or "-")[:10]
        search = "" if self.best is None else f" at {_interval(_summary(self.archive, self.best))}"
        self.progress.console.print(
            f"holdout: winner {winner} is fixed on the search items{search}; now it and the "
            f"baselines are scored on {len(self.run.holdout_task_ids)} unseen items"
        )
        self.holdout_done = sum(  # a resume may find some of them scored already
            e.status == "complete"
            for e in self.archive.run_evaluations(self.run.name, split="holdout")
        )
        self.progress.reset(
            self.overall,
            total=max(self.holdout_planned, self.holdout_done + 1),
            completed=self.holdout_done,
            description="holdout",
            info=f"winner {winner}, then the baselines",
        )

    def _holdout_role(self, spec: AgentSpec) -> str:
        """Why the run scores `spec` on the holdout: winner, baseline or exploratory."""
        roles = self.archive.run_roles(self.run.name)
        entries = self.archive.run_evaluations(self.run.name, split="holdout")
        return next(
            (roles[e.id] for e in reversed(entries) if e.agent_hash == spec.spec_hash), "holdout"
        )

    def _update_eta(self) -> None:
        seconds = self._seconds_left()
        deadline = None if seconds is None else time.monotonic() + seconds
        self.progress.update(self.overall, deadline=deadline)

    def _seconds_left(self) -> float | None:
        """Items still to run times this process's pace so far: an upper bound while racing drops
        designs early; None before the first item, or with neither an agent nor a time budget."""
        if not self.items_run:
            return None
        elapsed = time.monotonic() - self.started_at
        pace = elapsed / self.items_run
        waiting = self.holdout_planned - self.holdout_done - (self.holdout and bool(self.running))
        holdout = pace * len(self.run.holdout_task_ids) * max(waiting, 0)
        current = pace * self.items_left
        if self.holdout:
            return current + holdout
        bounds = []
        if self.budget.max_agents is not None:
            unstarted = self.budget.max_agents - self.done - (self.running == "candidate")
            bounds.append(current + pace * len(self.run.search_task_ids) * max(unstarted, 0))
        if self.budget.max_minutes is not None:
            spent = self.run.elapsed_s + elapsed
            bounds.append(max(self.budget.max_minutes * 60 - spent, 0.0))
        return min(bounds) + holdout if bounds else None


class _EtaColumn(ProgressColumn):
    """The run's row: the time left, counting down between updates (rich's own estimate needs
    steps faster than its 30-second window, and a design takes minutes). Other rows: `tail`."""

    def render(self, task: Task) -> Text:
        if "deadline" not in task.fields:
            return Text(str(task.fields.get("tail", "")))
        deadline = task.fields["deadline"]
        if deadline is None:
            return Text("ETA -:--:--")
        return Text(f"ETA {timedelta(seconds=round(max(deadline - time.monotonic(), 0)))}")


def _progress(out: Console | None = None) -> Progress:
    """Two rows that fit 80 columns: the run (designs, then the holdout) and the current design."""
    return Progress(
        TextColumn("{task.description}", table_column=Column(no_wrap=True)),
        BarColumn(bar_width=10),
        MofNCompleteColumn(),
        TextColumn(
            "{task.fields[info]}",
            markup=False,
            table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"),
        ),
        _EtaColumn(),
        console=out or console,
        expand=True,
        transient=False,
    )


def _print_summary(archive: Archive, summary: RunSummary) -> None:
    run = summary.run
    console.print(
        f"\nrun [bold]{run.name}[/]: {summary.agents_done} agents, {summary.tokens:,} tokens, "
        f"${summary.cost:.4f}, {summary.elapsed_s / 60:.1f} min; stopped: {summary.stop_reason}"
    )
    _show(archive, run.name, limit=20)


@dataclass(frozen=True)
class _Placing:
    """A leaderboard row as `show` reports it: its search score, its holdout check if any, and
    its role in the run ("winner", "exploratory" when scored on the holdout after the winner was
    fixed, else "candidate")."""

    row: LeaderboardRow
    search: ScoreSummary
    holdout: ScoreSummary | None
    role: str

    @property
    def gap(self) -> float | None:
        return None if self.holdout is None else self.search.mean - self.holdout.mean

    @property
    def tokens_per_item(self) -> float:
        return (self.row.prompt_tokens + self.row.completion_tokens) / max(self.row.n_tasks, 1)

    @property
    def s_per_item(self) -> float:
        return self.row.wall_s / max(self.row.n_tasks, 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.row.rank,
            "agent": self.row.agent_hash,
            "role": self.role,
            "design": AgentSpec.from_dict(self.row.spec).describe(),
            "search": asdict(self.search),
            "holdout": None if self.holdout is None else asdict(self.holdout),
            "gap": self.gap,
            "tokens_per_item": self.tokens_per_item,
            "s_per_item": self.s_per_item,
            "cost": self.row.cost,
            "spec": self.row.spec,
        }


def _placings(
    archive: Archive,
    run: RunRecord | None,
    *,
    limit: int,
    benchmark: str | None,
    model: str | None,
) -> list[_Placing]:
    """The leaderboard on search scores (a run's, or across runs) with the holdout scores beside.

    The winner was recorded on search scores before the holdout was touched; a holdout score of
    any other design is exploratory and can never replace it.
    """
    run_name = None if run is None else run.name
    rows = archive.leaderboard(run_name=run_name, benchmark=benchmark, model=model, limit=limit)
    holdout = {
        row.agent_hash: row
        for row in archive.leaderboard(
            run_name=run_name, benchmark=benchmark, model=model, split="holdout", limit=10_000
        )
    }
    roles = {} if run is None else archive.run_roles(run.name)
    placings = []
    for row in rows:
        check = holdout.get(row.agent_hash)
        if run is not None and row.agent_hash == run.winner_hash:
            role = "winner"
        elif check is not None and roles.get(check.evaluation_id) == "exploratory":
            role = "exploratory"
        else:
            role = "candidate"
        confirmed = None if check is None else _summary(archive, check)
        placings.append(_Placing(row, _summary(archive, row), confirmed, role))
    return placings


def _show(
    archive: Archive,
    run_name: str | None,
    *,
    limit: int,
    benchmark: str | None = None,
    model: str | None = None,
) -> None:
    """A run's verdict, then its leaderboard in two tables that fit 80 columns: the scores, then
    what each design is and costs."""
    run = None if run_name is None else archive.get_run(run_name)
    placings = _placings(archive, run, limit=limit, benchmark=benchmark, model=model)
    if run is not None:
        title = (
            f"{run.name}: {run.benchmark}, ranked on the search split "
            f"({len(run.search_task_ids)} items); holdout: {len(run.holdout_task_ids)} unseen items"
        )
        for line in run_verdict(archive, run.name).headline():
            console.print(escape(line))
        console.print()
    else:
        title = "all runs" + "".join(
            f", {what} {value}"
            for what, value in (("benchmark", benchmark), ("model", model))
            if value is not None
        )
    summaries = [p.search for p in placings] + [p.holdout for p in placings if p.holdout]
    # Borderless, so that the scores fit 80 columns whole and the designs get half of them.
    style: dict[str, Any] = {"show_edge": False, "pad_edge": False, "collapse_padding": True}
    scores = Table(caption=_interval_caption(summaries), box=box.SIMPLE_HEAD, **style)
    designs = Table(box=box.SIMPLE_HEAD, **style)
    for table, columns in (
        (scores, ("#", "agent", "search (95% CI)", "n", "holdout (95% CI)", "n", "gap")),
        (designs, ("agent", "tokens/item", "s/item", "cost $", "design")),
    ):
        for column in columns:
            left = column in ("agent", "design")
            table.add_column(
                column,
                justify="left" if left else "right",
                no_wrap=column != "design",
                overflow="fold",  # a long design breaks across lines, never cut short
            )
    for p in placings:
        rank, agent = str(p.row.rank), p.row.agent_hash[:10]
        mark = "*" if p.role == "exploratory" else ""
        held = "-" if p.holdout is None else _ci(p.holdout) + mark
        scores.add_row(
            f"{rank} winner" if p.role == "winner" else rank,
            agent,
            _ci(p.search),
            str(p.search.n),
            held,
            "-" if p.holdout is None else str(p.holdout.n),
            "-" if p.gap is None else f"{p.gap:+.3f}",
        )
        designs.add_row(
            agent,
            f"{p.tokens_per_item:,.0f}",
            f"{p.s_per_item:.1f}",
            f"{p.row.cost:.4f}",
            escape(AgentSpec.from_dict(p.row.spec).describe()),
        )
    console.print(f"[bold]{escape(title)}[/]")  # not the table's title: that wraps at its width
    console.print(scores)
    if any(p.holdout for p in placings):
        console.print("gap = search - holdout; a large positive gap means the search overfit.")
    if any(p.role == "exploratory" for p in placings):
        console.print("* exploratory: scored on the holdout after the winner was fixed, no verdict")
    console.print("\n[bold]the designs: cost and components[/]")
    console.print(designs)


def _show_json(
    archive: Archive,
    run_name: str | None,
    *,
    limit: int,
    benchmark: str | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """What `show` prints, for scripts: the verdict and the leaderboard with every interval's
    method and n."""
    run = None if run_name is None else archive.get_run(run_name)
    verdict = None if run is None else run_verdict(archive, run.name)
    return {
        "run": None if run is None else run.name,
        "benchmark": benchmark if run is None else run.benchmark,
        "model": model if run is None else run.model,
        "winner": None if run is None else run.winner_hash,
        "verdict": [] if verdict is None else verdict.headline(),
        "baselines": [
            {
                "label": b.label,
                "agent": b.baseline_hash,
                "comparison": asdict(b.comparison),
                "winner_tokens_per_item": b.winner_tokens,
                "baseline_tokens_per_item": b.baseline_tokens,
            }
            for b in (() if verdict is None else verdict.baselines)
        ],
        "overfit": None if verdict is None or verdict.overfit is None else asdict(verdict.overfit),
        "leaderboard": [
            p.to_json()
            for p in _placings(archive, run, limit=limit, benchmark=benchmark, model=model)
        ],
    }


def _summary(archive: Archive, row: LeaderboardRow) -> ScoreSummary:
    """The row's interval, recomputed from its task scores, so that archives written before the
    intervals were mended show honest ones too."""
    return summarize([r.score for r in archive.task_results(row.evaluation_id).values()])


def _ci(summary: ScoreSummary) -> str:
    return f"{summary.mean:.3f} [{summary.ci_low:.2f}, {summary.ci_high:.2f}]"


def _interval(summary: ScoreSummary) -> str:
    return f"{_ci(summary)} n={summary.n}"


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
    benchmark: BenchmarkOption = DEFAULT_BENCHMARK,
    model: ModelOption = DEFAULT_MODEL,
    strategy: StrategyOption = "tpe",
    objective: ObjectiveOption = "score",
    race: RaceOption = True,
    race_alpha: RaceAlphaOption = 0.1,
    max_agents: MaxAgentsOption = DEFAULT_MAX_AGENTS,
    max_tokens: MaxTokensOption = None,
    max_minutes: MaxMinutesOption = None,
    n_search: NSearchOption = DEFAULT_N_SEARCH,
    n_holdout: NHoldoutOption = DEFAULT_N_HOLDOUT,
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
        race=race,
        race_alpha=race_alpha,
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
                archive,
                config.budget,
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
    benchmark: BenchmarkOption = DEFAULT_BENCHMARK,
    model: ModelOption = DEFAULT_MODEL,
    strategy: StrategyOption = "tpe",
    objective: ObjectiveOption = "score",
    race: RaceOption = True,
    race_alpha: RaceAlphaOption = 0.1,
    max_agents: MaxAgentsOption = DEFAULT_MAX_AGENTS,
    max_tokens: MaxTokensOption = None,
    max_minutes: MaxMinutesOption = None,
    n_search: NSearchOption = DEFAULT_N_SEARCH,
    n_holdout: NHoldoutOption = DEFAULT_N_HOLDOUT,
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
        race=race,
        race_alpha=race_alpha,
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
    with _open(storage) as archive:
        if select_on is not None:  # refused before anything is spent
            check_selection(select_on, n_holdout=len(archive.get_run(name).holdout_task_ids))
        finalize_run(archive, name, top=top)
        _show(archive, name, limit=20)
        if select_on is not None:
            console.print(escape(holdout_choice(archive, name, n_selection=select_on).sentence()))


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
        with _progress() as progress:
            reporter = _ProgressReporter(progress, archive, budget)
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
    as_json: JsonOption = False,
    storage: StorageOption = DEFAULT_STORAGE,
) -> None:
    """Print a leaderboard: search scores, the holdout confirmation and the gap between them.

    Without a run name but with --benchmark or --model, ranks agents across all runs.
    """
    if lineage and as_json:
        raise AgentDesignError("--json prints the leaderboard; it does not combine with --lineage")
    with _open(storage) as archive:
        if lineage:
            _show_lineage(archive, name)
            return
        across_runs = name is None and (benchmark is not None or model is not None)
        run_name = None if across_runs else name or _latest_run(archive)
        if as_json:
            _print_json(
                _show_json(archive, run_name, limit=limit, benchmark=benchmark, model=model)
            )
        else:
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
    check_concurrency(concurrency)  # here too, before the archive is opened (or made)
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
def benchmarks(as_json: JsonOption = False) -> None:
    """List the benchmarks a run can use."""
    found = [(name, get_benchmark(name)) for name in available_benchmarks()]
    if as_json:
        _print_json(
            [
                {"name": name, "tasks": len(bench.tasks()), "description": bench.description}
                for name, bench in found
            ]
        )
        return
    table = Table(
        title="benchmarks",
        caption="or your own data: --benchmark jsonl:data.jsonl (settings in data.yaml beside it)",
    )
    table.add_column("name", no_wrap=True)
    table.add_column("tasks", justify="right", no_wrap=True)
    table.add_column("description")
    for name, bench in found:
        table.add_row(name, str(len(bench.tasks())), escape(bench.description))
    console.print(table)


@app.command()
def components(as_json: JsonOption = False) -> None:
    """List every component by slot, with its parameters, ranges and defaults."""
    found = [
        (slot, name, REGISTRY.get(slot, name)) for slot in SLOTS for name in REGISTRY.names(slot)
    ]
    if as_json:
        _print_json(
            [
                {
                    "slot": slot,
                    "name": name,
                    "description": _summary_line(cls),
                    "parameters": [
                        {
                            "name": f"{slot}__{info.name}",
                            "param": info.name,
                            "kind": info.kind,
                            "default": info.default,
                            "low": info.low,
                            "high": info.high,
                            "log": info.log,
                            "choices": info.choices,
                            "searchable": info.searchable,
                            "description": info.doc,
                        }
                        for info in cls.param_info()
                    ],
                }
                for slot, name, cls in found
            ]
        )
        return
    # Two columns, so that at 80 the names stay whole and the descriptions get half the width.
    table = Table(title="components (flat names: slot, slot__param)")
    table.add_column("slot, component, parameter", no_wrap=True)
    table.add_column("what it does; default, searched range")
    for slot in SLOTS:
        in_slot = [(name, cls) for s, name, cls in found if s == slot]
        table.add_row(f"[bold]{slot}[/]", f"slot: one of the {len(in_slot)} components below")
        for name, cls in in_slot:
            table.add_row(f"  [bold]{name}[/]", escape(_summary_line(cls)))
            for info in cls.param_info():
                table.add_row(f"    {slot}__{info.name}", escape(_param_text(info)))
        table.add_section()
    console.print(table)


def _summary_line(cls: type[Component]) -> str:
    """A component's docstring up to its first blank line, on one line."""
    return " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())


def _param_text(info: ParamInfo) -> str:
    """A parameter's doc, default and range, as the components listing shows them."""
    if info.choices is not None:
        span = "one of " + ", ".join(map(str, info.choices))
    elif info.low is not None:
        span = f"in {info.low}..{info.high}" + (" (log)" if info.log else "")
    else:
        span = "searched" if info.searchable else "fixed"
    default = repr(info.default) if len(repr(info.default)) < 40 else "a text"
    return f"{info.doc}; default {default}, {span}"


@app.command()
def strategies(as_json: JsonOption = False) -> None:
    """List the search strategies a run can use (--strategy)."""
    listing = [{"name": name, "description": about} for name, (about, _) in STRATEGIES.items()]
    if as_json:
        _print_json(listing)
        return
    table = Table(title="strategies")
    table.add_column("name", no_wrap=True)
    table.add_column("how it proposes designs")
    for entry in listing:
        table.add_row(entry["name"], escape(entry["description"]))
    console.print(table)


def _print_json(data: object) -> None:
    """Plain JSON on stdout: never wrapped or coloured by rich, whatever the terminal."""
    typer.echo(json.dumps(data, indent=2, default=str))


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
