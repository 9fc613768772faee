"""Tasks per second of a search against a hosted model at 1, 8, 32 and 64 tasks at once, against
the latency-bound ideal, and the engine's own CPU time per task.

    nice -n 10 .venv/bin/python bench/concurrency.py [--concurrency 1 8 32 64] [--latency 0.5]
        [--designs 4] [--waves 4]

The model is an OpenAI-compatible server written here, run in a child process on 127.0.0.1 so
that its CPU time is not counted as the engine's. It answers every chat completion "Answer: 0",
with usage, after `--latency` seconds, and stops itself after a deadline if the bench has not
stopped it first. Each setting calls `run_search` the way `agentdesign run` does: through litellm
and the response cache, on a fresh SQLite archive with an empty cache directory. It runs
`--designs` GSM8K designs that make one model call per item (single-pass workflows, searched over
reasoning style, few-shot memory and token cap), each on `--waves` x concurrency search items
(at least 16), with no holdout.

Ideal is the latency bound: each design takes ceil(items / concurrency) x latency. The CPU
columns are this process's CPU time while designs are evaluated, divided by the tasks: all of it,
then the part that a bare `litellm.completion` call takes (measured next, at the same concurrency,
against the same server), then the rest, which is the engine's own per task (agent, response
cache, archive writes, bookkeeping). One Python process runs at most 1000 / (CPU ms per task)
tasks a second, however many are in flight. The CPU spent outside the evaluations (setting the
run up, proposing each design, optuna) is shown per design. "Peak in flight" is the most requests
the server held at once, which would show a cap on concurrency such as a connection pool.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _common import child_server, markdown_table, server_stats

from agentdesign.archive import Archive, EvaluationRecord
from agentdesign.components import AgentSpec, import_litellm
from agentdesign.search import Budget, Reporter, RunConfig, run_search

MODEL = "openai/fake"
MIN_ITEMS = 16
# Single-pass designs, so that each task is exactly one call and its time the server's latency.
CHOICES = {
    "workflow": ("single",),
    "planning": ("none",),
    "reasoning": ("direct", "cot", "scratchpad"),
    "memory": ("none", "few_shot"),
    "tool": ("none",),
    "reflection": ("none",),
}
LIMITS = {"reasoning__max_tokens": (64, 512), "memory__k": (1, 3)}


# -- the model server (a child process) -----------------------------------------------------------


def serve(latency_s: float, serve_for_s: float) -> None:
    """Answers chat completions after `latency_s`, and GET /stats, on 127.0.0.1 until killed or
    until `serve_for_s` has passed; prints its port first."""
    lock = threading.Lock()
    stats = {"requests": 0, "in_flight": 0, "peak": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as hosted providers serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with lock:
                self._reply({"requests": stats["requests"], "peak": stats["peak"]})

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                stats["requests"] += 1
                stats["in_flight"] += 1
                stats["peak"] = max(stats["peak"], stats["in_flight"])
            time.sleep(latency_s)
            with lock:
                stats["in_flight"] -= 1
            self._reply(_completion(prompt_tokens=len(body) // 4))

        def _reply(self, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 256  # the default backlog of 5 drops some of 64 connections at once

    with Server(("127.0.0.1", 0), Handler) as server:
        print(server.server_address[1], flush=True)
        threading.Timer(serve_for_s, server.shutdown).start()
        server.serve_forever(poll_interval=0.1)


def _completion(*, prompt_tokens: int) -> dict[str, Any]:
    message = {"role": "assistant", "content": "Answer: 0"}
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 3,
            "total_tokens": prompt_tokens + 3,
        },
    }


def model_server(latency_s: float, serve_for_s: float) -> AbstractContextManager[str]:
    """The base URL of this file's server running in a child process, stopped on the way out."""
    command = [sys.executable, __file__, "--serve", "--latency", str(latency_s)]
    return child_server([*command, "--serve-for", str(serve_for_s)])


# -- the bench ------------------------------------------------------------------------------------


@contextmanager
def cache_dir(path: Path) -> Iterator[None]:
    """AGENTDESIGN_CACHE_DIR set to `path`, so that no response is cached from an earlier run."""
    before = os.environ.get("AGENTDESIGN_CACHE_DIR")
    os.environ["AGENTDESIGN_CACHE_DIR"] = str(path)
    try:
        yield
    finally:
        if before is None:
            del os.environ["AGENTDESIGN_CACHE_DIR"]
        else:
            os.environ["AGENTDESIGN_CACHE_DIR"] = before


class EvaluationClock(Reporter):
    """Adds up the process's CPU time while designs are evaluated: the per-task work, apart from
    what a run and each design cost once."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self._since: float | None = None

    def agent_started(self, spec: AgentSpec, n_tasks: int, n_done: int, split: str) -> None:
        self._since = time.process_time()

    def agent_finished(self, spec: AgentSpec, evaluation: EvaluationRecord, split: str) -> None:
        if self._since is not None:
            self.cpu_s += time.process_time() - self._since
            self._since = None


def litellm_cpu_per_call(url: str, concurrency: int, calls: int) -> float:
    """CPU seconds this process spends per bare `litellm.completion` call, `concurrency` at once."""
    litellm = import_litellm()

    def call(i: int) -> None:
        messages = [{"role": "user", "content": f"Question {i}?"}]
        litellm.completion(model=MODEL, messages=messages, api_base=url, timeout=60, max_retries=0)

    call(-1)  # builds litellm's client for `url`, if the run has not
    started = time.process_time()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(call, range(calls)))
    return (time.process_time() - started) / calls


def measure(concurrency: int, designs: int, items: int, latency_s: float) -> dict[str, str]:
    """One setting's table row: a fresh search against a fresh server."""
    ideal_s = designs * math.ceil(items / concurrency) * latency_s
    with (
        model_server(latency_s, serve_for_s=300 + 10 * ideal_s) as url,
        tempfile.TemporaryDirectory(prefix="agentdesign-bench-") as scratch,
        cache_dir(Path(scratch) / "cache"),
        Archive(f"sqlite:///{scratch}/archive.db") as archive,
    ):
        config = RunConfig.of(
            name=f"concurrency-{concurrency}",
            model=MODEL,
            api_base=url,
            budget=Budget(max_agents=designs),
            n_search=items,
            n_holdout=0,
            concurrency=concurrency,
            llm_timeout_s=60,
            choices=CHOICES,
            limits=LIMITS,
        )
        clock = EvaluationClock()
        wall_s, cpu_s = time.perf_counter(), time.process_time()
        run_search(archive, config, reporter=clock)
        wall_s, cpu_s = time.perf_counter() - wall_s, time.process_time() - cpu_s
        board = archive.leaderboard(run_name=config.name, limit=designs)
        stats = server_stats(url)
        litellm_s = litellm_cpu_per_call(url, concurrency, calls=max(16, 2 * concurrency))
    tasks = sum(row.n_tasks for row in board)
    if stats["requests"] != tasks:  # the ideal assumes one call per task
        sys.exit(f"error: {stats['requests']} model calls for {tasks} tasks")
    ideal_s = len(board) * math.ceil(items / concurrency) * latency_s
    cpu_ms = clock.cpu_s / tasks * 1000
    return {
        "concurrency": str(concurrency),
        "designs x items": f"{len(board)} x {items}",
        "peak in flight": str(stats["peak"]),
        "wall s": f"{wall_s:.1f}",
        "ideal s": f"{ideal_s:.1f}",
        "tasks/s": f"{tasks / wall_s:.1f}",
        "ideal tasks/s": f"{tasks / ideal_s:.1f}",
        "of ideal": f"{ideal_s / wall_s:.0%}",
        "CPU ms/task": f"{cpu_ms:.1f}",
        "litellm ms/call": f"{litellm_s * 1000:.1f}",
        "engine ms/task": f"{cpu_ms - litellm_s * 1000:.1f}",
        "CPU-bound tasks/s": f"{1000 / cpu_ms:.0f}",
        "other CPU ms/design": f"{(cpu_s - clock.cpu_s) / len(board) * 1000:.0f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per model call")
    parser.add_argument("--designs", type=int, default=4, help="designs searched per setting")
    parser.add_argument("--waves", type=int, default=4, help="items per design / concurrency")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-for", type=float, default=60.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.latency, args.serve_for)
        return
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")  # litellm's OpenAI client wants one
    # Imports and first-call set-up (litellm's take seconds) are paid here, not by a setting.
    measure(concurrency=2, designs=1, items=2, latency_s=0.01)
    rows = []
    for concurrency in args.concurrency:
        items = max(MIN_ITEMS, args.waves * concurrency)
        rows.append(measure(concurrency, args.designs, items, args.latency))
        print(f"  concurrency {concurrency}: {rows[-1]['wall s']} s", file=sys.stderr, flush=True)
    print(
        f"{args.latency} s per model call, one call per task; SQLite archive; response cache on, "
        f"empty; {os.cpu_count()} CPU cores\n"
    )
    print(markdown_table(rows, right=tuple(rows[0])))


if __name__ == "__main__":
    main()
