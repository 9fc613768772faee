"""The bootstrap of the sandbox's child process (`_sandbox.py` starts it and reads how it ended).

It reads the program from a file descriptor, confines itself (`_isolation.CONFINE_SOURCE`), installs
the audit hook (PEP 578) that ends the process with a `SANDBOX-VIOLATION:` line on stderr and the
violation exit code on any network use, process creation, write outside the working directory or
read outside it and the Python installation, then runs the program as `__main__`, showing its own
lines in tracebacks and ending with the memory exit code on a MemoryError.
"""

from __future__ import annotations

from agentdesign.components.sandbox._isolation import CONFINE_ARGS, CONFINE_CALL, CONFINE_SOURCE

__all__ = ["CHILD_PROGRAM"]

# The child's bootstrap, run with `python -I -B -X utf8 -c`. argv: `_isolation.confine_args` (work
# dir, limits, confinement), then the fd holding the code, the violation and memory exit codes and
# whether to install the hook. It is a string, not a module, so that the child imports nothing
# beyond what it needs: in particular not our package or `subprocess` before the hook is in place.
# The hook reads only values bound in its closure (no module globals, no builtins lookups, no
# monkey-patchable Python helpers such as `os.path.realpath`) and never calls the program's code
# (short of a custom `__fspath__`), so the program cannot change its rules by patching modules.
CHILD_PROGRAM = (
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

"""
    + f"\n_run(*map(int, sys.argv[{CONFINE_ARGS + 1}:{CONFINE_ARGS + 5}]))\n"
)
