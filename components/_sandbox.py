"""Runs model-written Python in a separate, confined process.

HumanEval solutions, program-of-thought answers and a Python tool all execute code a model wrote.
Each run gets a fresh `python -I` process in a new session with a minimal environment, a temporary
working directory (removed afterwards), resource limits (address space, CPU time, file size,
process count) and a wall-time limit that kills the whole process group.

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
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from agentdesign.components._isolation import (
    CONFINE_CALL,
    CONFINE_SOURCE,
    Isolation,
    confine_args,
    current_isolation,
    new_workdir,
    require_isolation,
    spawn_confined,
)

__all__ = [
    "REQUEST_MARK",
    "ChannelRefusal",
    "SandboxLimits",
    "SandboxResult",
    "run_python",
    "sandbox_isolation",
]

# Exit codes the child uses to tell a refused operation and an exhausted heap from other failures.
_VIOLATION_EXIT = 86
_MEMORY_EXIT = 87
_VIOLATION_MARKER = "SANDBOX-VIOLATION: "
# Per stream; beyond it the head and the tail are kept (the tail holds tracebacks and markers).
_OUTPUT_LIMIT = 64 * 1024
_MB = 1024 * 1024
# A program served by the engine (`run_python(serve=...)`) writes each request as one line on
# stdout, after this mark, as JSON; the engine answers with one JSON line on its stdin.
REQUEST_MARK = b"\x1eagentdesign-request "
_REQUEST_LIMIT = 1024 * 1024  # bytes of one request line; longer ones are output, not requests

# The child's bootstrap, run with `python -I -B -X utf8 -c`. argv: `_isolation.confine_args` (work
# dir, limits, confinement), then the fd holding the code, the violation and memory exit codes and
# whether to install the hook. It is a string, not a module, so that the child imports nothing
# beyond what it needs: in particular not our package or `subprocess` before the hook is in place.
# The hook reads only values bound in its closure (no module globals, no builtins lookups, no
# monkey-patchable Python helpers such as `os.path.realpath`) and never calls the program's code
# (short of a custom `__fspath__`), so the program cannot change its rules by patching modules.
_CHILD = (
    "import os\nimport sys\n"
    + CONFINE_SOURCE
    + r"""

def _install_hook(workdir, violation_exit):
    write, exit_, lstat, readlink, getcwd = os.write, os._exit, os.lstat, os.readlink, os.getcwd
    fspath, fs_encoding = os.fspath, sys.getfilesystemencoding()
    flush_stdout = sys.stdout.flush
    str_, bytes_, int_, tuple_, type_, len_, repr_ = str, bytes, int, tuple, type, len, repr
    isinstance_, as_str, decode = isinstance, str.__str__, bytes.decode
    base_exception, os_error = BaseException, OSError
    split, join, startswith = str.split, str.join, str.startswith
    safe_reprs = (str, bytes, int, float, bool, type(None))
    realpath = os.path.realpath
    read_roots = tuple(
        sorted({realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                      sys.base_exec_prefix, "/usr/share/zoneinfo")} - {"/"})
    )
    read_files = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/full")
    write_files = ("/dev/null",)
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    denied = frozenset((
        "_posixsubprocess.fork_exec", "subprocess.Popen", "os.fork", "os.forkpty",
        "os.posix_spawn", "os.spawn", "os.exec", "os.system", "os.kill", "os.killpg",
        "os.link", "os.symlink", "os.pidfd_open",
        "socket.bind", "socket.connect", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
        "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo", "socket.sethostname",
        "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function", "ctypes.cdata",
        "ctypes.string_at", "ctypes.wstring_at", "ctypes.PyObj_FromPtr",
        "resource.setrlimit", "resource.prlimit", "fcntl.ioctl",
        "gc.get_objects", "gc.get_referrers", "gc.get_referents",
        "syslog.openlog", "syslog.syslog",
    ))
    # Modules that reach files or processes in C without audit events.
    denied_imports = frozenset(
        ("_posixsubprocess", "_posixshmem", "_sqlite3", "_dbm", "_gdbm", "readline", "posix")
    )
    # event -> (writes?, ((index of a path, index of its dir_fd or None), ...))
    path_events = {
        "os.listdir": (False, ((0, None),)),
        "os.scandir": (False, ((0, None),)),
        "os.getxattr": (False, ((0, None),)),
        "os.listxattr": (False, ((0, None),)),
        "os.mkdir": (True, ((0, 2),)),
        "os.remove": (True, ((0, 1),)),
        "os.rmdir": (True, ((0, 1),)),
        "os.rename": (True, ((0, 2), (1, 3))),
        "os.chmod": (True, ((0, 2),)),
        "os.chown": (True, ((0, 3),)),
        "os.utime": (True, ((0, 3),)),
        "os.truncate": (True, ((0, None),)),
        "os.setxattr": (True, ((0, None),)),
        "os.removexattr": (True, ((0, None),)),
    }
    hook_ref = []

    def describe(value):
        if type_(value) in safe_reprs:
            text = repr_(value)
        elif type_(value) is tuple_:
            text = "(" + join(", ", [describe(item) for item in value]) + ")"
        else:
            text = "<" + type_(value).__name__ + ">"
        return text if len_(text) <= 200 else text[:200] + "..."

    def refuse(event, args):
        try:
            flush_stdout()
        except base_exception:
            pass
        line = "\n" + "SANDBOX-VIOLATION: " + event + " " + describe(args) + "\n"
        write(2, line.encode("utf-8", "replace"))
        exit_(violation_exit)

    def canonical(path):
        # realpath without Python helpers: lexical after a missing component, as the kernel fails
        # on those anyway; "" (never allowed) for symlink loops or a non-path base.
        if not startswith(path, "/"):
            return ""
        done, pending, hops = [], split(path, "/")[::-1], 0
        while pending:
            part = pending.pop()
            if part == "" or part == ".":
                continue
            if part == "..":
                if done:
                    done.pop()
                continue
            candidate = "/" + join("/", done + [part])
            try:
                mode = lstat(candidate).st_mode
            except os_error:
                done.append(part)
                continue
            if mode & 0o170000 != 0o120000:
                done.append(part)
                continue
            hops += 1
            if hops > 40:
                return ""
            target = readlink(candidate)
            if startswith(target, "/"):
                done = []
            pending.extend(split(target, "/")[::-1])
        return "/" + join("/", done)

    def resolve(path, dir_fd):
        # None for a file descriptor: it was opened under these rules.
        if path is None:
            path = "."
        if type_(path) is int_:
            return None
        if type_(path) is not str_ and type_(path) is not bytes_:
            path = fspath(path)
        # Exact copies: a str subclass could override the methods used below.
        if isinstance_(path, bytes_):
            path = decode(path, fs_encoding, "surrogateescape")
        else:
            path = as_str(path)
        if not startswith(path, "/"):
            if type_(dir_fd) is int_ and dir_fd >= 0:
                base = readlink("/proc/self/fd/" + str_(dir_fd))
            else:
                base = getcwd()
            path = base + "/" + path
        return canonical(path)

    def within(path, roots):
        for root in roots:
            if path == root or startswith(path, root + "/"):
                return True
        return False

    def allowed(path, dir_fd, writes):
        resolved = resolve(path, dir_fd)
        if resolved is None:
            return True
        if within(resolved, (workdir,)):
            try:
                kind = lstat(resolved).st_mode & 0o170000
            except os_error:
                return True
            return kind != 0o020000 and kind != 0o060000  # no device nodes
        if writes:
            return resolved in write_files
        return resolved in read_files or within(resolved, read_roots)

    def hook(event, args):
        try:
            if event == "open":
                path, mode, flags = args
                writes = flags & write_flags != 0 or (
                    type_(mode) is str_
                    and ("w" in mode or "a" in mode or "x" in mode or "+" in mode)
                )
                ok = allowed(path, None, writes)
            elif event in path_events:
                writes, places = path_events[event]
                ok = True
                for path_at, dir_fd_at in places:
                    dir_fd = None if dir_fd_at is None else args[dir_fd_at]
                    ok = ok and allowed(args[path_at], dir_fd, writes)
            elif event == "import":
                # Five arguments: an extension module loaded from a file; only installed ones.
                ok = as_str(args[0]) not in denied_imports and (
                    len_(args) != 5 or args[1] is None or within(resolve(args[1], None), read_roots)
                )
            elif event == "socket.__new__":
                ok = args[1] == 1  # AF_UNIX: socketpair (asyncio); connect and bind stay refused
            elif event == "ctypes.dlopen":
                ok = args[0] is None  # the interpreter itself; its symbols cannot be called anyway
            elif event == "object.__setattr__" or event == "object.__delattr__":
                ok = not hook_ref or args[0] is not hook_ref[0]
            else:
                ok = event not in denied
        except base_exception:
            ok = False
        if not ok:
            refuse(event, args)

    # subprocess.Popen raises an audit event, the C function behind it does not; nor does
    # os.pidfd_open (whose descriptor signals any process). Loaded here and stubbed, `import
    # subprocess` still works (asyncio needs it); a fresh copy of either C module would need an
    # import, which the hook refuses.
    import _posixsubprocess
    import posix

    audit = sys.audit

    def fork_exec(*args):
        audit("_posixsubprocess.fork_exec")
        raise PermissionError("process creation is not allowed in the sandbox")

    def pidfd_open(*args):
        audit("os.pidfd_open", *args)
        raise PermissionError("process handles are not allowed in the sandbox")

    _posixsubprocess.fork_exec = fork_exec
    os.pidfd_open = posix.pidfd_open = pidfd_open
    hook_ref.append(hook)
    sys.addaudithook(hook)


def _run(code_fd, violation_exit, memory_exit, hooks):
    chunks = []
    while chunk := os.read(code_fd, 1 << 16):
        chunks.append(chunk)
    os.close(code_fd)
    source = b"".join(chunks).decode("utf-8", "surrogatepass")
    workdir = os.path.realpath(sys.argv[1])
    """
    + CONFINE_CALL
    + r"""

    import linecache
    import traceback
    import types

    # Tracebacks show the program's lines although no file holds it (mtime None: never rechecked).
    linecache.cache["<sandbox>"] = (len(source), None, source.splitlines(True), "<sandbox>")
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    if hooks:
        _install_hook(workdir, violation_exit)
    try:
        exec(compile(source, "<sandbox>", "exec"), main.__dict__)
    except SystemExit:
        raise
    except MemoryError:
        main.__dict__.clear()
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        os.write(2, b"\nMemoryError: the memory limit was reached\n")
        os._exit(memory_exit)
    except BaseException as error:
        # Without this frame: the program's own lines are what the reader needs. (The default
        # excepthook would show no source lines: it reads files, not linecache.)
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        sys.exit(1)


_run(*map(int, sys.argv[9:13]))
"""
)


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    """Per-run ceilings; the defaults suit unit-test style programs (HumanEval's take < 1 s)."""

    wall_s: float = 10.0
    memory_mb: int = 512
    cpu_s: float = 10.0
    file_mb: int = 16


@dataclass(frozen=True, kw_only=True)
class SandboxResult:
    """What a run printed and how it ended; `kind` is None when it exited 0."""

    ok: bool
    stdout: str
    stderr: str
    exit_code: int | None  # None when the sandbox killed it; negative: the signal that ended it
    kind: str | None  # "timeout" | "memory" | "violation" | "error"
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


class ChannelRefusal(Exception):
    """Raised by a `serve` function for a request it refuses: the program gets the message as
    an error reply, and runs on."""


def run_python(
    code: str,
    *,
    stdin: str = "",
    limits: SandboxLimits = SandboxLimits(),
    audit_hooks: bool = True,
    serve: Callable[[Any], Any] | None = None,
) -> SandboxResult:
    """Runs `code` as a program in a confined child process and reports how it ended.

    Never raises for anything the code does; safe to call from several threads at once. Raises
    SandboxUnavailableError where only the audit hooks would confine it and unsafe mode is off.
    `audit_hooks=False` leaves the operating system's isolation alone in force: the hostile-program
    tests use it to show that this layer holds by itself.

    With `serve`, the program's stdin is the engine's answer channel instead of `stdin`: each
    line it writes after REQUEST_MARK is decoded as JSON and handed to `serve` outside the
    sandbox, whose return value goes back as `{"value": ...}` (a ChannelRefusal as
    `{"error": ...}`). Time spent serving does not count against the wall-time limit. Any other
    exception of `serve` (a failed model call, say) ends the program and is raised here.
    """
    isolation = current_isolation()
    require_isolation(isolation)
    if not audit_hooks and isolation.launcher is None:
        raise ValueError("audit_hooks=False needs operating-system isolation, and there is none")
    workdir = new_workdir(isolation)
    try:
        with tempfile.TemporaryFile() as code_file, tempfile.TemporaryFile() as stdin_file:
            code_file.write(code.encode("utf-8", "surrogatepass"))
            code_file.seek(0)
            stdin_file.write(stdin.encode("utf-8", "replace"))
            stdin_file.seek(0)
            argv = [sys.executable, "-I", "-B", "-X", "utf8", "-c", _CHILD]
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
        shutil.rmtree(workdir, onerror=_force_remove)


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
        channel = _Channel(serve, process.stdin, captures["stdout"])
    timed_out = False
    try:
        with selectors.DefaultSelector() as selector:
            assert process.stdout is not None and process.stderr is not None
            selector.register(process.stdout, selectors.EVENT_READ, channel or captures["stdout"])
            selector.register(process.stderr, selectors.EVENT_READ, captures["stderr"])
            timed_out = not _drain(selector, deadline, channel)
        served_s = channel.served_s if channel is not None else 0.0
        timed_out = timed_out or not _await_exit(process.pid, deadline + served_s)
    finally:
        # The leader is at most a zombie here, so its group id cannot have been reused.
        child.kill()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
    wall_s = time.monotonic() - start - (channel.served_s if channel is not None else 0.0)
    return _result(
        child.returncode,
        captures["stdout"].text(),
        captures["stderr"].text(),
        timed_out=timed_out,
        wall_s=wall_s,
        limits=limits,
        isolation=isolation.level,
    )


def _drain(
    selector: selectors.BaseSelector, deadline: float, channel: _Channel | None = None
) -> bool:
    """Reads both pipes until they close; False if the deadline (moved on by the time spent
    serving the channel's requests) came first."""
    while selector.get_map():
        remaining = deadline + (channel.served_s if channel is not None else 0.0) - time.monotonic()
        if remaining <= 0:
            return False
        for key, _ in selector.select(remaining):
            data = os.read(key.fd, 1 << 16)
            if data:
                key.data.add(data)
            else:
                selector.unregister(key.fileobj)
    return True


class _Channel:
    """A served program's stdout: request lines are answered on its stdin, the rest is output."""

    def __init__(self, serve: Callable[[Any], Any], reply: IO[bytes], output: _Capture) -> None:
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
            self.output.add(bytes(self.pending[:n]))
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


def _await_exit(pid: int, deadline: float) -> bool:
    """Waits for the child to exit without reaping it; False if the deadline came first."""
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def _result(
    returncode: int,
    stdout: str,
    stderr: str,
    *,
    timed_out: bool,
    wall_s: float,
    limits: SandboxLimits,
    isolation: str,
) -> SandboxResult:
    kind, detail = (
        ("timeout", f"wall-time limit of {limits.wall_s:g} s exceeded")
        if timed_out
        else _classify(returncode, stderr, wall_s=wall_s, limits=limits)
    )
    return SandboxResult(
        ok=kind is None,
        stdout=stdout,
        stderr=stderr,
        exit_code=None if timed_out else returncode,
        kind=kind,
        wall_s=wall_s,
        detail=detail,
        isolation=isolation,
    )


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


def _force_remove(function: Any, path: str, _excinfo: Any) -> None:
    """rmtree's error handler: the program may have removed permissions on what it created."""
    with contextlib.suppress(OSError):
        os.chmod(os.path.dirname(path), 0o700)
        os.chmod(path, 0o700)
    with contextlib.suppress(OSError):
        function(path)
