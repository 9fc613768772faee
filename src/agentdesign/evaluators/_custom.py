"""A benchmark from the user's own JSON Lines file: `--benchmark jsonl:path/to/data.jsonl`.

Each line is a JSON object with a question and an answer. A short YAML file (`jsonl:bench.yaml`, or
`data.yaml` found beside `data.jsonl`) can rename the fields, pick the scorer, add a train file for
few-shot examples, and give the benchmark a name and a description. Every key is optional:

    name: capitals                 # default: the data file's name without extension
    description: Capital cities.   # default: says where the data is and how it is scored
    data: capitals.jsonl           # default: the YAML's name with .jsonl (relative to the YAML)
    train: capitals-train.jsonl    # default: none
    question_field: question       # default "question"
    answer_field: answer           # default "answer"
    choices_field: choices         # default "choices" (multiple_choice only; optional there)
    scorer: exact                  # exact | numeric | contains | regex | multiple_choice
                                   # | module:function (default exact)

Task ids are "<name>/<line>". The benchmark name carries a digest of the data and of the settings
that change scores, so an archive never reuses a result across edited or different data.

Files are read within bounds (`read_data_file`): the data a regular file
of at most `MAX_DATA_BYTES`, the YAML one of `MAX_SETTINGS_BYTES`, nested at most `MAX_NESTING`
deep, with at most `_MAX_ALIASES` aliases (a "billion laughs" file would otherwise expand into
gigabytes the moment a setting is read as text).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import re
import string
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar, cast

import regex
import yaml

from agentdesign.components import (
    MAX_DATA_BYTES,
    MAX_NESTING,
    MAX_SETTINGS_BYTES,
    check_unicode,
    extract_answer,
    output_key,
)
from agentdesign.evaluators._benchmark import (
    FILE_PREFIX,
    OPENERS,
    Benchmark,
    BenchmarkError,
    Score,
    Task,
    load_jsonl,
    parse_jsonl,
    read_data_file,
)
from agentdesign.evaluators._gsm8k import extract_final_number

__all__ = ["FileBenchmark", "open_file_benchmark"]

_KEYS = (
    "name",
    "description",
    "data",
    "train",
    "question_field",
    "answer_field",
    "choices_field",
    "scorer",
)
_TOLERANCE = Decimal("1e-6")
# A settings file needs no YAML aliases; a few are allowed, too few to expand into much.
_MAX_ALIASES = 16
# Seconds a gold regex may take on one reply: a pattern that backtracks catastrophically on it
# (`(a|aa)+$` on a long run of a's) would otherwise hold the interpreter, and the task timeout
# with it, for hours.
REGEX_TIMEOUT_S = 1.0
_LETTERS = string.ascii_uppercase
# A choice letter as models write it: "B", "(B)", "B)", "B.", "B: Paris", "**B**".
_LETTER = re.compile(r"^[\s*(\[]*([A-Z])(?:[\s*)\].:,]|$)")


@dataclass(frozen=True)
class _Scorer:
    """How a reply is judged: `rule` goes into the benchmark's description for value models."""

    rule: str
    score: Callable[[Task, str], Score]
    # what a vote among attempts counts (`Benchmark.answer_key`): the final number for numeric
    # answers, the final answer as text comparisons see it for the rest
    key: Callable[[str], str] = output_key


def _normalize(text: str) -> str:
    """Case, surrounding quotes and full stops, and runs of spaces do not matter."""
    return " ".join(text.casefold().split()).strip(" .!?\"'`")


def _exact(task: Task, prediction: str) -> Score:
    answer = extract_answer(prediction)
    correct = _normalize(answer) == _normalize(task.answer)
    return Score(float(correct), {"prediction": answer, "gold": task.answer})


def _numeric(task: Task, prediction: str) -> Score:
    predicted, gold = extract_final_number(prediction), extract_final_number(task.answer)
    if predicted is None or gold is None:
        return Score(0.0, {"prediction": None, "error": "no_number"}, error_kind="parse")
    correct = abs(Decimal(predicted) - Decimal(gold)) < _TOLERANCE
    return Score(float(correct), {"prediction": predicted, "gold": gold})


def _contains(task: Task, prediction: str) -> Score:
    answer = extract_answer(prediction)
    correct = _normalize(task.answer) in _normalize(answer)
    return Score(float(correct), {"prediction": answer, "gold": task.answer})


def _regex(task: Task, prediction: str) -> Score:
    """A match of the gold pattern, given up after `REGEX_TIMEOUT_S`: that reply scores 0 as
    "scorer_timeout", a result and not a failure of the run, since the reply is cached and a
    resume would time out on it again (the `regex` module checks its clock while it backtracks,
    which `re` cannot be made to do)."""
    answer = extract_answer(prediction)
    details = {"prediction": answer, "pattern": task.answer}
    try:
        correct = _compiled(task.answer).search(answer, timeout=REGEX_TIMEOUT_S) is not None
    except TimeoutError:
        details["error"] = f"no match decided in {REGEX_TIMEOUT_S:g} s"
        return Score(0.0, details, error_kind="scorer_timeout")
    return Score(float(correct), details)


@functools.cache
def _compiled(pattern: str) -> Any:
    return regex.compile(pattern)


def _multiple_choice(task: Task, prediction: str) -> Score:
    answer = extract_answer(prediction)
    letter = _choice_letter(answer, task.metadata.get("choices", ()))
    if letter is None:
        details = {"prediction": answer, "gold": task.answer, "error": "no_choice"}
        return Score(0.0, details, error_kind="parse")
    return Score(float(letter == task.answer), {"prediction": letter, "gold": task.answer})


def _choice_letter(answer: str, choices: Sequence[str]) -> str | None:
    """The option a reply picks: its letter, or the text of one of the choices."""
    match = _LETTER.match(answer)
    if match is not None and (not choices or _LETTERS.index(match[1]) < len(choices)):
        return match[1]
    picked = [i for i, choice in enumerate(choices) if _normalize(choice) == _normalize(answer)]
    return _LETTERS[picked[0]] if picked else None


def _text_key(output: str) -> str:
    return _normalize(extract_answer(output))


_BUILTIN_SCORERS = {
    "exact": _Scorer(
        "the final answer equals the gold answer (ignoring case and spaces)", _exact, _text_key
    ),
    "numeric": _Scorer("the final number equals the gold number", _numeric),
    "contains": _Scorer(
        "the final answer contains the gold answer (ignoring case)", _contains, _text_key
    ),
    "regex": _Scorer("the final answer matches the gold regular expression", _regex, _text_key),
    "multiple_choice": _Scorer(
        "the chosen option's letter is the gold one", _multiple_choice, _text_key
    ),
}


def _function_scorer(path: str, *, where: str, folder: Path) -> _Scorer:
    """A user's `module:function(prediction=..., answer=...)` returning a float in [0, 1].

    The module is imported from sys.path, or else from `module.py` beside the YAML file.
    """
    module_name, _, function_name = path.partition(":")
    try:
        module = _import(module_name, folder)
    except Exception as error:  # the user's module: any import failure is theirs to fix
        raise BenchmarkError(
            f"{where}: cannot import scorer module {module_name!r}: {error}"
        ) from error
    function = getattr(module, function_name, None)
    if not callable(function):
        raise BenchmarkError(f"{where}: scorer module {module_name!r} has no {function_name}()")
    try:
        inspect.signature(function).bind(prediction="", answer="")
    except (TypeError, ValueError) as error:
        raise BenchmarkError(
            f"{where}: scorer {path} must accept prediction= and answer= ({error})"
        ) from error

    def score(task: Task, prediction: str) -> Score:
        try:
            value = function(prediction=prediction, answer=task.answer)
        except Exception as error:  # the user's code: one line for them, no traceback of ours
            detail = " ".join(str(error).split())[:300]
            raise BenchmarkError(
                f"scorer {path} raised {type(error).__name__} on task {task.id}: {detail}"
            ) from error
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise BenchmarkError(f"scorer {path} returned {value!r}, not a number in [0, 1]")
        return Score(float(value), {"scorer": path})

    return _Scorer(f"{path} scores the reply against the gold answer", score, _text_key)


def _import(module_name: str, folder: Path) -> Any:
    local = folder / f"{module_name}.py"
    if importlib.util.find_spec(module_name) is not None or not local.is_file():
        return importlib.import_module(module_name)
    spec = importlib.util.spec_from_file_location(module_name, local)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


class FileBenchmark(Benchmark):  # type: ignore[misc, unused-ignore]  # see BenchmarkError
    """A user's data set; `open_file_benchmark` makes a subclass with its name and description."""

    name: ClassVar[str] = "jsonl"
    description: ClassVar[str] = "A data set from a JSON Lines file."

    def __init__(
        self, *, tasks: Sequence[Task], train: Sequence[Task], scorer: _Scorer, reference: str
    ) -> None:
        self._tasks = tuple(tasks)
        self._train = tuple(train)
        self._scorer = scorer
        self._reference = reference

    @property
    def reference(self) -> str:
        return self._reference

    def tasks(self) -> Sequence[Task]:
        return self._tasks

    def train_examples(self) -> Sequence[Task]:
        return self._train

    def answer_key(self, task: Task, output: str) -> str:
        return self._scorer.key(output)

    def score(self, task: Task, prediction: str) -> Score:
        if not prediction.strip():
            return Score(0.0, {"error": "empty"})
        return self._scorer.score(task, prediction)


def open_file_benchmark(path: str) -> Benchmark:
    """The benchmark in a JSONL file, or described by a YAML file (see the module docstring)."""
    given = Path(path).expanduser().resolve()
    if given.suffix in (".yaml", ".yml"):
        config_path: Path | None = given
        config = _read_config(given)
        data_path = given.parent / str(config.get("data", given.with_suffix(".jsonl").name))
    else:
        beside = [given.with_suffix(s) for s in (".yaml", ".yml") if given.with_suffix(s).is_file()]
        config_path = beside[0] if beside else None
        config = _read_config(config_path) if config_path is not None else {}
        data_path = given
        if "data" in config:
            raise BenchmarkError(
                f"{config_path}: 'data' belongs in a YAML given as jsonl:FILE.yaml"
            )
    where = str(config_path or data_path)
    settings = {key: config.get(key, default) for key, default in _DEFAULTS.items()}
    for key, value in settings.items():
        if not isinstance(value, str) or not value:
            raise BenchmarkError(f"{where}: {key} must be a non-empty string, got {value!r}")
    scorer_name = settings["scorer"]
    folder = (config_path or data_path).parent
    if scorer_name in _BUILTIN_SCORERS:
        scorer = _BUILTIN_SCORERS[scorer_name]
    elif re.fullmatch(r"[\w.]+:\w+", scorer_name):
        scorer = _function_scorer(scorer_name, where=where, folder=folder)
    else:
        raise BenchmarkError(
            f"{where}: unknown scorer {scorer_name!r} (choose {', '.join(_BUILTIN_SCORERS)}, "
            "or module:function)"
        )
    base = config.get("name", data_path.stem)
    if isinstance(base, int | float) and not isinstance(base, bool):
        base = str(base)  # `name: 2024` is a number in YAML
    if not isinstance(base, str) or not base:
        raise BenchmarkError(f"{where}: name must be a non-empty string")
    data = read_data_file(data_path, limit=MAX_DATA_BYTES)
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode() + data).hexdigest()
    name = f"{base}-{digest[:8]}"
    tasks = _tasks(parse_jsonl(data, source=str(data_path)), data_path, name, settings)
    train: list[Task] = []
    if config.get("train"):
        train_path = folder / str(config["train"])
        train = _tasks(load_jsonl(train_path), train_path, f"{name}/train", settings)
    description = config.get(
        "description",
        f"Questions from {data_path.name} ({len(tasks)} items); a reply scores 1 if "
        f"{scorer.rule}, else 0.",
    )
    if not isinstance(description, str):
        raise BenchmarkError(f"{where}: description must be a string")
    cls = cast(
        type[FileBenchmark],
        type("FileBenchmark", (FileBenchmark,), {"name": name, "description": description}),
    )
    return cls(tasks=tasks, train=train, scorer=scorer, reference=f"{FILE_PREFIX}{given}")


_DEFAULTS = {
    "question_field": "question",
    "answer_field": "answer",
    "choices_field": "choices",
    "scorer": "exact",
}


class _Unbounded(yaml.YAMLError):  # type: ignore[misc, unused-ignore]  # untyped PyYAML
    """A settings file past the loader's bounds."""


class _SettingsLoader(yaml.SafeLoader):  # type: ignore[misc, unused-ignore]  # untyped PyYAML
    """YAML's safe loader, with at most `_MAX_ALIASES` aliases and `MAX_NESTING` levels: its
    composer recurses once a level, and every alias may repeat a whole subtree."""

    def __init__(self, stream: bytes) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > _MAX_ALIASES:
                raise _Unbounded(f"more than {_MAX_ALIASES} aliases (*name); settings need none")
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                raise _Unbounded(f"nested more than {MAX_NESTING} deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _read_config(path: Path) -> dict[str, Any]:
    try:
        config = yaml.load(read_data_file(path, limit=MAX_SETTINGS_BYTES), Loader=_SettingsLoader)
    except _Unbounded as error:
        raise BenchmarkError(f"{path}: refused: {error}") from error
    except yaml.YAMLError as error:
        raise BenchmarkError(f"{path}: invalid YAML ({str(error).splitlines()[0]})") from error
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise BenchmarkError(f"{path}: expected a mapping of settings, got {type(config).__name__}")
    unknown = sorted(set(map(str, config)) - set(_KEYS))
    if unknown:
        raise BenchmarkError(
            f"{path}: unknown setting(s) {', '.join(unknown)} (known: {', '.join(_KEYS)})"
        )
    for key, value in config.items():
        if isinstance(value, str):
            try:
                check_unicode(value)
            except ValueError as error:
                raise BenchmarkError(f"{path}: {key}: {error}") from None
    return config


def _tasks(
    records: Sequence[Mapping[str, Any]], path: Path, prefix: str, settings: Mapping[str, str]
) -> list[Task]:
    """The tasks of a data file's `records`, read from `path`, their ids under `prefix`."""
    if not records:
        raise BenchmarkError(f"{path}: no questions (the file is empty)")
    multiple_choice = settings["scorer"] == "multiple_choice"
    tasks = []
    for number, record in enumerate(records, start=1):
        where = f"{path}:{number}"
        question = _field(record, settings["question_field"], where)
        answer = _field(record, settings["answer_field"], where)
        if not isinstance(question, str) or not question.strip():
            raise BenchmarkError(f"{where}: field {settings['question_field']!r} must be text")
        metadata: dict[str, Any] = {"line": number}
        if multiple_choice:
            choices = record.get(settings["choices_field"])
            question, answer = _multiple_choice_task(question, answer, choices, where, settings)
            metadata["choices"] = choices or []
        elif isinstance(answer, bool) or not isinstance(answer, str | int | float):
            raise BenchmarkError(
                f"{where}: field {settings['answer_field']!r} must be text or a number"
            )
        answer = str(answer)
        _check_answer(answer, settings, where)
        tasks.append(
            Task(id=f"{prefix}/{number}", question=question, answer=answer, metadata=metadata)
        )
    return tasks


def _field(record: Mapping[str, Any], field: str, where: str) -> Any:
    if field not in record:
        raise BenchmarkError(f"{where}: missing field {field!r}")
    return record[field]


def _multiple_choice_task(
    question: str, answer: Any, choices: Any, where: str, settings: Mapping[str, str]
) -> tuple[str, str]:
    """The question with its lettered options, and the gold answer as a letter.

    The gold answer may be a letter, a 0-based index or the text of a choice; without a choices
    field the question must list the options itself and the answer must be a letter.
    """
    field = settings["answer_field"]
    if choices is None:
        if isinstance(answer, str) and re.fullmatch(r"[A-Z]", answer.strip()):
            return question, answer.strip()
        raise BenchmarkError(f"{where}: field {field!r} must be a letter A-Z without choices")
    if (
        not isinstance(choices, list)
        or not 2 <= len(choices) <= len(_LETTERS)
        or not all(isinstance(choice, str) for choice in choices)
    ):
        raise BenchmarkError(
            f"{where}: field {settings['choices_field']!r} must be a list of 2 to 26 texts"
        )
    letters = _LETTERS[: len(choices)]
    if isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer < len(choices):
        gold = letters[answer]
    elif isinstance(answer, str) and answer.strip() in letters:
        gold = answer.strip()
    elif isinstance(answer, str) and answer in choices:
        gold = letters[choices.index(answer)]
    else:
        raise BenchmarkError(
            f"{where}: field {field!r} must be a letter, an index or the text of a choice"
        )
    options = "\n".join(
        f"{letter}. {choice}" for letter, choice in zip(letters, choices, strict=True)
    )
    return f"{question}\n\n{options}\n\nAnswer with the letter of the correct option.", gold


def _check_answer(answer: str, settings: Mapping[str, str], where: str) -> None:
    field = settings["answer_field"]
    if settings["scorer"] == "numeric" and extract_final_number(answer) is None:
        raise BenchmarkError(f"{where}: field {field!r} must hold a number for scorer numeric")
    if settings["scorer"] == "regex":
        try:
            _compiled(answer)
        except regex.error as error:
            raise BenchmarkError(
                f"{where}: field {field!r} is not a valid regex ({error})"
            ) from None


OPENERS.register(FILE_PREFIX.removesuffix(":"), open_file_benchmark)
