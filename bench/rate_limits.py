"""A search at 32 tasks at once against a hosted model that allows 600 requests a minute: provider
failures (target 0) and the requests answered as a share of what the limit allows (target 85%).

    nice -n 10 .venv/bin/python bench/rate_limits.py [--rpm 600] [--concurrency 32]
        [--latency 0.5] [--calls 384] [--modes headers retry-after bare capped]

The model is tests/limited_provider.py, run in a child process on 127.0.0.1 (so that its CPU time
is not the engine's): an OpenAI-compatible server that lets `--rpm` requests a minute through, as
a token bucket holding a second's worth, answers them after `--latency` seconds, and answers the
others 429 at once. It stops itself after a deadline if the bench has not stopped it first. Each
mode is a fresh search (`run_search`, as `agentdesign run` runs it: litellm, the response cache,
a fresh SQLite archive, an empty cache directory) of 2 GSM8K designs that make one model call per
item, on `--calls` / 2 items each, against a fresh server:

- headers: the server says what OpenAI says: `Retry-After` and `retry-after-ms` on a 429, and
  `x-ratelimit-limit-requests`, `-remaining-requests`, `-reset-requests` on every reply;
- retry-after: only `Retry-After` and `retry-after-ms` on a 429;
- bare: 429s that say nothing (the limiter's cut of the calls at once and the backoff alone);
- capped: as headers, with `rpm` set to the limit (`--rpm 600` on the command line).

"Of the limit" is the requests answered over what the bucket allows between the first answered
request and the last: its second's worth held at the start, then rpm / 60 a second.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from contextlib import AbstractContextManager, redirect_stderr
from io import StringIO
from pathlib import Path

from _common import child_server, markdown_table, server_stats
from concurrency import CHOICES, LIMITS, cache_dir

from agentdesign.archive import Archive
from agentdesign.components import ProviderError, import_litellm
from agentdesign.search import Budget, RunConfig, run_search

MODEL = "openai/limited"
DESIGNS = 2
SERVER = Path(__file__).resolve().parents[1] / "tests" / "limited_provider.py"
MODES = {
    "headers": [],
    "retry-after": ["--no-headers"],
    "bare": ["--no-headers", "--no-retry-after"],
    "capped": [],
}


def limited_server(
    rpm: float, latency_s: float, flags: list[str], serve_for_s: float
) -> AbstractContextManager[str]:
    """The base URL of a limited server in a child process, stopped on the way out."""
    command = [sys.executable, str(SERVER), "--rpm", str(rpm), "--latency", str(latency_s)]
    return child_server([*command, "--serve-for", str(serve_for_s), *flags])


def measure(
    mode: str, *, rpm: float, concurrency: int, latency_s: float, calls: int
) -> dict[str, str]:
    """One mode's table row: a fresh search against a fresh server."""
    items = calls // DESIGNS
    at_limit_s = DESIGNS * items / (rpm / 60)
    stderr = StringIO()
    with (
        limited_server(rpm, latency_s, MODES[mode], serve_for_s=300 + 10 * at_limit_s) as url,
        tempfile.TemporaryDirectory(prefix="agentdesign-bench-") as scratch,
        cache_dir(Path(scratch) / "cache"),
        Archive(f"sqlite:///{scratch}/archive.db") as archive,
    ):
        config = RunConfig.of(
            f"rate-limits-{mode}",
            model=MODEL,
            api_base=url,
            budget=Budget(max_agents=DESIGNS),
            n_search=items,
            n_holdout=0,
            race=False,
            concurrency=concurrency,
            llm_timeout_s=60,
            choices=CHOICES,
            limits=LIMITS,
            rpm=rpm if mode == "capped" else None,
        )
        wall_s = time.perf_counter()
        stopped = ""
        with redirect_stderr(stderr):
            try:
                run_search(archive, config)
            except ProviderError as exc:
                stopped = str(exc)
        wall_s = time.perf_counter() - wall_s
        stats = server_stats(url)
        with sqlite3.connect(f"{scratch}/archive.db") as conn:
            [(failures,)] = conn.execute("SELECT COUNT(*) FROM ad_task_failure").fetchall()
        board = archive.leaderboard(run_name=config.name, limit=DESIGNS)
    tasks = sum(row.n_tasks for row in board)
    allowed = max(1.0, rpm / 60) + stats["ok_span_s"] * rpm / 60
    warnings = [line for line in stderr.getvalue().splitlines() if line.startswith("warning")]
    if stopped:
        print(f"  {mode}: stopped: {stopped}", file=sys.stderr)
    return {
        "mode": mode,
        "tasks": f"{tasks} of {DESIGNS * items}",
        "provider failures": str(failures),
        "answered": str(stats["ok"]),
        "429s": str(stats["limited"]),
        "peak in flight": str(stats["peak"]),
        "answered s": f"{stats['ok_span_s']:.1f}",
        "answered/s": f"{stats['ok'] / max(stats['ok_span_s'], 1e-9):.2f}",
        "of the limit": f"{stats['ok'] / allowed:.0%}",
        "wall s": f"{wall_s:.1f}",
        "waiting lines": str(len(warnings)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rpm", type=float, default=600, help="the server's requests a minute")
    parser.add_argument("--concurrency", type=int, default=32, help="tasks run at once")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per answered call")
    parser.add_argument("--calls", type=int, default=384, help="model calls per mode")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")  # litellm's OpenAI client wants one
    import_litellm()  # its import takes seconds: not part of any row
    rows = []
    for mode in args.modes:
        rows.append(
            measure(
                mode,
                rpm=args.rpm,
                concurrency=args.concurrency,
                latency_s=args.latency,
                calls=args.calls,
            )
        )
        print(f"  {mode}: {rows[-1]['wall s']} s", file=sys.stderr, flush=True)
    print(
        f"{args.rpm:g} requests a minute allowed, {args.concurrency} tasks at once, "
        f"{args.latency:g} s per answered call, one call per task; {os.cpu_count()} CPU cores\n"
    )
    print(markdown_table(rows, right=tuple(rows[0])[1:]))


if __name__ == "__main__":
    main()
