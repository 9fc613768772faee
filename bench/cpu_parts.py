"""Where a task's CPU time goes: one setting of bench/concurrency.py, with the CPU time of the
thread running each part added up (litellm's call, the archive's writes and reads, the response
cache, the agent, the runner), per task; then the search's CPU time by thread, and the engine's
own part of it: all but the threads that run litellm's calls and its logging.

    nice -n 10 .venv/bin/python bench/cpu_parts.py [--concurrency 64] [--latency 0.5]
    nice -n 10 .venv/bin/python bench/cpu_parts.py --clients [--calls 300]

A part's time is its own thread's CPU time (time.thread_time) from the moment it is called until
it returns, counted once when it calls itself: the threads it waits on are not in it (litellm's
own background thread, for one). The total is the process's CPU time while the setting ran,
the bare litellm calls it measures last included.

A thread's CPU time is read when it ends (time.thread_time), or, for a thread still alive when the
search ends (litellm's logging pool, the model calls' threads), off its CPU-time clock, less what
it had used before the search began.
The engine's own CPU time per task is the search's (`run_search`, set-up and optuna included)
less that of litellm's threads: the "model call" threads, which run nothing but
`litellm.completion`, and litellm's logging threads.

`--clients` measures instead the CPU time of one bare call, one at a time against the same server
answering at once, through litellm, through the OpenAI client that litellm calls for `openai/`
models, and through httpx (the HTTP client under both), with and without litellm's options that
might cut it (a shared OpenAI client, message logging off).
"""

from __future__ import annotations

import argparse
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import concurrency as bench

from agentdesign.components import import_litellm

_spent: Counter[str] = Counter()
_calls: Counter[str] = Counter()
_depth = threading.local()
# The search's threads: CPU seconds by kind (the name, digits as N), and how many.
_threads: Counter[str] = Counter()
_thread_count: Counter[str] = Counter()
_threads_lock = threading.Lock()
_searching = False
# The threads that run litellm's work: its calls (see `_within` in the llm module) and its logging.
_LITELLM_THREADS = ("model call", "litellm")


def clock(owner: Any, name: str, label: str) -> None:
    """Replaces `owner.name` with the same function, timed under `label` (if `owner` has it)."""
    real: Callable[..., Any] | None = getattr(owner, name, None)
    if real is None:  # a part an older tree lacks
        return

    def timed(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_depth, label, 0)
        setattr(_depth, label, depth + 1)
        started = time.thread_time()
        try:
            return real(*args, **kwargs)
        finally:
            setattr(_depth, label, depth)
            if depth == 0:
                _spent[label] += time.thread_time() - started
                _calls[label] += 1

    setattr(owner, name, timed)


def _kind(thread: threading.Thread) -> str:
    return re.sub(r"\d+", "N", thread.name)


def count_threads() -> None:
    """Makes every thread that ends during the search add its CPU time to `_threads`."""
    run = threading.Thread.run

    def counted(self: threading.Thread) -> None:
        try:
            run(self)
        finally:
            if _searching:
                used = time.thread_time()
                with _threads_lock:
                    _threads[_kind(self)] += used
                    _thread_count[_kind(self)] += 1
                    self._cpu_counted = True  # type: ignore[attr-defined]

    threading.Thread.run = counted  # type: ignore[method-assign]


def _live_threads() -> dict[threading.Thread, float]:
    """The CPU seconds each thread alive now (but the main one) has used, read off its CPU-time
    clock (/proc's counts are in hundredths of a second, too coarse for 64 threads)."""
    used = {}
    for thread in threading.enumerate():
        if thread is threading.main_thread() or thread.ident is None:
            continue
        try:
            used[thread] = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except OSError:  # ended meanwhile: counted as it ended
            continue
    return used


def timed_search(search: Callable[..., Any], totals: dict[str, float]) -> Callable[..., Any]:
    """`search` (run_search), with the process's and the main thread's CPU seconds while it runs
    put in `totals`, and its other threads' in `_threads`."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        global _searching
        before = _live_threads()
        _searching = True
        process, main = time.process_time(), time.thread_time()
        try:
            return search(*args, **kwargs)
        finally:
            totals["search"] = time.process_time() - process
            totals["main thread"] = time.thread_time() - main
            _searching = False
            for thread, used in _live_threads().items():
                if not getattr(thread, "_cpu_counted", False):
                    _threads[f"{_kind(thread)} (alive)"] += used - before.get(thread, 0.0)
                    _thread_count[f"{_kind(thread)} (alive)"] += 1

    return timed


def clients(calls: int) -> None:
    """The `--clients` table (see the module's docstring)."""
    import httpx
    import openai

    litellm = import_litellm()
    messages = [{"role": "user", "content": "Question?"}]
    with bench.model_server(0.0, serve_for_s=600) as url:
        shared = openai.OpenAI(
            base_url=url,
            max_retries=0,
            timeout=60,
            http_client=httpx.Client(limits=httpx.Limits(max_connections=64)),
        )
        plain = httpx.Client(timeout=60)
        body = {"model": "fake", "messages": messages, "max_tokens": 64}

        def through_litellm(**extra: Any) -> Callable[[], Any]:
            return lambda: litellm.completion(
                model=bench.MODEL, messages=messages, api_base=url, timeout=60, max_retries=0,
                temperature=0.0, max_tokens=64, seed=0, **extra,
            )  # fmt: skip

        ways: list[tuple[str, Callable[[], Any]]] = [
            ("litellm.completion", through_litellm()),
            ("litellm.completion, one shared OpenAI client", through_litellm(client=shared)),
            (
                "litellm.completion, price named (0)",
                through_litellm(input_cost_per_token=0.0, output_cost_per_token=0.0),
            ),
            ("openai client", lambda: shared.chat.completions.create(**body)),
            ("httpx", lambda: plain.post(url + "/chat/completions", json=body).json()),
        ]
        print("| client | CPU ms a call |\n| --- | ---: |")
        for label, call in ways:
            for _ in range(20):
                call()
            started = time.process_time()
            for _ in range(calls):
                call()
            print(f"| {label} | {(time.process_time() - started) / calls * 1000:.2f} |")
        litellm.turn_off_message_logging = True
        call = through_litellm()
        started = time.process_time()
        for _ in range(calls):
            call()
        per_call = (time.process_time() - started) / calls * 1000
        print(f"| litellm.completion, message logging off | {per_call:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per model call")
    parser.add_argument("--designs", type=int, default=4)
    parser.add_argument("--waves", type=int, default=4, help="items per design / concurrency")
    parser.add_argument("--clients", action="store_true", help="bare calls through each client")
    parser.add_argument("--calls", type=int, default=300, help="--clients: calls through each")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    if args.clients:
        clients(args.calls)
        return
    litellm = import_litellm()
    from agentdesign.archive import _queries, _writes
    from agentdesign.components import _agent
    from agentdesign.components.llm import _cache
    from agentdesign.evaluators import _runner
    from agentdesign.search.study import _scoring

    clock(litellm, "completion", "litellm.completion")
    clock(_writes.Writes, "add_task_result", "archive: add_task_result")
    clock(_queries.Queries, "task_results", "archive: task_results (racing)")
    clock(_writes.Writes, "update_run", "archive: update_run")
    clock(_queries.Queries, "run_totals", "archive: run_totals")
    clock(_scoring.RunScoring, "_trails_incumbent", "racing: _trails_incumbent")
    clock(_writes.Writes, "add_task_results", "archive: add_task_results")
    clock(_queries.Queries, "task_scores", "archive: task_scores")
    clock(_cache.ResponseCache, "put", "response cache: put")
    clock(_cache.ResponseCache, "get", "response cache: get")
    clock(_runner, "_run_and_score", "runner: _run_and_score")
    clock(_agent.Agent, "run", "agent: run")
    bench.measure(concurrency=2, designs=1, items=2, latency_s=0.01)  # imports and set-up
    _spent.clear()
    _calls.clear()
    count_threads()
    search: dict[str, float] = {}
    bench.run_search = timed_search(bench.run_search, search)
    items = max(bench.MIN_ITEMS, args.waves * args.concurrency)
    tasks = args.designs * items
    started = time.process_time()
    row = bench.measure(args.concurrency, args.designs, items, args.latency)
    total_s = time.process_time() - started
    print(
        f"concurrency {args.concurrency}, {args.latency:g} s per call, {tasks} tasks: "
        f"{row['CPU ms/task']} ms of CPU a task while designs were evaluated, "
        f"{total_s / tasks * 1000:.1f} in all; {row['of ideal']} of ideal\n"
    )
    print("| part | ms a task | calls | ms a call |\n| --- | ---: | ---: | ---: |")
    for label, spent_s in _spent.most_common():
        print(
            f"| {label} | {spent_s / tasks * 1000:.2f} | {_calls[label]} "
            f"| {spent_s / _calls[label] * 1000:.2f} |"
        )
    litellm_s = sum(s for kind, s in _threads.items() if kind.startswith(_LITELLM_THREADS))
    per_task = {
        "search": search["search"] / tasks * 1000,
        "own": (search["search"] - litellm_s) / tasks * 1000,
        "main": search["main thread"] / tasks * 1000,
        "rest": (search["search"] - search["main thread"] - sum(_threads.values())) / tasks * 1000,
    }
    print(
        f"\nThe search: {per_task['search']:.2f} ms of CPU a task, the engine's own (all but "
        f"litellm's threads) {per_task['own']:.2f}\n\n| thread | ms a task | threads |\n"
        f"| --- | ---: | ---: |\n| main | {per_task['main']:.2f} | 1 |"
    )
    for kind, spent_s in _threads.most_common():
        print(f"| {kind} | {spent_s / tasks * 1000:.2f} | {_thread_count[kind]} |")
    print(f"| the rest (alive before and after: not read) | {per_task['rest']:.2f} | |")


if __name__ == "__main__":
    main()
