"""Tasks run at once really overlap: a search at concurrency 16 keeps 16 model calls in flight
against an OpenAI-compatible server on 127.0.0.1, through litellm and the response cache, so 16
tasks take about one model latency instead of sixteen. Nothing on the way caps them at 8, as a
connection pool can (GEPA users found runs silently held to 8 evaluations at once).

bench/concurrency.py measures the pace at 1 to 64 tasks at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import capitals_file, chat_completion, send_json, serving, space_choices

from agentdesign.archive import Archive
from agentdesign.components import import_litellm
from agentdesign.evaluators import Benchmark, get_benchmark
from agentdesign.search import Budget, RunConfig, run_search

LATENCY_S = 0.5
TASKS = 16
MODEL = "openai/slow"
ONE_CALL = space_choices()  # a design that makes one model call per task
ANSWER = chat_completion("Answer: Paris", model="slow", prompt_tokens=7, completion_tokens=2)


class SlowProvider:
    """Answers every chat completion after `LATENCY_S`; counts the requests it holds at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = self.in_flight = self.peak = 0
        self.first_at = self.last_at = 0.0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                provider.arrived()
                time.sleep(LATENCY_S)
                provider.left()
                send_json(self, ANSWER)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 64

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def arrived(self) -> None:
        with self.lock:
            self.first_at = self.first_at or time.perf_counter()
            self.requests += 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)

    def left(self) -> None:
        with self.lock:
            self.in_flight -= 1
            self.last_at = time.perf_counter()


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[SlowProvider]:
    """The slow provider, serving until the test ends; an empty response cache in `tmp_path`."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # litellm's OpenAI client wants one
    monkeypatch.setenv("AGENTDESIGN_CACHE_DIR", str(tmp_path / "cache"))
    slow = SlowProvider()
    with serving(slow.server):
        yield slow


@pytest.fixture
def capitals(tmp_path: Path) -> Benchmark:
    return get_benchmark(f"jsonl:{capitals_file(tmp_path, TASKS)}")


def test_tasks_at_once_overlap_their_model_calls(
    provider: SlowProvider, capitals: Benchmark, tmp_path: Path
) -> None:
    import_litellm()  # its import takes seconds: not part of the timing
    config = RunConfig.of(
        name="overlap",
        benchmark=capitals.reference,
        model=MODEL,
        api_base=provider.url,
        budget=Budget(max_agents=1),
        n_search=TASKS,
        n_holdout=0,
        concurrency=TASKS,
        choices=ONE_CALL,
    )
    with Archive(str(tmp_path / "archive.db")) as archive:
        started = time.perf_counter()
        summary = run_search(archive, config)
        wall_s = time.perf_counter() - started
        [row] = archive.leaderboard(run_name="overlap")
    assert (row.n_tasks, row.mean, summary.agents_done) == (TASKS, 1.0, 1)
    assert provider.requests == TASKS  # one call per task, none from the cache
    assert provider.peak == TASKS  # all at once: nothing holds them to fewer
    # One latency for the calls, where one at a time takes TASKS of them (8 s).
    calls_s = provider.last_at - provider.first_at
    assert calls_s < 3 * LATENCY_S, calls_s
    assert wall_s < TASKS * LATENCY_S / 2, wall_s
