"""The command line's shared options: the storage and output switches, and the run settings that
`run` and `worker` both take (a worker that starts a run takes the same ones): one option for each
setting of the run's table (`SETTINGS`) that has a help text, with its default and help taken
from there, gathered in `RunOptions` and turned into a `RunConfig` by one method, which only
parses (the config checks every setting, `resolve` the rest)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer

from agentdesign.components import (
    MAX_DATA_BYTES,
    AgentDesignError,
    parse_spec,
    read_text_file,
)
from agentdesign.search.config import SETTINGS, RunConfig, Setting
from agentdesign.search.verdict import BASELINES

__all__ = [
    "DEFAULT_STORAGE",
    "ApiBaseOption",
    "ConcurrencyOption",
    "EstimateOption",
    "JsonOption",
    "LLMTimeoutOption",
    "MaxCostOption",
    "RetryBudgetOption",
    "RpmOption",
    "RunOptions",
    "StorageOption",
    "TaskTimeoutOption",
    "TpmOption",
    "UnsafeSandboxOption",
    "with_run_options",
]

DEFAULT_STORAGE = "agentdesign.db"
StorageOption = Annotated[
    str, typer.Option("--storage", "-s", help="archive: a file path or a database URL")
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="print JSON for scripts instead of a table")
]


# The run settings the command line takes, in the order `--help` lists them.
_RUN_SETTINGS: tuple[Setting, ...] = tuple(s for s in SETTINGS if s.help is not None)
_BY_NAME: Mapping[str, Setting] = {s.name: s for s in _RUN_SETTINGS}


def _option(name: str) -> Any:
    """The option of setting `name` (its flags, its help), as typer reads it from an annotation."""
    setting = _BY_NAME[name]
    if setting.parse is not None:
        return typer.Option(*setting.flags, help=setting.help_text(), parser=setting.parse)
    return typer.Option(*setting.flags, help=setting.help_text())


def _annotation(setting: Setting) -> Any:
    kind = setting.type if setting.type is not None else type(setting.default)
    return Annotated[kind, _option(setting.name)]


_OPTIONS: Mapping[str, Any] = {s.name: _annotation(s) for s in _RUN_SETTINGS}
# The run settings other commands take too (`evaluate`, `resume`)
ConcurrencyOption = Annotated[int, _option("concurrency")]
TaskTimeoutOption = Annotated[float | None, _option("task_timeout_s")]
ApiBaseOption = Annotated[str | None, _option("api_base")]
LLMTimeoutOption = Annotated[float, _option("llm_timeout_s")]
EstimateOption = Annotated[
    bool,
    typer.Option(
        "--estimate",
        help="print the run's calls, tokens and dollars, estimated from a short calibration or "
        "this archive's evaluations, and run nothing",
    ),
]
# resume's: a new budget, as its --max-agents, --max-tokens and --max-minutes are
MaxCostOption = Annotated[
    float | None, typer.Option(help="new dollar budget", parser=_BY_NAME["max_cost"].parse)
]
RetryBudgetOption = Annotated[float, _option("retry_budget_s")]
RpmOption = Annotated[float | None, _option("rpm")]
TpmOption = Annotated[float | None, _option("tpm")]
UnsafeSandboxOption = Annotated[
    bool,
    typer.Option(
        "--unsafe-sandbox",
        help="run model-written code under audit hooks only where no OS sandbox works",
    ),
]


class RunOptions:
    """The run settings of `run` and `worker` as the command line gave them, one option each of
    the table's settings with a help text (`SETTINGS`), named after it; any not given takes the
    option's default. `given` names the settings the user gave, even at their default value."""

    def __init__(self, *, given: Collection[str] = (), **values: Any) -> None:
        names = {s.name for s in _RUN_SETTINGS}
        unknown = sorted((set(values) | set(given)) - names)
        if unknown:
            raise TypeError(f"no run option {', '.join(unknown)}")
        self.values: Mapping[str, Any] = {
            s.name: values.get(s.name, s.option_default) for s in _RUN_SETTINGS
        }
        self.given = frozenset(given)

    def config(self, name: str) -> RunConfig:
        """The run these options start; `--baseline` files are read here, as specs, and
        `--models` split at its commas."""
        values = dict(self.values)
        baselines = values.pop("baselines")
        if baselines is not None:
            values["baselines"] = _baselines(baselines)
        if values["models"] is not None:
            values["models"] = [model.strip() for model in values["models"].split(",")]
        return RunConfig.of(name, **values)


_KEYWORD = inspect.Parameter.KEYWORD_ONLY  # typer passes every option by name


def with_run_options(command: Callable[..., None]) -> Callable[..., None]:
    """Gives a command the run settings of `RunOptions` as options, where its parameter
    `options` stands (so `--help` lists them in that place), and calls it with them gathered into
    one."""
    hints = get_type_hints(command, include_extras=True)
    params: list[inspect.Parameter] = []
    for param in inspect.signature(command).parameters.values():
        if param.name != "options":
            params.append(param.replace(kind=_KEYWORD, annotation=hints[param.name]))
            continue
        params.extend(
            inspect.Parameter(
                s.name, _KEYWORD, default=s.option_default, annotation=_OPTIONS[s.name]
            )
            for s in _RUN_SETTINGS
        )

    # typer passes its context to a parameter of this type: it tells which options were given.
    params.append(inspect.Parameter("command_context", _KEYWORD, annotation=typer.Context))

    @functools.wraps(command)
    def with_options(**values: Any) -> None:
        context: typer.Context = values.pop("command_context")
        shared = {s.name: values.pop(s.name) for s in _RUN_SETTINGS}
        command(options=RunOptions(given=_given(context, shared), **shared), **values)

    with_options.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    with_options.__annotations__ = {p.name: p.annotation for p in params}
    return with_options


def _given(context: typer.Context, names: Collection[str]) -> set[str]:
    """Which of `names` the command line (or an environment variable) set, not a default."""
    sources = {name: context.get_parameter_source(name) for name in names}
    return {
        name
        for name, source in sources.items()
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")
    }


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
            text = read_text_file(path, limit=MAX_DATA_BYTES)
        except ValueError as err:
            raise AgentDesignError(
                f"--baseline {option!r} is neither {' nor '.join(BASELINES)} nor a readable "
                f"spec file ({err})"
            ) from None
        chosen.append({"label": path.stem, "spec": parse_spec(text).to_dict()})
    return chosen
