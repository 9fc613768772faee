"""Operating-system isolation for the sandbox's child process, so that model-written code stays
contained even if it gets past the sandbox's audit hooks.

Probed once per process, best first:

- bwrap (bubblewrap): the child gets its own user, PID, network, IPC, UTS and mount namespaces. Its
  root is a read-only tmpfs holding only its work folder (writable), a read-only Python
  installation, the system libraries Python loads, a fresh /proc of its PID namespace and a
  read-only /dev. It runs as uid 65534 with no capabilities and no new privileges. As root, bwrap
  would map that uid to host uid 0, which the kernel exempts from RLIMIT_NPROC and which owns every
  root file; so bwrap leaves the id maps to us (--userns-block-fd): 65534 maps to the host's 65534
  (and 0 to 0 for bwrap's own setup), and the child's first act is to switch to 65534 for good.
- unshare (util-linux): the same namespaces but the mount one only for /proc; the files outside
  the work folder are closed by Landlock where the kernel has it, else only by the audit hooks.
- none: audit hooks and rlimits only. The sandbox refuses to run code then, unless
  AGENTDESIGN_UNSAFE_SANDBOX=1 (the CLI's --unsafe-sandbox) says to go ahead.

Rlimits bound CPU time, address space and file size everywhere, and the process count wherever the
child has a user namespace of its own and is not host root (RLIMIT_NPROC counts per namespace).
Under bwrap (0.7 or later: `--size`) the work folder is a tmpfs of the namespace's own, of a
fixed size, and what the program writes never reaches the host's disk; elsewhere the folder is on
the host, and the sandbox watches its size (`_sandbox.py`). A seccomp filter (`_seccomp.py`),
where the kernel takes it, refuses the system calls a program has no use for.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentdesign.components._errors import SandboxUnavailableError
from agentdesign.components.sandbox._seccomp import SECCOMP_SOURCE, seccomp_program
from agentdesign.components.sandbox._workfolder import WorkFolder

__all__ = [
    "CONFINE_ARGS",
    "CONFINE_CALL",
    "CONFINE_SOURCE",
    "UNSAFE_ENV",
    "Child",
    "Isolation",
    "confine_args",
    "current_isolation",
    "new_work_folder",
    "require_isolation",
    "spawn_confined",
]

UNSAFE_ENV = "AGENTDESIGN_UNSAFE_SANDBOX"
_NOBODY = 65534
_NPROC = 64  # processes and threads; thread stacks reach the memory limit about as soon
# What Python loads besides its own installation: shared libraries and time zones.
_SYSTEM_PATHS = (
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib32",
    "/usr/local/lib",
    "/lib",
    "/lib64",
    "/lib32",
    "/usr/share/zoneinfo",
    "/etc/ld.so.cache",
)
_PROBE_S = 20.0
_REAP_S = 5.0  # the most a namespace's teardown is awaited

# Source run in the child before the program (see _sandbox_child.CHILD_PROGRAM): it switches
# user, sets the rlimits and applies Landlock. The launchers start it as pid 1 of its PID
# namespace, and pid 1 ignores the signals it has no handler for (SIGXCPU, say); so it forks, the
# program runs as its child, and pid 1 only reaps and then reports the program's end. When pid 1
# ends, the kernel ends every other process in the namespace, and the launcher, its parent, reaps
# it: nothing is orphaned for the host's init to reap (which, in a container, may never happen).
CONFINE_SOURCE = SECCOMP_SOURCE + r"""
def _limit(resource, which, soft, hard):
    current_hard = resource.getrlimit(which)[1]
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(which, (soft, hard))


def _reap_as_init():
    child = os.fork()
    if child == 0:
        return
    while True:
        pid, status = os.wait()
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            os._exit(128 - code if code < 0 else code)


def _landlock(abi, workdir, read_paths):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def check(result, what):
        if result < 0:
            raise OSError(ctypes.get_errno(), "landlock: " + what)
        return result

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    fs = (1 << {1: 13, 2: 14, 3: 15, 4: 15}.get(abi, 16)) - 1
    file_rights = 1 | 2 | 4 | (1 << 14 if abi >= 3 else 0) | (1 << 15 if abi >= 5 else 0)
    # filesystem (every right this ABI knows), TCP bind and connect (v4), signals and abstract
    # unix sockets beyond this process tree (v6): all denied unless a rule below allows it
    attr = (ctypes.c_uint64 * 3)(fs, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)
    ruleset = check(libc.syscall(444, attr, 8 if abi < 4 else 16 if abi < 6 else 24, 0), "ruleset")
    rules = [(workdir, fs & ~(1 << 6 | 1 << 11)), ("/dev/null", 2 | 4)]  # no device nodes made
    rules += [(path, 1 | 4 | 8) for path in read_paths]  # execute, read files, list directories
    for path, rights in rules:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        if not os.path.isdir(path):
            rights &= file_rights
        rule = PathBeneath(rights & fs, fd)
        check(libc.syscall(445, ruleset, 1, ctypes.byref(rule), 0), "rule for " + path)
        os.close(fd)
    check(libc.prctl(38, 1, 0, 0, 0), "no new privileges")  # PR_SET_NO_NEW_PRIVS
    check(libc.syscall(446, ruleset, 0), "restrict")
    os.close(ruleset)


def _confine(workdir, memory, cpu, fsize, nproc, uid, landlock, read_paths, seccomp):
    import resource
    import signal

    os.closerange(3, 1 << 20)  # nothing the launcher left open reaches the program
    if uid >= 0:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    if os.getpid() == 1:
        _reap_as_init()
    os.chdir(workdir)
    os.environ.pop("PWD", None)  # bwrap's, which can be "/" as it could not enter the folder
    _limit(resource, resource.RLIMIT_AS, memory, memory)
    _limit(resource, resource.RLIMIT_CPU, cpu, cpu + 1)
    _limit(resource, resource.RLIMIT_FSIZE, fsize, fsize)
    _limit(resource, resource.RLIMIT_CORE, 0, 0)
    if nproc:
        _limit(resource, resource.RLIMIT_NPROC, nproc, nproc)
    # Past the file-size limit a write raises OSError instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if landlock:
        _landlock(landlock, workdir, [p for p in read_paths.split(os.pathsep) if p])
    if seccomp:
        _seccomp(bytes.fromhex(seccomp))
"""
# How the child calls it, with `confine_args` as its first arguments.
CONFINE_CALL = "_confine(sys.argv[1], *map(int, sys.argv[2:8]), *sys.argv[8:10])"
# The number of arguments `confine_args` gives.
CONFINE_ARGS = 9


@dataclass(frozen=True)
class Isolation:
    """How the child is isolated; `level` says it in one line, for results and `doctor`."""

    launcher: str | None  # "bwrap", "unshare" or None (audit hooks and rlimits only)
    as_root: bool
    landlock: int = 0  # the Landlock ABI the child applies (0: none)
    seccomp: bool = False  # whether the child installs the seccomp filter
    tmpfs: bool = False  # whether its work folder is a tmpfs of its own (bwrap), else the host's

    @property
    def nproc(self) -> int:
        """RLIMIT_NPROC for the child, 0 where it would count host processes or not apply."""
        own_user = self.launcher == "bwrap" or (self.launcher == "unshare" and not self.as_root)
        return _NPROC if own_user else 0

    @property
    def level(self) -> str:
        limits = "cpu, memory, file-size" + (", process-count" if self.nproc else "")
        folder = "tmpfs work folder" if self.tmpfs else "watched work folder"
        seccomp = ", seccomp" if self.seccomp else ""
        extras = f"rlimits ({limits}), {folder} size{seccomp}, audit hooks"
        landlock = f"landlock v{self.landlock} files+tcp" if self.landlock else ""
        if self.launcher == "bwrap":
            return (
                "bwrap: user+pid+net+ipc+uts+mount namespaces, read-only Python, "
                f"uid {_NOBODY}, no capabilities, {extras}"
            )
        if self.launcher == "unshare":
            files = landlock or "files guarded by audit hooks only"
            return f"unshare: user+pid+net+ipc+uts namespaces, {files}, {extras}"
        return "hooks only: " + ", ".join(filter(None, (landlock, extras))) + " (no namespaces)"


@functools.cache
def read_paths() -> tuple[str, ...]:
    """What the child may read besides its work folder: the Python installation (each prefix as
    written and resolved, so that `sys.executable` resolves inside too) and the system paths."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    prefixes |= {os.path.realpath(p) for p in prefixes}
    executable = os.path.realpath(sys.executable)
    if not any(executable.startswith(p.rstrip("/") + "/") for p in prefixes):
        prefixes.add(os.path.dirname(executable))
    system = {p for p in _SYSTEM_PATHS if os.path.exists(p)}
    return tuple(sorted((prefixes - {"/"}) | system))


def current_isolation() -> Isolation:
    """The isolation this process gives its sandboxed children (probed once)."""
    return _probe()


def require_isolation(isolation: Isolation) -> None:
    """Refuses code when only hooks would hold it, unless unsafe mode is on (then warns once)."""
    if isolation.launcher is not None:
        return
    if os.environ.get(UNSAFE_ENV) != "1":
        raise SandboxUnavailableError(
            "no operating-system sandbox for model-written code here (neither bubblewrap nor "
            "unshare works); install bubblewrap, or pass --unsafe-sandbox "
            f"({UNSAFE_ENV}=1) to run it under audit hooks only"
        )
    _warn_unsafe(isolation.level)


@functools.cache
def _warn_unsafe(level: str) -> None:
    print(f"warning: model-written code runs unconfined by the OS ({level})", file=sys.stderr)


@functools.cache
def _probe() -> Isolation:
    as_root = os.geteuid() == 0
    landlock = _landlock_abi()
    # Under bwrap the files outside are not there at all; Landlock is unshare's file boundary.
    # Each with the seccomp filter where the kernel takes it (and this machine has one), else
    # without; bwrap with a tmpfs work folder where it can size one, else with the host's.
    filters = (True, False) if seccomp_program() is not None else (False,)
    for launcher, abi, folders in (
        ("bwrap", 0, (True, False)),
        ("unshare", landlock, (False,)),
        (None, landlock, (False,)),
    ):
        if launcher is None or shutil.which(launcher):
            for tmpfs in folders:
                for seccomp in filters:
                    candidate = Isolation(launcher, as_root, abi, seccomp, tmpfs)
                    if _works(candidate):
                        return candidate
    return Isolation(None, as_root, landlock)


def _landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where it has none (or not on Linux)."""
    if sys.platform != "linux":
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        version = int(libc.syscall(444, None, 0, 1))  # LANDLOCK_CREATE_RULESET_VERSION
    except (OSError, AttributeError):
        return 0
    return max(version, 0)


def _works(isolation: Isolation) -> bool:
    """Whether a child confined this way starts and runs Python (namespaces may be forbidden,
    seccomp missing from the kernel)."""
    folder = new_work_folder(isolation)
    workdir = folder.path
    code = f"import os, sys\n{CONFINE_SOURCE}\n{CONFINE_CALL}\nprint('ok')"
    argv = [sys.executable, "-I", "-c", code]
    argv += confine_args(isolation, workdir, memory=256 << 20, cpu_s=5, file_size=1 << 20)
    try:
        child = spawn_confined(
            isolation,
            argv,
            workdir=workdir,
            folder_size=1 << 20,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", "HOME": workdir},
            pass_fds=(),
            deadline=time.monotonic() + _PROBE_S,
        )
        try:
            out, _ = child.process.communicate(timeout=_PROBE_S)
        finally:
            child.kill()
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        folder.remove()
    return child.process.returncode == 0 and out == b"ok\n"


def confine_args(
    isolation: Isolation, workdir: str, *, memory: int, cpu_s: int, file_size: int
) -> list[str]:
    """The CONFINE_ARGS arguments of the child's `_confine`: work folder, rlimits (bytes,
    seconds), process count, uid to switch to (-1: none), Landlock ABI, the readable paths and
    the seccomp filter in hex ("": none)."""
    uid = _NOBODY if isolation.launcher == "bwrap" and isolation.as_root else -1
    numbers = (memory, cpu_s, file_size, isolation.nproc, uid, isolation.landlock)
    program = seccomp_program() if isolation.seccomp else None
    seccomp = program.hex() if program is not None else ""
    return [workdir, *map(str, numbers), os.pathsep.join(read_paths()), seccomp]


def new_work_folder(isolation: Isolation) -> WorkFolder:
    """A fresh private work folder that the child's user can write."""
    as_nobody = isolation.launcher == "bwrap" and isolation.as_root
    return WorkFolder(owner=_NOBODY if as_nobody else None)


class Child:
    """A started child: its launcher's process, and the pid namespace's init once known."""

    def __init__(self, isolation: Isolation, process: subprocess.Popen[bytes], init: int | None):
        self.isolation = isolation
        self.process = process
        self._init_fd = _pidfd(init)

    def kill(self) -> None:
        """Kills the child and all it started, and returns once they are gone.

        The namespace's init goes first, so that the launcher is still there to reap it."""
        if self._init_fd is None and self.isolation.launcher == "unshare":
            self._init_fd = _pidfd(_first_child(self.process.pid))
        if self._init_fd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._init_fd, signal.SIGKILL)
            select.select([self._init_fd], [], [], _REAP_S)  # readable once it has exited
            os.close(self._init_fd)
            self._init_fd = None
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(_REAP_S)  # the launcher reaps it, then ends
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    @property
    def returncode(self) -> int:
        """How the program ended, as Popen reports a direct child: negative for a signal.

        Our pid-1 reaper reports a death by signal n as exit code 128 + n, as shells do.
        """
        code = self.process.wait()
        if self.isolation.launcher is not None and 128 < code < 128 + 65:
            return 128 - code
        return code


def spawn_confined(
    isolation: Isolation,
    argv: Sequence[str],
    *,
    workdir: str,
    folder_size: int,
    stdin: int,
    stdout: int,
    stderr: int,
    env: Mapping[str, str],
    pass_fds: tuple[int, ...],
    deadline: float,
) -> Child:
    """Starts `argv` (a Python command) in a new session under `isolation`; a tmpfs work folder
    holds `folder_size` bytes at most."""

    def popen(prefix: list[str], fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [*prefix, *argv],
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=workdir,
            env=env,
            pass_fds=pass_fds + fds,
            start_new_session=True,
        )

    if isolation.launcher != "bwrap":
        return Child(isolation, popen(_UNSHARE if isolation.launcher else [], ()), None)
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    args = ["--info-fd", str(info_w)]
    if isolation.as_root:
        args += ["--userns-block-fd", str(block_r)]
        # bwrap keeps the capabilities to switch users only for the child's first act.
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--uid", str(_NOBODY), "--gid", str(_NOBODY)]
    try:
        try:
            size = folder_size if isolation.tmpfs else None
            process = popen([*_bwrap_args(workdir, size), *args], (info_w, block_r))
        finally:
            os.close(info_w)
            os.close(block_r)
        init = _read_info(info_r, deadline)
        if isolation.as_root:
            _map_ids(init)
    finally:
        os.close(info_r)
        os.close(block_w)  # bwrap goes on: with the maps, or fails setting up without them
    return Child(isolation, process, init)


_UNSHARE = [
    "unshare",
    "--user",
    f"--map-user={_NOBODY}",
    f"--map-group={_NOBODY}",
    "--net",
    "--pid",
    "--ipc",
    "--uts",
    "--fork",
    "--kill-child",
    "--mount-proc",
]


def _bwrap_args(workdir: str, folder_size: int | None) -> list[str]:
    """bwrap's options; the work folder is a tmpfs of `folder_size` bytes, or (None) the host's
    folder bound in."""
    args = ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--as-pid-1"]
    args += ["--cap-drop", "ALL"]
    binds = [("--ro-bind", p) for p in read_paths() if not os.path.islink(p)]
    if folder_size is None:
        binds.append(("--bind", workdir))
    # bwrap creates the mount points' parents; mode 0755 so that uid 65534 can pass through them
    parents = {os.path.dirname(path) for _, path in [*binds, ("", workdir)]}
    for parent in list(parents):
        while parent not in ("/", ""):
            parents.add(parent)
            parent = os.path.dirname(parent)
    for parent in sorted(parents - {"/"}):
        args += ["--perms", "0755", "--dir", parent]
    for path in read_paths():
        if os.path.islink(path):  # /lib -> usr/lib on merged-/usr systems
            args += ["--symlink", os.readlink(path), path]
    for option, path in sorted(binds, key=lambda bind: bind[1]):
        args += [option, path, path]
    if folder_size is not None:
        # A tmpfs of this namespace at the host folder's path, gone with it. 0777: as root, bwrap
        # makes it as uid 0, and the child runs as 65534 (no one else sees it).
        args += ["--size", str(folder_size), "--perms", "0777", "--tmpfs", workdir]
    args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev", "--remount-ro", "/"]
    return args


def _read_info(fd: int, deadline: float) -> int | None:
    """The pid of bwrap's namespaced child from its --info-fd JSON; None if bwrap failed first."""
    data = b""
    while select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    with contextlib.suppress(ValueError):
        pid = json.loads(data).get("child-pid")
        return pid if isinstance(pid, int) else None
    return None


def _map_ids(pid: int | None) -> None:
    """Maps uid and gid 65534 to the host's 65534, and 0 to 0 for bwrap's setup as root."""
    if pid is None:
        return
    mapping = f"0 0 1\n{_NOBODY} {_NOBODY} 1\n"
    with contextlib.suppress(OSError):  # bwrap died: its own error is what the result shows
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w", encoding="ascii") as handle:
                handle.write(mapping)


def _pidfd(pid: int | None) -> int | None:
    if pid is None:
        return None
    with contextlib.suppress(OSError):  # gone already, or a kernel before 5.3
        return os.pidfd_open(pid)
    return None


def _first_child(pid: int) -> int | None:
    """The first child of a running process: unshare's, the pid namespace's init."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{pid}/children") as handle:
        return next(map(int, handle.read().split()), None)
    return None
