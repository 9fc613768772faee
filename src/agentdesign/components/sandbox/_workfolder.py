"""The sandbox's work folders on the host: made, measured and removed whatever a program left in
them, and swept up after a process that was killed while it held one.

A program can leave a tree deeper than Python's recursion limit, paths longer than PATH_MAX,
folders without permissions and symlinks to the host's files. So nothing here recurses or walks
by path: the walk holds one directory descriptor at a time, goes up by "..", opens every folder
with O_NOFOLLOW and changes modes on folders only, never through a symlink. The program is dead
by the time its folder is removed (its process group or PID namespace is killed first), so the
tree no longer changes under the walk.

Each folder is locked (flock) by the process that made it for as long as it uses it. A folder
with the prefix whose lock is free and which is older than a minute belongs to a process that is
gone (killed, say, mid-run); the first folder a process makes sweeps those away.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import tempfile
import time
from collections.abc import Iterator

__all__ = ["WORK_PREFIX", "WorkFolder", "folder_usage", "remove_tree", "sweep_stale_folders"]

WORK_PREFIX = "agentdesign-sandbox-"
# Old enough that the process that made it has locked it long since (made, then locked at once).
_STALE_AFTER_S = 60.0
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class WorkFolder:
    """A fresh private folder in TMPDIR, locked by this process until `remove`."""

    def __init__(self, *, owner: int | None = None) -> None:
        sweep_once()
        self.path = tempfile.mkdtemp(prefix=WORK_PREFIX)
        self._lock = os.open(self.path, _FOLDER_FLAGS)
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        if owner is not None:  # the sandbox's own user, which must write it
            os.chown(self.path, owner, owner)

    def remove(self) -> None:
        """Removes the folder and all in it, as far as it can; never raises."""
        remove_tree(self.path)
        with contextlib.suppress(OSError):
            os.close(self._lock)


def remove_tree(path: str) -> None:
    """Removes the folder `path` and everything under it, without recursion and without following
    a symlink; what cannot be removed (a mount point, say) stays. Never raises OSError."""
    with contextlib.suppress(OSError):
        for dir_fd, name, is_folder in _walk(path, removing=True):
            with contextlib.suppress(OSError):
                if is_folder:
                    os.rmdir(name, dir_fd=dir_fd)
                else:
                    os.unlink(name, dir_fd=dir_fd)
        os.rmdir(path)


def folder_usage(path: str, *, max_entries: int) -> tuple[int, int]:
    """The bytes the files under `path` take on disk and how many entries it holds, counting at
    most `max_entries` (a folder with more is over any bound). The folder may be in use."""
    used = entries = 0
    with contextlib.suppress(OSError):
        for dir_fd, name, _ in _walk(path, removing=False):
            with contextlib.suppress(OSError):
                used += os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_blocks * 512
            entries += 1
            if entries >= max_entries:
                break
    return used, entries


def _walk(path: str, *, removing: bool) -> Iterator[tuple[int, str, bool]]:
    """Every entry under the folder `path` as (its folder's descriptor, its name, whether it is a
    folder). `removing`: each folder comes after all it holds, so that the caller may remove each
    as it comes, and its mode is made 0o700 before it is read; else each comes as it is entered,
    so that every step yields and a caller can stop the walk of a folder that grows under it.
    One descriptor is open at a time (up is ".."); the folders still to visit are kept by name."""
    fd = _open_folder(path, None, take_over=removing)
    if fd is None:
        return
    # The way down from `path`: each folder's name and its subfolders still to visit.
    frames: list[tuple[str, list[str]]] = [("", [])]
    try:
        yield from _files(fd, frames[-1][1])
        while True:
            name, pending = frames[-1]
            if pending:
                folder = pending.pop()
                child = _open_folder(folder, fd, take_over=removing)
                if child is None or not removing:
                    yield fd, folder, True
                if child is None:
                    continue
                os.close(fd)
                fd = child
                frames.append((folder, []))
                yield from _files(fd, frames[-1][1])
            elif len(frames) > 1:
                frames.pop()
                parent = os.open("..", _FOLDER_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = parent
                if removing:
                    yield fd, name, True
            else:
                return
    finally:
        os.close(fd)


def _files(fd: int, folders: list[str]) -> Iterator[tuple[int, str, bool]]:
    """The entries of the folder `fd` that are not folders (a symlink is one of them: the link,
    never what it points to); its subfolders' names go to `folders`."""
    with contextlib.suppress(OSError), os.scandir(fd) as entries:
        for entry in entries:
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_folder:
                folders.append(entry.name)
            else:
                yield fd, entry.name, False


def _open_folder(name: str, dir_fd: int | None, *, take_over: bool) -> int | None:
    """A descriptor of the folder `name`, None if it is not one (a symlink is not) or cannot be
    opened. `take_over`: its mode becomes 0o700 first, which its owner may always do; the program
    may have left it unreadable."""
    for attempt in range(2):
        try:
            fd = os.open(name, _FOLDER_FLAGS, dir_fd=dir_fd)
        except PermissionError:
            if attempt or not take_over:
                return None
            # follow_symlinks=False: should it be a symlink after all, Python refuses to chmod it.
            with contextlib.suppress(OSError, NotImplementedError, ValueError):
                os.chmod(name, 0o700, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return None
        else:
            if take_over:
                with contextlib.suppress(OSError):
                    os.fchmod(fd, 0o700)
            return fd
    return None


@functools.cache
def sweep_once() -> None:
    """`sweep_stale_folders`, once per process: before the first work folder it makes."""
    sweep_stale_folders()


def sweep_stale_folders() -> list[str]:
    """Removes the work folders in TMPDIR whose process is gone; returns their paths."""
    base = tempfile.gettempdir()
    names: list[str] = []
    with contextlib.suppress(OSError), os.scandir(base) as entries:
        names = [entry.name for entry in entries if entry.name.startswith(WORK_PREFIX)]
    swept = []
    for name in names:
        path = os.path.join(base, name)
        if _stale(path):
            remove_tree(path)
            swept.append(path)
    return swept


def _stale(path: str) -> bool:
    """Whether `path` is a work folder no process holds (its lock is free) and old enough that
    its maker would hold it by now. Only root sweeps others' folders (bwrap's are uid 65534's)."""
    try:
        fd = os.open(path, _FOLDER_FLAGS)
    except OSError:
        return False
    try:
        status = os.fstat(fd)
        if os.geteuid() not in (0, status.st_uid):
            return False
        if time.time() - status.st_mtime < _STALE_AFTER_S:
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: its process holds it
        return False
    finally:
        os.close(fd)
    return True
