"""A heartbeat: a daemon thread that calls `beat` every `interval_s` seconds while work runs.

Workers prove they are alive this way, both to the archive (the lease on the evaluation they run)
and to optuna (the trial they hold); a worker that dies stops beating and its work is taken over.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import Self

__all__ = ["Heartbeat", "worker_id"]

log = logging.getLogger(__name__)


def worker_id() -> str:
    """A name for this process that no other process, here or on another host, shares."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Heartbeat:
    """Calls `beat` every `interval_s` seconds from a daemon thread, between enter and exit."""

    def __init__(self, *, interval_s: float, beat: Callable[[], object]) -> None:
        self._interval_s = interval_s
        self._beat = beat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agentdesign-heartbeat", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._beat()
            except Exception:  # a missed beat is retried next time; the work must go on
                log.warning("heartbeat failed", exc_info=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
