"""A run's definition: its budget and everything else stored with it, so that a resume, a worker
joining it or an export rebuilds the same run, and the items that definition draws beyond its split.

The Python object nests its settings by concept (budget, split, racing, meta agent, space,
baselines); what a run stores is flat, one key per setting of the table in `_settings`, as every
archive stored it before, so that `RunConfig.from_dict` reads them all. Every setting is checked
here, whoever gives it (the command line, `create_search`, a stored run).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from agentdesign.components import REGISTRY, AgentDesignError
from agentdesign.evaluators import Benchmark, check_concurrency, make_split
from agentdesign.search.config._models import choose_models
from agentdesign.search.config._settings import DEFAULTS, SETTINGS
from agentdesign.search.racing import Racing
from agentdesign.search.space import SearchSpace
from agentdesign.search.strategies import check_refinable

__all__ = [
    "MAX_SEED",
    "MAX_WAIT_S",
    "Budget",
    "MetaSettings",
    "RaceSettings",
    "RunConfig",
    "SpaceSettings",
    "SplitSettings",
    "check_rate_limits",
    "check_seconds",
    "check_seed",
    "default_baselines",
    "dev_task_ids",
]

# Seeds as numpy's generators take them (the samplers', the bootstrap's).
MAX_SEED = 2**32 - 1
# Seconds a timeout may be: the clock's waits (threads, sockets) overflow far past it.
MAX_WAIT_S = 1_000_000
# The largest integer an archive stores (a 64-bit column, SQLite's and PostgreSQL's).
_MAX_INT = 2**63 - 1


def check_seed(seed: int, *, name: str = "seed") -> None:
    """Refuses a seed no generator takes, before a run is written (past it, a run is left
    running with a traceback, its name taken)."""
    if not 0 <= seed <= MAX_SEED:
        raise AgentDesignError(f"{name} must be from 0 to {MAX_SEED}, got {seed}")


def check_seconds(seconds: float, *, name: str) -> None:
    """Refuses a timeout that is not positive, or longer than any wait can be (NaN too)."""
    if seconds <= 0:
        raise AgentDesignError(f"{name} must be positive, got {seconds}")
    if not seconds <= MAX_WAIT_S:
        raise AgentDesignError(f"{name} must be at most {MAX_WAIT_S:,} seconds, got {seconds}")


def check_rate_limits(retry_budget_s: float, rpm: float | None, tpm: float | None) -> None:
    """Refuses a retry budget or a cap on requests or tokens a minute that no call can keep."""
    if not 0 <= retry_budget_s <= MAX_WAIT_S:
        raise AgentDesignError(
            f"retry budget must be from 0 to {MAX_WAIT_S:,} seconds, got {retry_budget_s:g}"
        )
    for name, cap in (("rpm", rpm), ("tpm", tpm)):
        if cap is not None and not 0 < cap < math.inf:
            raise AgentDesignError(f"{name} (a minute's cap) must be positive, got {cap:g}")


def _check_numbers(values: Mapping[str, Any], *, what: str) -> None:
    """Refuses the numbers no archive stores: integers past 64 bits, NaN and infinities."""
    for name, value in values.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and abs(value) > _MAX_INT:
            raise AgentDesignError(f"{what}{name} must be at most {_MAX_INT}, got {value}")
        if isinstance(value, float) and not math.isfinite(value):
            raise AgentDesignError(f"{what}{name} must be a finite number, got {value}")


@dataclass(frozen=True)
class Budget:
    """When a run stops searching: after this many agents, tokens, minutes or dollars
    (`max_cost`, at litellm's prices: a model with none counts nothing), whichever comes first.
    The dollar budget comes last, so that every budget stored before it is a prefix."""

    max_agents: int | None = DEFAULTS["max_agents"]
    max_tokens: int | None = DEFAULTS["max_tokens"]
    max_minutes: float | None = DEFAULTS["max_minutes"]
    max_cost: float | None = DEFAULTS["max_cost"]

    def __post_init__(self) -> None:
        _check_numbers(asdict(self), what="budget ")
        for name, value in asdict(self).items():
            if value is not None and value <= 0:
                raise AgentDesignError(f"budget {name} must be positive, got {value}")
        if all(value is None for value in asdict(self).values()):
            raise AgentDesignError(
                "a budget needs at least one of max_agents, max_tokens, max_minutes, max_cost"
            )


def default_baselines() -> list[dict[str, Any]]:
    """The built-in baselines (BASELINES) as a run stores them."""
    return [dict(baseline) for baseline in DEFAULTS["baselines"]]


@dataclass(frozen=True)
class SplitSettings:
    """The items a run draws from its benchmark's pool, with a `seed` of their own apart from the
    strategy's (runs stored before it was kept their strategy seed as it): `n_search` that every
    design is scored on, `n_holdout` unseen ones that confirm the winners. A split whose items
    another run on the same benchmark in the archive uses the other way round is refused unless
    `allow_overlap` (see `check_split`)."""

    n_search: int = DEFAULTS["n_search"]
    n_holdout: int = DEFAULTS["n_holdout"]
    seed: int = DEFAULTS["split_seed"]
    allow_overlap: bool = DEFAULTS["allow_split_overlap"]


@dataclass(frozen=True)
class RaceSettings:
    """Racing (see `Racing`): a design is dropped at a stage where it is clearly worse than the
    incumbent, a design as good dropped with probability `alpha` at most. Runs stored before
    racing race not; those stored before its rules race by the rule they began with, "paired"."""

    enabled: bool = DEFAULTS["race"]
    alpha: float = DEFAULTS["race_alpha"]
    first_stage: int = DEFAULTS["race_first_stage"]
    rule: str = DEFAULTS["race_rule"]


@dataclass(frozen=True)
class MetaSettings:
    """The meta agent (see `MetaAgent`): every `every`-th proposal of a value-guided strategy is
    written by a model (0: never; the "meta" strategy: every one); `model` is any litellm model
    (the run's by default), `view` how many designs of the run it sees, `code` whether it may
    write workflows as code (the "code" workflow then joins the space)."""

    every: int = DEFAULTS["meta_every"]
    model: str | None = DEFAULTS["meta_model"]
    view: int = DEFAULTS["meta_view"]
    code: bool = DEFAULTS["meta_code"]


@dataclass(frozen=True)
class SpaceSettings:
    """The design space: a `preset` (or a JSON file of its shape), which `resolve` narrows to the
    run's benchmark and turns into choices and limits, or the `choices` and `limits` themselves
    (none: the whole space). Token caps, sample counts and temperatures are searched on a coarse
    `grid` (see SearchSpace), so two designs never differ only by noise; runs stored before the
    grid keep their space."""

    preset: str | None = None
    choices: Mapping[str, Sequence[str]] = field(default_factory=dict)
    limits: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    grid: bool = DEFAULTS["grid"]

    def __post_init__(self) -> None:
        # as a stored run reads back: so a config and its stored form are equal
        object.__setattr__(self, "choices", {k: tuple(v) for k, v in self.choices.items()})
        limits = {k: cast(tuple[float, float], tuple(v)) for k, v in self.limits.items()}
        object.__setattr__(self, "limits", limits)


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines a run; stored with it so `resume` rebuilds the same run.

    Made with its sections, or from the flat settings of the table in `_settings` (`of`), as the
    command line and `create_search` give them and a run stores them (`to_dict`, `from_dict`).
    """

    name: str
    benchmark: str = DEFAULTS["benchmark"]
    model: str = DEFAULTS["model"]
    strategy: str = DEFAULTS["strategy"]
    objective: str = DEFAULTS["objective"]  # or "score-cost": tokens per item, minimized too
    seed: int = DEFAULTS["seed"]  # the strategy's
    budget: Budget = field(default_factory=Budget)
    split: SplitSettings = field(default_factory=SplitSettings)
    race: RaceSettings = field(default_factory=RaceSettings)
    meta: MetaSettings = field(default_factory=MetaSettings)
    space: SpaceSettings = field(default_factory=SpaceSettings)
    # Hand-designed agents scored on the same holdout items as the winner, for the paired verdict:
    # {"label": name, "spec": None} for a built-in one (BASELINES), {"label", "spec": dict} else.
    baselines: Sequence[Mapping[str, Any]] = field(default_factory=default_baselines)
    concurrency: int = DEFAULTS["concurrency"]
    task_timeout_s: float | None = DEFAULTS["task_timeout_s"]  # a task still running then scores 0
    refine_every: int = DEFAULTS["refine_every"]  # mcts/evolution: every n-th proposal rewrites a
    # prompt (0: never)
    # Designs scored on the holdout at the end: the recorded winner first, any more only as
    # "exploratory" results that can never replace it.
    confirm_top: int = DEFAULTS["confirm_top"]
    api_base: str | None = DEFAULTS["api_base"]
    llm_timeout_s: float = DEFAULTS["llm_timeout_s"]  # a model call still unanswered is retried
    # A model call the provider rate-limits tries again for this long (0: as any failure); the
    # run's calls keep to `rpm` requests and `tpm` tokens a minute if set (see LiteLLMChatModel).
    retry_budget_s: float = DEFAULTS["retry_budget_s"]
    rpm: float | None = DEFAULTS["rpm"]
    tpm: float | None = DEFAULTS["tpm"]
    # The models a design may run on, a choice of the space (none: `model` alone), and the one
    # the baselines run on, which is then the run's `model` (see `choose_models`).
    models: Sequence[str] = DEFAULTS["models"]
    reference_model: str | None = DEFAULTS["reference_model"]

    def __post_init__(self) -> None:
        """Refuses every bad setting, so that a run is never written that cannot start."""
        object.__setattr__(self, "baselines", tuple(dict(b) for b in self.baselines))
        models, reference = choose_models(self.model, tuple(self.models), self.reference_model)
        object.__setattr__(self, "models", models)
        object.__setattr__(self, "reference_model", reference)
        if reference is not None:  # the baselines, a spec file's too, run on the reference
            object.__setattr__(self, "model", reference)
            baselines = tuple(
                b if b.get("spec") is None else {**b, "spec": {**b["spec"], "model": reference}}
                for b in self.baselines
            )
            object.__setattr__(self, "baselines", baselines)
        check_seed(self.seed)
        check_seed(self.split.seed, name="split_seed")
        if self.task_timeout_s is not None:
            check_seconds(self.task_timeout_s, name="task timeout")
        check_seconds(self.llm_timeout_s, name="LLM timeout")
        _check_numbers({k: v for k, v in self.to_dict().items() if k != "budget"}, what="")
        if self.refine_every < 0:
            raise AgentDesignError(f"refine_every must not be negative, got {self.refine_every}")
        if self.refine_every:
            check_refinable(self.strategy)
        for setting, value in (("meta_every", self.meta.every), ("meta_view", self.meta.view)):
            if value < 0:
                raise AgentDesignError(f"{setting} must not be negative, got {value}")
        if self.meta.every or self.meta.code or self.meta.model:
            check_refinable(self.strategy, what="the meta agent")
        if self.confirm_top < 0:
            raise AgentDesignError(f"confirm_top must not be negative, got {self.confirm_top}")
        if self.space.preset is not None and (self.space.choices or self.space.limits):
            raise AgentDesignError("give a space preset or its choices and limits, not both")
        check_concurrency(self.concurrency)
        check_rate_limits(self.retry_budget_s, self.rpm, self.tpm)
        self.racing()  # refuses bad racing settings before anything is written

    @property
    def meta_period(self) -> int:
        """Every how many proposals the meta agent writes one (0: never); the "meta" strategy
        asks it for each, unless told otherwise."""
        return self.meta.every or (1 if self.strategy == "meta" else 0)

    def racing(self) -> Racing | None:
        if not self.race.enabled:
            return None
        return Racing(alpha=self.race.alpha, first_stage=self.race.first_stage, rule=self.race.rule)

    def search_space(self) -> SearchSpace:
        """The space the run searches (before `resolve` narrows it to an interactive benchmark's
        episode workflows); a preset must be resolved into choices and limits first."""
        if self.space.preset is not None:
            raise AgentDesignError(
                f"the space {self.space.preset!r} is narrowed to the run's benchmark when the "
                "run is resolved (see resolve)"
            )
        choices = dict(self.space.choices)
        if self.meta.code:  # the meta agent's workflows written as code join the space
            workflows = choices.get("workflow") or REGISTRY.names("workflow", opt_in=False)
            choices["workflow"] = tuple(dict.fromkeys((*workflows, "code")))
        return SearchSpace(
            model=self.model,
            choices=choices,
            limits=self.space.limits,
            grid=self.space.grid,
            models=self.models,
        )

    def to_dict(self) -> dict[str, Any]:
        """The flat form a run stores, one key per setting, in the order archives always had."""
        data: dict[str, Any] = {
            "name": self.name,
            "benchmark": self.benchmark,
            "model": self.model,
            "strategy": self.strategy,
            "objective": self.objective,
            "race": self.race.enabled,
            "race_alpha": self.race.alpha,
            "race_first_stage": self.race.first_stage,
            "race_rule": self.race.rule,
            "budget": asdict(self.budget),
            "n_search": self.split.n_search,
            "n_holdout": self.split.n_holdout,
            "split_seed": self.split.seed,
            "allow_split_overlap": self.split.allow_overlap,
            "seed": self.seed,
            "concurrency": self.concurrency,
            "task_timeout_s": self.task_timeout_s,
            "refine_every": self.refine_every,
            "meta_every": self.meta.every,
            "meta_model": self.meta.model,
            "meta_view": self.meta.view,
            "meta_code": self.meta.code,
            "confirm_top": self.confirm_top,
            "api_base": self.api_base,
            "llm_timeout_s": self.llm_timeout_s,
        }
        if self.space.preset is not None:  # never stored: `resolve` narrows it first
            data["space"] = self.space.preset
        data["choices"] = {k: list(v) for k, v in self.space.choices.items()}
        data["limits"] = {k: list(v) for k, v in self.space.limits.items()}
        data["baselines"] = [dict(b) for b in self.baselines]
        data["grid"] = self.space.grid
        # After every older key: an older run's stored form is a prefix of a new run's
        data.update(retry_budget_s=self.retry_budget_s, rpm=self.rpm, tpm=self.tpm)
        data.update(models=list(self.models), reference_model=self.reference_model)
        return data

    @classmethod
    def of(cls, name: str, **settings: Any) -> RunConfig:
        """Run `name`'s config from flat settings: those of the table (`SETTINGS`), by name, and
        `budget` (a `Budget` or its fields), `choices` and `limits`; the table's defaults for any
        not given."""
        known = {s.name for s in SETTINGS} | _SECTIONS
        unknown = sorted(set(settings) - known)
        if unknown:
            raise AgentDesignError(
                f"no run setting {', '.join(unknown)} (the settings: {', '.join(sorted(known))})"
            )
        given = settings.get("budget")
        if given is not None and _BUDGET_FIELDS & set(settings):
            raise AgentDesignError(
                "give a budget or max_agents, max_tokens, max_minutes, max_cost, not both"
            )
        if settings.get("models") is not None and not settings["models"]:
            raise AgentDesignError("models must name at least one model")
        value = {**DEFAULTS, **settings}
        if isinstance(given, Budget):
            budget = given
        elif given is not None:
            budget = Budget(**given)
        else:
            budget = Budget(**{k: value[k] for k in sorted(_BUDGET_FIELDS)})
        return cls(
            name=name,
            benchmark=value["benchmark"],
            model=value["model"],
            strategy=value["strategy"],
            objective=value["objective"],
            seed=value["seed"],
            budget=budget,
            split=SplitSettings(
                n_search=value["n_search"],
                n_holdout=value["n_holdout"],
                seed=value["split_seed"],
                allow_overlap=value["allow_split_overlap"],
            ),
            race=RaceSettings(
                enabled=value["race"],
                alpha=value["race_alpha"],
                first_stage=value["race_first_stage"],
                rule=value["race_rule"],
            ),
            meta=MetaSettings(
                every=value["meta_every"],
                model=value["meta_model"],
                view=value["meta_view"],
                code=value["meta_code"],
            ),
            space=SpaceSettings(
                preset=value["space"],
                choices=value.get("choices") or {},
                limits=value.get("limits") or {},
                grid=value["grid"],
            ),
            baselines=value["baselines"],
            concurrency=value["concurrency"],
            task_timeout_s=value["task_timeout_s"],
            refine_every=value["refine_every"],
            confirm_top=value["confirm_top"],
            api_base=value["api_base"],
            llm_timeout_s=value["llm_timeout_s"],
            retry_budget_s=value["retry_budget_s"],
            rpm=value["rpm"],
            tpm=value["tpm"],
            models=value["models"] or (),
            reference_model=value["reference_model"],
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """A config as any archive stored it (`to_dict`), the oldest too."""
        # Stored before the grid and racing: searched without them (a stored `prune` now races);
        # stored before the racing rules: raced, and resumed, by the paired test. A setting
        # stored before it existed takes the table's default, as it did then.
        fields = {
            "grid": False,
            "race": bool(data.get("prune", False)),
            "race_rule": "paired",
            **data,
        }
        fields.pop("prune", None)
        if not fields.get("models"):  # stored as [] by a run on one model
            fields.pop("models", None)
        return cls.of(fields.pop("name"), **fields)


_SECTIONS = frozenset({"budget", "choices", "limits"})  # given to `of` beside the table's
_BUDGET_FIELDS = frozenset({"max_agents", "max_tokens", "max_minutes", "max_cost"})


def dev_task_ids(benchmark: Benchmark, config: RunConfig) -> tuple[str, ...]:
    """The items a prompt refiner or the meta agent learns failures from: a third of the search
    items' count (at least 2), drawn after the search and holdout items in the run's seeded order,
    so they are neither; none without refinement or a meta agent."""
    if not (config.refine_every or (config.meta_period and config.meta.view)):
        return ()
    split = config.split
    n_dev = max(2, split.n_search // 3)
    drawn = make_split(
        [t.id for t in benchmark.tasks()],
        seed=split.seed,
        n_search=split.n_search,
        n_holdout=split.n_holdout + n_dev,
    )
    return drawn.holdout_ids[split.n_holdout :]
