"""Hostile programs against the sandbox: each is stopped or harmless with the operating system's
isolation alone ("os") and with the audit hooks on top ("os+hooks"), the way it ended is
recorded, and the host is unaffected: this process and a victim process alive, no file written
outside, the archive untouched, no connection made, no secret in the output.

The suite needs the OS isolation: with CI=true a machine without it fails, elsewhere it skips.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from string import Template

import pytest

from agentdesign.components import (
    Isolation,
    SandboxLimits,
    SandboxResult,
    current_isolation,
    run_python,
)
from agentdesign.components.sandbox import _isolation, _seccomp

LIMITS = SandboxLimits(wall_s=2.0, cpu_s=1.0, memory_mb=256, folder_mb=16)
LAYERS = {"os+hooks": True, "os": False}
FORKING = ("fork-bomb", "fork-count")  # run without hooks only where the process count is bound


@pytest.fixture(autouse=True)
def os_isolation() -> Isolation:
    """The isolation in force; a failure in CI where bubblewrap is missing, else a skip."""
    isolation = _isolation.current_isolation()
    if os.environ.get("CI") == "true":
        assert isolation.launcher == "bwrap", f"CI needs bubblewrap's sandbox, got {isolation}"
    elif isolation.launcher is None:
        pytest.skip(f"no operating-system isolation here ({isolation.level})")
    return isolation


@dataclass(frozen=True)
class Host:
    """What the hostile programs aim at, and how to tell that nothing happened to it."""

    secret: Path  # a file outside the work folder, holding `token`
    token: str
    env_token: str  # in this process's and the victim's environment
    outside: Path  # an empty folder outside the work folder
    archive: Path  # a SQLite file outside the work folder
    archive_hash: str
    victim: subprocess.Popen[bytes]
    tcp: socket.socket  # listening on 127.0.0.1
    udp: socket.socket  # bound on 127.0.0.1

    @property
    def tcp_port(self) -> int:
        return int(self.tcp.getsockname()[1])

    @property
    def udp_port(self) -> int:
        return int(self.udp.getsockname()[1])

    @property
    def target(self) -> str:
        """A file a program tries to create outside."""
        return str(self.outside / "escaped")

    def fill(self, code: str) -> str:
        """The program with its targets filled in, as Python literals."""
        paths = {"secret": str(self.secret), "target": self.target, "archive": str(self.archive)}
        numbers = {"victim": self.victim.pid, "me": os.getpid()}
        numbers |= {"tcp": self.tcp_port, "udp": self.udp_port}
        targets = {**paths, **numbers, "home": str(Path.home())}
        return Template(code).substitute({name: repr(v) for name, v in targets.items()})

    def assert_unaffected(self, result: SandboxResult) -> None:
        output = result.stdout + result.stderr
        assert self.token not in output and self.env_token not in output
        assert "pyproject.toml" not in output  # nothing of the repository either
        assert self.victim.poll() is None, "the victim process was killed"
        assert list(self.outside.iterdir()) == []
        assert _sha256(self.archive) == self.archive_hash
        with pytest.raises(BlockingIOError):
            self.tcp.accept()
        with pytest.raises(BlockingIOError):
            self.udp.recv(100)
        assert result.isolation == current_isolation().level


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    token, env_token = "file-secret-5b0c9e", "env-secret-9d41aa"
    monkeypatch.setenv("AGENTDESIGN_HOSTILE_SECRET", env_token)
    secret = tmp_path / "secret.txt"
    secret.write_text(token)
    outside = tmp_path / "outside"
    outside.mkdir()
    archive = tmp_path / "archive.db"
    with sqlite3.connect(archive) as db:
        db.execute("create table runs (name text)")
        db.execute("insert into runs values ('r1')")
    db.close()
    victim = subprocess.Popen(["sleep", "60"])  # its environment holds env_token
    # Popen returns once the exec has begun; until the kernel has set up the new program's
    # memory, /proc shows an empty environment (seen on a loaded machine): wait for it.
    environ, deadline = Path(f"/proc/{victim.pid}/environ"), time.monotonic() + 30
    while not environ.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)
    tcp = socket.create_server(("127.0.0.1", 0))
    tcp.setblocking(False)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    try:
        yield Host(
            secret=secret,
            token=token,
            env_token=env_token,
            outside=outside,
            archive=archive,
            archive_hash=_sha256(archive),
            victim=victim,
            tcp=tcp,
            udp=udp,
        )
    finally:
        victim.kill()
        victim.wait()
        tcp.close()
        udp.close()


@dataclass(frozen=True)
class Case:
    """A hostile program and the result kinds it may end with, per layer. The program names its
    targets as $secret, $target (a file to create), $victim, $me (this process), $tcp and $udp
    (ports), $archive and $home."""

    code: str
    with_hooks: tuple[str | None, ...]
    os_only: tuple[str | None, ...]


VIOLATION, ERROR = ("violation",), ("error",)
LIBC = """import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def check(result):
    if result < 0:
        raise OSError(ctypes.get_errno(), 'failed')
    return result
"""
DIR_FD = "import os\nfd = os.open('.', os.O_RDONLY)\nup = '../' * 12\n"
CREATE = "import sys\ncreate = [sys.executable, '-c', 'open(%r, \"w\")' % $target]\n"

CASES: dict[str, Case] = {
    # --- files: every path API, reading the secret and writing outside ---
    "open-read": Case("print(open($secret).read())", VIOLATION, ERROR),
    "open-write": Case("open($target, 'w').write('x')", VIOLATION, ERROR),
    "write-python": Case("import os\nopen(os.__file__, 'a').write('#')", VIOLATION, ERROR),
    "dir-fd-read": Case(
        DIR_FD + "print(os.read(os.open(up + $secret, os.O_RDONLY, dir_fd=fd), 99))",
        VIOLATION,
        ERROR,
    ),
    "dir-fd-write": Case(
        DIR_FD + "os.write(os.open(up + $target, os.O_WRONLY | os.O_CREAT, dir_fd=fd), b'x')",
        VIOLATION,
        ERROR,
    ),
    "openat2": Case(
        LIBC + "how = (ctypes.c_uint64 * 3)(0, 0, 0)  # struct open_how\n"
        "path = ('../' * 12 + $secret).encode()\n"
        "fd = check(libc.syscall(437, os.open('.', os.O_RDONLY), path, ctypes.byref(how), 24))\n"
        "print(os.read(fd, 99))",
        VIOLATION,
        ERROR,
    ),
    "symlink": Case(
        "import os\nos.symlink($secret, 'link')\nprint(open('link').read())", VIOLATION, ERROR
    ),
    "symlink-to-root": Case(
        "import os\nos.symlink('/', 'up')\nprint(open('up' + $secret).read())", VIOLATION, ERROR
    ),
    "proc-self-root": Case("print(open('/proc/self/root' + $secret).read())", VIOLATION, ERROR),
    "proc-parent-cwd": Case(
        "import os\nfor pid in (os.getppid(), $me):\n    print(os.listdir(f'/proc/{pid}/cwd'))",
        VIOLATION,
        ERROR,
    ),
    "proc-parent-environ": Case(
        "import os\nfor pid in (os.getppid(), $victim, $me):\n"
        "    print(open(f'/proc/{pid}/environ').read())",
        VIOLATION,
        ERROR,
    ),
    "list-root-and-home": Case(
        "import os\nfor folder in ('/root', $home):\n    print(*os.listdir(folder), sep='\\n')",
        VIOLATION,
        (None, "error"),  # see test_the_listing_of_root_and_home_...
    ),
    # --- network ---
    "tcp-connect": Case(
        "import socket\nsocket.create_connection(('127.0.0.1', $tcp), timeout=1).sendall(b'hi')",
        VIOLATION,
        ERROR,
    ),
    "udp-send": Case(
        "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
        ".sendto(b'hi', ('127.0.0.1', $udp))",
        VIOLATION,
        (None, "error"),  # sent into the sandbox's own network namespace, or refused
    ),
    # --- processes ---
    "subprocess": Case(
        CREATE + "import subprocess\nsubprocess.run(create, check=True)", VIOLATION, ERROR
    ),
    "fork": Case(
        "import os\nif os.fork() == 0:\n    open($target, 'w')\n    os._exit(0)\n"
        "assert os.wait()[1] == 0, 'the child failed'",
        VIOLATION,
        ERROR,
    ),
    "exec": Case(CREATE + "import os\nos.execv(sys.executable, create)", VIOLATION, ERROR),
    "pidfd": Case(
        "import os, signal\nfor pid in ($victim, $me):\n"
        "    signal.pidfd_send_signal(os.pidfd_open(pid), signal.SIGKILL)",
        VIOLATION,
        ERROR,
    ),
    "kill-parent": Case(
        "import os\nfor pid in ($victim, $me):\n    os.kill(pid, 9)", VIOLATION, ERROR
    ),
    "tgkill-parent": Case(
        LIBC + "for pid in ($victim, $me):\n    check(libc.syscall(234, pid, pid, 9))",
        VIOLATION,
        ERROR,
    ),
    "ptrace": Case(
        LIBC + "for pid in ($victim, $me):\n    check(libc.ptrace(16, pid, 0, 0))  # ATTACH",
        VIOLATION,
        ERROR,
    ),
    "ctypes-libc-write": Case(
        LIBC + "check(libc.open($target.encode(), os.O_WRONLY | os.O_CREAT, 0o644))",
        VIOLATION,
        ERROR,
    ),
    # --- resources ---
    "fork-bomb": Case(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        VIOLATION,
        ("timeout",),
    ),
    "fork-count": Case(
        "import os, time\nn = 0\ntry:\n    while n < 1000:\n        if os.fork() == 0:\n"
        "            time.sleep(30)\n            os._exit(0)\n        n += 1\n"
        "except OSError:\n    pass\nprint(n)",
        VIOLATION,
        (None,),
    ),
    "allocate-20gb": Case("x = bytearray(20 * 10**9)", ("memory",), ("memory",)),
    "endless-loop": Case("while True:\n    pass", ("timeout",), ("timeout",)),
    "fill-the-folder": Case(  # 10 files of 10 MB, each under the file-size limit
        "for n in range(10):\n    open(f'f{n}', 'wb').write(b'x' * 10 * 2**20)",
        ("disk",),
        ("disk",),
    ),
    "deep-folder-tree": Case(  # past Python's recursion limit, its top folder unreadable
        "import os\nos.mkdir('a')\nfor _ in range(1200):\n    os.mkdir('t')\n"
        "    os.rename('a', 't/a')\n    os.rename('t', 'a')\nos.chmod('a', 0)",
        (None,),
        (None,),
    ),
    # --- the package and its archive ---
    "import-agentdesign": Case(
        "from agentdesign.archive import Archive\nArchive($archive).create_run('pwned')",
        ("violation", "error"),  # the hook refuses the repository, or it is not there
        ERROR,
    ),
    "sqlite-archive": Case(
        "import sqlite3\nsqlite3.connect($archive).execute('delete from runs')", VIOLATION, ERROR
    ),
}


def _run_case(name: str, host: Host, *, audit_hooks: bool) -> SandboxResult:
    case = CASES[name]
    result = run_python(host.fill(case.code), limits=LIMITS, audit_hooks=audit_hooks)
    expected = case.with_hooks if audit_hooks else case.os_only
    assert result.kind in expected, result
    assert result.ok == (result.kind is None)
    if result.kind is not None:
        assert result.detail, "the way it was stopped is recorded"
    host.assert_unaffected(result)
    return result


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("name", CASES)
def test_hostile_program_is_contained(
    name: str, layer: str, os_isolation: Isolation, host: Host
) -> None:
    if name in FORKING and not LAYERS[layer] and not os_isolation.nproc:
        pytest.skip(f"no process-count limit here ({os_isolation.level})")
    _run_case(name, host, audit_hooks=LAYERS[layer])


def test_the_listing_of_root_and_home_shows_only_the_python_installations_path(host: Host) -> None:
    result = _run_case("list-root-and-home", host, audit_hooks=False)
    visible = {part for path in _isolation.read_paths() for part in Path(path).parts}
    assert set(result.stdout.split()) <= visible


def test_the_fork_bomb_is_bounded_by_the_process_limit(os_isolation: Isolation, host: Host) -> None:
    if not os_isolation.nproc:
        pytest.skip(f"no process-count limit here ({os_isolation.level})")
    result = _run_case("fork-count", host, audit_hooks=False)
    assert 0 < int(result.stdout) < os_isolation.nproc


def test_the_secret_environment_is_visible_to_the_host_only(host: Host) -> None:
    # The probe is meaningful: the secret is in the victim's environment as the host sees it...
    assert Path(f"/proc/{host.victim.pid}/environ").read_text().count(host.env_token) == 1
    # ...and a program that prints its whole environment does not show it.
    result = run_python("import os\nprint(os.environ)", limits=LIMITS, audit_hooks=False)
    assert result.ok
    host.assert_unaffected(result)


# Cases that hold in the unshare fallback too (files through Landlock): it is forced here.
UNSHARE_CASES = [
    "open-read",
    "open-write",
    "dir-fd-read",
    "dir-fd-write",
    "symlink-to-root",
    "proc-self-root",
    "proc-parent-environ",
    "tcp-connect",
    "pidfd",
    "kill-parent",
    "ptrace",
    "sqlite-archive",
    "allocate-20gb",
]


@pytest.fixture
def unshare(monkeypatch: pytest.MonkeyPatch) -> Isolation:
    isolation = Isolation("unshare", os.geteuid() == 0, _isolation._landlock_abi())
    if not (isolation.landlock and shutil.which("unshare") and _isolation._works(isolation)):
        pytest.skip("unshare with Landlock does not work here")
    monkeypatch.setattr(_isolation, "_probe", lambda: isolation)
    return isolation


@pytest.mark.parametrize("name", UNSHARE_CASES)
def test_the_unshare_fallback_contains_it_too(name: str, unshare: Isolation, host: Host) -> None:
    result = _run_case(name, host, audit_hooks=False)
    assert result.isolation.startswith("unshare: ")


def test_bubblewrap_isolates_where_installed(os_isolation: Isolation) -> None:
    if shutil.which("bwrap"):
        assert os_isolation.launcher == "bwrap", "bwrap is installed but its sandbox failed"


# Each system call with arguments that would be harmless should the filter not hold (a clone's
# child exits at once), then threads and a fork, which must still work.
SYSCALLS = """import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(number, *args):
    ctypes.set_errno(0)
    result = libc.syscall(number, *args)
    if result == 0:
        os._exit(0)  # a clone's child
    if result > 0 and number == $clone:
        os.waitpid(result, 0)
    return os.strerror(ctypes.get_errno()) if result < 0 else 'allowed'
for name, number in $refused:
    print(name, errno_of(number, -1, 0, 0, 0, 0, 0), sep=': ')
print('clone-newuser', errno_of($clone, 0x10000000 | 17, 0, 0, 0, 0), sep=': ')
print('clone3', errno_of(435, 0, 0), sep=': ')
thread = threading.Thread(target=print, args=('thread: ran',))
thread.start()
thread.join()
if os.fork() == 0:
    os._exit(3)
print('fork:', os.waitstatus_to_exitcode(os.wait()[1]))
"""


def test_the_seccomp_filter_refuses_what_a_program_has_no_use_for(
    os_isolation: Isolation, host: Host
) -> None:
    if os.environ.get("CI") == "true":
        assert os_isolation.seccomp, f"CI needs the seccomp filter, got {os_isolation}"
    elif not os_isolation.seccomp:
        pytest.skip(f"no seccomp filter here ({os_isolation.level})")
    abi = _seccomp._ABIS[platform.machine()]
    code = Template(SYSCALLS).substitute(refused=sorted(abi.refused.items()), clone=abi.clone)
    result = run_python(code, limits=LIMITS, audit_hooks=False)  # the OS layer alone
    assert result.ok, result.stderr
    lines = dict(line.split(": ") for line in result.stdout.splitlines())
    assert lines == {
        **{name: "Operation not permitted" for name in [*abi.refused, "clone-newuser"]},
        "clone3": "Function not implemented",  # the C library falls back to clone on it
        "thread": "ran",
        "fork": "3",
    }
    host.assert_unaffected(result)
