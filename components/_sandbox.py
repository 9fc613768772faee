"""Runs model-written Python in a separate, confined process.

HumanEval solutions, program-of-thought answers and a Python tool all execute code a model wrote.
Each run gets a fresh `python -I` process in a new session with a minimal environment, a temporary
working directory (removed afterwards), resource limits (address space, CPU time, file size) and
a wall-time limit that kills the whole process group.

Inside the child an audit hook (PEP 578), installed before the untrusted code is compiled, ends
the process with a `SANDBOX-VIOLATION:` line on stderr on: any network use, any process creation,
writing outside the working directory, and reading outside it and the Python installation (so
`/etc`, home directories, the repository and the archive are unreadable). As root on Linux the
child also moves into an empty network namespace, as defence in depth.

Limits of the approach: audit hooks are not a security boundary against code written to escape
them (PEP 578 says so): C-level file access that raises no audit event (e.g. a re-created `posix`
module's `mknod` raced against a rename) stays possible. This guards against the mistakes and
stray side effects of model-written code, not against a determined attacker; run untrusted
workloads from the internet in a container or VM as well.
"""

from __future__ import annotations

import contextlib
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["SandboxLimits", "SandboxResult", "run_python"]

# Exit codes the child uses to tell a refused operation and an exhausted heap from other failures.
_VIOLATION_EXIT = 86
_MEMORY_EXIT = 87
_VIOLATION_MARKER = "SANDBOX-VIOLATION: "
# Per stream; beyond it the head and the tail are kept (the tail holds tracebacks and markers).
_OUTPUT_LIMIT = 64 * 1024
_MB = 1024 * 1024

# The child's bootstrap, run with `python -I -B -X utf8 -c`. argv: work dir, fd holding the code,
# address-space, CPU-second and file-size limits, violation and memory exit codes. It is a string,
# not a module, so that the child imports nothing beyond what it needs: in particular not our
# package or `subprocess` before the hook is in place.
# The hook reads only values bound in its closure (no module globals, no builtins lookups, no
# monkey-patchable Python helpers such as `os.path.realpath`) and never calls the program's code
# (short of a custom `__fspath__`), so the program cannot change its rules by patching modules.
_CHILD = r"""
import os
import sys


def _limit(resource, which, soft, hard):
    current_hard = resource.getrlimit(which)[1]
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(which, (soft, hard))


def _confine(memory, cpu, fsize):
    import resource
    import signal

    if sys.platform == "linux" and os.geteuid() == 0:
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).unshare(0x40000000)  # CLONE_NEWNET
        except (ImportError, OSError, AttributeError):
            pass
    _limit(resource, resource.RLIMIT_AS, memory, memory)
    _limit(resource, resource.RLIMIT_CPU, cpu, cpu + 1)
    _limit(resource, resource.RLIMIT_FSIZE, fsize, fsize)
    _limit(resource, resource.RLIMIT_CORE, 0, 0)
    # Past the file-size limit a write raises OSError instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


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
        "os.link", "os.symlink",
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
        ("_posixsubprocess", "_posixshmem", "_sqlite3", "_dbm", "_gdbm", "readline")
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

    # subprocess.Popen raises an audit event, the C function behind it does not. Loaded here and
    # stubbed, `import subprocess` still works (asyncio needs it); a fresh copy of the C module
    # would need an import, which the hook refuses.
    import _posixsubprocess

    audit = sys.audit

    def fork_exec(*args):
        audit("_posixsubprocess.fork_exec")
        raise PermissionError("process creation is not allowed in the sandbox")

    _posixsubprocess.fork_exec = fork_exec
    hook_ref.append(hook)
    sys.addaudithook(hook)


def _run(code_fd, violation_exit, memory_exit):
    chunks = []
    while chunk := os.read(code_fd, 1 << 16):
        chunks.append(chunk)
    os.close(code_fd)
    source = b"".join(chunks).decode("utf-8", "surrogatepass")
    workdir = os.path.realpath(sys.argv[1])
    _confine(int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))

    import linecache
    import traceback
    import types

    # Tracebacks show the program's lines although no file holds it (mtime None: never rechecked).
    linecache.cache["<sandbox>"] = (len(source), None, source.splitlines(True), "<sandbox>")
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
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


_run(int(sys.argv[2]), int(sys.argv[6]), int(sys.argv[7]))
"""


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


def run_python(
    code: str, *, stdin: str = "", limits: SandboxLimits = SandboxLimits()
) -> SandboxResult:
    """Runs `code` as a program in a confined child process and reports how it ended.

    Never raises for anything the code does; safe to call from several threads at once.
    """
    workdir = tempfile.mkdtemp(prefix="agentdesign-sandbox-")
    try:
        with tempfile.TemporaryFile() as code_file, tempfile.TemporaryFile() as stdin_file:
            code_file.write(code.encode("utf-8", "surrogatepass"))
            code_file.seek(0)
            stdin_file.write(stdin.encode("utf-8", "replace"))
            stdin_file.seek(0)
            argv = [
                sys.executable,
                "-I",
                "-B",
                "-X",
                "utf8",
                "-c",
                _CHILD,
                workdir,
                str(code_file.fileno()),
                str(limits.memory_mb * _MB),
                str(max(1, math.ceil(limits.cpu_s))),
                str(limits.file_mb * _MB),
                str(_VIOLATION_EXIT),
                str(_MEMORY_EXIT),
            ]
            return _supervise(argv, workdir, stdin_file.fileno(), code_file.fileno(), limits)
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
    argv: list[str], workdir: str, stdin_fd: int, code_fd: int, limits: SandboxLimits
) -> SandboxResult:
    start = time.monotonic()
    deadline = start + limits.wall_s
    process = subprocess.Popen(
        argv,
        stdin=stdin_fd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workdir,
        env=_child_env(workdir),
        pass_fds=(code_fd,),
        start_new_session=True,
    )
    captures = {"stdout": _Capture(_OUTPUT_LIMIT), "stderr": _Capture(_OUTPUT_LIMIT)}
    timed_out = False
    try:
        with selectors.DefaultSelector() as selector:
            assert process.stdout is not None and process.stderr is not None
            selector.register(process.stdout, selectors.EVENT_READ, captures["stdout"])
            selector.register(process.stderr, selectors.EVENT_READ, captures["stderr"])
            timed_out = not _drain(selector, deadline)
        timed_out = timed_out or not _await_exit(process.pid, deadline)
    finally:
        # The leader is at most a zombie here, so its group id cannot have been reused.
        _kill_group(process.pid)
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
        if process.stderr is not None:
            process.stderr.close()
    wall_s = time.monotonic() - start
    return _result(
        process.returncode,
        captures["stdout"].text(),
        captures["stderr"].text(),
        timed_out=timed_out,
        wall_s=wall_s,
        limits=limits,
    )


def _drain(selector: selectors.BaseSelector, deadline: float) -> bool:
    """Reads both pipes until they close; False if the deadline came first."""
    while selector.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        for key, _ in selector.select(remaining):
            data = os.read(key.fd, 1 << 16)
            if data:
                key.data.add(data)
            else:
                selector.unregister(key.fileobj)
    return True


def _await_exit(pid: int, deadline: float) -> bool:
    """Waits for the child to exit without reaping it; False if the deadline came first."""
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _result(
    returncode: int,
    stdout: str,
    stderr: str,
    *,
    timed_out: bool,
    wall_s: float,
    limits: SandboxLimits,
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
