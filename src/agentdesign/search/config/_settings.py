"""The one table of a run's settings as its users give them: each setting's name (create_search's
keyword, the key a run stores it under), its default, and, for those the command line takes, the
option's help. `RunConfig`, `create_search`, the command line's `run` and `worker` and the loading
of a stored run all take their defaults from here, so none can drift from another.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from agentdesign.components import DEFAULT_LLM_TIMEOUT_S, DEFAULT_RETRY_BUDGET_S, AgentDesignError
from agentdesign.search.space import SPACE_PRESETS
from agentdesign.search.strategies import STRATEGIES
from agentdesign.search.verdict import BASELINES

__all__ = ["DEFAULTS", "SETTINGS", "Setting", "default_run_note"]

_SAME = object()  # a setting whose option's default is the setting's own


@dataclass(frozen=True)
class Setting:
    """One run setting: its `name` and `default`; `help` (text, or a function of none that gives
    it, for a text read from a registry only when the command line is built) for a setting the
    command line takes as an option, `--<name>` or `flags`, of type `type` (the default's by
    default) with default `cli_default` (the setting's by default), None for the Python API's
    own settings."""

    name: str
    default: Any
    help: str | Callable[[], str] | None = None
    type: Any = None
    flags: tuple[str, ...] = ()
    cli_default: Any = _SAME
    parse: Callable[[str], Any] | None = None

    @property
    def option_default(self) -> Any:
        """The command line option's default."""
        return self.default if self.cli_default is _SAME else self.cli_default

    def help_text(self) -> str:
        assert self.help is not None, f"{self.name} is no option of the command line"
        return self.help if isinstance(self.help, str) else self.help()


def _dollars(text: str) -> float:
    """`--max-cost`'s text as dollars ("2.5" or "$2.5"); the budget refuses one not positive."""
    try:
        return float(text.strip().removeprefix("$"))
    except ValueError:
        raise AgentDesignError(f"--max-cost must be a number of dollars, got {text!r}") from None


def _strategies() -> str:
    return f"one of {', '.join(STRATEGIES)}"  # read when asked: plugins may add strategies


# The default run aims at 10 minutes on 2 CPU cores with no response cache, and at a verdict that
# can decide (docs/results.md has the measured runs). BFCL with the embedded Qwen2.5-Coder-0.5B,
# 4 designs x 4 search items, then the winner and chain of thought on 40 unseen items: 8 min 39 s,
# 1.49 GB; on those 40 items (the two differed on 11) a gain of about 0.23 would be shown with 80%
# power. With 6 search items it took 11 min 14 s. GSM8K's 8 holdout items (the default before,
# 8 min 45 s with the 1.5B model) could show no gain, and 40 of them did not finish in 20 minutes
# even with the 0.5B model.
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "benchmark",
        "bfcl",
        "benchmark name, or jsonl:PATH for your own data (.jsonl or .yaml)",
    ),
    Setting("model", "embedded/qwen2.5-coder-0.5b", "litellm model string"),
    Setting("strategy", "tpe", _strategies),
    Setting("objective", "score", "score, or score-cost (also minimize tokens per item)"),
    # Racing (see Racing): a design is dropped at a stage where it is clearly worse than the
    # incumbent, a design as good dropped with probability race_alpha at most.
    Setting(
        "race",
        True,
        "racing: a design earns more search items only while it is not clearly worse than the "
        "best so far (see docs/racing.md)",
    ),
    Setting(
        "race_alpha",
        0.1,
        "racing drops a design as good as the best so far with this chance at most",
    ),
    Setting("race_first_stage", 4),
    Setting("race_rule", "bounds"),
    # The budget: a run stops after this many agents, tokens, minutes or dollars, whichever comes
    # first. Dollars are litellm's prices of the calls: a model it has no price for counts none.
    Setting("max_agents", 4, "stop after this many agents", type=int | None),
    Setting("max_tokens", None, "stop after this many tokens", type=int | None),
    Setting("max_minutes", None, "stop after this many minutes", type=float | None),
    Setting(
        "max_cost",
        None,
        "stop proposing designs once the run has spent this many dollars (litellm's prices; the "
        "holdout verdict is still paid; a model with no price cannot be stopped by it)",
        type=float | None,
        parse=_dollars,
    ),
    Setting("n_search", 4, "items each agent is scored on"),
    Setting("n_holdout", 40, "unseen items that confirm the winners"),
    Setting("seed", 0, "seed of the strategy (the split has its own)"),
    Setting(
        "split_seed",
        0,
        "seed of the split into search, holdout and dev items; another one draws a fresh holdout",
    ),
    Setting(
        "allow_split_overlap",
        False,
        "start the run even if its search sees another run's holdout items here, or its holdout "
        "holds items another run searched (refused otherwise)",
        flags=("--allow-split-overlap",),
    ),
    Setting("concurrency", 1, "tasks run at once (1 for embedded)"),
    Setting(
        "task_timeout_s",
        None,
        "seconds a task may take; past it the task scores 0 as a timeout",
        type=float | None,
        flags=("--task-timeout",),
    ),
    Setting(
        "refine_every",
        0,
        "mcts/evolution: every n-th design rewrites a prompt from failures (0: off)",
    ),
    # The meta agent (see MetaAgent): every n-th proposal of a value-guided strategy is written by
    # a model (0: never; the "meta" strategy: every one); `meta_model` is any litellm model (the
    # run's by default), `meta_view` how many designs of the run it sees, `meta_code` whether it
    # may write workflows as code (the "code" workflow then joins the space).
    Setting(
        "meta_every",
        0,
        "mcts/evolution: every n-th design is written by the meta agent (0: off; --strategy "
        "meta: every design)",
    ),
    Setting(
        "meta_model",
        None,
        "the meta agent's model, any litellm model string (default: --model)",
        type=str | None,
    ),
    Setting("meta_view", 4, "how many of the run's best designs the meta agent sees (0: none)"),
    Setting("meta_code", False, "the meta agent may write workflows as Python, run in the sandbox"),
    Setting("api_base", None, "OpenAI-compatible server URL", type=str | None),
    Setting(
        "llm_timeout_s",
        DEFAULT_LLM_TIMEOUT_S,
        "seconds a model call may wait for its reply before it is retried",
        type=float,
        flags=("--llm-timeout",),
    ),
    # Rate limits: a call the provider rate-limits is tried again, waiting as the provider asks,
    # for this long before it is a provider failure (0: tried as any failure); the run's calls
    # keep to `rpm` requests and `tpm` tokens a minute where set.
    Setting(
        "retry_budget_s",
        DEFAULT_RETRY_BUDGET_S,
        "seconds a model call the provider rate-limits keeps trying, waiting as it asks (0: "
        "tried as any failure)",
        type=float,
        flags=("--retry-budget",),
    ),
    Setting("rpm", None, "at most this many model requests a minute", type=float | None),
    Setting(
        "tpm",
        None,
        "at most this many model tokens a minute (estimated before a call)",
        type=float | None,
    ),
    # The design space: a preset or a JSON file of its shape, narrowed to what suits the
    # benchmark when the run is resolved (see `resolve`). The command line and `create_search`
    # narrow to the quick preset unless told otherwise; a `RunConfig` searches the whole space.
    Setting(
        "space",
        None,
        f"design space: {', '.join(SPACE_PRESETS)} or a JSON file",
        type=str,
        cli_default="quick",
    ),
    # Designs scored on the holdout at the end: the recorded winner first, any more only as
    # "exploratory" results that can never replace it.
    Setting(
        "confirm_top",
        1,
        "designs scored on the holdout at the end: the recorded winner, then the next best as "
        "exploratory results that never replace it",
    ),
    # Hand-designed agents scored on the same holdout items as the winner, for the paired verdict:
    # {"label": name, "spec": None} for a built-in one (BASELINES), {"label", "spec": dict} else.
    Setting(
        "baselines",
        tuple({"label": name, "spec": None} for name in BASELINES),
        "hand-designed agent the winner is compared with on the holdout: cot, cot-sc or a spec "
        "JSON file; repeat for several, 'none' for none (default: cot and cot-sc)",
        type=list[str] | None,
        flags=("--baseline",),
        cli_default=None,
    ),
    # Token caps, sample counts and temperatures are searched on a coarse grid (see SearchSpace),
    # so two designs never differ only by noise.
    Setting("grid", True),
    # The model as a choice of the design space: the models a design may run on (none: `model`
    # alone), and the one the baselines run on (the run's `model`), by default the largest.
    Setting(
        "models",
        (),
        "search over these models too, litellm model strings separated by commas: the model "
        "becomes a choice of the design space (default: --model alone)",
        type=str | None,
        cli_default=None,
    ),
    Setting(
        "reference_model",
        None,
        "with --models: the one of them the baselines run on (default: the largest embedded "
        "model when all are embedded, else the first listed)",
        type=str | None,
    ),
)

DEFAULTS: Mapping[str, Any] = MappingProxyType({s.name: s.default for s in SETTINGS})


def default_run_note(settings: Mapping[str, Any], given: Collection[str]) -> str | None:
    """The header's line on a run that kept the default benchmark and model, so that a user who
    never chose them learns which they are and why: the measured run's time and power (see above
    SETTINGS) where its sizes are the defaults too. None for a run that names either, even at its
    default value; `settings` by name, as the command line gives them, `given` the names the user
    gave (a setting not given holds its default)."""
    if {"benchmark", "model"} & set(given):
        return None
    note = "default run: BFCL with the embedded Qwen2.5-Coder-0.5B"
    if all(settings[name] == DEFAULTS[name] for name in ("max_agents", "n_search", "n_holdout")):
        note += (
            f", {DEFAULTS['max_agents']} designs x {DEFAULTS['n_search']} search items, "
            f"{DEFAULTS['n_holdout']} holdout items: about 9 minutes on 2 CPU cores, enough "
            "holdout items to show a gain of about 0.23"
        )
    return note + " (give --model/--benchmark to choose)"
