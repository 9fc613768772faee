"""The sandbox: results, limits, and that model code reaches no network, process or file."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentdesign.components import (
    UNSAFE_ENV,
    Isolation,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailableError,
    run_python,
)
from agentdesign.components.sandbox import _isolation
from agentdesign.components.sandbox._sandbox import _classify

FAST = SandboxLimits(wall_s=3.0, cpu_s=3.0, memory_mb=256)
REPO = Path(__file__).resolve().parents[1]


def run(code: str, *, stdin: str = "", limits: SandboxLimits = FAST) -> SandboxResult:
    return run_python(code, stdin=stdin, limits=limits)


# Prints the program's pid and PID namespace, for `assert_gone`.
WHOAMI = "import os\nprint(os.getpid(), os.readlink('/proc/self/ns/pid'), flush=True)\n"


def assert_gone(printed: str) -> None:
    """Nothing of the run is left: no process in its own PID namespace, or its pid in ours."""
    pid, namespace = printed.split()
    if namespace == os.readlink("/proc/self/ns/pid"):
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)
        return
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            assert os.readlink(entry / "ns" / "pid") != namespace, f"process {entry.name} is left"


# --- results ------------------------------------------------------------------------------------


def test_a_normal_program_prints() -> None:
    result = run("import sys\nprint('hello', sys.stdin.read().upper())", stdin="world")
    assert result.ok
    assert (result.stdout, result.stderr) == ("hello WORLD\n", "")
    assert (result.exit_code, result.kind, result.detail) == (0, None, "")
    assert 0 < result.wall_s < FAST.wall_s


def test_an_exception_is_an_error_with_the_programs_traceback() -> None:
    result = run("def f():\n    return 1 / 0\nf()")
    assert not result.ok
    assert (result.kind, result.exit_code) == ("error", 1)
    assert result.detail == "ZeroDivisionError: division by zero"
    # Lines of the program itself, and no frame of the sandbox's bootstrap.
    assert 'File "<sandbox>", line 2, in f' in result.stderr
    assert "return 1 / 0" in result.stderr
    assert result.stderr.count('File "') == 2


def test_a_nonzero_exit_is_an_error() -> None:
    result = run("import sys\nsys.exit(3)")
    assert (result.ok, result.kind, result.exit_code, result.detail) == (
        False,
        "error",
        3,
        "exit code 3",
    )


def test_a_syntax_error_is_an_error() -> None:
    result = run("def f(:\n")
    assert result.kind == "error"
    assert "SyntaxError" in result.detail


def test_output_is_bounded_keeping_head_and_tail() -> None:
    result = run("print('start')\nprint('x' * 5_000_000)\nprint('end')")
    assert result.ok
    assert len(result.stdout) < 70_000
    assert result.stdout.startswith("start\n")
    assert result.stdout.endswith("x\nend\n")
    assert "bytes omitted" in result.stdout


def test_runs_in_parallel_threads() -> None:
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda n: run(f"print({n} * 2)"), range(4)))
    assert [r.stdout for r in results] == ["0\n", "2\n", "4\n", "6\n"]


# --- limits -------------------------------------------------------------------------------------


def test_an_infinite_loop_times_out_and_leaves_no_process() -> None:
    limits = SandboxLimits(wall_s=1.0, cpu_s=5.0)
    start = time.monotonic()
    result = run(f"{WHOAMI}while True:\n    pass", limits=limits)
    assert time.monotonic() - start < limits.wall_s + 1.0
    assert (result.ok, result.kind, result.exit_code) == (False, "timeout", None)
    assert "wall-time" in result.detail
    assert_gone(result.stdout)


def test_a_program_that_closes_its_output_still_times_out() -> None:
    code = "import os\nos.close(1)\nos.close(2)\nwhile True:\n    pass"
    result = run(code, limits=SandboxLimits(wall_s=1.0))
    assert result.kind == "timeout"


def test_the_cpu_limit_ends_a_busy_program() -> None:
    result = run("while True:\n    pass", limits=SandboxLimits(wall_s=5.0, cpu_s=1.0))
    assert result.kind == "timeout", result
    assert "CPU-time" in result.detail


def test_a_cpu_limit_signal_is_a_timeout_however_short_the_wall_time_looked() -> None:
    limits = SandboxLimits(wall_s=5.0, cpu_s=1.0)
    xcpu = _classify(-signal.SIGXCPU, "", wall_s=0.2, limits=limits)
    assert xcpu == ("timeout", "CPU-time limit of 1 s exceeded")
    # SIGKILL: past the hard CPU limit only if the run was long enough, else the OOM killer
    assert _classify(-signal.SIGKILL, "", wall_s=1.5, limits=limits)[0] == "timeout"
    assert _classify(-signal.SIGKILL, "", wall_s=0.2, limits=limits)[0] == "memory"


@pytest.mark.parametrize(
    "code",
    [
        "b' ' * 10**10",
        "chunks = []\nwhile True:\n    chunks.append(' ' * 10**6)",
    ],
    ids=["one-huge-allocation", "list-growth"],
)
def test_exhausting_memory_is_a_memory_failure(code: str) -> None:
    result = run(code)
    assert (result.ok, result.kind) == (False, "memory")
    assert "256 MB" in result.detail


def test_the_file_size_limit_fails_the_write() -> None:
    result = run("open('big', 'wb').write(b'x' * 3 * 2**20)", limits=SandboxLimits(file_mb=1))
    assert result.kind == "error"
    assert "File too large" in result.detail


# --- confinement --------------------------------------------------------------------------------

# Each probe stays harmless should the sandbox fail: forked children exit at once, signals are
# 0, files touched are missing or opened without writing.
FORK_STORM = "import os\nfor _ in range(20):\n    if os.fork() == 0:\n        os._exit(0)"
VIOLATIONS = {
    "fork-storm": (FORK_STORM, "os.fork"),
    "subprocess": ("import subprocess\nsubprocess.run(['true'])", "subprocess.Popen"),
    "os-system": ("import os\nos.system('true')", "os.system"),
    "os-exec": ("import os\nos.execv('/bin/true', ['true'])", "os.exec"),
    "posix-spawn": ("import os\nos.posix_spawn('/bin/true', ['true'], {})", "os.posix_spawn"),
    "multiprocessing": (
        "import multiprocessing\nmultiprocessing.Process(target=print).start()",
        "os.fork",
    ),
    "raw-fork-exec": (
        "import _posixsubprocess\n_posixsubprocess.fork_exec()",
        "_posixsubprocess.fork_exec",
    ),
    "fresh-posixsubprocess": (
        "import sys, _posixsubprocess\ndel sys.modules['_posixsubprocess']\n"
        "import _posixsubprocess",
        "import",
    ),
    "signal-parent": ("import os\nos.kill(os.getppid(), 0)", "os.kill"),
    "postgres": ("import socket\nsocket.create_connection(('127.0.0.1', 5432))", "socket"),
    "raw-socket": (
        "import socket\nsocket.socket().connect(('127.0.0.1', 5432))",
        "socket.__new__",
    ),
    "dns": ("import socket\nsocket.gethostbyname('example.com')", "socket.gethostbyname"),
    "etc-passwd": ("print(open('/etc/passwd').read())", "open"),
    "proc-environ": ("import os\nopen(f'/proc/{os.getppid()}/environ').read()", "open"),
    "repo-file": (f"open({str(REPO / 'pyproject.toml')!r}).read()", "open"),
    "repo-listing": (f"import os\nos.listdir({str(REPO)!r})", "os.listdir"),
    "host-home": (f"open({str(Path.home() / '.bashrc')!r}).read()", "open"),
    "relative-escape": ("import os\nos.chdir('/etc')\nopen('passwd').read()", "open"),
    "dotdot-escape": ("open('../../etc/passwd').read()", "open"),
    "symlink-out": ("import os\nos.symlink('/etc/passwd', 'passwd')", "os.symlink"),
    "stdlib-write": ("import os\nopen(os.__file__, 'r+')", "open"),
    "stdlib-remove": (
        "import os\nfd = os.open(os.path.dirname(os.__file__), os.O_RDONLY)\n"
        "os.remove('no-such-module.py', dir_fd=fd)",
        "os.remove",
    ),
    "raise-limits": (
        "import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))",
        "resource",
    ),
    "ctypes": ("import ctypes\nctypes.CDLL('libc.so.6').getpid()", "ctypes.dlopen"),
    "sqlite": ("import sqlite3", "import"),
    "patched-realpath": (
        "import os.path\nos.path.realpath = lambda path: path\nopen('/etc/passwd').read()",
        "open",
    ),
}


@pytest.mark.parametrize("code, event", VIOLATIONS.values(), ids=VIOLATIONS.keys())
def test_refused_operations_are_violations(code: str, event: str) -> None:
    result = run(code)
    assert (result.ok, result.kind, result.exit_code) == (False, "violation", 86), result.stderr
    assert result.detail.startswith(event)
    assert f"SANDBOX-VIOLATION: {result.detail}" in result.stderr


def test_no_process_survives_a_fork_storm() -> None:
    result = run(f"{WHOAMI}{FORK_STORM}")
    assert result.kind == "violation"
    assert_gone(result.stdout)


def test_a_write_outside_the_sandbox_does_not_happen(tmp_path: Path) -> None:
    target = tmp_path / "escaped.txt"
    result = run(f"open({str(target)!r}, 'w').write('data')")
    assert result.kind == "violation"
    assert result.detail.startswith(f"open ({str(target)!r}, 'w'")
    assert not target.exists()


def test_output_before_a_violation_is_kept() -> None:
    result = run("print('before')\nopen('/etc/passwd')")
    assert (result.kind, result.stdout) == ("violation", "before\n")


def test_the_working_directory_is_private_writable_and_removed() -> None:
    code = (
        "import os, pathlib, tempfile\n"
        "pathlib.Path('notes.txt').write_text('kept')\n"
        "os.mkdir('sub')\n"
        "with open('sub/data.bin', 'wb') as f:\n"
        "    f.write(b'1234')\n"
        "os.rename('sub/data.bin', 'sub/moved.bin')\n"
        "with tempfile.NamedTemporaryFile(dir=None) as f:\n"
        "    inside = f.name.startswith(os.getcwd())\n"
        "print(os.getcwd(), sorted(os.listdir('.')), inside, open('notes.txt').read())\n"
        "print(os.path.expanduser('~') == os.getcwd())"
    )
    result = run(code)
    assert result.ok, result.stderr
    cwd, listing = result.stdout.split(" ", 1)
    assert listing == "['notes.txt', 'sub'] True kept\nTrue\n"
    assert Path(cwd).name.startswith("agentdesign-sandbox-")
    assert not Path(cwd).exists()


def test_without_os_isolation_code_is_refused_unless_unsafe(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_isolation, "_probe", lambda: Isolation(None, os.geteuid() == 0))
    monkeypatch.delenv(UNSAFE_ENV, raising=False)
    with pytest.raises(SandboxUnavailableError, match="--unsafe-sandbox") as caught:
        run("print(1)")
    assert "\n" not in str(caught.value)
    monkeypatch.setenv(UNSAFE_ENV, "1")
    _isolation._warn_unsafe.cache_clear()
    results = [run("print(1)"), run("print(2)")]
    assert [(r.stdout, r.isolation.split(":")[0]) for r in results] == [
        ("1\n", "hooks only"),
        ("2\n", "hooks only"),
    ]
    assert capsys.readouterr().err.count("warning: model-written code runs unconfined") == 1


def test_the_environment_is_minimal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESIGN_TEST_SECRET", "hunter2")
    result = run("import os\nprint(sorted(os.environ))")
    assert result.stdout == "['HOME', 'LANG', 'LC_ALL', 'PATH', 'TMPDIR']\n"


def test_the_standard_library_and_installed_packages_import() -> None:
    code = (
        "import asyncio, collections, decimal, fractions, hashlib, heapq, itertools, json, math\n"
        "import random, re, string, typing, zoneinfo\n"
        "import numpy\n"
        "async def main():\n"
        "    return int(numpy.arange(4).sum())\n"
        "print(asyncio.run(main()), zoneinfo.ZoneInfo('Europe/Paris').key)"
    )
    result = run(code)
    assert result.ok, result.stderr
    assert result.stdout == "6 Europe/Paris\n"


def test_a_device_node_cannot_be_made_or_opened() -> None:
    code = "import os\nos.mknod('disk', 0o600 | 0o060000, os.makedev(7, 0))\nopen('disk', 'rb')"
    result = run(code)
    # Without root in a namespace, or under Landlock, mknod fails; else the hook refuses the open.
    if result.kind == "error":
        assert result.detail.startswith("PermissionError: [Errno ")
    else:
        assert result.kind == "violation"
        assert result.detail.startswith("open ('disk'")
