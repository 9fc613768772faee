"""`python -c CODE ARGS` as a real process of its own, without paying for the imports each time.

A fresh interpreter spends seconds importing agentdesign (scipy, scikit-learn, SQLAlchemy,
optuna) before it runs a command that takes a fraction of a second. Here a server process
imports the modules once, and each command is a child forked from it: a process of its own, with
its own working directory, environment, file descriptors, exit status and signals, which runs
CODE at the top level of its interpreter, so that an exception ends it with a traceback on
stderr and exit 1, and `sys.exit` and the interpreter's shutdown (atexit, non-daemon threads,
flushing) work as in a fresh process. Whatever the imports printed is printed again at the start
of each command's output, so a warning at import time shows in every result as it would in a
fresh process.

One server per environment (a variable read at import time sees the command's environment; those
no import reads are left out, see _SET_IN_THE_CHILD) and list of modules; the servers end when the
test session does.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

# The server reads one JSON request a line and answers each with one line: "run" forks a child
# and answers its pid; "poll" answers a child's wait status, or "running". The child leaves the
# loop and runs the request's code at the top level.
_SERVER = r"""
import json, os, sys
requests = os.fdopen(os.dup(0), "r")
answers = os.fdopen(os.dup(1), "w")
startup_out, startup_err, preload = sys.argv[1:4]


def redirect(fd, path, flags):
    opened = os.open(path, flags, 0o600)
    os.dup2(opened, fd)
    os.close(opened)


redirect(0, os.devnull, os.O_RDONLY)
redirect(1, startup_out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
redirect(2, startup_err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
entry = module = function = None
for entry in preload.split(",") if preload else []:
    module, _, function = entry.partition(":")
    __import__(module)
    if function:
        getattr(sys.modules[module], function)()
sys.stdout.flush()
sys.stderr.flush()
import gc
gc.freeze()  # what the imports made is shared with the children, not collected in each
answers.write("ready\n")
answers.flush()
request = None
for line in requests:
    job = json.loads(line)
    if job["op"] == "poll":
        pid, status = os.waitpid(job["pid"], os.WNOHANG)
        answers.write(f"{status}\n" if pid else "running\n")
        answers.flush()
        continue
    pid = os.fork()
    if pid == 0:
        request = job
        break
    answers.write(f"{pid}\n")
    answers.flush()
if request is None:
    raise SystemExit(0)
requests.close()
answers.close()
os.chdir(request["cwd"])
if dict(os.environ) != request["env"]:  # only the variables no import reads may differ
    os.environ.clear()
    os.environ.update(request["env"])
redirect(1, request["stdout"], os.O_WRONLY | os.O_APPEND)
redirect(2, request["stderr"], os.O_WRONLY | os.O_APPEND)
sys.argv = ["-c", *request["args"]]
del gc, json, os, requests, answers, startup_out, startup_err, preload, redirect, line, job, pid
del entry, module, function
exec(compile(request.pop("code"), "<string>", "exec"))
"""


class ForkedProcess:
    """A command forked off a server, with what `subprocess.Popen` offers the tests."""

    def __init__(self, server: _Server, pid: int, args: list[str], out: Path, err: Path) -> None:
        self.server, self.pid, self.args, self.out, self.err = server, pid, args, out, err
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            status = self.server.ask({"op": "poll", "pid": self.pid})
            if status != "running":
                self.returncode = os.waitstatus_to_exitcode(int(status))
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.001
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(pause)
            pause = min(2 * pause, 0.05)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:  # not reaped yet, so the pid is still this child's
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Its stdout and stderr once it has ended."""
        self.wait(timeout)
        return self.out.read_text(), self.err.read_text()


class _Server:
    def __init__(self, env: Mapping[str, str], preload: Sequence[str]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="agentdesign-forked-"))
        self.startup = (self.folder / "startup.out", self.folder / "startup.err")
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVER, *map(str, self.startup), ",".join(preload)],
            cwd=self.folder,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lock = threading.Lock()
        self.count = 0
        assert self._answer(timeout=600) == "ready", self.startup[1].read_text()

    def _answer(self, timeout: float) -> str:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            raise RuntimeError(f"the fork server did not answer:\n{self.startup[1].read_text()}")
        return line.strip()

    def ask(self, request: dict[str, object]) -> str:
        with self.lock:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            return self._answer(timeout=60)

    def start(
        self, code: str, args: Sequence[str], cwd: Path | str, env: Mapping[str, str]
    ) -> ForkedProcess:
        with self.lock:
            self.count += 1
            number = self.count
        out, err = (self.folder / f"{number}.{kind}" for kind in ("out", "err"))
        out.write_bytes(self.startup[0].read_bytes())
        err.write_bytes(self.startup[1].read_bytes())
        request = {"op": "run", "code": code, "args": list(args), "cwd": str(cwd)}
        request |= {"env": dict(env), "stdout": str(out), "stderr": str(err)}
        pid = int(self.ask(request))
        return ForkedProcess(self, pid, [sys.executable, "-c", code, *args], out, err)

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


# Variables that no import reads, so that commands differing only in them share a server; the
# child gets their values. pytest names the test running in PYTEST_CURRENT_TEST, and agentdesign
# reads AGENTDESIGN_CACHE_DIR only when a command runs (tests give each test a cache of its own).
_SET_IN_THE_CHILD = frozenset({"PYTEST_CURRENT_TEST", "AGENTDESIGN_CACHE_DIR"})
_MAX_SERVERS = 4  # each holds the imports' memory (about 250 MB, litellm included)
_SERVERS: dict[tuple[tuple[tuple[str, str], ...], tuple[str, ...]], _Server] = {}


# What a command imports before it does anything, and litellm, which most commands import later
# (a run's model, `show`'s prices): seconds each time, through agentdesign's own import of it,
# which keeps litellm to its local price list. An entry "module:function" also calls function().
AGENTDESIGN = (
    "agentdesign.search.cli",
    "agentdesign.components.testing",
    "agentdesign.components:import_litellm",
)


def start_forked(
    code: str,
    *args: str,
    cwd: Path | str,
    env: Mapping[str, str] | None = None,
    preload: Sequence[str] = AGENTDESIGN,
) -> ForkedProcess:
    """`python -c code args` started in `cwd` with `env` (this process's by default), as
    `subprocess.Popen` starts it, forked from a server that imported `preload` already (an
    entry "module:function" also called function() once it was imported); stdin
    is /dev/null and stdout and stderr are kept for `communicate`."""
    env = dict(os.environ if env is None else env)
    imported_with = sorted((k, v) for k, v in env.items() if k not in _SET_IN_THE_CHILD)
    key = (tuple(imported_with), tuple(preload))
    server = _SERVERS.pop(key, None)  # and put back last: the least recently used goes first
    if server is None:
        while len(_SERVERS) >= _MAX_SERVERS:
            _SERVERS.pop(next(iter(_SERVERS))).close()
        server = _Server(dict(key[0]), preload)
    _SERVERS[key] = server
    return server.start(code, args, cwd, env)


def run_forked(
    code: str,
    *args: str,
    cwd: Path | str,
    env: Mapping[str, str] | None = None,
    preload: Sequence[str] = AGENTDESIGN,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """What `subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env,
    capture_output=True, text=True, timeout=timeout)` returns, from a forked process."""
    process = start_forked(code, *args, cwd=cwd, env=env, preload=preload)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()  # as subprocess.run does
        process.wait()
        raise
    finally:
        stdout, stderr = process.out.read_text(), process.err.read_text()
        process.out.unlink()
        process.err.unlink()
    return subprocess.CompletedProcess(process.args, process.returncode or 0, stdout, stderr)


@atexit.register
def _close_servers() -> None:
    while _SERVERS:
        _SERVERS.popitem()[1].close()
