"""The search loop: ask the strategy for a design, evaluate it for real, record everything.

All state lives in the archive and in the optuna study stored in the same database, never in process
memory, so a run killed at any moment resumes where it stopped: finished task results are read back
and never run again, and the trial that was in flight is retried rather than abandoned.

Many workers may drive one run (see `_workers`). The agent budget is reserved in the archive before
an evaluation starts, so workers together never evaluate more agents than it allows. A run's entry
points are in `_runs`, its definition in `_config`, its holdout confirmation in `_holdout`.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any

import optuna

from agentdesign.archive import Archive, EvaluationRecord, RunRecord, RunTotals
from agentdesign.components import (
    AgentSpec,
    ChatModel,
    ProviderError,
    default_chat_model,
)
from agentdesign.evaluators import (
    Benchmark,
    BenchmarkError,
    InteractiveBenchmark,
    TaskOutcome,
    episode_workflows,
    examples_from_tasks,
    score_interval,
)
from agentdesign.search.space import SearchSpace
from agentdesign.search.strategies import (
    Strategy,
    ask_trial,
    history_from_study,
    make_strategy,
    report_items,
)
from agentdesign.search.study._config import RunConfig
from agentdesign.search.study._evaluation import evaluate_agent
from agentdesign.search.study._holdout import HoldoutConfirmation
from agentdesign.search.study._operators import ModelOperators
from agentdesign.search.study._prior import labelled_from_archive
from agentdesign.search.study._reporting import Reporter, RunSummary
from agentdesign.search.study._splits import RunItems, dev_items, run_header
from agentdesign.search.study._workers import GRACE_BEATS, WorkerTrials, trial_storage

__all__ = ["Engine", "study_name"]

# A sampler that keeps proposing designs the run already has is stopped after this many in a row.
_MAX_REPEATS = 30
# Seconds that budget totals read from the archive, and elapsed time not yet written to it, may
# lag within an evaluation: a read and a write per task cost more than the task itself at 64 tasks
# at once (bench/concurrency.py). This worker's own tokens always count at once.
_TOTALS_LAG_S = 1.0


def study_name(run_name: str) -> str:
    return f"agentdesign/{run_name}"


def _playable(space: SearchSpace, benchmark: Benchmark) -> SearchSpace:
    """The space narrowed to the workflows that can play an interactive benchmark's episodes
    (all of them when the space allows none, as the single-pass `quick` preset does)."""
    if not isinstance(benchmark, InteractiveBenchmark):
        return space
    playable = episode_workflows()
    workflows = tuple(n for n in space.components("workflow") if n in playable) or playable
    return dataclasses.replace(space, choices={**space.choices, "workflow": workflows})


class Engine(WorkerTrials, HoldoutConfirmation, ModelOperators):
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
            else default_chat_model(
                api_base=config.api_base,
                timeout_s=config.llm_timeout_s,
                retry_budget_s=config.retry_budget_s,
                rpm=config.rpm,
                tpm=config.tpm,
            )
        )
        self.reporter = reporter or Reporter()
        self.examples = examples_from_tasks(benchmark.train_examples())
        self.search_tasks = benchmark.tasks_by_ids(run.search_task_ids)
        self.holdout_tasks = benchmark.tasks_by_ids(run.holdout_task_ids)
        self.dev_tasks = benchmark.tasks_by_ids(dev_items(run, benchmark, config))
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # optuna warns that heartbeats are meant for Study.optimize; ask-and-tell beats by itself.
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        self.heartbeat_s = heartbeat_s
        self.storage = trial_storage(archive, heartbeat_s)
        self.strategy = strategy or make_strategy(
            config.strategy,
            space=self.space,
            seed=config.seed if strategy_seed is None else strategy_seed,
            objective=config.objective,
            refiner=self._refiner(every=config.refine_every) if config.refine_every else None,
            meta=self._meta_agent() if config.meta_period else None,
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
        self._unbeaten_since: dict[int, float] = {}
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
        items = RunItems(
            self.run.search_task_ids, self.run.holdout_task_ids, tuple(t.id for t in self.dev_tasks)
        )
        self.reporter.run_header(run_header(self.run, self.config, self.strategy, items))
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
        # beating since it started (see `TrialStorage`): renewed after the sampler's work
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
        racing = self.racing if role == "candidate" else None
        order = [t.id for t in tasks]
        opened: list[EvaluationRecord] = []
        pruned = False
        tested = 0  # the last stage tested
        done: set[str] = set()  # kept here, so that a check between tasks reads nothing

        def should_prune() -> bool:
            nonlocal pruned, tested
            # A stage is tested once its items, the first of the run's order, all have a result.
            if pruned or not racing or not opened:
                return pruned
            stage = racing.due(order, done, after=tested)
            if not stage:
                return False
            tested = stage
            results = self.archive.task_results(opened[0].id)
            pruned = self._trails_incumbent(
                spec, {t: results[t] for t in order[:stage]}, n_items=len(order)
            )
            return pruned

        def started(evaluation: EvaluationRecord, n_done: int) -> None:
            nonlocal ran
            if n_done and racing:
                done.update(self.archive.task_results(evaluation.id))
            self.archive.add_run_entry(
                run_name=self.run.name,
                agent_hash=spec.spec_hash,
                evaluation_id=evaluation.id,
                trial_number=trial_number,
                role=role,
            )
            opened.append(evaluation)
            if split == "holdout":  # every look at the holdout is kept, reused scores too
                self.archive.record_holdout_look(
                    benchmark=self.run.benchmark,
                    evaluation_id=evaluation.id,
                    source="run",
                    run_name=self.run.name,
                )
            if evaluation.status != "complete":
                ran = True
                self.reporter.agent_started(spec, len(tasks), n_done, split)

        def recorded(outcome: TaskOutcome) -> None:
            done.add(outcome.task_id)
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
            lease_s=self.heartbeat_s * GRACE_BEATS,
        )
        if evaluation is None and pruned:
            evaluation = self._record_pruned(opened[0].id)
        if evaluation is not None and ran:
            self.reporter.agent_finished(spec, evaluation, split)
        return evaluation

    def _trails_incumbent(
        self, spec: AgentSpec, stage: Mapping[str, TaskOutcome], *, n_items: int
    ) -> bool:
        """Whether `spec`, with these results at a stage, is clearly worse than the run's best
        fully scored design."""
        assert self.racing is not None
        top = self.archive.leaderboard(run_name=self.run.name, limit=1)
        if not top or top[0].agent_hash == spec.spec_hash:
            return False
        incumbent = self.archive.task_results(top[0].evaluation_id)
        return self.racing.clearly_worse(
            {t: r.score for t, r in stage.items()},
            {t: r.score for t, r in incumbent.items()},
            n_items=n_items,
        )

    def _record_pruned(self, evaluation_id: int) -> EvaluationRecord:
        """Closes a pruned evaluation with the mean of its tasks so far: never ranked complete."""
        scores = [outcome.score for outcome in self.archive.task_results(evaluation_id).values()]
        low, high, _ = score_interval(scores, seed=self.config.seed)
        return self.archive.finish_evaluation(
            evaluation_id, status="pruned", mean=sum(scores) / len(scores), ci_low=low, ci_high=high
        )
