"""A run's definition: its budget and everything else stored with it, so that a resume, a worker
joining it or an export rebuilds the same run, and the items that definition draws beyond its split.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from agentdesign.components import (
    DEFAULT_LLM_TIMEOUT_S,
    DEFAULT_RETRY_BUDGET_S,
    REGISTRY,
    AgentDesignError,
)
from agentdesign.evaluators import Benchmark, check_concurrency, make_split
from agentdesign.search.racing import Racing
from agentdesign.search.space import SearchSpace
from agentdesign.search.strategies import check_refinable
from agentdesign.search.verdict import BASELINES

__all__ = [
    "MAX_SEED",
    "MAX_WAIT_S",
    "Budget",
    "RunConfig",
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
            f"retry budget must be from 0 to {MAX_WAIT_S / 60:,.0f} minutes, "
            f"got {retry_budget_s / 60:g}"
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
    """When a run stops: after this many agents, tokens or minutes, whichever comes first."""

    max_agents: int | None = 8
    max_tokens: int | None = None
    max_minutes: float | None = None

    def __post_init__(self) -> None:
        _check_numbers(asdict(self), what="budget ")
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
    # Racing (see Racing): a design is dropped at a stage where it is clearly worse than the
    # incumbent, a design as good dropped with probability race_alpha at most; runs stored before
    # racing race not, those stored before `race_rule` race by the rule they began with, "paired".
    race: bool = True
    race_alpha: float = 0.1
    race_first_stage: int = 4
    race_rule: str = "bounds"
    budget: Budget = field(default_factory=Budget)
    n_search: int = 10
    n_holdout: int = 10
    # The split's own seed, apart from the strategy's `seed`: runs stored before it was kept
    # their split seed (their seed), and keep it. A split whose items another run on the same
    # benchmark in the archive uses the other way round is refused unless allowed (`_splits`).
    split_seed: int = 0
    allow_split_overlap: bool = False
    seed: int = 0
    concurrency: int = 1
    task_timeout_s: float | None = None  # a task still running then scores 0 as a "timeout"
    refine_every: int = 0  # mcts/evolution: every n-th proposal rewrites a prompt (0: never)
    # The meta agent (see MetaAgent): every n-th proposal of a value-guided strategy is written by
    # a model (0: never; the "meta" strategy: every one); `meta_model` is any litellm model (the
    # run's by default), `meta_view` how many designs of the run it sees, `meta_code` whether it
    # may write workflows as code (the "code" workflow then joins the space).
    meta_every: int = 0
    meta_model: str | None = None
    meta_view: int = 4
    meta_code: bool = False
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
    # A model call the provider rate-limits tries again for this long (0: as any failure); the
    # run's calls keep to `rpm` requests and `tpm` tokens a minute if set (see LiteLLMChatModel).
    retry_budget_s: float = DEFAULT_RETRY_BUDGET_S
    rpm: float | None = None
    tpm: float | None = None

    def __post_init__(self) -> None:
        """Refuses every bad setting, so that a run is never written that cannot start."""
        check_seed(self.seed)
        check_seed(self.split_seed, name="split_seed")
        if self.task_timeout_s is not None:
            check_seconds(self.task_timeout_s, name="task timeout")
        check_seconds(self.llm_timeout_s, name="LLM timeout")
        _check_numbers(vars(self), what="")
        if self.refine_every < 0:
            raise AgentDesignError(f"refine_every must not be negative, got {self.refine_every}")
        if self.refine_every:
            check_refinable(self.strategy)
        for setting in ("meta_every", "meta_view"):
            if getattr(self, setting) < 0:
                raise AgentDesignError(
                    f"{setting} must not be negative, got {getattr(self, setting)}"
                )
        if self.meta_every or self.meta_code or self.meta_model:
            check_refinable(self.strategy, what="the meta agent")
        check_concurrency(self.concurrency)
        check_rate_limits(self.retry_budget_s, self.rpm, self.tpm)
        self.racing()  # refuses bad racing settings before anything is written

    @property
    def meta_period(self) -> int:
        """Every how many proposals the meta agent writes one (0: never); the "meta" strategy
        asks it for each, unless told otherwise."""
        return self.meta_every or (1 if self.strategy == "meta" else 0)

    def racing(self) -> Racing | None:
        if not self.race:
            return None
        return Racing(alpha=self.race_alpha, first_stage=self.race_first_stage, rule=self.race_rule)

    def space(self) -> SearchSpace:
        choices = dict(self.choices)
        if self.meta_code:  # the meta agent's workflows written as code join the space
            workflows = choices.get("workflow") or REGISTRY.names("workflow", opt_in=False)
            choices["workflow"] = tuple(dict.fromkeys((*workflows, "code")))
        return SearchSpace(model=self.model, choices=choices, limits=self.limits, grid=self.grid)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["choices"] = {k: list(v) for k, v in self.choices.items()}
        data["limits"] = {k: list(v) for k, v in self.limits.items()}
        data["baselines"] = [dict(b) for b in self.baselines]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        # Stored before the grid and racing: searched without them (a stored `prune` now races);
        # stored before the racing rules: raced, and resumed, by the paired test.
        fields = {
            "grid": False,
            "race": bool(data.get("prune", False)),
            "race_rule": "paired",
            **data,
        }
        fields.pop("prune", None)
        fields["budget"] = Budget(**fields["budget"])
        fields["limits"] = {k: (v[0], v[1]) for k, v in fields.get("limits", {}).items()}
        return cls(**fields)


def dev_task_ids(benchmark: Benchmark, config: RunConfig) -> tuple[str, ...]:
    """The items a prompt refiner or the meta agent learns failures from: a third of the search
    items' count (at least 2), drawn after the search and holdout items in the run's seeded order,
    so they are neither; none without refinement or a meta agent."""
    if not (config.refine_every or (config.meta_period and config.meta_view)):
        return ()
    n_dev = max(2, config.n_search // 3)
    drawn = make_split(
        [t.id for t in benchmark.tasks()],
        seed=config.split_seed,
        n_search=config.n_search,
        n_holdout=config.n_holdout + n_dev,
    )
    return drawn.holdout_ids[config.n_holdout :]
