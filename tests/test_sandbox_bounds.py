"""The sandbox's bounds on what a program leaves and sends: its work folder is removed whatever
it holds (and swept up after a killed process), has a total size, and a served program cannot
block the engine or flood it with requests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from test_sandbox import run

from agentdesign.components import Isolation, SandboxLimits, SandboxResult, run_python
from agentdesign.components.sandbox import _isolation
from agentdesign.components.sandbox._workfolder import WORK_PREFIX, remove_tree, sweep_stale_folders

# A folder tree 1,200 deep (past Python's recursion limit), built in a few shallow steps each, so
# that the audit hooks' path checks stay cheap.
DEEP_TREE = (
    "import os\nos.mkdir('a')\nfor _ in range(1200):\n"
    "    os.mkdir('t')\n    os.rename('a', 't/a')\n    os.rename('t', 'a')\n"
    "print(os.getcwd())"
)


def forced_isolation(isolation: Isolation) -> Isolation:
    """`isolation`, which keeps its work folder on the host's disk (a tmpfs has its own); skips
    where it does not work."""
    if not (shutil.which(str(isolation.launcher)) and _isolation._works(isolation)):
        pytest.skip(f"{isolation.launcher} does not work here")
    return isolation


UNSHARE = Isolation("unshare", os.geteuid() == 0, _isolation._landlock_abi())
# bubblewrap too old to size a tmpfs (before 0.7), binding the host's folder in
BWRAP_HOST_FOLDER = Isolation("bwrap", os.geteuid() == 0)


@pytest.fixture(params=["default", "unshare", "bwrap-host-folder"])
def isolation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Isolation:
    """The isolation in use here, and the fallbacks with the work folder on the host, forced."""
    if request.param == "default":
        return _isolation.current_isolation()
    forced = forced_isolation(UNSHARE if request.param == "unshare" else BWRAP_HOST_FOLDER)
    monkeypatch.setattr(_isolation, "_probe", lambda: forced)
    return forced


def test_a_folder_tree_deeper_than_the_recursion_limit_is_removed(isolation: Isolation) -> None:
    result = run(DEEP_TREE, limits=SandboxLimits(wall_s=20.0, cpu_s=20.0))
    assert result.ok, result.stderr
    assert result.isolation == isolation.level
    assert not Path(result.stdout.strip()).exists()


def _deep_tree(root: Path, *, depth: int, name: str) -> None:
    """`depth` nested folders `name` under `root`, made through descriptors (the path may be
    longer than the kernel takes), each holding a file, the deepest without permissions."""
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        os.close(os.open("file", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        child = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(os.open("file", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    os.fchmod(fd, 0)
    os.close(fd)


def test_removal_needs_no_recursion_and_no_path_the_kernel_would_refuse(tmp_path: Path) -> None:
    deep, long = tmp_path / "deep", tmp_path / "long"
    deep.mkdir()
    long.mkdir()
    _deep_tree(deep, depth=2000, name="d")
    _deep_tree(long, depth=40, name="n" * 200)  # paths of 8,000 characters
    remove_tree(str(deep))
    remove_tree(str(long))
    assert list(tmp_path.iterdir()) == []


def test_cleanup_never_changes_a_file_a_symlink_points_to() -> None:
    """A symlink to a host file, in a folder the program left read-only: a user other than root
    cannot unlink it before that folder's mode is changed (root passes permissions, so the test
    switches to another user in a child process)."""
    base = Path(tempfile.mkdtemp(prefix="agentdesign-test-"))  # where that user can reach
    host_file, work = base / "host-file", base / "work"
    host_file.write_text("the host's")
    host_file.chmod(0o600)
    work.mkdir()
    as_root = os.geteuid() == 0
    if as_root:
        for path in (base, host_file, work):
            os.chown(path, 65534, 65534)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        code = 1
        try:
            if as_root:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            (work / "locked").mkdir()
            (work / "locked" / "link").symlink_to(host_file)
            (work / "locked").chmod(0o500)
            remove_tree(str(work))
            code = 0
        finally:
            os._exit(code)
    try:
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        assert oct(host_file.stat().st_mode & 0o777) == "0o600"
        assert not work.exists()
    finally:
        remove_tree(str(base))


def _stale_folder(*, age_s: float) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=WORK_PREFIX))
    (folder / "left").mkdir()
    (folder / "left" / "by-a-killed-run").write_text("x")
    then = time.time() - age_s
    os.utime(folder / "left", (then, then))
    os.utime(folder, (then, then))
    return folder


def test_work_folders_left_by_a_killed_process_are_swept(tmp_path: Path) -> None:
    stale, recent, held = (_stale_folder(age_s=age) for age in (600, 1, 600))
    holder = subprocess.Popen(  # holds its lock as a running sandbox does, with an old folder
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDONLY)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(60)",
            str(held),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        os.utime(held, (time.time() - 600,) * 2)
        swept = sweep_stale_folders()
        assert str(stale) in swept and not stale.exists()
        assert recent.exists() and held.exists()
    finally:
        holder.kill()
        holder.wait()
        for folder in (recent, held):
            remove_tree(str(folder))


WRITE_MB = "for n in range({count}):\n    open(f'f{{n}}', 'wb').write(b'x' * {size} * 2**20)\n"


def test_the_work_folder_has_a_total_size(isolation: Isolation) -> None:
    limits = SandboxLimits(wall_s=10.0, cpu_s=10.0, file_mb=4, folder_mb=8)
    # Under the file-size limit each, 24 MB in all: the folder fills (bubblewrap's tmpfs), or is
    # seen over its size (a watched folder, at the latest once the program has ended).
    result = run(WRITE_MB.format(count=6, size=4), limits=limits)
    assert (result.ok, result.kind) == (False, "disk"), result
    assert result.detail.startswith("work-folder limit of 8 MB")
    assert run(WRITE_MB.format(count=1, size=4), limits=limits).ok


def test_many_empty_files_in_a_watched_folder_are_over_its_size() -> None:
    forced = forced_isolation(UNSHARE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_isolation, "_probe", lambda: forced)
        code = "for n in range(1000):\n    open(f'f{n}', 'w').close()\nprint('made all')"
        result = run(code, limits=SandboxLimits(wall_s=20.0, cpu_s=20.0, folder_mb=1))
    assert result.kind == "disk", result  # 1 MB: 256 entries at most


# --- the request channel of a served program -----------------------------------------------------

REQUEST = "import os\nrequest = b'\\x1eagentdesign-request {}\\n'\n"
READ_REPLY = "    assert os.read(0, 1 << 20)\n"


def served(code: str, reply: object, *, wall_s: float = 3.0) -> SandboxResult:
    """`code` run with a channel that answers every request with `reply`; a run that has not
    ended 10 s after its wall-time limit (the engine blocked) fails the test."""
    results: list[SandboxResult] = []
    limits = SandboxLimits(wall_s=wall_s, cpu_s=wall_s)
    thread = threading.Thread(
        target=lambda: results.append(run_python(code, limits=limits, serve=lambda _: reply)),
        daemon=True,
    )
    thread.start()
    thread.join(wall_s + 10)
    assert results, "the engine blocked on a program that does not read its replies"
    return results[0]


def test_a_program_that_never_reads_its_replies_cannot_block_the_engine() -> None:
    # 40 replies of 10 kB fill the pipe to its stdin many times over; the program sleeps on,
    # using no CPU time, so only the wall-time limit can end it.
    code = REQUEST + "for _ in range(40):\n    os.write(1, request)\nimport time\ntime.sleep(60)"
    start = time.monotonic()
    result = served(code, "x" * 10_000, wall_s=2.0)
    assert result.kind == "timeout" and time.monotonic() - start < 6.0


@pytest.mark.parametrize(
    ("code", "reply", "detail"),
    [
        (REQUEST + "while True:\n    os.write(1, request)\n" + READ_REPLY, None, "more than 256"),
        (
            "import os\nrequest = b'\\x1eagentdesign-request \"' + b'x' * 10**6 + b'\"\\n'\n"
            "while True:\n    os.write(1, request)\n" + READ_REPLY,
            None,
            "requests passed 16 MB",
        ),
        (REQUEST + "while True:\n    os.write(1, request)\n", "x" * 100_000, "4 MB of replies"),
    ],
    ids=["many-requests", "request-bytes", "unread-replies"],
)
def test_a_program_that_floods_the_channel_is_ended(code: str, reply: object, detail: str) -> None:
    start = time.monotonic()
    result = served(code, reply, wall_s=20.0)
    assert result.kind == "channel" and detail in result.detail, result
    assert result.exit_code is None and time.monotonic() - start < 15.0
