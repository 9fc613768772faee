"""The search loop: ask the strategy for a design, evaluate it for real, record everything.

All state lives in the archive and in the optuna study stored in the same database, never in process
memory, so a run killed at any moment resumes where it stopped: finished task results are read back
and never run again, and the trial that was in flight is retried rather than abandoned.

Any number of worker processes may drive one run on PostgreSQL (SQLite: one at a time). Each holds
a trial with a heartbeat; a trial whose heartbeat stops is failed and queued again with the same
design (optuna's RetryHeartbeatStaleTrialCallback), and the evaluation lease in the archive makes
sure no task is paid twice. The agent budget is reserved in the archive before an evaluation starts,
so workers together never evaluate more agents than it allows.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import optuna

from agentdesign.archive import (
    Archive,
    ArchiveError,
    EvaluationRecord,
    Heartbeat,
    RunRecord,
    RunTotals,
    worker_id,
)
from agentdesign.components import (
    DEFAULT_LLM_TIMEOUT_S,
    AgentDesignError,
    AgentSpec,
    ChatModel,
    Completion,
    ProviderError,
    check_model,
    default_chat_model,
)
from agentdesign.evaluators import (
    Benchmark,
    BenchmarkError,
    InteractiveBenchmark,
    TaskOutcome,
    check_concurrency,
    episode_workflows,
    examples_from_tasks,
    get_benchmark,
    make_split,
    score_interval,
)
from agentdesign.search._base import Strategy, ask_trial, history_from_study, report_items
from agentdesign.search._evaluation import evaluate_agent
from agentdesign.search._racing import Racing
from agentdesign.search._refine import Failure, PromptRefiner
from agentdesign.search._space import SearchSpace
from agentdesign.search._strategies import check_refinable, make_strategy
from agentdesign.search._value import labelled_from_archive
from agentdesign.search._verdict import BASELINES, cot_baseline, cot_sc_baseline

__all__ = [
    "Budget",
    "Reporter",
    "RunConfig",
    "RunSummary",
    "check_searchable",
    "finalize_run",
    "resume_search",
    "run_search",
    "run_worker",
]

log = logging.getLogger(__name__)

# A sampler that keeps proposing designs the run already has is stopped after this many in a row.
_MAX_REPEATS = 30
# Seconds between a worker's heartbeats; a trial or an evaluation lease unrenewed for
# _GRACE_BEATS of them belongs to a dead worker and is taken over.
DEFAULT_HEARTBEAT_S = 10
_GRACE_BEATS = 3
# Seconds that budget totals read from the archive, and elapsed time not yet written to it, may
# lag within an evaluation: a read and a write per task cost more than the task itself at 64 tasks
# at once (bench/concurrency.py). This worker's own tokens always count at once.
_TOTALS_LAG_S = 1.0


@dataclass(frozen=True)
class Budget:
    """When a run stops: after this many agents, tokens or minutes, whichever comes first."""

    max_agents: int | None = 8
    max_tokens: int | None = None
    max_minutes: float | None = None

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is not None and value <= 0:
                raise AgentDesignError(f"budget {name} must be positive, got {value}")
        if self.max_agents is None and self.max_tokens is None and self.max_minutes is None:
            raise AgentDesignError(
                "a budget needs at least one of max_agents, max_tokens, max_minutes"
            )


def default_baselines() -> list[dict[str, Any]]:
    """The built-in baselines (BASELINES) as a run stores them."""
    return [{"label": name, "spec": None} for name in BASELINES]


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines a run; stored with it so `resume` rebuilds the same run."""

    name: str
    benchmark: str = "gsm8k"
    model: str = "embedded/qwen2.5-coder-1.5b"
    strategy: str = "tpe"
    objective: str = "score"  # or "score-cost": tokens per task, minimized, as a second objective
    # Racing (see Racing): a design is dropped at a stage where a paired test shows it clearly
    # worse than the incumbent (one-sided p below race_alpha); runs stored before it race not.
    race: bool = True
    race_alpha: float = 0.1
    race_first_stage: int = 4
    budget: Budget = field(default_factory=Budget)
    n_search: int = 10
    n_holdout: int = 10
    split_seed: int = 0
    seed: int = 0
    concurrency: int = 1
    task_timeout_s: float | None = None  # a task still running then scores 0 as a "timeout"
    refine_every: int = 0  # mcts/evolution: every n-th proposal rewrites a prompt (0: never)
    # Designs scored on the holdout at the end: the recorded winner first, any more only as
    # "exploratory" results that can never replace it.
    confirm_top: int = 1
    api_base: str | None = None
    llm_timeout_s: float = DEFAULT_LLM_TIMEOUT_S  # a model call still unanswered then is retried
    choices: Mapping[str, Sequence[str]] = field(default_factory=dict)
    limits: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    # Hand-designed agents scored on the same holdout items as the winner, for the paired verdict:
    # {"label": name, "spec": None} for a built-in one (BASELINES), {"label", "spec": dict} else.
    baselines: Sequence[Mapping[str, Any]] = field(default_factory=lambda: default_baselines())
    # Token caps, sample counts and temperatures are searched on a coarse grid (see SearchSpace),
    # so two designs never differ only by noise; runs stored before the grid keep their space.
    grid: bool = True

    def __post_init__(self) -> None:
        if self.task_timeout_s is not None and self.task_timeout_s <= 0:
            raise AgentDesignError(f"task timeout must be positive, got {self.task_timeout_s}")
        if self.llm_timeout_s <= 0:
            raise AgentDesignError(f"LLM timeout must be positive, got {self.llm_timeout_s}")
        if self.refine_every < 0:
            raise AgentDesignError(f"refine_every must not be negative, got {self.refine_every}")
        if self.refine_every:
            check_refinable(self.strategy)
        check_concurrency(self.concurrency)

    def racing(self) -> Racing | None:
        return (
            Racing(alpha=self.race_alpha, first_stage=self.race_first_stage) if self.race else None
        )

    def space(self) -> SearchSpace:
        return SearchSpace(
            model=self.model, choices=self.choices, limits=self.limits, grid=self.grid
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["choices"] = {k: list(v) for k, v in self.choices.items()}
        data["limits"] = {k: list(v) for k, v in self.limits.items()}
        data["baselines"] = [dict(b) for b in self.baselines]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        # Stored before the grid and racing: searched without them (a stored `prune` now races).
        fields = {"grid": False, "race": bool(data.get("prune", False)), **data}
        fields.pop("prune", None)
        fields["budget"] = Budget(**fields["budget"])
        fields["limits"] = {k: (v[0], v[1]) for k, v in fields.get("limits", {}).items()}
        return cls(**fields)


@dataclass(frozen=True)
class RunSummary:
    """Where a run stands after `run_search` or `resume_search` returns."""

    run: RunRecord
    agents_done: int
    tokens: int
    cost: float
    elapsed_s: float
    stop_reason: str
    holdout: tuple[EvaluationRecord, ...]


class Reporter:
    """Receives progress as it happens (the CLI draws a progress bar from it).

    Every hook does nothing here, so a reporter overrides only what it draws.
    """

    def run_started(self, run: RunRecord) -> None:
        """The run passed its checks and starts (or resumes) searching."""

    def agent_started(self, spec: AgentSpec, n_tasks: int, n_done: int, split: str) -> None:
        """An evaluation starts, `n_done` of its `n_tasks` already in the archive."""

    def task_finished(self, outcome: TaskOutcome) -> None:
        """A task's result was committed."""

    def agent_finished(self, spec: AgentSpec, evaluation: EvaluationRecord, split: str) -> None:
        """An evaluation finished (complete or pruned)."""


def study_name(run_name: str) -> str:
    return f"agentdesign/{run_name}"


def run_search(
    archive: Archive,
    config: RunConfig,
    *,
    llm: ChatModel | None = None,
    reporter: Reporter | None = None,
    heartbeat_s: int = DEFAULT_HEARTBEAT_S,
) -> RunSummary:
    """Starts a new run named `config.name` and searches until its budget is spent."""
    run = _create_run(archive, config, llm=llm)
    config = RunConfig.from_dict(run.config)  # as stored: the benchmark's reference
    benchmark = get_benchmark(config.benchmark)
    return _Search(
        archive, run, config, config.space(), benchmark, llm, reporter, heartbeat_s
    ).drive()


def _create_run(
    archive: Archive,
    config: RunConfig,
    *,
    llm: ChatModel | None,
    benchmark: Benchmark | None = None,
    strategy: Strategy | None = None,
) -> RunRecord:
    """Checks the config, then stores the run with its seeded split (nothing, if a check fails).

    A `benchmark` or `strategy` object (the Python API's) stands in for the config's name of it."""
    benchmark = benchmark if benchmark is not None else get_benchmark(config.benchmark)
    # Stored as the benchmark's reference (a data file's absolute path), so resume and export
    # reopen the same benchmark from any directory.
    config = replace(config, benchmark=benchmark.reference)
    benchmark.check_ready()  # e.g. Java for an interactive benchmark, before anything is written
    config.space()  # validates the space before anything is written
    if strategy is None:  # likewise the strategy name and objective
        make_strategy(
            config.strategy, space=config.space(), seed=config.seed, objective=config.objective
        )
    if llm is None:
        check_model(config.model, api_base=config.api_base)
    split = make_split(
        [t.id for t in benchmark.tasks()],
        seed=config.split_seed,
        n_search=config.n_search,
        n_holdout=config.n_holdout,
    )
    dev_task_ids(benchmark, config)  # refused here, before writing, if the pool is too small
    run = archive.create_run(
        name=config.name,
        benchmark=config.benchmark,
        model=config.model,
        strategy=config.strategy,
        budget=asdict(config.budget),
        config=config.to_dict(),
        split_seed=config.split_seed,
        search_task_ids=split.search_ids,
        holdout_task_ids=split.holdout_ids,
    )
    return run


def dev_task_ids(benchmark: Benchmark, config: RunConfig) -> tuple[str, ...]:
    """The items a prompt refiner learns failures from: a third of the search items' count (at
    least 2), drawn after the search and holdout items in the run's seeded order, so they are
    neither; none without refinement."""
    if not config.refine_every:
        return ()
    n_dev = max(2, config.n_search // 3)
    drawn = make_split(
        [t.id for t in benchmark.tasks()],
        seed=config.split_seed,
        n_search=config.n_search,
        n_holdout=config.n_holdout + n_dev,
    )
    return drawn.holdout_ids[config.n_holdout :]


def resume_search(
    archive: Archive,
    name: str,
    *,
    budget: Budget | None = None,
    llm: ChatModel | None = None,
    reporter: Reporter | None = None,
    heartbeat_s: int = DEFAULT_HEARTBEAT_S,
) -> RunSummary:
    """Continues run `name` from what the archive holds, optionally with a new budget.

    A run whose winner is recorded has been scored on its holdout, so it cannot search on: a
    design found after that would be chosen by someone who has seen the holdout.
    """
    run = archive.get_run(name)
    if budget is not None and budget != RunConfig.from_dict(run.config).budget:
        check_searchable(run)
    return _stored_search(archive, name, budget, llm, reporter, heartbeat_s).drive()


# -- many workers and finalization ----------------------------------------------------------------


def run_worker(
    archive: Archive,
    config: RunConfig,
    *,
    llm: ChatModel | None = None,
    reporter: Reporter | None = None,
    heartbeat_s: int = DEFAULT_HEARTBEAT_S,
) -> RunSummary:
    """Joins run `config.name` as one more worker, starting the run if it does not exist yet.

    A run that exists keeps its stored config (its split, space and budget); `config` only
    starts a new one. Workers stop when the run's budget is spent; the last one to stop confirms
    the winners on holdout.
    """
    try:
        archive.get_run(config.name)
    except ArchiveError:
        try:
            _create_run(archive, config, llm=llm)
        except ArchiveError:
            archive.get_run(config.name)  # another worker created it meanwhile; else re-raise
    # Each worker seeds its strategy apart, or all would propose the same designs in the same order
    # and queue behind one another's leases (bench/workers.py measured exactly that).
    strategy_seed = config.seed + zlib.crc32(worker_id().encode())
    return _stored_search(
        archive, config.name, None, llm, reporter, heartbeat_s, strategy_seed=strategy_seed
    ).drive()


def check_searchable(run: RunRecord) -> None:
    """Refuses to search on in a run whose winner is recorded: it has been scored on the holdout,
    so a design found after that would be chosen by someone who has seen the holdout."""
    if run.winner_hash is not None:
        raise AgentDesignError(
            f"run {run.name} has fixed its winner and scored it on the holdout, so it cannot "
            "search on; start a new run instead (it reuses every evaluation archived here)"
        )


def finalize_run(
    archive: Archive,
    name: str,
    *,
    top: int | None = None,
    llm: ChatModel | None = None,
    reporter: Reporter | None = None,
) -> tuple[EvaluationRecord, ...]:
    """Confirms a run's `top` agents (default: its `confirm_top`), chosen on search scores, on
    holdout. Idempotent and resumable: confirmations already archived are reused, not paid again.
    """
    search = _stored_search(archive, name, None, llm, reporter, DEFAULT_HEARTBEAT_S)
    if top is not None:
        if top < 1:
            raise AgentDesignError(f"top must be at least 1, got {top}")
        search.config = replace(search.config, confirm_top=top)
    return search.finalize()


def _stored_search(
    archive: Archive,
    name: str,
    budget: Budget | None,
    llm: ChatModel | None,
    reporter: Reporter | None,
    heartbeat_s: int,
    *,
    strategy_seed: int | None = None,
    benchmark: Benchmark | None = None,
    strategy: Strategy | None = None,
) -> _Search:
    run = archive.get_run(name)
    config = RunConfig.from_dict(run.config)
    if budget is not None:
        config = RunConfig.from_dict({**config.to_dict(), "budget": asdict(budget)})
    benchmark = benchmark if benchmark is not None else get_benchmark(config.benchmark)
    benchmark.check_ready()
    return _Search(
        archive,
        run,
        config,
        config.space(),
        benchmark,
        llm,
        reporter,
        heartbeat_s,
        strategy_seed=config.seed if strategy_seed is None else strategy_seed,
        strategy=strategy,
    )


def _playable(space: SearchSpace, benchmark: Benchmark) -> SearchSpace:
    """The space narrowed to the workflows that can play an interactive benchmark's episodes
    (all of them when the space allows none, as the single-pass `quick` preset does)."""
    if not isinstance(benchmark, InteractiveBenchmark):
        return space
    playable = episode_workflows()
    workflows = tuple(n for n in space.components("workflow") if n in playable) or playable
    return dataclasses.replace(space, choices={**space.choices, "workflow": workflows})


class _Search:
    """One process driving one run; holds only handles, never state that a crash would lose."""

    def __init__(
        self,
        archive: Archive,
        run: RunRecord,
        config: RunConfig,
        space: SearchSpace,
        benchmark: Benchmark,
        llm: ChatModel | None,
        reporter: Reporter | None,
        heartbeat_s: int,
        strategy_seed: int | None = None,
        strategy: Strategy | None = None,
    ) -> None:
        self.archive = archive
        self.run = run
        self.config = config
        self.space = _playable(space, benchmark)
        self.benchmark = benchmark
        self.llm = (
            llm
            if llm is not None
            else default_chat_model(api_base=config.api_base, timeout_s=config.llm_timeout_s)
        )
        self.reporter = reporter or Reporter()
        self.examples = examples_from_tasks(benchmark.train_examples())
        self.search_tasks = benchmark.tasks_by_ids(run.search_task_ids)
        self.holdout_tasks = benchmark.tasks_by_ids(run.holdout_task_ids)
        self.dev_tasks = benchmark.tasks_by_ids(dev_task_ids(benchmark, config))
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # optuna warns that heartbeats are meant for Study.optimize; ask-and-tell beats by itself.
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        self.heartbeat_s = heartbeat_s
        self.storage = archive.study_storage(
            heartbeat_interval=heartbeat_s,
            grace_period=heartbeat_s * _GRACE_BEATS,
            stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(),
        )
        self.strategy = strategy or make_strategy(
            config.strategy,
            space=self.space,
            seed=config.seed if strategy_seed is None else strategy_seed,
            objective=config.objective,
            refiner=self._refiner(every=config.refine_every) if config.refine_every else None,
        )
        # Racing compares scores; a score-cost search keeps cheap weak designs for its front.
        self.racing = config.racing() if config.objective == "score" else None
        self.study = optuna.create_study(
            study_name=study_name(run.name),
            storage=self.storage,
            sampler=self.strategy.sampler(),
            directions=self.strategy.directions(),
            load_if_exists=True,
        )
        self._own_trials: set[int] = set()
        self._clock = time.monotonic()
        self._totals: tuple[float, RunTotals] | None = None  # when read, what was read
        self._tokens_since = 0  # this worker's, since then

    # -- budget --

    def _charge_time(self, *, lag_s: float = 0.0) -> None:
        """Adds the time since the last charge to the run's, unless under `lag_s` have passed."""
        now = time.monotonic()
        if now - self._clock < lag_s:
            return
        self.run = self.archive.update_run(self.run.name, add_elapsed_s=now - self._clock)
        self._clock = now

    def _stop_reason(self, *, lag_s: float = 0.0) -> str | None:
        """Why the budget stops the run now, if it does; totals read up to `lag_s` ago will do."""
        budget = self.config.budget
        if self._totals is None or time.monotonic() - self._totals[0] >= lag_s:
            self._totals = (time.monotonic(), self.archive.run_totals(self.run.name))
            self._tokens_since = 0
        totals = self._totals[1]
        if budget.max_agents is not None and totals.n_finished >= budget.max_agents:
            return f"evaluated {totals.n_finished} agents"
        tokens = totals.prompt_tokens + totals.completion_tokens + self._tokens_since
        if budget.max_tokens is not None and tokens >= budget.max_tokens:
            return f"used {tokens} tokens"
        elapsed = self.run.elapsed_s + time.monotonic() - self._clock
        if budget.max_minutes is not None and elapsed >= budget.max_minutes * 60:
            return f"ran {elapsed / 60:.1f} minutes"
        return None

    # -- the loop --

    def drive(self, *, finalize: bool = True) -> RunSummary:
        """Searches until the budget is spent, then confirms on holdout (unless not `finalize`).
        A `ProviderError`, or a `BenchmarkError` such as the user's scorer raising, marks the run
        failed and stops it; a resume (once the provider answers, or the scorer is fixed) retries
        those tasks."""
        self.archive.update_run(self.run.name, status="running")
        self.reporter.run_started(self.run)
        reason = None
        holdout: tuple[EvaluationRecord, ...] = ()
        try:
            repeats = 0
            if self.run.winner_hash is not None:  # fixed, holdout seen: the search is over
                reason = "the run's winner is recorded"
            while reason is None and (reason := self._stop_reason()) is None:
                agents_before = self.archive.run_totals(self.run.name).n_agents
                work = self.ask()
                if work is None:
                    if self.archive.single_writer:
                        reason = "every agent of the budget is taken by an unfinished evaluation"
                        break
                    time.sleep(self.heartbeat_s)  # other workers hold the last agents: wait
                    continue
                if self.score(*work) is None:
                    reason = self._stop_reason() or "stopped"
                    break
                is_repeat = self.archive.run_totals(self.run.name).n_agents == agents_before
                repeats = repeats + 1 if is_repeat else 0
                if repeats >= _MAX_REPEATS:
                    reason = "the strategy keeps proposing designs this run already evaluated"
                    break
            if finalize:
                self._wait_for_other_workers()
                holdout = self.finalize()
        except (ProviderError, BenchmarkError) as exc:  # no score was made of it: stop, keep all
            self.archive.update_run(self.run.name, status="failed")
            fixed = "the provider answers" if isinstance(exc, ProviderError) else "it is fixed"
            raise type(exc)(
                f"{exc}; run {self.run.name} stopped and is kept: `agentdesign resume "
                f"{self.run.name}` runs those tasks again once {fixed}"
            ) from exc
        finally:
            self._charge_time()
        totals = self.archive.run_totals(self.run.name)
        return RunSummary(
            run=self.run,
            agents_done=totals.n_finished,
            tokens=totals.prompt_tokens + totals.completion_tokens,
            cost=totals.cost,
            elapsed_s=self.run.elapsed_s,
            stop_reason=reason or "budget spent",
            holdout=holdout,
        )

    def finalize(self) -> tuple[EvaluationRecord, ...]:
        """Confirms the top agents on holdout and marks the run finished."""
        holdout = self._confirm_on_holdout()
        self._charge_time()
        self.run = self.archive.update_run(self.run.name, status="finished")
        return holdout

    def ask(self) -> tuple[optuna.Trial, AgentSpec] | None:
        """A trial and its design, with one of the run's agents reserved for it; None while every
        agent the budget allows is taken."""
        while (work := self._next_work()) is not None:
            trial, spec = work
            if self._admit(trial, spec):
                return work
            # another worker took the last agent
            self._finish_trial(trial.number, state=optuna.trial.TrialState.FAIL)
        return None

    def score(self, trial: optuna.Trial, spec: AgentSpec) -> EvaluationRecord | None:
        """Scores an asked design on the search items (racing it) and tells the study; None when
        the budget stopped it part-way."""
        with self._trial_heartbeat(trial):
            evaluation = self._evaluate(spec, self.search_tasks, "search", trial)
        if evaluation is not None:
            self._tell(trial, evaluation)
        return evaluation

    def tell_scores(
        self, trial: optuna.Trial, spec: AgentSpec, scores: Mapping[str, float]
    ) -> EvaluationRecord:
        """Records the caller's scores of an asked design, one per search item, and tells the
        study. A result the archive holds already stands: the archive never rewrites one."""
        evaluation = self.archive.get_or_create_evaluation(
            agent_hash=spec.spec_hash,
            benchmark=self.benchmark.name,
            task_ids=[t.id for t in self.search_tasks],
            split="search",
        )
        if evaluation.status != "complete":
            for task in self.search_tasks:
                outcome = TaskOutcome(
                    task_id=task.id,
                    output="",
                    answer=task.answer,
                    score=scores[task.id],
                    prompt_tokens=0,
                    completion_tokens=0,
                    cost=0.0,
                    latency_s=0.0,
                    details={"scored_by": "caller"},
                )
                self.archive.add_task_result(evaluation.id, outcome)
            results = self.archive.task_results(evaluation.id)
            final = [results[t.id].score for t in self.search_tasks]
            low, high, _ = score_interval(final, seed=self.config.seed)
            evaluation = self.archive.finish_evaluation(
                evaluation.id,
                status="complete",
                mean=sum(final) / len(final),
                ci_low=low,
                ci_high=high,
            )
        self._tell(trial, evaluation)
        return evaluation

    # -- workers: trials, heartbeats and the shared agent budget --

    def _next_work(self) -> tuple[optuna.Trial, AgentSpec] | None:
        """A trial and its design: a dead worker's trial queued again, else a new one; None while
        every agent the budget allows is taken and no trial waits to be retried."""
        self._reclaim_stale_trials()
        max_agents = self.config.budget.max_agents
        waiting = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        n_agents = self.archive.run_totals(self.run.name).n_agents
        if not waiting and max_agents is not None and n_agents >= max_agents:
            return None
        if waiting:  # a dead worker's design first, as it was
            trial = self.study.ask()
        else:
            history = history_from_study(
                self.study,
                description=self.benchmark.description,
                prior=labelled_from_archive(
                    self.archive,
                    benchmark=self.benchmark.name,
                    unseen=self.run.holdout_task_ids,
                )
                if self.strategy.reads_prior
                else (),
            )
            trial = ask_trial(self.study, self.strategy, history)
        self._own_trials.add(trial.number)
        self.storage.record_heartbeat(trial._trial_id)
        spec = self.space.suggest(trial)  # a retried trial has its parameters fixed: same design
        trial.set_user_attr("spec", spec.to_json())
        parents = [*(trial.user_attrs.get("parents") or []), None, None]
        self.archive.add_agent(
            spec=spec.to_dict(),
            spec_hash=spec.spec_hash,
            parent_hash=parents[0],
            co_parent_hash=parents[1],
            operator=trial.user_attrs.get("operator"),
        )
        return trial, spec

    def _reclaim_stale_trials(self) -> None:
        """Fails the trials of dead workers and queues each again (as a WAITING trial).

        On PostgreSQL a trial is dead once its heartbeat is older than the grace period. A SQLite
        archive has one writing process, this one, so any trial it does not hold is dead.
        """
        if not self.archive.single_writer:
            optuna.storages.fail_stale_trials(self.study)
            return
        retry = self.storage.get_heartbeat_stale_trial_callback()
        assert retry is not None
        for stale in self.study.get_trials(states=(optuna.trial.TrialState.RUNNING,)):
            if stale.number not in self._own_trials:
                self.study.tell(stale.number, state=optuna.trial.TrialState.FAIL)
                retry(self.study, stale)

    def _wait_for_other_workers(self) -> None:
        """Waits until no other live worker holds a trial of this run, so that the holdout
        confirmation ranks the final leaderboard; a dead worker's trial stops counting once its
        heartbeat is stale. Every worker then confirms; the leases make them share the work."""
        if self.archive.single_writer:
            return
        while True:
            optuna.storages.fail_stale_trials(self.study)
            running = self.study.get_trials(
                deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)
            )
            if all(t.number in self._own_trials for t in running):
                return
            time.sleep(self.heartbeat_s)

    @contextmanager
    def _trial_heartbeat(self, trial: optuna.Trial) -> Iterator[None]:
        beat = lambda: self.storage.record_heartbeat(trial._trial_id)  # noqa: E731
        with Heartbeat(interval_s=self.heartbeat_s, beat=beat):
            yield

    # -- prompt refinement: failures from the archive, its calls recorded as the run's cost --

    def _refiner(self, *, every: int) -> PromptRefiner:
        return PromptRefiner(
            llm=self.llm,
            model=self.config.model,
            failures=self._failures,
            on_call=self._record_search_call,
            every=every,
        )

    def _failures(self, spec: AgentSpec) -> list[Failure]:
        """The development tasks `spec` scored below 1 on, with what it answered.

        The development items are the run's own (see `dev_task_ids`): apart from the search items
        every design is scored on and from the holdout, so a rewrite is never scored on the tasks
        it learnt from. `spec` is scored on them first (archived, counted in the run's tokens,
        never ranked).
        """
        evaluation = self._evaluate(spec, self.dev_tasks, "search", None, role="dev")
        if evaluation is None:  # the budget ran out meanwhile
            return []
        tasks = {t.id: t for t in self.dev_tasks}
        return [
            Failure(question=tasks[i].question, output=r.output, expected=tasks[i].answer)
            for i, r in self.archive.task_results(evaluation.id).items()
            if r.score < 1.0
        ]

    def _record_search_call(self, completion: Completion) -> None:
        """A cached answer was paid for, and recorded, when this run first asked for it."""
        if completion.cached:
            return
        self.archive.add_search_call(
            run_name=self.run.name,
            purpose="refinement",
            model=self.config.model,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            cost=completion.cost,
            latency_s=completion.latency_s,
        )

    def _admit(self, trial: optuna.Trial, spec: AgentSpec) -> bool:
        """Reserves one of the run's agents for `spec` (or finds it holds one already)."""
        self.archive.add_agent(spec=spec.to_dict(), spec_hash=spec.spec_hash)
        evaluation = self.archive.get_or_create_evaluation(
            agent_hash=spec.spec_hash,
            benchmark=self.benchmark.name,
            task_ids=[t.id for t in self.search_tasks],
            split="search",
        )
        return self.archive.add_run_entry(
            run_name=self.run.name,
            agent_hash=spec.spec_hash,
            evaluation_id=evaluation.id,
            trial_number=trial.number,
            max_agents=self.config.budget.max_agents,
        )

    def _tell(
        self, trial: optuna.Trial | optuna.trial.FrozenTrial, evaluation: EvaluationRecord
    ) -> None:
        """Score, or score and tokens per task; a pruned evaluation is told as pruned, with its
        mean on the items it had (see `report_items`)."""
        number = trial.number
        scores = [r.score for r in self.archive.task_results(evaluation.id).values()]
        if scores:
            # a resumed trial comes back frozen: reporting needs the live handle on its id
            live = (
                trial
                if isinstance(trial, optuna.Trial)
                else optuna.Trial(self.study, trial._trial_id)
            )
            with suppress(optuna.exceptions.UpdateFinishedTrialError):
                report_items(live, sum(scores) / len(scores), len(scores))
        if evaluation.status == "pruned":
            self._finish_trial(number, state=optuna.trial.TrialState.PRUNED)
            return
        tokens = evaluation.tokens_per_item
        assert evaluation.mean is not None  # complete evaluations have one
        values = (
            [evaluation.mean] if self.config.objective == "score" else [evaluation.mean, tokens]
        )
        self._finish_trial(number, values)

    def _finish_trial(
        self,
        number: int,
        values: Sequence[float] | None = None,
        *,
        state: optuna.trial.TrialState | None = None,
    ) -> None:
        """Tells optuna how a trial ended, unless another worker has failed it meanwhile: this one
        was held up past its heartbeat, and that worker retries the design as a new trial
        (`evaluate_agent` has logged the takeover), so there is nothing left to tell."""
        with suppress(optuna.exceptions.UpdateFinishedTrialError):  # failed just now
            self.study.tell(number, values, state=state, skip_if_finished=True)

    def _evaluate(
        self,
        spec: AgentSpec,
        tasks: Sequence[Any],
        split: str,
        trial: optuna.Trial | optuna.trial.FrozenTrial | None,
        *,
        role: str = "candidate",
    ) -> EvaluationRecord | None:
        """Evaluates `spec` on `tasks`, reusing every result already archived; the run notes it
        under `role` (see `Archive.add_run_entry`).

        Returns None when the budget ran out part-way; the partial evaluation stays in the archive,
        marked running, and a resume completes it. With racing, a candidate clearly worse than the
        incumbent at a stage stops there, archived as "pruned" (see `Racing`).
        """
        ran = False
        trial_number = None if trial is None else trial.number
        stages = (
            set(self.racing.stages(len(tasks))) if self.racing and role == "candidate" else set()
        )
        opened: list[EvaluationRecord] = []
        pruned = False
        tested: set[int] = set()
        n_results = 0  # counted here, so that a check between tasks reads nothing

        def should_prune() -> bool:
            nonlocal pruned
            # Several tasks finishing together may pass a stage: it is tested once reached.
            reached = {stage for stage in stages if stage <= n_results} - tested
            if pruned or not reached or not opened:
                return pruned
            tested.update(reached)
            pruned = self._trails_incumbent(spec, self.archive.task_results(opened[0].id))
            return pruned

        def started(evaluation: EvaluationRecord, n_done: int) -> None:
            nonlocal ran, n_results
            n_results = n_done
            self.archive.add_run_entry(
                run_name=self.run.name,
                agent_hash=spec.spec_hash,
                evaluation_id=evaluation.id,
                trial_number=trial_number,
                role=role,
            )
            opened.append(evaluation)
            if evaluation.status != "complete":
                ran = True
                self.reporter.agent_started(spec, len(tasks), n_done, split)

        def recorded(outcome: TaskOutcome) -> None:
            nonlocal n_results
            n_results += 1
            self._tokens_since += outcome.prompt_tokens + outcome.completion_tokens
            self._charge_time(lag_s=_TOTALS_LAG_S)
            self.reporter.task_finished(outcome)

        # Token and time budgets may stop a search evaluation part-way; the holdout confirmation
        # of the chosen winner always runs to the end.
        evaluation = evaluate_agent(
            self.archive,
            spec,
            self.benchmark,
            tasks,
            llm=self.llm,
            split=split,
            train_examples=self.examples,
            concurrency=self.config.concurrency,
            timeout_s=self.config.task_timeout_s,
            seed=self.config.seed,
            on_start=started,
            on_result=recorded,
            should_stop=lambda: (
                split == "search"
                and (self._stop_reason(lag_s=_TOTALS_LAG_S) is not None or should_prune())
            ),
            lease_s=self.heartbeat_s * _GRACE_BEATS,
        )
        if evaluation is None and pruned:
            evaluation = self._record_pruned(opened[0].id)
        if evaluation is not None and ran:
            self.reporter.agent_finished(spec, evaluation, split)
        return evaluation

    def _trails_incumbent(self, spec: AgentSpec, done: Mapping[str, TaskOutcome]) -> bool:
        """Whether `spec`, with these search results so far, is clearly worse than the run's
        best fully scored design on the items both have."""
        assert self.racing is not None
        top = self.archive.leaderboard(run_name=self.run.name, limit=1)
        if not top or top[0].agent_hash == spec.spec_hash:
            return False
        incumbent = self.archive.task_results(top[0].evaluation_id)
        return self.racing.clearly_worse(
            {t: r.score for t, r in done.items()}, {t: r.score for t, r in incumbent.items()}
        )

    def _record_pruned(self, evaluation_id: int) -> EvaluationRecord:
        """Closes a pruned evaluation with the mean of its tasks so far: never ranked complete."""
        scores = [outcome.score for outcome in self.archive.task_results(evaluation_id).values()]
        low, high, _ = score_interval(scores, seed=self.config.seed)
        return self.archive.finish_evaluation(
            evaluation_id, status="pruned", mean=sum(scores) / len(scores), ci_low=low, ci_high=high
        )

    def _confirm_on_holdout(self) -> tuple[EvaluationRecord, ...]:
        """Records the winner, chosen on search scores alone, then scores it, the baselines and
        any exploratory designs on the untouched holdout split, in that order."""
        if not self.holdout_tasks or self.config.confirm_top < 1:
            return ()
        winner = self._record_winner()
        if winner is None:
            return ()
        confirmed = self._evaluate(winner, self.holdout_tasks, "holdout", None, role="winner")
        if confirmed is None:
            return ()
        scored = [confirmed, *self._score_baselines(winner, confirmed)]
        top = self.archive.leaderboard(run_name=self.run.name, limit=self.config.confirm_top)
        for row in top:
            if row.agent_hash != winner.spec_hash:
                spec = AgentSpec.from_dict(row.spec)
                evaluation = self._evaluate(
                    spec, self.holdout_tasks, "holdout", None, role="exploratory"
                )
                if evaluation is not None:
                    scored.append(evaluation)
        return tuple(scored)

    def _record_winner(self) -> AgentSpec | None:
        """The run's winner: the best complete search evaluation, recorded in the archive before
        any holdout task runs, or the one recorded already (a winner is never replaced)."""
        if self.run.winner_hash is None:
            top = self.archive.leaderboard(run_name=self.run.name, limit=1)
            if not top:
                return None
            try:
                self.run = self.archive.record_winner(self.run.name, top[0].agent_hash)
            except ArchiveError:  # another worker recorded its winner first: that one stands
                self.run = self.archive.get_run(self.run.name)
        assert self.run.winner_hash is not None
        return AgentSpec.from_dict(self.archive.get_agent(self.run.winner_hash).spec)

    def _score_baselines(
        self, winner: AgentSpec, confirmed: EvaluationRecord
    ) -> list[EvaluationRecord]:
        """Scores the run's baselines on the winner's holdout items; CoT first, since CoT-SC takes
        as many samples as the winner's tokens per item buy at CoT's."""
        interactive = isinstance(self.benchmark, InteractiveBenchmark)
        cot = cot_baseline(self.config.model, interactive=interactive)
        cot_evaluation: EvaluationRecord | None = None
        scored = []
        for baseline in sorted(self.config.baselines, key=lambda b: b["label"] != "cot"):
            if baseline.get("spec") is not None:
                spec = AgentSpec.from_dict(baseline["spec"])
            elif baseline["label"] == "cot":
                spec = cot
            elif interactive:  # self-consistency cannot play an environment's episodes
                continue
            else:
                cot_evaluation = cot_evaluation or self._evaluate(
                    cot, self.holdout_tasks, "holdout", None, role="baseline"
                )
                if cot_evaluation is None:
                    continue
                matched = cot_sc_baseline(
                    self.config.model,
                    winner_tokens=confirmed.tokens_per_item,
                    cot_tokens=cot_evaluation.tokens_per_item,
                )
                if matched is None:  # CoT is already the cost-matched baseline; the verdict says so
                    continue
                spec = matched
            if spec.spec_hash == winner.spec_hash:
                continue  # the winner is this baseline: no comparison to make
            evaluation = self._evaluate(spec, self.holdout_tasks, "holdout", None, role="baseline")
            if evaluation is not None:
                scored.append(evaluation)
                if spec.spec_hash == cot.spec_hash:
                    cot_evaluation = evaluation
        return scored
