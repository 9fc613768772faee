"""The search loop: ask the strategy for a design, evaluate it for real, record everything.

All state lives in the archive and in the optuna study stored in the same database, never in process
memory, so a run killed at any moment resumes where it stopped: finished task results are read back
and never run again, and the trial that was in flight is completed rather than abandoned.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import optuna

from agentdesign.archive import Archive, EvaluationRecord, RunRecord, evaluate_agent
from agentdesign.components import (
    AgentDesignError,
    AgentSpec,
    ChatModel,
    check_model,
    default_chat_model,
)
from agentdesign.evaluators import (
    Benchmark,
    InteractiveBenchmark,
    TaskOutcome,
    episode_workflows,
    examples_from_tasks,
    get_benchmark,
    make_split,
)
from agentdesign.search._space import SearchSpace
from agentdesign.search._strategies import make_sampler

__all__ = ["Budget", "Reporter", "RunConfig", "RunSummary", "resume_search", "run_search"]

log = logging.getLogger(__name__)

# A sampler that keeps proposing designs the run already has is stopped after this many in a row.
_MAX_REPEATS = 30


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


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines a run; stored with it so `resume` rebuilds the same run."""

    name: str
    benchmark: str = "gsm8k"
    model: str = "embedded/qwen2.5-coder-1.5b"
    strategy: str = "tpe"
    budget: Budget = field(default_factory=Budget)
    n_search: int = 10
    n_holdout: int = 10
    split_seed: int = 0
    seed: int = 0
    concurrency: int = 1
    confirm_top: int = 1
    api_base: str | None = None
    choices: Mapping[str, Sequence[str]] = field(default_factory=dict)
    limits: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def space(self) -> SearchSpace:
        return SearchSpace(model=self.model, choices=self.choices, limits=self.limits)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["choices"] = {k: list(v) for k, v in self.choices.items()}
        data["limits"] = {k: list(v) for k, v in self.limits.items()}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        fields = dict(data)
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


class Reporter(Protocol):
    """Receives progress as it happens (the CLI draws a progress bar from it)."""

    def agent_started(self, spec: AgentSpec, n_tasks: int, n_done: int, split: str) -> None: ...

    def task_finished(self, outcome: TaskOutcome) -> None: ...

    def agent_finished(self, spec: AgentSpec, evaluation: EvaluationRecord, split: str) -> None: ...


class _SilentReporter:
    def agent_started(self, spec: AgentSpec, n_tasks: int, n_done: int, split: str) -> None:
        pass

    def task_finished(self, outcome: TaskOutcome) -> None:
        pass

    def agent_finished(self, spec: AgentSpec, evaluation: EvaluationRecord, split: str) -> None:
        pass


def study_name(run_name: str) -> str:
    return f"agentdesign/{run_name}"


def run_search(
    archive: Archive,
    config: RunConfig,
    *,
    llm: ChatModel | None = None,
    reporter: Reporter | None = None,
) -> RunSummary:
    """Starts a new run named `config.name` and searches until its budget is spent."""
    benchmark = get_benchmark(config.benchmark)
    benchmark.check_ready()  # e.g. Java for an interactive benchmark, before anything is written
    space = config.space()  # validates the space before anything is written
    make_sampler(config.strategy, seed=config.seed)  # likewise the strategy name
    if llm is None:
        check_model(config.model)
    split = make_split(
        [t.id for t in benchmark.tasks()],
        seed=config.split_seed,
        n_search=config.n_search,
        n_holdout=config.n_holdout,
    )
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
    return _Search(archive, run, config, space, benchmark, llm, reporter).drive()


def resume_search(
    archive: Archive,
    name: str,
    *,
    budget: Budget | None = None,
    llm: ChatModel | None = None,
    reporter: Reporter | None = None,
) -> RunSummary:
    """Continues run `name` from what the archive holds, optionally with a new budget."""
    run = archive.get_run(name)
    config = RunConfig.from_dict(run.config)
    if budget is not None:
        config = RunConfig.from_dict({**config.to_dict(), "budget": asdict(budget)})
    benchmark = get_benchmark(config.benchmark)
    benchmark.check_ready()
    return _Search(archive, run, config, config.space(), benchmark, llm, reporter).drive()


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
    ) -> None:
        self.archive = archive
        self.run = run
        self.config = config
        self.space = _playable(space, benchmark)
        self.benchmark = benchmark
        self.llm = llm if llm is not None else default_chat_model(api_base=config.api_base)
        self.reporter = reporter or _SilentReporter()
        self.examples = examples_from_tasks(benchmark.train_examples())
        self.search_tasks = benchmark.tasks_by_ids(run.search_task_ids)
        self.holdout_tasks = benchmark.tasks_by_ids(run.holdout_task_ids)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(
            study_name=study_name(run.name),
            storage=archive.url,
            sampler=make_sampler(config.strategy, seed=config.seed),
            direction="maximize",
            load_if_exists=True,
        )
        self._clock = time.monotonic()

    # -- budget --

    def _charge_time(self) -> None:
        now = time.monotonic()
        self.run = self.archive.update_run(self.run.name, add_elapsed_s=now - self._clock)
        self._clock = now

    def _stop_reason(self) -> str | None:
        budget = self.config.budget
        totals = self.archive.run_totals(self.run.name)
        if budget.max_agents is not None and totals.n_complete >= budget.max_agents:
            return f"evaluated {totals.n_complete} agents"
        tokens = totals.prompt_tokens + totals.completion_tokens
        if budget.max_tokens is not None and tokens >= budget.max_tokens:
            return f"used {tokens} tokens"
        elapsed = self.run.elapsed_s + time.monotonic() - self._clock
        if budget.max_minutes is not None and elapsed >= budget.max_minutes * 60:
            return f"ran {elapsed / 60:.1f} minutes"
        return None

    # -- the loop --

    def drive(self) -> RunSummary:
        self.archive.update_run(self.run.name, status="running")
        reason = None
        try:
            repeats = 0
            while (reason := self._stop_reason()) is None:
                agents_before = self.archive.run_totals(self.run.name).n_complete
                trial, spec = self._next_trial()
                evaluation = self._evaluate(spec, self.search_tasks, "search", trial.number)
                if evaluation is None:
                    reason = self._stop_reason() or "stopped"
                    break
                self.study.tell(trial.number, evaluation.mean)
                is_repeat = self.archive.run_totals(self.run.name).n_complete == agents_before
                repeats = repeats + 1 if is_repeat else 0
                if repeats >= _MAX_REPEATS:
                    reason = "the strategy keeps proposing designs this run already evaluated"
                    break
            holdout = self._confirm_on_holdout()
        finally:
            self._charge_time()
        self.run = self.archive.update_run(self.run.name, status="finished")
        totals = self.archive.run_totals(self.run.name)
        return RunSummary(
            run=self.run,
            agents_done=totals.n_complete,
            tokens=totals.prompt_tokens + totals.completion_tokens,
            cost=totals.cost,
            elapsed_s=self.run.elapsed_s,
            stop_reason=reason or "budget spent",
            holdout=holdout,
        )

    def _next_trial(self) -> tuple[optuna.trial.FrozenTrial | optuna.Trial, AgentSpec]:
        """The trial left running by a killed process, if any, else a new one from the sampler."""
        for stale in self.study.get_trials(
            deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)
        ):
            spec_json = stale.user_attrs.get("spec")
            if spec_json is None:  # killed between ask and recording the spec: nothing to finish
                self.study.tell(stale.number, state=optuna.trial.TrialState.FAIL)
                continue
            return stale, AgentSpec.from_json(spec_json)
        trial = self.study.ask()
        spec = self.space.suggest(trial)
        trial.set_user_attr("spec", spec.to_json())
        return trial, spec

    def _evaluate(
        self, spec: AgentSpec, tasks: Sequence[Any], split: str, trial_number: int | None
    ) -> EvaluationRecord | None:
        """Evaluates `spec` on `tasks`, reusing every result already archived.

        Returns None when the budget ran out part-way; the partial evaluation stays in the archive,
        marked running, and a resume completes it.
        """
        ran = False

        def started(evaluation: EvaluationRecord, n_done: int) -> None:
            nonlocal ran
            self.archive.add_run_entry(
                run_name=self.run.name,
                agent_hash=spec.spec_hash,
                evaluation_id=evaluation.id,
                trial_number=trial_number,
            )
            if evaluation.status != "complete":
                ran = True
                self.reporter.agent_started(spec, len(tasks), n_done, split)

        def recorded(outcome: TaskOutcome) -> None:
            self._charge_time()
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
            seed=self.config.seed,
            on_start=started,
            on_result=recorded,
            should_stop=lambda: split == "search" and self._stop_reason() is not None,
        )
        if evaluation is not None and ran:
            self.reporter.agent_finished(spec, evaluation, split)
        return evaluation

    def _confirm_on_holdout(self) -> tuple[EvaluationRecord, ...]:
        """Scores the top agents, chosen on the search split, on the untouched holdout split."""
        if not self.holdout_tasks or self.config.confirm_top < 1:
            return ()
        top = self.archive.leaderboard(run_name=self.run.name, limit=self.config.confirm_top)
        confirmed = []
        for row in top:
            spec = AgentSpec.from_dict(row.spec)
            evaluation = self._evaluate(spec, self.holdout_tasks, "holdout", None)
            if evaluation is not None:
                confirmed.append(evaluation)
        return tuple(confirmed)
