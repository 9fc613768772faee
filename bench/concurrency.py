"""Tasks per second of a search against a hosted model at 1, 8, 32 and 64 tasks at once, and the
engine's own CPU time per task.

    nice -n 10 .venv/bin/python bench/concurrency.py [--concurrency 1 8 32 64] [--latency 0.5]
        [--agents 4] [--waves 4]

The model is an OpenAI-compatible server written here, run in a child process on 127.0.0.1 (so
its CPU is not the engine's), that answers every chat completion "Answer: 0" after `--latency`
seconds and stops itself after a deadline. Each setting runs `run_search` as `agentdesign run`
does, through litellm with the response cache, on a fresh SQLite archive and a fresh, empty
cache directory: `--agents` GSM8K designs of one model call per item (single-pass workflows,
searched over reasoning style, few-shot memory and token cap), `--waves` x concurrency search items
each (at least 16), no holdout.

Ideal is the latency bound: every evaluation takes ceil(items / concurrency) x latency. The CPU
columns are this process's CPU time over the run, per task: all of it, the part a bare
`litellm.completion` takes per call (measured beside, at the same concurrency), and the rest,
which is the engine's (agent, response cache, archive writes, optuna, bookkeeping). The server
also reports the most requests it held at once, which shows any cap on concurrency.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _common import markdown_table

from agentdesign.archive import Archive
from agentdesign.components import import_litellm
from agentdesign.search import Budget, RunConfig, run_search

MODEL = "openai/fake"
MIN_ITEMS = 16
# One model call per item, so a task's time is the server's latency and nothing else.
CHOICES = {
    "workflow": ("single",),
    "planning": ("none",),
    "reasoning": ("direct", "cot", "scratchpad"),
    "memory": ("none", "few_shot"),
    "tool": ("none",),
    "reflection": ("none",),
}
LIMITS = {"reasoning__max_tokens": (64, 512), "memory__k": (1, 3)}


# -- the server (child process) -------------------------------------------------------------------


def serve(latency_s: float, serve_for_s: float) -> None:
    """Serves chat completions on 127.0.0.1 after `latency_s`, and GET /stats, until killed or
    `serve_for_s` has passed; prints its port first."""
    lock = threading.Lock()
    stats = {"requests": 0, "in_flight": 0, "peak": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a hosted provider does

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with lock:
                self._reply(200, {k: stats[k] for k in ("requests", "peak")})

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if not self.path.endswith("/chat/completions"):
                self._reply(404, {"error": {"message": f"no {self.path}"}})
                return
            with lock:
                stats["requests"] += 1
                stats["in_flight"] += 1
                stats["peak"] = max(stats["peak"], stats["in_flight"])
            time.sleep(latency_s)
            with lock:
                stats["in_flight"] -= 1
            self._reply(200, _completion(prompt_tokens=len(body) // 4))

        def _reply(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 256  # 64 clients connecting at once must not wait on the backlog

    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    threading.Timer(serve_for_s, server.shutdown).start()
    server.serve_forever(poll_interval=0.1)


def _completion(*, prompt_tokens: int) -> dict[str, Any]:
    text = "Answer: 0"
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 3,
            "total_tokens": prompt_tokens + 3,
        },
    }


@contextmanager
def server(latency_s: float, serve_for_s: float) -> Iterator[str]:
    """The server's base URL while it runs in a child process; stopped on the way out."""
    command = [sys.executable, __file__, "--serve", "--latency", str(latency_s)]
    command += ["--serve-for", str(serve_for_s)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def server_stats(url: str) -> dict[str, int]:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=10) as response:
        stats: dict[str, int] = json.load(response)
    return stats


# -- the bench ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    concurrency: int
    agents: int
    items: int
    latency_s: float

    @property
    def ideal_s(self) -> float:
        return self.agents * math.ceil(self.items / self.concurrency) * self.latency_s


def litellm_cpu_per_call(url: str, concurrency: int, calls: int) -> float:
    """CPU seconds of this process per bare `litellm.completion` call, `concurrency` at once."""
    litellm = import_litellm()

    def call(i: int) -> None:
        messages = [{"role": "user", "content": f"Question {i}?"}]
        litellm.completion(
            model=MODEL, messages=messages, api_base=url, timeout=60, max_retries=0
        )

    call(-1)  # the first call builds litellm's client
    started = time.process_time()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(call, range(calls)))
    return (time.process_time() - started) / calls


def measure(setting: Setting) -> dict[str, str]:
    serve_for_s = 120 + 5 * setting.ideal_s
    with (
        server(setting.latency_s, serve_for_s) as url,
        tempfile.TemporaryDirectory(prefix="agentdesign-bench-") as scratch,
    ):
        os.environ["AGENTDESIGN_CACHE_DIR"] = str(Path(scratch) / "cache")
        config = RunConfig(
            name=f"concurrency-{setting.concurrency}",
            model=MODEL,
            api_base=url,
            budget=Budget(max_agents=setting.agents),
            n_search=setting.items,
            n_holdout=0,
            concurrency=setting.concurrency,
            llm_timeout_s=60,
            choices=CHOICES,
            limits=LIMITS,
        )
        with Archive(f"sqlite:///{scratch}/archive.db") as archive:
            wall, cpu = time.perf_counter(), time.process_time()
            summary = run_search(archive, config)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            rows = archive.leaderboard(run_name=config.name, limit=1000)
        stats = server_stats(url)
        calls = min(stats["requests"], 4 * setting.concurrency * 4)
        bare = litellm_cpu_per_call(url, setting.concurrency, max(calls, 16))
    tasks = sum(row.n_tasks for row in rows)
    if stats["requests"] != tasks:
        print(f"warning: {stats['requests']} calls for {tasks} tasks", file=sys.stderr)
    ideal = Setting(setting.concurrency, len(rows), setting.items, setting.latency_s).ideal_s
    return {
        "concurrency": str(setting.concurrency),
        "agents x items": f"{len(rows)} x {setting.items}",
        "tasks": str(tasks),
        "peak in flight": str(stats["peak"]),
        "wall s": f"{wall:.1f}",
        "ideal s": f"{ideal:.1f}",
        "tasks/s": f"{tasks / wall:.1f}",
        "ideal tasks/s": f"{tasks / ideal:.1f}",
        "of ideal": f"{ideal / wall:.0%}",
        "CPU ms/task": f"{cpu / tasks * 1000:.1f}",
        "litellm ms/call": f"{bare * 1000:.1f}",
        "engine ms/task": f"{(cpu / tasks - bare) * 1000:.1f}",
        "stop": summary.stop_reason,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per model call")
    parser.add_argument("--agents", type=int, default=4, help="designs evaluated per setting")
    parser.add_argument("--waves", type=int, default=4, help="items per design / concurrency")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-for", type=float, default=60.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.latency, args.serve_for)
        return
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")  # litellm's OpenAI client wants one
    # Imports and first-call set-up (litellm's takes seconds) are paid once, not per task.
    measure(Setting(concurrency=2, agents=1, items=2, latency_s=0.01))
    rows = []
    for concurrency in args.concurrency:
        items = max(MIN_ITEMS, args.waves * concurrency)
        rows.append(measure(Setting(concurrency, args.agents, items, args.latency)))
        print(f"  concurrency {concurrency}: {rows[-1]['wall s']} s", file=sys.stderr, flush=True)
    print(f"{args.latency} s per model call, SQLite archive, response cache on and empty\n")
    print(markdown_table(rows, right=tuple(rows[0])))


if __name__ == "__main__":
    main()
