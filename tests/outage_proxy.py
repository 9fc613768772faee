"""A database outage on loopback: a TCP proxy between clients and a server that can drop every
connection and refuse new ones for a while, as a restart of the server does, without touching the
server itself (other tests share it).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from types import TracebackType
from typing import Self


class OutageProxy:
    """Forwards 127.0.0.1:`port` to `target` until `cut` drops every connection and refuses new
    ones for its seconds; `close` (or the end of a `with` block) stops it and its threads."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._closed = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def cut(self, seconds: float) -> None:
        """Drops every connection, refuses connections for `seconds` (the port is closed), then
        serves again on the same port."""
        with self._lock:
            listener, self._listener = self._listener, None
            dropped, self._open = self._open, []
        assert listener is not None
        _drop(listener)  # shut down first: a bare close leaves the accept thread listening
        for sock in dropped:
            _drop(sock)
        self._accepting.join(timeout=5)
        time.sleep(seconds)
        with self._lock:
            self._listener = socket.create_server(("127.0.0.1", self.port))
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            listener, self._listener = self._listener, None
            dropped, self._open = self._open, []
        if listener is not None:
            _drop(listener)
        for sock in dropped:
            _drop(sock)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _accept(self) -> None:
        listener = self._listener
        while listener is not None:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by `cut` or `close`
                return
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._closed or self._listener is not listener:
                    _drop(client)
                    _drop(upstream)
                    return
                self._open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copies bytes from `source` to `sink` until either side closes."""
    try:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
    finally:
        _drop(source)
        _drop(sink)


def _drop(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
