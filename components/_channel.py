"""The request channel of a program the engine serves (`run_python(serve=...)`): the program
writes each request as one line on stdout after REQUEST_MARK, as JSON; the engine answers it with
one JSON line on the program's stdin, `{"value": ...}` or, for a ChannelRefusal, `{"error": ...}`.
Everything else the program writes is its output. Code workflows reach model, solver and tool
through it (`_code.py`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import IO, Any

__all__ = ["REQUEST_MARK", "Channel", "ChannelRefusal"]

# A program served by the engine (`run_python(serve=...)`) writes each request as one line on
# stdout, after this mark, as JSON; the engine answers with one JSON line on its stdin.
REQUEST_MARK = b"\x1eagentdesign-request "
_REQUEST_LIMIT = 1024 * 1024  # bytes of one request line; longer ones are output, not requests


class ChannelRefusal(Exception):
    """Raised by a `serve` function for a request it refuses: the program gets the message as
    an error reply, and runs on."""


class Channel:
    """A served program's stdout: request lines are answered on its stdin, the rest is output."""

    def __init__(
        self, serve: Callable[[Any], Any], reply: IO[bytes], output: Callable[[bytes], None]
    ) -> None:
        self.serve = serve
        self.reply = reply
        self.output = output
        self.pending = bytearray()
        self.served_s = 0.0

    def add(self, data: bytes) -> None:
        self.pending += data
        while True:
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
            self._answer(line)

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
        with contextlib.suppress(OSError):  # the program may have exited meanwhile
            self.reply.write(json.dumps(reply).encode() + b"\n")
            self.reply.flush()


def _mark_prefix(data: bytearray) -> int:
    """How many bytes at the end of `data` could begin REQUEST_MARK."""
    for n in range(min(len(data), len(REQUEST_MARK) - 1), 0, -1):
        if data.endswith(REQUEST_MARK[:n]):
            return n
    return 0
