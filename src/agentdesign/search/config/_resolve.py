"""A run's configuration made, once per process, into what that process drives (`resolve`): the
benchmark it names, its space (a preset narrowed to the benchmark), its strategy with the model
operators bound to the live run, racing, its items and the model client.

Every way into a run goes through it, by making its `Engine`: `run`, `resume`, `worker` and
`finalize` on the command line, `run_search`, `resume_search`, `run_worker` and `finalize_run`,
and the Python API's `create_search` and `load_search`. What only the world can tell about a new
run (the benchmark is ready, the model is known, the pool holds the split, no other run's split
collides with it) is checked here, before anything is written; what the settings alone tell is
checked by `RunConfig` itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from agentdesign.archive import Archive, RunRecord
from agentdesign.components import (
    ChatModel,
    Completion,
    Message,
    check_model,
    default_chat_model,
)
from agentdesign.evaluators import (
    Benchmark,
    InteractiveBenchmark,
    episode_workflows,
    get_benchmark,
)
from agentdesign.search.config._config import RunConfig, SpaceSettings
from agentdesign.search.config._splits import RunItems, check_split, dev_items, draw_items
from agentdesign.search.racing import Racing
from agentdesign.search.space import SearchSpace, space_from_option, unsuited_components
from agentdesign.search.strategies import (
    MetaAgent,
    PromptRefiner,
    RunView,
    Strategy,
    make_strategy,
)

__all__ = ["ResolvedRun", "resolve", "store_run"]


@dataclass(frozen=True)
class ResolvedRun:
    """What a run's configuration resolved to in this process (see `resolve`)."""

    config: RunConfig  # as the run stores it: the benchmark's reference, the space's narrowing
    benchmark: Benchmark
    space: SearchSpace  # narrowed to the workflows that can play an interactive benchmark
    strategy: Strategy
    racing: Racing | None  # None when the run does not race, and for a score-cost search
    items: RunItems
    llm: ChatModel

    def open_model(self) -> None:
        """Opens the run's model client, once a new run is stored: litellm's opens the response
        cache, and a run stopped by a full disk under it is then one to resume."""
        if isinstance(self.llm, _DeferredModel):
            self.llm.open()


class _DeferredModel:
    """The litellm client the config names (with the response cache), made when first opened."""

    def __init__(self, config: RunConfig) -> None:
        self._api_base = config.api_base
        self._timeout_s = config.llm_timeout_s
        self._retry_budget_s = config.retry_budget_s
        self._rpm, self._tpm = config.rpm, config.tpm
        self._client: ChatModel | None = None

    def open(self) -> ChatModel:
        if self._client is None:
            self._client = default_chat_model(
                api_base=self._api_base,
                timeout_s=self._timeout_s,
                retry_budget_s=self._retry_budget_s,
                rpm=self._rpm,
                tpm=self._tpm,
            )
        return self._client

    def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        max_tokens: int,
        seed: int | None,
        stop: Sequence[str] = (),
    ) -> Completion:
        return self.open().complete(
            model=model,
            messages=messages,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            stop=stop,
        )


def resolve(
    config: RunConfig,
    archive: Archive,
    *,
    view: RunView,
    run: RunRecord | None = None,
    llm: ChatModel | None = None,
    benchmark: Benchmark | None = None,
    strategy: Strategy | None = None,
    strategy_seed: int | None = None,
) -> ResolvedRun:
    """Resolves `config`: for a new run (no `run`), checks it against the world and `archive` and
    draws its items; for stored `run`, takes the items it stored. The prompt refiner and meta
    agent the strategy holds read the run through `view` (the engine).

    A `benchmark` or `strategy` object (the Python API's) stands in for the config's name of it;
    `llm` for the litellm client the config names; `strategy_seed` for the config's seed."""
    benchmark = benchmark if benchmark is not None else get_benchmark(config.benchmark)
    if config.benchmark != benchmark.reference:
        # Stored as the benchmark's reference (a data file's absolute path), so resume and export
        # reopen the same benchmark from any directory.
        config = replace(config, benchmark=benchmark.reference)
    benchmark.check_ready()  # e.g. Java for an interactive benchmark, before anything is written
    if config.space.preset is not None:
        narrowing = space_from_option(config.space.preset, unsuited=unsuited_components(benchmark))
        space_settings = SpaceSettings(
            choices=narrowing.get("choices", {}),
            limits=narrowing.get("limits", {}),
            grid=config.space.grid,
        )
        config = replace(config, space=space_settings)
    space = _playable(config.search_space(), benchmark)
    client = llm if llm is not None else _DeferredModel(config)
    if strategy is None:
        strategy = make_strategy(
            config.strategy,
            space=space,
            seed=config.seed if strategy_seed is None else strategy_seed,
            objective=config.objective,
            refiner=_refiner(config, client, view) if config.refine_every else None,
            meta=_meta_agent(config, client, space, view) if config.meta_period else None,
        )
    if run is None:
        if llm is None:
            for model in config.models or (config.model,):
                check_model(model, api_base=config.api_base)
            if config.meta.model and config.meta_period:
                check_model(config.meta.model, api_base=config.api_base)
        items = draw_items(benchmark, config)  # refused here, before writing, if the pool is small
        check_split(archive, config, items, pool=[t.id for t in benchmark.tasks()])
    else:
        dev = dev_items(run, benchmark, config)
        items = RunItems(run.search_task_ids, run.holdout_task_ids, dev)
    return ResolvedRun(
        config=config,
        benchmark=benchmark,
        space=space,
        strategy=strategy,
        # Racing compares scores; a score-cost search keeps cheap weak designs for its front.
        racing=config.racing() if config.objective == "score" else None,
        items=items,
        llm=client,
    )


def store_run(archive: Archive, resolved: ResolvedRun) -> RunRecord:
    """Stores a new run as resolved, with its seeded split."""
    config, items = resolved.config, resolved.items
    return archive.create_run(
        name=config.name,
        benchmark=config.benchmark,
        model=config.model,
        strategy=config.strategy,
        budget=asdict(config.budget),
        config=config.to_dict(),
        split_seed=config.split.seed,
        search_task_ids=items.search,
        holdout_task_ids=items.holdout,
        dev_task_ids=items.dev,
    )


def _playable(space: SearchSpace, benchmark: Benchmark) -> SearchSpace:
    """The space narrowed to the workflows that can play an interactive benchmark's episodes
    (all of them when the space allows none, as the single-pass `quick` preset does)."""
    if not isinstance(benchmark, InteractiveBenchmark):
        return space
    playable = episode_workflows()
    workflows = tuple(n for n in space.components("workflow") if n in playable) or playable
    return dataclasses.replace(space, choices={**space.choices, "workflow": workflows})


def _refiner(config: RunConfig, llm: ChatModel, view: RunView) -> PromptRefiner:
    return PromptRefiner(
        llm=llm,
        model=config.model,
        failures=view.failures,
        on_start=lambda: view.call_started("refinement"),
        on_call=lambda completion: view.call_finished(completion, "refinement", config.model),
        every=config.refine_every,
    )


def _meta_agent(config: RunConfig, llm: ChatModel, space: SearchSpace, view: RunView) -> MetaAgent:
    return MetaAgent(
        llm=llm,
        model=config.meta.model or config.model,
        space=space,
        run=view,
        every=config.meta_period,
        n_view=config.meta.view,
        code=config.meta.code,
    )
