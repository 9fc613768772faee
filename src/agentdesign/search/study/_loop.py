"""The search loop: ask the strategy for a design, evaluate it for real, record everything.

All state lives in the archive and in the optuna study stored in the same database, never in process
memory, so a run killed at any moment resumes where it stopped: finished task results are read back
and never run again, and the trial that was in flight is retried rather than abandoned.

Many workers may drive one run (see `_workers`). The agent budget is reserved in the archive before
an evaluation starts, so workers together never evaluate more agents than it allows. A run's entry
points are in `_runs`, its definition and resolution in `agentdesign.search.config`, its scoring
within the budget in `_scoring`, its holdout confirmation in `_holdout`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from contextlib import suppress

import optuna

from agentdesign.archive import Archive, EvaluationRecord, RunRecord
from agentdesign.components import (
    AgentSpec,
    ChatModel,
    Completion,
    Example,
    ProviderError,
)
from agentdesign.evaluators import Benchmark, BenchmarkError, Task
from agentdesign.search.config import Budget, RunConfig, RunItems, resolve, run_header, store_run
from agentdesign.search.strategies import (
    Failure,
    MetaOutcome,
    Strategy,
    ask_trial,
    history_from_study,
    report_items,
)
from agentdesign.search.study._context import RunContext
from agentdesign.search.study._holdout import HoldoutConfirmation
from agentdesign.search.study._operators import ModelOperators
from agentdesign.search.study._prior import labelled_from_archive
from agentdesign.search.study._reporting import Reporter, RunSummary
from agentdesign.search.study._scoring import RunScoring
from agentdesign.search.study._workers import (
    DEFAULT_HEARTBEAT_S,
    GRACE_BEATS,
    WorkerTrials,
    trial_storage,
)
from agentdesign.search.tracking import (
    MlflowTracking,
    NoTracking,
    RunOutcome,
    RunTracking,
    connect_mlflow,
)

__all__ = ["Engine", "study_name"]

# A sampler that keeps proposing designs the run already has is stopped after this many in a row.
_MAX_REPEATS = 30


def study_name(run_name: str) -> str:
    return f"agentdesign/{run_name}"


class Engine:
    """One process driving one run; holds only handles, never state that a crash would lose.

    It resolves the run's configuration once (`resolve`), storing a new run first (no `run`
    given), and holds one `RunContext` that its parts share: this worker's trials
    (`WorkerTrials`), the scoring within the budget (`RunScoring`), the holdout confirmation
    (`HoldoutConfirmation`) and what the model operators see of the run (`ModelOperators`), which
    it offers the meta agent and the prompt refiner as their `RunView`.

    Its `tracking` keeps a record of the run outside the archive when one is asked for (MLflow:
    `AGENTDESIGN_MLFLOW=1`), told by the engine when the run starts and ends, and by the scoring
    after each evaluation. Its setting is checked first, so that a bad one stores nothing.
    """

    def __init__(
        self,
        archive: Archive,
        config: RunConfig,
        *,
        run: RunRecord | None = None,
        llm: ChatModel | None = None,
        reporter: Reporter | None = None,
        heartbeat_s: int = DEFAULT_HEARTBEAT_S,
        benchmark: Benchmark | None = None,
        strategy: Strategy | None = None,
        strategy_seed: int | None = None,
    ) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # optuna warns that heartbeats are meant for Study.optimize; ask-and-tell beats by itself.
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        mlflow = connect_mlflow()  # AGENTDESIGN_MLFLOW=1: a bad setting stops the run here
        resolved = resolve(
            config,
            archive,
            view=self,  # its operators answer once the context is made, below
            run=run,
            llm=llm,
            benchmark=benchmark,
            strategy=strategy,
            strategy_seed=strategy_seed,
        )
        if run is None:
            run = store_run(archive, resolved)
        resolved.open_model()
        self.context = RunContext.open(
            archive, run, resolved, reporter=reporter, heartbeat_s=heartbeat_s
        )
        storage = trial_storage(archive, heartbeat_s)
        self.study = optuna.create_study(
            study_name=study_name(run.name),
            storage=storage,
            sampler=resolved.strategy.sampler(),
            directions=resolved.strategy.directions(),
            load_if_exists=True,
        )
        self.trials = WorkerTrials(self.context, self.study, storage)
        self.tracking: RunTracking = (
            NoTracking() if mlflow is None else MlflowTracking(mlflow, self.context)
        )
        self.scoring = RunScoring(self.context, self.tracking)
        self.holdout = HoldoutConfirmation(self.context, self.scoring)
        self.operators = ModelOperators(self.context, self.scoring)

    # -- the run, as its callers read it --

    @property
    def run(self) -> RunRecord:
        return self.context.run

    @property
    def config(self) -> RunConfig:
        return self.context.config

    @property
    def benchmark(self) -> Benchmark:
        return self.context.benchmark

    @property
    def strategy(self) -> Strategy:
        return self.context.resolved.strategy

    @property
    def llm(self) -> ChatModel:
        return self.context.llm

    @property
    def examples(self) -> Sequence[Example]:
        return self.context.examples

    @property
    def search_tasks(self) -> Sequence[Task]:
        return self.context.search_tasks

    @property
    def dev_tasks(self) -> Sequence[Task]:
        return self.context.dev_tasks

    def set_budget(self, budget: Budget) -> None:
        """Runs this process to `budget` from now on (the stored run keeps its own)."""
        self.context.budget = budget

    def set_reporter(self, reporter: Reporter) -> None:
        self.context.reporter = reporter

    # -- the run's view for its model operators (`RunView`) --

    def failures(self, spec: AgentSpec) -> Sequence[Failure]:
        return self.operators.failures(spec)

    def tokens_per_item(self) -> Mapping[str, float]:
        return self.operators.tokens_per_item()

    def front(self) -> Mapping[str, int]:
        return self.operators.front()

    def call_started(self, purpose: str) -> None:
        self.operators.call_started(purpose)

    def call_finished(self, completion: Completion, purpose: str, model: str) -> None:
        self.operators.call_finished(completion, purpose, model)

    def record(self, outcomes: Sequence[MetaOutcome]) -> None:
        self.operators.record(outcomes)

    # -- the loop --

    def drive(self, *, finalize: bool = True) -> RunSummary:
        """Searches until the budget is spent, then confirms on holdout (unless not `finalize`).
        A `ProviderError`, or a `BenchmarkError` such as the user's scorer raising, marks the run
        failed and stops it; a resume (once the provider answers, or the scorer is fixed) retries
        those tasks."""
        ctx = self.context
        ctx.archive.update_run(ctx.run.name, status="running")
        ctx.reporter.run_started(ctx.run)
        items = RunItems(
            ctx.run.search_task_ids, ctx.run.holdout_task_ids, tuple(t.id for t in ctx.dev_tasks)
        )
        header = run_header(ctx.run, ctx.config, self.strategy, items, budget=ctx.budget)
        ctx.reporter.run_header(header)
        unpriced = self.scoring.unpriced_warning()
        if unpriced is not None:
            ctx.reporter.warning(unpriced)
        reason = None
        holdout: tuple[EvaluationRecord, ...] = ()
        outcome: RunOutcome = "interrupted"  # unless the block below says otherwise
        self.tracking.run_started()
        try:
            repeats = 0
            if ctx.run.winner_hash is not None:  # fixed, holdout seen: the search is over
                reason = "the run's winner is recorded"
            while reason is None and (reason := self.scoring.stop_reason()) is None:
                agents_before = ctx.archive.run_totals(ctx.run.name).n_agents
                work = self.ask()
                if work is None:
                    if ctx.archive.single_writer:
                        reason = "every agent of the budget is taken by an unfinished evaluation"
                        break
                    time.sleep(ctx.heartbeat_s)  # other workers hold the last agents: wait
                    continue
                if self.score(*work) is None:
                    reason = self.scoring.stop_reason() or "stopped"
                    break
                is_repeat = ctx.archive.run_totals(ctx.run.name).n_agents == agents_before
                repeats = repeats + 1 if is_repeat else 0
                if repeats >= _MAX_REPEATS:
                    size = ctx.resolved.space.size_hint()
                    reason = (
                        "the strategy keeps proposing designs this run already evaluated (the "
                        f"space holds {size} combination{'s' * (size != 1)} of components)"
                    )
                    break
            if finalize:
                self.trials.wait_for_others()
                holdout = self._confirm(None)
            outcome = "finished" if finalize else "stopped"
        except (ProviderError, BenchmarkError) as exc:  # no score was made of it: stop, keep all
            outcome = "failed"
            ctx.archive.update_run(ctx.run.name, status="failed")
            fixed = "the provider answers" if isinstance(exc, ProviderError) else "it is fixed"
            raise type(exc)(
                f"{exc}; run {ctx.run.name} stopped and is kept: `agentdesign resume "
                f"{ctx.run.name}` runs those tasks again once {fixed}"
            ) from exc
        except Exception:
            outcome = "failed"
            raise
        finally:
            self.scoring.charge_time()
            self.tracking.run_ended(outcome)
        totals = ctx.archive.run_totals(ctx.run.name)
        return RunSummary(
            run=ctx.run,
            agents_done=totals.n_finished,
            tokens=totals.prompt_tokens + totals.completion_tokens,
            cost=totals.cost,
            elapsed_s=ctx.run.elapsed_s,
            stop_reason=reason or "budget spent",
            holdout=holdout,
        )

    def finalize(self, *, top: int | None = None) -> tuple[EvaluationRecord, ...]:
        """Confirms the top agents (default: the run's `confirm_top`) on holdout and marks the
        run finished; its tracking then records the verdict."""
        outcome: RunOutcome = "interrupted"
        try:
            holdout = self._confirm(top)
            outcome = "finished"
            return holdout
        except Exception:
            outcome = "failed"
            raise
        finally:
            self.tracking.run_ended(outcome)

    def _confirm(self, top: int | None) -> tuple[EvaluationRecord, ...]:
        ctx = self.context
        holdout = self.holdout.confirm(ctx.config.confirm_top if top is None else top)
        self.scoring.charge_time()
        ctx.run = ctx.archive.update_run(ctx.run.name, status="finished")
        return holdout

    def ask(self) -> tuple[optuna.Trial, AgentSpec] | None:
        """A trial and its design, with one of the run's agents reserved for it; None while every
        agent the budget allows is taken."""
        while (work := self._next_work()) is not None:
            trial, spec = work
            if self._admit(trial, spec):
                return work
            # another worker took the last agent
            self.trials.finish(trial.number, state=optuna.trial.TrialState.FAIL)
        return None

    def score(self, trial: optuna.Trial, spec: AgentSpec) -> EvaluationRecord | None:
        """Scores an asked design on the search items (racing it) and tells the study; None when
        the budget stopped it part-way."""
        with self.trials.heartbeat(trial):
            evaluation = self.scoring.evaluate(spec, self.context.search_tasks, "search", trial)
        if evaluation is not None:
            self._tell(trial, evaluation)
        return evaluation

    def tell_scores(
        self, trial: optuna.Trial, spec: AgentSpec, scores: Mapping[str, float]
    ) -> EvaluationRecord:
        """Records the caller's scores of an asked design, one per search item, and tells the
        study. A result the archive holds already stands: the archive never rewrites one."""
        evaluation = self.scoring.record_scores(spec, scores)
        self._tell(trial, evaluation)
        return evaluation

    # -- trials and the shared agent budget --

    def _next_work(self) -> tuple[optuna.Trial, AgentSpec] | None:
        """A trial and its design: a dead worker's trial queued again, else a new one; None while
        every agent the budget allows is taken and no trial waits to be retried."""
        ctx = self.context
        self.trials.reclaim_stale()
        max_agents = ctx.budget.max_agents
        waiting = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        n_agents = ctx.archive.run_totals(ctx.run.name).n_agents
        if not waiting and max_agents is not None and n_agents >= max_agents:
            return None
        # One worker asks at a time, so that the sampler sees every other worker's trial with
        # its design (see `TrialStorage.asking`); a held-up holder is waited for a grace period.
        asking = self.trials.storage.asking(
            self.study.study_name, wait_s=self.trials.heartbeat_s * GRACE_BEATS
        )
        with asking:
            trial, spec = self._ask_design(retry=bool(waiting))
        parents = [*(trial.user_attrs.get("parents") or []), None, None]
        ctx.archive.add_agent(
            spec=spec.to_dict(),
            spec_hash=spec.spec_hash,
            parent_hash=parents[0],
            co_parent_hash=parents[1],
            operator=trial.user_attrs.get("operator"),
        )
        return trial, spec

    def _ask_design(self, *, retry: bool) -> tuple[optuna.Trial, AgentSpec]:
        """A new trial and its design, its parameters and spec written to the study: a dead
        worker's design, as it was, when one is queued (`retry`), else the strategy's."""
        ctx = self.context
        if retry:
            trial = self.study.ask()
        else:
            history = history_from_study(
                self.study,
                description=ctx.benchmark.description,
                prior=labelled_from_archive(
                    ctx.archive,
                    benchmark=ctx.benchmark.name,
                    unseen=ctx.run.holdout_task_ids,
                )
                if self.strategy.reads_prior
                else (),
            )
            trial = ask_trial(self.study, self.strategy, history)
        self.trials.owned.add(trial.number)
        # beating since it started (see `TrialStorage`): renewed after the sampler's work
        self.trials.storage.record_heartbeat(trial._trial_id)
        # a retried trial has its parameters fixed: the same design
        spec = ctx.resolved.space.suggest(trial)
        if not retry:
            trial, spec = self.trials.apart_from_others(trial, spec)
        trial.set_user_attr("spec", spec.to_json())
        return trial, spec

    def _admit(self, trial: optuna.Trial, spec: AgentSpec) -> bool:
        """Reserves one of the run's agents for `spec` (or finds it holds one already)."""
        ctx = self.context
        ctx.archive.add_agent(spec=spec.to_dict(), spec_hash=spec.spec_hash)
        evaluation = ctx.archive.get_or_create_evaluation(
            agent_hash=spec.spec_hash,
            benchmark=ctx.benchmark.name,
            task_ids=[t.id for t in ctx.search_tasks],
            split="search",
        )
        return ctx.archive.add_run_entry(
            run_name=ctx.run.name,
            agent_hash=spec.spec_hash,
            evaluation_id=evaluation.id,
            trial_number=trial.number,
            max_agents=ctx.budget.max_agents,
        )

    def _tell(
        self, trial: optuna.Trial | optuna.trial.FrozenTrial, evaluation: EvaluationRecord
    ) -> None:
        """Score, or score and tokens per item; a pruned evaluation is told as pruned, with its
        mean on the items it had (see `report_items`)."""
        number = trial.number
        scores = list(self.context.archive.task_scores([evaluation.id])[evaluation.id].values())
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
            self.trials.finish(number, state=optuna.trial.TrialState.PRUNED)
            return
        tokens = evaluation.tokens_per_item
        assert evaluation.mean is not None  # complete evaluations have one
        values = (
            [evaluation.mean]
            if self.context.config.objective == "score"
            else [evaluation.mean, tokens]
        )
        self.trials.finish(number, values)
