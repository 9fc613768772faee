"""DSPy beside an agentdesign run: the same model, items, scorer and paired statistics.

    .venv/bin/python bench/peers.py --archive bench/results/live.sqlite --run NAME
        [--programs predict cot bootstrap mipro gepa] [--model M] [--reflection-model M]
        [--train-items 50] [--max-tokens 512] [--state bench/results/peers-NAME.json]
        [--table | --plan]

The run names everything: its benchmark, model, search items, holdout ids, winner and the tokens
its search spent (the budget). DSPy calls the same model through the same litellm provider
(`dspy.LM(model)`; embedded models after `register_embedded_provider()`, nothing patched). Its
optimizers compile on the benchmark's train split (`--train-items` of it, drawn with the run's
split seed; the search items where a benchmark has none) and validate on the run's search items;
no holdout item is ever shown to them. Each program then answers the run's holdout items, one at
a time, and the benchmark's own scorer scores its `answer` field, as it scores agentdesign's
replies; the winner's holdout scores are read from the archive and paired item by item.

Search tokens are every model call an optimizer made, reflection and proposal calls included
(prompt plus completion, as the provider reported them); DSPy's in-memory cache, fresh for each
program, makes a repeated call free, as it is in a DSPy user's run. An optimizer runs with its
own settings: where it spends more than the run's search tokens, the table says so and shows
what it asked for. Every item's outcome is written to the `--state` JSON file as it is scored,
so a killed run resumes with what is missing, and `--table` prints the table again without any
model call. `--plan` prints, also without a model call, how many program runs MIPROv2 and GEPA
plan (their own `auto="light"` arithmetic) and the tokens that comes to at zero-shot chain of
thought's tokens per item, against the run's budget: where an optimizer cannot search inside the
budget, it says what it asks for before hours are spent.

An optimizer's search, hours long on a CPU, resumes too: each model call it makes is appended to
a journal beside the state file (`peers-RUN.PROGRAM.calls.jsonl`), and a search run again takes
the calls the journal holds from it, counted in its search tokens as the killed attempt paid for
them, and calls the model from where that attempt stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import interval_legend, markdown_table, score_cell

from agentdesign.archive import Archive
from agentdesign.components import AgentDesignError
from agentdesign.components.llm._embedded import check_embedded_model, register_embedded_provider
from agentdesign.evaluators import (
    Benchmark,
    InteractiveBenchmark,
    Task,
    get_benchmark,
    make_split,
    paired_difference,
    summarize,
)
from agentdesign.search import run_verdict

try:
    import dspy
    from dspy.utils.exceptions import AdapterParseError, ContextWindowExceededError, LMError
except ImportError:  # one line, not a traceback: DSPy is an extra
    sys.exit("bench/peers.py needs DSPy: pip install 'agentdesign[bench]'")

PROGRAMS = ("predict", "cot", "bootstrap", "mipro", "gepa")
# What a DSPy user writes; the benchmark's scorer reads the `answer` field.
SIGNATURE = "question -> answer"
_FORMAT = 1
# GEPA's reflection model writes new instructions: sampled, with room for a long one.
_REFLECTION_TEMPERATURE = 1.0
_REFLECTION_MAX_TOKENS = 1024


class _Meter:
    """Tokens and calls of every model call DSPy finishes (from any thread, any LM copy)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tokens = self.calls = 0

    def add(self, usage: Mapping[str, Any]) -> None:
        tokens = int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
        if tokens:  # a cache hit reports no usage: the model did not run
            with self.lock:
                self.tokens += tokens
                self.calls += 1

    def read(self) -> tuple[int, int]:
        with self.lock:
            return self.tokens, self.calls


_METER = _Meter()


class CountedLM(dspy.LM):  # type: ignore[misc]
    """`dspy.LM`, counting each finished call into the meter.

    DSPy records every call it completes in its history (`update_history`), in the calling
    thread, for the LM and for every copy an optimizer makes of it, so the count misses none.
    litellm's own callbacks run late, in a background pool that may drop them under load.
    """

    def update_history(self, entry: dict[str, Any]) -> None:
        _METER.add(entry.get("usage") or {})
        super().update_history(entry)


@dataclass(frozen=True)
class RunSide:
    """What the comparison takes from the agentdesign run."""

    name: str
    benchmark: str
    model: str
    split_seed: int
    search_ids: tuple[str, ...]
    holdout_ids: tuple[str, ...]  # sorted, the order every paired score list uses
    winner_hash: str
    winner_scores: Mapping[str, float]
    winner_tokens_per_item: float
    search_tokens: int


def read_run(archive: Archive, run_name: str) -> RunSide:
    """The run's split, its winner's holdout scores and its search tokens; reads only."""
    verdict = run_verdict(archive, run_name)
    run, holdout = verdict.run, verdict.holdout
    if holdout is None or run.winner_hash is None:
        raise AgentDesignError(
            f"run {run_name!r} has no winner scored on the holdout yet: finish it first "
            f"(agentdesign resume {run_name})"
        )
    scores = {task: o.score for task, o in archive.task_results(holdout.id).items()}
    searched = sum(
        e.prompt_tokens + e.completion_tokens
        for e in archive.run_evaluations(run_name, split="search")
    )
    calls = sum(p + c for _, p, c, _ in archive.search_call_totals(run_name).values())
    return RunSide(
        name=run.name,
        benchmark=run.benchmark,
        model=run.model,
        split_seed=run.split_seed,
        search_ids=tuple(run.search_task_ids),
        holdout_ids=tuple(sorted(run.holdout_task_ids)),
        winner_hash=run.winner_hash,
        winner_scores=scores,
        winner_tokens_per_item=holdout.tokens_per_item,
        search_tokens=searched + calls,
    )


def train_tasks(benchmark: Benchmark, run: RunSide, n_items: int) -> tuple[Task, ...]:
    """`n_items` of the benchmark's train split, drawn with the run's seed; the run's search
    items where the benchmark has no train split. Never a holdout item."""
    train = list(benchmark.train_examples())
    if not train:
        return benchmark.tasks_by_ids(run.search_ids)
    by_id = {t.id: t for t in train}
    split = make_split(
        list(by_id), seed=run.split_seed, n_search=min(n_items, len(train)), n_holdout=0
    )
    return tuple(by_id[i] for i in split.search_ids)


def _examples(tasks: Sequence[Task]) -> list[Any]:
    return [
        dspy.Example(question=t.question, answer=t.answer, task_id=t.id).with_inputs("question")
        for t in tasks
    ]


class Programs:
    """Builds and compiles each program on the run's items; scores with the benchmark."""

    def __init__(
        self,
        benchmark: Benchmark,
        *,
        tasks: Mapping[str, Task],
        trainset: list[Any],
        valset: list[Any],
        reflection_lm: Any,
        seed: int,
    ) -> None:
        self.benchmark, self.tasks = benchmark, tasks
        self.trainset, self.valset = trainset, valset
        self.reflection_lm, self.seed = reflection_lm, seed

    def metric(
        self, gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None
    ) -> float:
        """The benchmark's score of the program's answer (GEPA's five-argument form)."""
        return self.benchmark.score(self.tasks[gold.task_id], str(pred.answer)).value

    def build(self, name: str) -> Any:
        """The program `name`, compiled where it is an optimizer's."""
        student = self.shell(name)
        if name in ("predict", "cot"):
            return student
        if name == "bootstrap":
            return dspy.BootstrapFewShot(metric=self.metric).compile(
                student, trainset=self.trainset
            )
        if name == "mipro":
            optimizer = dspy.MIPROv2(
                metric=self.metric, auto="light", num_threads=1, seed=self.seed
            )
            return optimizer.compile(student, trainset=self.trainset, valset=self.valset)
        gepa = dspy.GEPA(
            metric=self.metric,
            auto="light",
            reflection_lm=self.reflection_lm,
            num_threads=1,
            seed=self.seed,
        )
        return gepa.compile(student, trainset=self.trainset, valset=self.valset)

    def shell(self, name: str) -> Any:
        """An uncompiled program of `name`'s shape (a compiled state loads into it)."""
        return dspy.Predict(SIGNATURE) if name == "predict" else dspy.ChainOfThought(SIGNATURE)

    def answer(self, program: Any, task: Task) -> dict[str, Any]:
        """One holdout item: the program's answer scored by the benchmark, and its tokens. A reply
        DSPy cannot parse, or a prompt past the model's context, scores 0, as it does for
        agentdesign; any other model failure stops the run (a resume retries the item)."""
        before = _METER.read()[0]
        try:
            answer = str(program(question=task.question).answer)
        except (AdapterParseError, ContextWindowExceededError) as error:
            kind = "parse" if isinstance(error, AdapterParseError) else "context"
            tokens = _METER.read()[0] - before
            return {"answer": None, "score": 0.0, "tokens": tokens, "error": kind}
        except LMError as error:
            raise AgentDesignError(
                f"the model failed on {task.id}: {_first_line(error)}; run again to resume"
            ) from None
        score = self.benchmark.score(task, answer)
        tokens = _METER.read()[0] - before
        return {"answer": answer, "score": score.value, "tokens": tokens, "error": None}


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# -- the state file -------------------------------------------------------------------------------


def _write(path: Path, state: Mapping[str, Any]) -> None:
    """Atomically: a kill mid-write leaves the previous state, never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.tmp")
    scratch.write_text(json.dumps(state, indent=1, default=str) + "\n")
    os.replace(scratch, path)


def open_state(path: Path, setup: Mapping[str, Any]) -> dict[str, Any]:
    """The stored state, or a new one; refuses a file written for another comparison."""
    if not path.exists():
        return {"format": _FORMAT, "setup": dict(setup), "programs": {}}
    try:
        state = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise AgentDesignError(f"cannot read state file {path}: {error}") from None
    if not isinstance(state, dict) or state.get("format") != _FORMAT:
        raise AgentDesignError(f"{path} is not a bench/peers.py state file")
    if state.get("setup") != json.loads(json.dumps(setup)):
        raise AgentDesignError(
            f"{path} holds another comparison (its run, model or items differ): "
            "name a new --state file, or delete this one to start again"
        )
    return state


# -- running --------------------------------------------------------------------------------------


def run_program(
    name: str,
    programs: Programs,
    state: dict[str, Any],
    *,
    holdout: Sequence[Task],
    save: Callable[[], None],
    journal: Path,
) -> None:
    """Searches (once, resuming from the `journal` of its calls) and answers the holdout items
    still missing, saving after each."""
    entry = state["programs"].setdefault(name, {"items": {}})
    if "search" not in entry:
        _fresh_cache()
        calls_journal = CallJournal(journal, state["setup"], dspy.cache)
        dspy.cache = calls_journal
        before, calls_before = _METER.read()
        with contextlib.redirect_stdout(
            sys.stderr
        ):  # optimizers print progress: stdout is the table
            program = programs.build(name)
        tokens, calls = _METER.read()
        entry["search"] = {
            "tokens": tokens - before,
            "calls": calls - calls_before,
            "seconds": round(calls_journal.seconds(), 1),
            "replayed_calls": calls_journal.replayed,
            "program": program.dump_state(),
        }
        save()
        print(f"{name}: searched, {tokens - before:,} tokens", file=sys.stderr, flush=True)
    else:
        program = programs.shell(name)
        program.load_state(entry["search"]["program"])
    _fresh_cache()  # the holdout answers reuse nothing of the search
    for task in holdout:
        if task.id in entry["items"]:
            continue
        entry["items"][task.id] = programs.answer(program, task)
        save()
        outcome = entry["items"][task.id]
        print(f"  {name} {task.id} score={outcome['score']}", file=sys.stderr, flush=True)


class CallJournal:
    """DSPy's response cache (`dspy.cache`), with every model call that misses it appended to a
    journal file, so that a search killed part-way resumes instead of starting again.

    A request the journal holds, asked for the first time in this process, is answered from it
    and its tokens go to the meter: the killed attempt paid for that call, and the search's
    tokens are what an unbroken search would have spent. Asked again, it is a cache hit, free, as
    it was in the killed attempt. Optimizers are seeded and run on one thread, so a resumed search
    asks again exactly what it asked before. The journal's first line is the comparison's setup:
    a journal of another comparison is refused, never replayed. A line cut short by a kill is
    dropped; the call is made again.
    """

    def __init__(self, path: Path, setup: Mapping[str, Any], cache: Any) -> None:
        self.path, self.cache = path, cache
        self.head = json.dumps({"setup": setup}, default=str)
        self.stored: dict[str, dict[str, Any]] = {}
        self.replayed = 0
        self.offset = 0.0  # seconds of search the journal's calls took, up to its last one
        self.live_since: float | None = None  # when this attempt first called the model
        self.lock = threading.Lock()  # DSPy may call from its evaluation threads
        if path.exists():
            self._load()

    def _load(self) -> None:
        lines = self.path.read_text().split("\n")
        if json.loads(lines[0] or "null") != json.loads(self.head):
            raise AgentDesignError(
                f"{self.path} journals another comparison's calls: delete it to search again"
            )
        kept = [lines[0]]
        for line in lines[1:-1]:  # the last piece is "" after a whole line, else a cut one
            entry = json.loads(line)
            self.stored[entry["key"]] = entry
            self.offset = max(self.offset, float(entry["elapsed"]))
            kept.append(line)
        if lines[-1]:
            scratch = self.path.with_name(f".{self.path.name}.tmp")
            scratch.write_text("\n".join(kept) + "\n")
            os.replace(scratch, self.path)

    def get(self, request: dict[str, Any], ignored_args_for_cache_key: Any = None) -> Any:
        """The cached response; else the journal's, counted as paid; else None (a model call)."""
        found = self.cache.get(request, ignored_args_for_cache_key)
        if found is not None:
            return found
        with self.lock:
            entry = self.stored.pop(self._key(request, ignored_args_for_cache_key), None)
            if entry is None:
                if self.live_since is None:
                    self.live_since = time.perf_counter()
                return None
            self.replayed += 1
        from litellm import ModelResponse

        _METER.add(entry["usage"])
        self.cache.put(request, ModelResponse(**entry["response"]), ignored_args_for_cache_key)
        return self.cache.get(request, ignored_args_for_cache_key)  # a cache hit's form

    def put(
        self,
        request: dict[str, Any],
        value: Any,
        ignored_args_for_cache_key: Any = None,
        enable_memory_cache: bool = True,
    ) -> None:
        """Caches `value`; a model's response is also appended to the journal."""
        from litellm import ModelResponse

        self.cache.put(request, value, ignored_args_for_cache_key, enable_memory_cache)
        key = self._key(request, ignored_args_for_cache_key)
        if not isinstance(value, ModelResponse) or key is None:
            return
        response = value.model_dump()
        usage = response.get("usage") or {}
        line = {
            "key": key,
            "elapsed": round(self.seconds(), 3),
            "usage": {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens")},
            "response": response,
        }
        with self.lock, self.path.open("a") as journal:
            if journal.tell() == 0:
                journal.write(self.head + "\n")
            journal.write(json.dumps(line, default=str) + "\n")

    def seconds(self) -> float:
        """The search's seconds so far: the journal's, then this attempt's since its first call."""
        if self.live_since is None:
            return self.offset
        return self.offset + time.perf_counter() - self.live_since

    def _key(self, request: dict[str, Any], ignored: Any) -> str | None:
        try:
            return str(self.cache.cache_key(request, ignored))
        except Exception:  # DSPy caches no request it cannot key; nor does the journal
            return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cache, name)


def _fresh_cache() -> None:
    """An empty in-memory cache: no program rides on another's calls, nothing goes to disk."""
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)


# -- the plan -------------------------------------------------------------------------------------


def plan(run: RunSide, state: Mapping[str, Any]) -> str:
    """What MIPROv2 and GEPA (`auto="light"`) will ask for on this comparison, by DSPy's own
    arithmetic, and the tokens that comes to if each run costs what zero-shot chain of thought spent
    per holdout item: an estimate, not a bound (a run that repeats an earlier one is a free cache
    hit; demos, bootstrapping, proposals and reflection cost more)."""
    from dspy.teleprompt.gepa.gepa import AUTO_RUN_SETTINGS as GEPA_AUTO
    from dspy.teleprompt.mipro_optimizer_v2 import AUTO_RUN_SETTINGS as MIPRO_AUTO
    from dspy.teleprompt.mipro_optimizer_v2 import MIN_MINIBATCH_SIZE

    setup = state["setup"]
    n_val = len(setup["search_ids"])
    student = dspy.ChainOfThought(SIGNATURE)
    idle = dspy.LM(setup["model"])  # the optimizers want one; nothing here calls it
    mipro = dspy.MIPROv2(metric=lambda *_: 0.0, auto="light", prompt_model=idle, task_model=idle)
    trials = mipro._set_num_trials_from_num_candidates(student, False, MIPRO_AUTO["light"]["n"])
    defaults = inspect.signature(dspy.MIPROv2.compile).parameters
    batch, steps = defaults["minibatch_size"].default, defaults["minibatch_full_eval_steps"].default
    val = min(n_val, MIPRO_AUTO["light"]["val_size"])
    if val > MIN_MINIBATCH_SIZE:
        fulls = trials // steps + (1 if trials % steps else 0)
        mipro_runs = val + trials * batch + fulls * val
        how = f"{trials} trials on minibatches of {batch}, {fulls} full evaluations of {val} items"
    else:
        mipro_runs = val + trials * val
        how = f"the start program, then {trials} trials, each on all {val} validation items"
    gepa = dspy.GEPA(metric=lambda *_: 0.0, auto="light", reflection_lm=idle)
    gepa_runs = gepa.auto_budget(
        num_preds=len(student.predictors()),
        num_candidates=GEPA_AUTO["light"]["n"],
        valset_size=n_val,
    )
    budget = max(setup["budget"], 1)
    cot = state["programs"].get("cot", {}).get("items", {})
    per_run = sum(o["tokens"] for o in cot.values()) / len(cot) if cot else None
    rows = []
    for label, runs, why in (
        (_LABELS["mipro"], mipro_runs, how),
        (_LABELS["gepa"], gepa_runs, "metric calls, by GEPA's auto_budget"),
    ):
        tokens = None if per_run is None else math.ceil(runs * per_run)
        rows.append(
            {
                "program": label,
                "program runs planned": f"{runs:,} ({why})",
                "tokens, about": "unknown" if tokens is None else f"{tokens:,}",
                "x the budget": "" if tokens is None else f"{tokens / budget:.2f}x",
            }
        )
    floor = (
        "an unknown cost a program run (answer the holdout with --programs cot first)"
        if per_run is None
        else f"{per_run:,.0f} tokens a program run (zero-shot chain of thought's per holdout item)"
    )
    head = [
        f"run {run.name}: {n_val} validation (search) items, {len(setup['train_ids'])} train "
        f"items, {run.search_tokens:,} search tokens (the budget)",
        f"tokens at {floor}: an estimate (a run that repeats an earlier one is a "
        "free cache hit; few-shot demos, bootstrapping, instruction proposals and GEPA's "
        "reflection calls cost more)",
        "",
    ]
    return "\n".join([*head, markdown_table(rows, right=("tokens, about", "x the budget"))])


# -- the table ------------------------------------------------------------------------------------

_LABELS = {
    "predict": "dspy.Predict",
    "cot": "dspy.ChainOfThought (zero-shot)",
    "bootstrap": "BootstrapFewShot(ChainOfThought)",
    "mipro": "MIPROv2(auto='light')",
    "gepa": "GEPA(auto='light')",
}


def table(run: RunSide, state: Mapping[str, Any]) -> str:
    """The comparison as markdown, with the lines that say what it rests on."""
    setup = state["setup"]
    ids = list(run.holdout_ids)
    winner = [run.winner_scores[i] for i in ids]
    budget = run.search_tokens
    winner_summary = summarize(winner, seed=run.split_seed)
    rows = [
        {
            "program": f"agentdesign winner {run.winner_hash[:10]}",
            "holdout score [95% CI] n": score_cell(winner_summary),
            "winner minus it [95% CI] (p)": "",
            "search tokens": f"{budget:,}",
            "tokens/item": f"{run.winner_tokens_per_item:,.0f}",
        }
    ]
    summaries = [winner_summary]
    for name in PROGRAMS:
        entry = state["programs"].get(name)
        if entry is None:
            continue
        label = _LABELS[name] + (
            f", reflection {setup['reflection_model']}" if name == "gepa" else ""
        )
        items = entry["items"]
        search = entry.get("search", {}).get("tokens")
        spent = "not searched yet" if search is None else f"{search:,}"
        if search:  # its share of the run's search tokens
            spent += f" ({search / max(budget, 1):.2f}x" + (
                ": over the budget)" if search > budget else ")"
            )
        if len(items) < len(ids):
            rows.append(
                {
                    "program": label,
                    "holdout score [95% CI] n": f"{len(items)}/{len(ids)} items scored",
                    "winner minus it [95% CI] (p)": "",
                    "search tokens": spent,
                    "tokens/item": "",
                }
            )
            continue
        scores = [float(items[i]["score"]) for i in ids]
        summary = summarize(scores, seed=run.split_seed)
        summaries.append(summary)
        gain = paired_difference(winner, scores, seed=run.split_seed)
        rows.append(
            {
                "program": label,
                "holdout score [95% CI] n": score_cell(summary),
                "winner minus it [95% CI] (p)": (
                    f"{gain.mean_diff:+.2f} [{gain.ci_low:+.2f}, {gain.ci_high:+.2f}] "
                    f"(p = {gain.p_value:.3g})"
                ),
                "search tokens": spent,
                "tokens/item": f"{sum(items[i]['tokens'] for i in ids) / len(ids):,.0f}",
            }
        )
    same = setup["model"] == run.model
    head = [
        f"run {run.name} ({run.benchmark}, model {run.model}): {len(ids)} holdout items, "
        f"{len(run.search_ids)} search items, {budget:,} search tokens (the budget)",
        f"DSPy {dspy.__version__} on {setup['model']} through litellm"
        + ("" if same else f" (NOT the run's model {run.model})")
        + f", {setup['adapter']} adapter, temperature {setup['temperature']}, "
        f"max_tokens {setup['max_tokens']}; "
        f"optimizers train on {len(setup['train_ids'])} items, validate on the search items",
        "",
    ]
    legend = [
        "",
        interval_legend(summaries),
        "Paired on the same holdout items (winner minus program: McNemar's exact test and "
        "Tango's interval for 0/1 scores).",
    ]
    right = ("search tokens", "tokens/item")
    return "\n".join([*head, markdown_table(rows, right=right), *legend])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", required=True, help="the agentdesign archive (path or URL)")
    parser.add_argument("--run", required=True, help="the run whose items and budget to use")
    parser.add_argument("--programs", nargs="+", choices=PROGRAMS, default=list(PROGRAMS))
    parser.add_argument("--model", help="DSPy's model (default: the run's)")
    parser.add_argument("--reflection-model", help="GEPA's reflection model (default: --model)")
    parser.add_argument("--train-items", type=int, default=50)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument(
        "--adapter", choices=("chat", "json"), default="chat", help="DSPy's (default: chat)"
    )
    parser.add_argument("--state", type=Path, help="default: bench/results/peers-RUN.json")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--table", action="store_true", help="print the stored table: no model call")
    shown.add_argument(
        "--plan", action="store_true", help="print what the optimizers ask for: no model call"
    )
    args = parser.parse_args(argv)
    try:
        _main(args)
    except AgentDesignError as error:
        sys.exit(f"error: {error}")


def _main(args: argparse.Namespace) -> None:
    if args.train_items < 1 or args.max_tokens < 1:
        raise AgentDesignError("--train-items and --max-tokens must be at least 1")
    with Archive(args.archive) as archive:
        run = read_run(archive, args.run)
    model = args.model or run.model
    reflection_model = args.reflection_model or model
    benchmark = get_benchmark(run.benchmark)
    if isinstance(benchmark, InteractiveBenchmark):
        raise AgentDesignError(
            f"{run.benchmark} is played in an environment: DSPy's programs here answer one question"
        )
    train = train_tasks(benchmark, run, args.train_items)
    setup = {
        "run": run.name,
        "benchmark": run.benchmark,
        "model": model,
        "reflection_model": reflection_model,
        "temperature": args.temperature,
        "max_tokens": args.max_tokens,
        "adapter": args.adapter,
        "holdout_ids": list(run.holdout_ids),
        "search_ids": list(run.search_ids),
        "train_ids": [t.id for t in train],
        "budget": run.search_tokens,
    }
    path = args.state or Path(__file__).parent / "results" / f"peers-{run.name}.json"
    if args.table and not path.exists():
        raise AgentDesignError(f"no state file {path}: run the comparison first")
    state = open_state(path, setup)
    if args.plan:
        print(plan(run, state))
        return
    if not args.table:
        for name in (model, reflection_model):
            check_embedded_model(name)
        register_embedded_provider()
        # engine="litellm": DSPy would send some hosted models by its own client instead.
        lm = CountedLM(
            model, temperature=args.temperature, max_tokens=args.max_tokens, engine="litellm"
        )
        reflection_lm = CountedLM(
            reflection_model,
            temperature=_REFLECTION_TEMPERATURE,
            max_tokens=_REFLECTION_MAX_TOKENS,
            engine="litellm",
        )
        adapter = dspy.JSONAdapter() if args.adapter == "json" else dspy.ChatAdapter()
        dspy.configure(lm=lm, adapter=adapter, num_threads=1)
        pool = {t.id: t for t in (*benchmark.tasks(), *train)}
        programs = Programs(
            benchmark,
            tasks=pool,
            trainset=_examples(train),
            valset=_examples(benchmark.tasks_by_ids(run.search_ids)),
            reflection_lm=reflection_lm,
            seed=run.split_seed,
        )
        holdout = benchmark.tasks_by_ids(run.holdout_ids)
        for name in args.programs:
            run_program(
                name,
                programs,
                state,
                holdout=holdout,
                save=lambda: _write(path, state),
                journal=path.with_name(f"{path.stem}.{name}.calls.jsonl"),
            )
    print(table(run, state))


if __name__ == "__main__":
    main()
