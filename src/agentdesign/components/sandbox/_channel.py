"""The request channel of a program the engine serves (`run_python(serve=...)`): the program
writes each request as one line on stdout after REQUEST_MARK, as JSON; the engine answers it with
one JSON line on the program's stdin, `{"value": ...}` or, for a ChannelRefusal, `{"error": ...}`.
Everything else the program writes is its output. Code workflows reach model, solver and tool
through it (`_code.py`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

__all__ = ["REQUEST_MARK", "Channel", "ChannelRefusal"]

# A program served by the engine (`run_python(serve=...)`) writes each request as one line on
# stdout, after this mark, as JSON; the engine answers with one JSON line on its stdin.
REQUEST_MARK = b"\x1eagentdesign-request "
_REQUEST_LIMIT = 1024 * 1024  # bytes of one request line; longer ones are output, not requests
# What one program may send and leave unread; past any of them the sandbox ends it ("channel").
# A workflow's own requests are a few dozen (the task's budget is 32 model calls), each read
# before the next is sent.
_MAX_REQUESTS = 256
_MAX_REQUEST_BYTES = 16 * 1024 * 1024
_MAX_UNREAD = 4 * 1024 * 1024


class ChannelRefusal(Exception):
    """Raised by a `serve` function for a request it refuses: the program gets the message as
    an error reply, and runs on."""


class Channel:
    """A served program's stdout: request lines are answered on its stdin, the rest is output.

    `reply` is the program's stdin, non-blocking: a reply the pipe cannot take yet waits in
    `unsent` for `flush`, so that a program that never reads cannot block the engine. `failure`
    says, once set, which bound the program broke; nothing more is served then."""

    def __init__(
        self, serve: Callable[[Any], Any], reply: int, output: Callable[[bytes], None]
    ) -> None:
        self.serve = serve
        self.reply = reply
        self.output = output
        self.pending = bytearray()
        self.unsent = bytearray()
        self.served_s = 0.0
        self.requests = 0
        self.request_bytes = 0
        self.failure: str | None = None

    def add(self, data: bytes) -> None:
        if self.failure is not None:
            return
        self.pending += data
        while self.failure is None:
            at = self.pending.find(REQUEST_MARK)
            if at < 0:  # all output, but for what may be the start of a mark
                keep = _mark_prefix(self.pending)
                self._output(len(self.pending) - keep)
                return
            self._output(at)
            end = self.pending.find(b"\n")
            if end < 0:
                if len(self.pending) > _REQUEST_LIMIT:
                    self._output(len(self.pending))
                return
            line = bytes(self.pending[len(REQUEST_MARK) : end])
            del self.pending[: end + 1]
            self.requests += 1
            self.request_bytes += len(line)
            if self.requests > _MAX_REQUESTS:
                self.failure = f"the program sent more than {_MAX_REQUESTS} requests"
            elif self.request_bytes > _MAX_REQUEST_BYTES:
                self.failure = f"the program's requests passed {_MAX_REQUEST_BYTES >> 20} MB"
            else:
                self._answer(line)

    def flush(self) -> None:
        """Writes as much of the unsent replies as the pipe takes now."""
        while self.unsent:
            try:
                written = os.write(self.reply, self.unsent)
            except BlockingIOError:
                return
            except OSError:  # the program closed its stdin or exited: no one will read them
                self.unsent.clear()
                return
            del self.unsent[:written]

    def _output(self, n: int) -> None:
        if n > 0:
            self.output(bytes(self.pending[:n]))
            del self.pending[:n]

    def _answer(self, line: bytes) -> None:
        started = time.monotonic()
        try:
            request = json.loads(line)
        except ValueError:
            reply: dict[str, Any] = {"error": "the request is not one line of JSON"}
        else:
            try:
                reply = {"value": self.serve(request)}
            except ChannelRefusal as refusal:
                reply = {"error": str(refusal)}
            finally:
                self.served_s += time.monotonic() - started
        self.unsent += json.dumps(reply).encode() + b"\n"
        self.flush()
        if len(self.unsent) > _MAX_UNREAD:
            self.failure = f"the program left over {_MAX_UNREAD >> 20} MB of replies unread"


def _mark_prefix(data: bytearray) -> int:
    """How many bytes at the end of `data` could begin REQUEST_MARK."""
    for n in range(min(len(data), len(REQUEST_MARK) - 1), 0, -1):
        if data.endswith(REQUEST_MARK[:n]):
            return n
    return 0
