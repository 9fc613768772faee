"""A hosted provider's rate limit on loopback: an OpenAI-compatible chat completions server on
127.0.0.1 that lets `rpm` requests a minute through and answers the others 429, as a hosted
provider does.

The limit is a token bucket that holds `burst_s` seconds of requests (one at least), as providers
enforce a minute's limit over shorter spans. A request let through is answered "Answer: Paris"
after `latency_s`; one refused is answered at once, with `Retry-After` (whole seconds, rounded up)
and `retry-after-ms` saying when a request will be let through again, unless `retry_after` is
off. Every reply carries OpenAI's `x-ratelimit-limit-requests`, `-remaining-requests` and
`-reset-requests` if `headers` is on. `rpm=0` refuses every request (a quota spent for the day),
asking to wait `refuse_for_s`.

It is bounded: it serves 127.0.0.1 only, refuses bodies over 1 MiB, stops by itself after
`serve_for_s` or `max_requests`, and its threads are daemons. In a test, `with LimitedProvider(...)
as provider:` serves on a thread; the bench runs it in a child process, which prints its port, so
that its CPU time is not the client's:

    python tests/limited_provider.py --rpm 600 [--latency 0.5] [--serve-for 600]

and answers `GET /stats` with its counts as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

MAX_BODY_BYTES = 2**20


class LimitedProvider:
    """The server (see the module's docstring); `ok_at` and `limited_at` list when each request
    was let through and refused (time.monotonic), `peak` the most it held at once."""

    def __init__(
        self,
        *,
        rpm: float,
        latency_s: float = 0.0,
        burst_s: float = 1.0,
        retry_after: bool = True,
        headers: bool = True,
        refuse_for_s: float = 1.0,
        serve_for_s: float = 300.0,
        max_requests: int = 100_000,
    ) -> None:
        self.rpm, self.latency_s = rpm, latency_s
        self.retry_after, self.headers, self.refuse_for_s = retry_after, headers, refuse_for_s
        self.serve_for_s, self.max_requests = serve_for_s, max_requests
        self.rate = rpm / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.level, self.at = self.capacity, time.monotonic()
        self.lock = threading.Lock()
        self.ok_at: list[float] = []
        self.limited_at: list[float] = []
        self.in_flight = self.peak = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as hosted providers serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send(200, provider.stats(), {})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                if not 0 <= length <= MAX_BODY_BYTES:
                    self._send(413, {"error": {"message": "body too large"}}, {})
                    self.close_connection = True
                    return
                self.rfile.read(length)
                status, body, extra = provider.answer()
                self._send(status, body, extra)

            def _send(self, status: int, payload: dict[str, Any], extra: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in extra.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client went away
                    self.close_connection = True

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256  # 64 connections at once overflow the default backlog of 5

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port: int = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # -- the limit --

    def answer(self) -> tuple[int, dict[str, Any], dict[str, str]]:
        """One request's status, body and headers; sleeps `latency_s` for one let through."""
        with self.lock:
            now = time.monotonic()
            if len(self.ok_at) + len(self.limited_at) >= self.max_requests:
                threading.Thread(target=self.server.shutdown, daemon=True).start()
                return 503, {"error": {"message": "served its requests; stopping"}}, {}
            if self.rate > 0:
                self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
            self.at = now
            allowed = self.rate > 0 and self.level >= 1.0
            if allowed:
                self.level -= 1.0
                self.ok_at.append(now)
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
            else:
                self.limited_at.append(now)
            headers = self._limit_headers()
        if not allowed:
            return 429, _RATE_LIMITED, headers
        time.sleep(self.latency_s)
        with self.lock:
            self.in_flight -= 1
        return 200, _COMPLETION, headers

    def _limit_headers(self) -> dict[str, str]:
        """Retry-After if no request goes through now, and OpenAI's x-ratelimit-* (locked)."""
        headers: dict[str, str] = {}
        wait_s = self.refuse_for_s if self.rate <= 0 else max(0.0, 1 - self.level) / self.rate
        if self.retry_after and wait_s > 0:
            headers["Retry-After"] = str(math.ceil(wait_s))
            headers["retry-after-ms"] = str(math.ceil(wait_s * 1000))
        if self.headers:
            full_s = 0.0 if self.rate <= 0 else (self.capacity - self.level) / self.rate
            headers["x-ratelimit-limit-requests"] = f"{self.rpm:g}"
            headers["x-ratelimit-remaining-requests"] = str(max(0, math.floor(self.level)))
            headers["x-ratelimit-reset-requests"] = f"{full_s:.3f}s"
        return headers

    def stats(self) -> dict[str, Any]:
        with self.lock:
            ok, limited = list(self.ok_at), len(self.limited_at)
        span_s = ok[-1] - ok[0] if len(ok) > 1 else 0.0
        return {"ok": len(ok), "limited": limited, "peak": self.peak, "ok_span_s": span_s}

    # -- serving --

    def start(self) -> Self:
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,))
        self._thread.daemon = True
        self._thread.start()
        self._timer = threading.Timer(self.serve_for_s, self.server.shutdown)
        self._timer.daemon = True
        self._timer.start()
        return self

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


_RATE_LIMITED = {
    "error": {
        "message": "Rate limit reached for requests",
        "type": "requests",
        "code": "rate_limit_exceeded",
    }
}
_COMPLETION = {
    "id": "chatcmpl-limited",
    "object": "chat.completion",
    "created": 0,
    "model": "limited",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Answer: Paris"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rpm", type=float, required=True, help="requests a minute let through")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per reply")
    parser.add_argument("--burst", type=float, default=1.0, help="seconds of requests held")
    parser.add_argument("--no-retry-after", action="store_true", help="429s without Retry-After")
    parser.add_argument("--no-headers", action="store_true", help="no x-ratelimit-* headers")
    parser.add_argument("--serve-for", type=float, default=600.0, help="seconds until it stops")
    args = parser.parse_args()
    provider = LimitedProvider(
        rpm=args.rpm,
        latency_s=args.latency,
        burst_s=args.burst,
        retry_after=not args.no_retry_after,
        headers=not args.no_headers,
        serve_for_s=args.serve_for,
    )
    print(provider.port, flush=True)
    timer = threading.Timer(args.serve_for, provider.server.shutdown)
    timer.daemon = True
    timer.start()
    provider.server.serve_forever(poll_interval=0.1)


if __name__ == "__main__":
    main()
