"""Runs model-written Python in a separate, confined process.

HumanEval solutions, program-of-thought answers and a Python tool all execute code a model wrote.
Each run gets a fresh `python -I` process in a new session with a minimal environment, a temporary
working directory of bounded size (removed afterwards, whatever it holds: `_workfolder.py`),
resource limits (address space, CPU time, file size, process count) and a wall-time limit that
kills the whole process group.

Two layers hold it. The operating system's (`_isolation.py`): its own user, PID, network and mount
namespaces under bubblewrap (or util-linux unshare with Landlock), so that nothing outside its work
folder and a read-only Python exists for it, no other process is visible and no network is
reachable. And inside the child an audit
hook (PEP 578), installed before the untrusted code is compiled, ends the process with a
`SANDBOX-VIOLATION:` line on stderr on: any network use, any process creation, writing outside the
working directory, and reading outside it and the Python installation. The hook gives the precise
refusal that the result reports; it is not a security boundary against code written to escape it
(PEP 578 says so), the namespaces are. Where no namespaces can be made (macOS, say), the sandbox
refuses to run code unless unsafe mode is on; every result says which isolation it ran under.

The child's bootstrap and its audit hook are in `_sandbox_child.py`; the channel a served program
sends requests on is in `_channel.py`.
"""

from __future__ import annotations

import contextlib
import math
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentdesign.components.sandbox._channel import Channel
from agentdesign.components.sandbox._isolation import (
    Isolation,
    confine_args,
    current_isolation,
    new_work_folder,
    require_isolation,
    spawn_confined,
)
from agentdesign.components.sandbox._sandbox_child import CHILD_PROGRAM
from agentdesign.components.sandbox._workfolder import folder_usage

__all__ = ["SandboxLimits", "SandboxResult", "run_python", "sandbox_isolation"]

# Exit codes the child uses to tell a refused operation and an exhausted heap from other failures.
_VIOLATION_EXIT = 86
_MEMORY_EXIT = 87
_VIOLATION_MARKER = "SANDBOX-VIOLATION: "
# Per stream; beyond it the head and the tail are kept (the tail holds tracebacks and markers).
_OUTPUT_LIMIT = 64 * 1024
_MB = 1024 * 1024
# Where no tmpfs bounds the work folder (not under bwrap), it is measured this often, each entry
# counting as a block at least (so that a folder of many empty files is over its size too).
_WATCH_S = 0.1
_ENTRY_BYTES = 4096
_NO_SPACE = "[Errno 28]"  # ENOSPC, as an OSError's message starts


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    """Per-run ceilings; the defaults suit unit-test style programs (HumanEval's take < 1 s)."""

    wall_s: float = 10.0
    memory_mb: int = 512
    cpu_s: float = 10.0
    file_mb: int = 16  # one file
    folder_mb: int = 64  # the whole work folder


@dataclass(frozen=True, kw_only=True)
class SandboxResult:
    """What a run printed and how it ended; `kind` is None when it exited 0."""

    ok: bool
    stdout: str
    stderr: str
    exit_code: int | None  # None when the sandbox killed it; negative: the signal that ended it
    kind: str | None  # "timeout" | "memory" | "disk" | "channel" | "violation" | "error"
    wall_s: float
    detail: str
    isolation: str  # what confined it: `sandbox_isolation()`


class _Capture:
    """Keeps a stream's first and last bytes, so endless output cannot exhaust the host."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self.head = bytearray()
        self.tail = bytearray()

    def add(self, data: bytes) -> None:
        self.total += len(data)
        if len(self.head) < self.limit // 2:
            self.head += data[: self.limit // 2 - len(self.head)]
        self.tail += data
        if len(self.tail) > 2 * self.limit:
            del self.tail[: -self.limit]

    def text(self) -> str:
        if self.total <= self.limit:
            data = bytes(self.tail)
        else:
            keep = self.limit - len(self.head)
            omitted = self.total - len(self.head) - keep
            data = bytes(self.head) + f"\n[... {omitted} bytes omitted ...]\n".encode()
            data += bytes(self.tail[-keep:])
        return data.decode("utf-8", "replace")


def sandbox_isolation() -> str:
    """The isolation model-written code runs under here, in one line (probed once)."""
    return current_isolation().level


def run_python(
    code: str,
    *,
    stdin: str = "",
    limits: SandboxLimits = SandboxLimits(),
    audit_hooks: bool = True,
    serve: Callable[[Any], Any] | None = None,
) -> SandboxResult:
    """Runs `code` as a program in a confined child process and reports how it ended.

    Never raises for anything the code does (its work folder is removed whatever it holds); safe
    to call from several threads at once. Raises SandboxUnavailableError where only the audit
    hooks would confine it and unsafe mode is off.
    `audit_hooks=False` leaves the operating system's isolation alone in force: the hostile-program
    tests use it to show that this layer holds by itself.

    With `serve`, the program's stdin is the engine's answer channel instead of `stdin`: each
    line it writes after REQUEST_MARK is decoded as JSON and handed to `serve` outside the
    sandbox, whose return value goes back as `{"value": ...}` (a ChannelRefusal as
    `{"error": ...}`). Time spent serving does not count against the wall-time limit. A program
    that sends too much or leaves its replies unread is ended ("channel"). Any other
    exception of `serve` (a failed model call, say) ends the program and is raised here.
    """
    isolation = current_isolation()
    require_isolation(isolation)
    if not audit_hooks and isolation.launcher is None:
        raise ValueError("audit_hooks=False needs operating-system isolation, and there is none")
    folder = new_work_folder(isolation)
    workdir = folder.path
    try:
        with tempfile.TemporaryFile() as code_file, tempfile.TemporaryFile() as stdin_file:
            code_file.write(code.encode("utf-8", "surrogatepass"))
            code_file.seek(0)
            stdin_file.write(stdin.encode("utf-8", "replace"))
            stdin_file.seek(0)
            argv = [sys.executable, "-I", "-B", "-X", "utf8", "-c", CHILD_PROGRAM]
            argv += confine_args(
                isolation,
                workdir,
                memory=limits.memory_mb * _MB,
                cpu_s=max(1, math.ceil(limits.cpu_s)),
                file_size=limits.file_mb * _MB,
            )
            argv += [str(code_file.fileno()), str(_VIOLATION_EXIT), str(_MEMORY_EXIT)]
            argv.append(str(int(audit_hooks)))
            return _supervise(
                isolation,
                argv,
                workdir,
                subprocess.PIPE if serve is not None else stdin_file.fileno(),
                code_file.fileno(),
                limits,
                serve,
            )
    finally:
        folder.remove()


def _child_env(workdir: str) -> dict[str, str]:
    """Nothing inherited: no API keys, no database URLs; home and temp point into the sandbox."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": workdir,
        "TMPDIR": workdir,
    }


def _supervise(
    isolation: Isolation,
    argv: list[str],
    workdir: str,
    stdin_fd: int,
    code_fd: int,
    limits: SandboxLimits,
    serve: Callable[[Any], Any] | None,
) -> SandboxResult:
    start = time.monotonic()
    deadline = start + limits.wall_s
    child = spawn_confined(
        isolation,
        argv,
        workdir=workdir,
        folder_size=limits.folder_mb * _MB,
        stdin=stdin_fd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_child_env(workdir),
        pass_fds=(code_fd,),
        deadline=deadline,
    )
    process = child.process
    captures = {"stdout": _Capture(_OUTPUT_LIMIT), "stderr": _Capture(_OUTPUT_LIMIT)}
    channel = None
    if serve is not None:
        assert process.stdin is not None
        os.set_blocking(process.stdin.fileno(), False)
        channel = Channel(serve, process.stdin.fileno(), captures["stdout"].add)
    # A tmpfs bounds the folder; else it is on the host's disk, and watched.
    watch = None if isolation.tmpfs else _FolderWatch(workdir, limits.folder_mb)
    try:
        with selectors.DefaultSelector() as selector:
            assert process.stdout is not None and process.stderr is not None
            selector.register(process.stdout, selectors.EVENT_READ, channel or captures["stdout"])
            selector.register(process.stderr, selectors.EVENT_READ, captures["stderr"])
            stopped = _drain(selector, deadline, channel, watch)
        served_s = channel.served_s if channel is not None else 0.0
        stopped = stopped or _await_exit(process.pid, deadline + served_s, watch)
        if stopped is None and watch is not None and watch.over(now=True):
            stopped = "disk"  # it wrote too much between two measurements, then ended
    finally:
        # The leader is at most a zombie here, so its group id cannot have been reused.
        child.kill()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
    wall_s = time.monotonic() - start - (channel.served_s if channel is not None else 0.0)
    kind: str | None
    if stopped == "timeout":
        kind, detail = "timeout", f"wall-time limit of {limits.wall_s:g} s exceeded"
    elif stopped == "disk":
        kind, detail = "disk", f"{_folder_limit(limits)} exceeded"
    elif stopped == "channel" and channel is not None:
        kind, detail = "channel", str(channel.failure)
    else:
        kind, detail = _classify(
            child.returncode, captures["stderr"].text(), wall_s=wall_s, limits=limits
        )
    return SandboxResult(
        ok=kind is None,
        stdout=captures["stdout"].text(),
        stderr=captures["stderr"].text(),
        exit_code=child.returncode if stopped is None else None,
        kind=kind,
        wall_s=wall_s,
        detail=detail,
        isolation=isolation.level,
    )


class _FolderWatch:
    """The size of a work folder on the host's disk, measured every _WATCH_S at most."""

    def __init__(self, path: str, limit_mb: int) -> None:
        self.path = path
        self.limit = limit_mb * _MB
        self.due = time.monotonic() + _WATCH_S

    def over(self, *, now: bool = False) -> bool:
        """Whether the folder is past its limit, if a measurement is due or asked for `now`
        (False otherwise)."""
        if not now and time.monotonic() < self.due:
            return False
        used, entries = folder_usage(self.path, max_entries=self.limit // _ENTRY_BYTES + 1)
        self.due = time.monotonic() + _WATCH_S
        return max(used, entries * _ENTRY_BYTES) > self.limit


def _drain(
    selector: selectors.BaseSelector,
    deadline: float,
    channel: Channel | None,
    watch: _FolderWatch | None,
) -> str | None:
    """Reads both pipes until they close, writing the channel's replies as the program takes
    them. If something came first, says what: "timeout" (the deadline, moved on by the time spent
    serving the channel's requests), "channel" (the program broke the channel's bounds) or
    "disk" (its work folder grew past its limit)."""
    readers, writing = 2, False
    while readers:
        if channel is not None:
            if channel.failure is not None:
                return "channel"
            if bool(channel.unsent) != writing:  # wait for the pipe to take them, not on it
                writing = not writing
                if writing:
                    selector.register(channel.reply, selectors.EVENT_WRITE)
                else:
                    selector.unregister(channel.reply)
        remaining = deadline + (channel.served_s if channel is not None else 0.0) - time.monotonic()
        if remaining <= 0:
            return "timeout"
        if watch is not None:
            if watch.over():
                return "disk"
            remaining = min(remaining, max(0.0, watch.due - time.monotonic()))
        for key, _ in selector.select(remaining):
            if key.data is None:
                assert channel is not None
                channel.flush()
                continue
            data = os.read(key.fd, 1 << 16)
            if data:
                key.data.add(data)
            else:
                selector.unregister(key.fileobj)
                readers -= 1
    return None


def _await_exit(pid: int, deadline: float, watch: _FolderWatch | None) -> str | None:
    """Waits for the child to exit without reaping it; "timeout" or "disk" (as `_drain` says
    them) if that came first."""
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() >= deadline:
            return "timeout"
        if watch is not None and watch.over():
            return "disk"
        time.sleep(0.005)
    return None


def _folder_limit(limits: SandboxLimits) -> str:
    return f"work-folder limit of {limits.folder_mb} MB"


def _classify(
    returncode: int, stderr: str, *, wall_s: float, limits: SandboxLimits
) -> tuple[str | None, str]:
    """The failure kind and a one-line reason for a child that exited on its own."""
    if returncode == 0:
        return None, ""
    marker = stderr.rfind(_VIOLATION_MARKER)
    if returncode == _VIOLATION_EXIT and marker >= 0:
        return "violation", stderr[marker + len(_VIOLATION_MARKER) :].partition("\n")[0]
    if returncode == _MEMORY_EXIT or (returncode > 0 and "MemoryError" in _last_line(stderr)):
        return "memory", f"memory limit of {limits.memory_mb} MB exceeded"
    if returncode > 0 and _NO_SPACE in _last_line(stderr):  # its tmpfs is full
        return "disk", f"{_folder_limit(limits)} reached"
    # Only the soft CPU limit sends SIGXCPU. Past the hard limit the kernel sends SIGKILL, which the
    # OOM killer sends too: CPU time never exceeds wall time, so a shorter run died for memory.
    if returncode == -signal.SIGXCPU or (returncode == -signal.SIGKILL and wall_s >= limits.cpu_s):
        return "timeout", f"CPU-time limit of {limits.cpu_s:g} s exceeded"
    if returncode == -signal.SIGKILL:
        return "memory", "killed by SIGKILL (out of memory)"
    if returncode < 0:
        return "error", f"killed by {signal.Signals(-returncode).name}"
    return "error", _last_line(stderr) or f"exit code {returncode}"


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1][:300] if lines else ""
