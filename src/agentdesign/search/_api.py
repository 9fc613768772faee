"""The Python API: `create_search` / `load_search` and a `Search` to ask, tell and optimize.

A thin facade, as optuna's `create_study` and `Study` are, over the same loop `run_search` drives
(`_loop.Engine`): every design is scored through the archive (its cache, leases and racing), and
the honest-verdict rules hold whichever way a design was scored. The winner is chosen on the search
items and recorded before any holdout item runs, by `optimize` at its end or by `finalize()`, and
from then on nothing searches on in that run.

It takes objects where the CLI takes names, as DSPy's `compile(program, trainset=...)` does: a
`Benchmark`, or plain items with a scoring function; a `Strategy`; a litellm model string, or a
function from chat messages to reply text.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import optuna

from agentdesign.archive import Archive, EvaluationRecord, LeaderboardRow, RunRecord
from agentdesign.components import (
    Agent,
    AgentDesignError,
    AgentSpec,
    ChatModel,
    ExportedAgent,
    Message,
    build_agent,
)
from agentdesign.evaluators import Benchmark, Task
from agentdesign.search._inputs import (
    PYTHON_PREFIX,
    BenchmarkInput,
    ModelInput,
    Scorer,
    benchmark_from,
    from_python,
    model_from,
    open_archive,
    run_config_from,
    space_from,
    stored_benchmark,
    strategy_label,
)
from agentdesign.search.config import DEFAULTS, Budget, RunConfig
from agentdesign.search.strategies import Strategy
from agentdesign.search.study import Engine, Reporter, RunSummary, check_searchable, export_design
from agentdesign.search.verdict import RunVerdict, run_verdict

__all__ = ["Candidate", "Search", "create_search", "load_search"]

DEFAULT_STORAGE = "agentdesign.db"


@dataclass(frozen=True)
class Candidate:
    """A design `Search.ask` proposed, with the optuna trial that holds it and the search items
    it is to be scored on; give it back to `Search.evaluate` or `Search.tell`."""

    spec: AgentSpec
    trial: optuna.Trial
    tasks: tuple[Task, ...]

    @property
    def number(self) -> int:
        """The trial's number in the run's optuna study."""
        return self.trial.number


class Search:
    """One run in an archive, driven from Python; made by `create_search` or `load_search`.

    Use it as a context manager, or call `close()`, to close an archive it opened.
    """

    def __init__(self, *, archive: Archive, engine: Engine, owns_archive: bool) -> None:
        self._archive = archive
        self._engine = engine
        self._owns_archive = owns_archive

    @property
    def name(self) -> str:
        return self._engine.run.name

    @property
    def run(self) -> RunRecord:
        """The run as the archive holds it now."""
        return self._archive.get_run(self.name)

    @property
    def benchmark(self) -> Benchmark:
        return self._engine.benchmark

    @property
    def archive(self) -> Archive:
        """The archive the run lives in, for queries beyond these (`task_results`, `lineage`)."""
        return self._archive

    # -- ask and tell --

    def ask(self) -> Candidate:
        """The strategy's next design, with one more of the run's agents reserved for it.

        On a shared server (PostgreSQL) another worker takes the trial over if it is not told
        within half a minute (three missed heartbeats); on SQLite it waits as long as it takes.
        """
        self._check_open()
        self._engine.set_budget(self._budget_for_one_more())
        spent = self._engine.scoring.stop_reason()  # the dollar budget's, the one it can give
        if spent is not None:
            raise AgentDesignError(f"run {self.name}: {spent}; finalize() gives its verdict")
        work = self._engine.ask()
        if work is None:  # every agent reserved by another worker meanwhile
            raise AgentDesignError(f"run {self.name} has no agent left to reserve; ask again")
        trial, spec = work
        return Candidate(spec=spec, trial=trial, tasks=tuple(self._engine.search_tasks))

    def evaluate(self, candidate: Candidate) -> EvaluationRecord:
        """Scores `candidate` on the run's search items with the run's model, reusing every result
        the archive holds, racing it against the best design so far (a design clearly worse is
        stopped early and returned as "pruned"), and tells the study."""
        self._check_open()
        self._engine.set_budget(self._budget_for_one_more())
        evaluation = self._engine.score(candidate.trial, candidate.spec)
        if evaluation is None:  # another worker's tokens or time ended the run's budget
            raise AgentDesignError(f"the evaluation of {candidate.spec.spec_hash[:10]} stopped")
        return evaluation

    def tell(
        self, candidate: Candidate, scores: Mapping[str, float] | Sequence[float]
    ) -> EvaluationRecord:
        """Records your own scores of `candidate`, one in [0, 1] per search item: keyed by task id,
        or in the order of `candidate.tasks`. Scores the archive already holds for this design on
        these items stand (a result is never rewritten)."""
        self._check_open()
        ids = [t.id for t in candidate.tasks]
        if isinstance(scores, Mapping):
            by_id = dict(scores)
            if set(by_id) != set(ids):
                missing, extra = sorted(set(ids) - set(by_id)), sorted(set(by_id) - set(ids))
                raise AgentDesignError(
                    f"tell needs a score for each of the {len(ids)} search items: missing "
                    f"{missing[:3] or 'none'}, not search items {extra[:3] or 'none'}"
                )
        elif isinstance(scores, Sequence) and not isinstance(scores, str):
            if len(scores) != len(ids):
                raise AgentDesignError(
                    f"tell needs a score for each of the {len(ids)} search items, got {len(scores)}"
                )
            by_id = dict(zip(ids, scores, strict=True))
        else:
            raise AgentDesignError(
                f"scores must map task ids to scores or list them, not {type(scores).__name__}"
            )
        for task_id, value in by_id.items():
            if not isinstance(value, int | float) or not 0 <= value <= 1:
                raise AgentDesignError(f"score of {task_id} is {value!r}, not a number in [0, 1]")
        return self._engine.tell_scores(
            candidate.trial, candidate.spec, {k: float(v) for k, v in by_id.items()}
        )

    def agent(self, spec: AgentSpec) -> Agent:
        """`spec` as a runnable agent on the run's model and training examples, to score yourself:
        `search.agent(candidate.spec).run(question).output`."""
        return build_agent(spec, llm=self._engine.llm, train_examples=self._engine.examples)

    # -- the whole loop --

    def optimize(
        self,
        *,
        n_agents: int | None = None,
        max_tokens: int | None = None,
        max_minutes: float | None = None,
        max_cost: float | None = None,
        finalize: bool = True,
        reporter: Reporter | None = None,
    ) -> RunSummary:
        """Searches on for `n_agents` more designs, `max_tokens` more tokens, `max_minutes` more
        minutes or `max_cost` more dollars, whichever ends first (and never past the dollar
        budget `create_search` was given); then, unless `finalize` is False, records the winner
        and scores it and the baselines on the holdout (`verdict()` reads the outcome)."""
        more = {
            "n_agents": n_agents,
            "max_tokens": max_tokens,
            "max_minutes": max_minutes,
            "max_cost": max_cost,
        }
        if all(value is None for value in more.values()):
            raise AgentDesignError("optimize needs n_agents, max_tokens, max_minutes or max_cost")
        for key, value in more.items():
            if value is not None and value <= 0:
                raise AgentDesignError(f"{key} must be positive, got {value}")
        self._check_open()
        totals = self._archive.run_totals(self.name)
        tokens = totals.prompt_tokens + totals.completion_tokens
        dollars = [] if max_cost is None else [totals.cost + max_cost]
        self._engine.set_budget(
            Budget(
                max_agents=None if n_agents is None else totals.n_agents + n_agents,
                max_tokens=None if max_tokens is None else tokens + max_tokens,
                max_minutes=None if max_minutes is None else self.run.elapsed_s / 60 + max_minutes,
                max_cost=min([*dollars, *self._dollar_cap()], default=None),
            )
        )
        self._engine.set_reporter(reporter or Reporter())
        return self._engine.drive(finalize=finalize)

    def finalize(self) -> RunVerdict:
        """Records the winner, chosen on the search items alone, then scores it and the baselines
        on the holdout items; the winner is never replaced, so calling it again changes nothing."""
        self._engine.finalize()
        return self.verdict()

    # -- what the run found --

    def verdict(self) -> RunVerdict:
        """The winner against the baselines on the holdout, and how much the selection overfit."""
        return run_verdict(self._archive, self.name)

    @property
    def best(self) -> AgentSpec | None:
        """The recorded winner once there is one; before that the best fully scored design on the
        search items so far; None while no design is."""
        run = self.run
        if run.winner_hash is not None:
            return AgentSpec.from_dict(self._archive.get_agent(run.winner_hash).spec)
        top = self._archive.leaderboard(run_name=self.name, limit=1)
        return AgentSpec.from_dict(top[0].spec) if top else None

    def leaderboard(self, *, limit: int = 20, split: str = "search") -> list[LeaderboardRow]:
        """The run's fully scored designs, best first, with their 95% intervals."""
        return self._archive.leaderboard(run_name=self.name, split=split, limit=limit)

    def export(
        self, out: str | os.PathLike[str], *, spec: AgentSpec | None = None
    ) -> ExportedAgent:
        """Writes `spec` (default: `best`) as a folder `agent_<hash>` in `out`: the agent file,
        its prompts, the evidence from this run, the runtime (see `write_export`)."""
        chosen = spec if spec is not None else self.best
        if chosen is None:
            raise AgentDesignError(f"no finished design to export in run {self.name}")
        if chosen.spec_hash == self.run.winner_hash:
            why = "its recorded winner"
        else:
            why = "given to export" if spec is not None else "its best so far (no winner yet)"
        return export_design(
            self._archive,
            self.name,
            chosen,
            out=Path(out),
            train_examples=self._engine.examples,
            question=self._engine.search_tasks[0].question if self._engine.search_tasks else None,
            chosen_as=why,
        )

    # -- closing --

    def close(self) -> None:
        if self._owns_archive:
            self._archive.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Search({self.name!r}, benchmark={self.benchmark.name!r})"

    # -- helpers --

    def _check_open(self) -> None:
        check_searchable(self.run)

    def _budget_for_one_more(self) -> Budget:
        n_agents = self._archive.run_totals(self.name).n_agents
        return Budget(max_agents=n_agents + 1, max_cost=min(self._dollar_cap(), default=None))

    def _dollar_cap(self) -> list[float]:
        """The run's stored dollar budget, if it has one: every way of driving it keeps to it."""
        cap = self._engine.config.budget.max_cost
        return [] if cap is None else [cap]


def create_search(
    benchmark: BenchmarkInput = DEFAULTS["benchmark"],
    *,
    scorer: Scorer | None = None,
    name: str | None = None,
    storage: str | os.PathLike[str] | Archive = DEFAULT_STORAGE,
    model: ModelInput = DEFAULTS["model"],
    model_name: str | None = None,
    strategy: str | Strategy = DEFAULTS["strategy"],
    space: str | Mapping[str, Any] | None = None,
    n_search: int = DEFAULTS["n_search"],
    n_holdout: int = DEFAULTS["n_holdout"],
    seed: int = DEFAULTS["seed"],
    **options: Any,
) -> Search:
    """Starts a new run named `name` (default: `search-<time>`) in `storage` and returns it.

    Its defaults are those of `agentdesign run`, from one table (`agentdesign.search.study.
    SETTINGS`): 6 search and 8 holdout items, the quick space, a stored budget of 4 agents (which
    `optimize` replaces with its own).

    - `benchmark`: a registered name (`agentdesign benchmarks`), "jsonl:PATH", a `Benchmark`, or
      items such as `[{"question": ..., "answer": ...}]` with `scorer(output, answer) -> [0, 1]`.
    - `model`: any litellm model string; or a `ChatModel`, or a function from chat messages to the
      reply's text, whose results are archived under `python/<model_name>` (default: its name).
    - `models=[...]` (an option): search over these models, the model a choice of the space;
      `reference_model=` the one the baselines run on (default: the largest embedded model when
      all are embedded, else the first listed). A `ChatModel` or function then answers for each,
      told which in its `model` argument, and their names must start with `python/`.
    - `strategy`: a name (`agentdesign strategies`) or a `Strategy`, whose space is then the run's.
    - `space`: a preset ("quick", the default, "full", "tiny"), a JSON file of its shape, or
      {"choices": ..., "limits": ...}.
    - `options`: any other run setting of that table, e.g. `race=False`,
      `objective="score-cost"`, `concurrency=4`, `task_timeout_s=60`, `baselines=[...]`;
      `max_cost=2.0`, a dollar budget that `ask`, `evaluate` and `optimize` never search past.

    Nothing is written when an argument is refused.
    """
    bench = benchmark_from(benchmark, scorer)
    llm, model_string = model_from(model, model_name)
    listed = options.get("models")
    if llm is not None and listed:
        outside = [m for m in listed if not (isinstance(m, str) and from_python(m))]
        if outside:
            raise AgentDesignError(
                f"a model function answers for models named {PYTHON_PREFIX}NAME, so that its "
                f"replies are never archived as another model's; got {', '.join(map(str, outside))}"
            )
    if isinstance(strategy, Strategy):
        if space is not None:
            raise AgentDesignError("give a space or a Strategy (which holds its space), not both")
        narrowing: Mapping[str, Any] = {
            "choices": strategy.space.choices,
            "limits": strategy.space.limits,
            "grid": strategy.space.grid,
        }
        narrowing = {**narrowing, "objective": strategy.objective}
    else:
        narrowing = space_from(space)
    for key, value in {"n_search": n_search, "n_holdout": n_holdout, "seed": seed}.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise AgentDesignError(f"{key} must be a whole number, got {value!r}")
    fields = {
        "name": name or time.strftime("search-%Y%m%d-%H%M%S"),
        "benchmark": bench.reference,
        "strategy": strategy_label(strategy),
        "n_search": n_search,
        "n_holdout": n_holdout,
        "seed": seed,
        **narrowing,
    }
    if llm is None or not listed:  # a model function over `models` answers for each of them
        fields["model"] = model_string
    config = run_config_from(fields, options)
    if isinstance(strategy, Strategy):
        _check_strategy_models(strategy, config)
    archive, owned = open_archive(storage, create=True)
    try:
        given = strategy if isinstance(strategy, Strategy) else None
        engine = Engine(archive, config, llm=llm, benchmark=bench, strategy=given)
    except BaseException:
        if owned:
            archive.close()
        raise
    return Search(archive=archive, engine=engine, owns_archive=owned)


def _check_strategy_models(strategy: Strategy, config: RunConfig) -> None:
    """Refuses a strategy whose space runs its designs on other models than the search's."""
    space = strategy.space
    searched = tuple(config.models) or (config.model,)
    if space.model != config.model:
        raise AgentDesignError(
            f"the strategy's space is for model {space.model!r}, the search's model is "
            f"{config.model!r}: build it with SearchSpace(model={config.model!r}, ...)"
        )
    if space.model_choices != searched:
        raise AgentDesignError(
            f"the strategy's space searches the models {list(space.model_choices)}, the search "
            f"{list(searched)}: build it with SearchSpace(model={config.model!r}, "
            f"models={list(config.models)!r}, ...)"
        )


def load_search(
    name: str,
    *,
    storage: str | os.PathLike[str] | Archive = DEFAULT_STORAGE,
    benchmark: Benchmark | Iterable[Mapping[str, Any]] | None = None,
    scorer: Scorer | None = None,
    model: ChatModel | Callable[[Sequence[Message]], str] | None = None,
    model_name: str | None = None,
    strategy: Strategy | None = None,
) -> Search:
    """Opens run `name` in `storage` to resume it. What the archive cannot store must be passed
    again, as it was given to `create_search`: in-memory items (with their scorer) or a
    `Benchmark` object, a model function, a `Strategy` object."""
    archive, owned = open_archive(storage, create=False)
    try:
        run = archive.get_run(name)
        config = RunConfig.from_dict(run.config)
        bench = stored_benchmark(config, benchmark, scorer)
        llm = None
        if model is not None:
            llm, model_string = model_from(model, model_name)
            if model_string != config.model and not config.models:
                raise AgentDesignError(
                    f"run {name} was searched with model {config.model!r}, not {model_string!r}"
                )
        label = None if strategy is None else strategy_label(strategy)
        if label is not None and label != config.strategy:
            raise AgentDesignError(
                f"run {name} was searched with strategy {config.strategy!r}, not {label!r}"
            )
        missing = [
            what
            for what, needed in (
                ("benchmark=<the same items or Benchmark>", bench is None),
                ("model=<the same model function>", llm is None and from_python(config.model)),
                (
                    "strategy=<the same Strategy>",
                    strategy is None and from_python(config.strategy),
                ),
            )
            if needed
        ]
        if missing:
            raise AgentDesignError(
                f"run {name} was created from Python objects that the archive cannot store: "
                f"pass them again, load_search({name!r}, {', '.join(missing)})"
            )
        assert bench is not None
        engine = Engine(archive, config, run=run, llm=llm, benchmark=bench, strategy=strategy)
    except BaseException:
        if owned:
            archive.close()
        raise
    return Search(archive=archive, engine=engine, owns_archive=owned)
