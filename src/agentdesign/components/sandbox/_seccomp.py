"""The seccomp filter of the sandbox's child: system calls it has no use for are refused.

None of them lets a program out of the namespaces, but each is kernel attack surface that a
Python program solving a task never needs: io_uring, the kernel keyrings, new namespaces
(unshare, setns, clone with a CLONE_NEW* flag), ptrace and process_vm_readv/writev, bpf,
userfaultfd and perf_event_open. They fail with EPERM. clone3, whose flags a filter cannot read,
fails with ENOSYS, on which the C library falls back to clone (threads and fork work as before).
A system call of another ABI (32-bit x86 or x32 on x86-64) fails with EPERM too.

The filter is classic BPF, written here so that no library is needed (the exported agent carries
this file); the child installs it last, after its other confinement (`_isolation._confine`).
"""

from __future__ import annotations

import platform
import struct
from dataclasses import dataclass

__all__ = ["SECCOMP_SOURCE", "seccomp_program"]

# How the child installs a filter (`_seccomp(bytes)`), run as part of `_isolation.CONFINE_SOURCE`.
SECCOMP_SOURCE = r"""
def _seccomp(program):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    code = ctypes.create_string_buffer(program, len(program))

    class Program(ctypes.Structure):  # struct sock_fprog
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Program(len(program) // 8, ctypes.cast(code, ctypes.c_void_p))
    for option, args in ((38, (1, 0, 0, 0)), (22, (2, ctypes.byref(fprog), 0, 0))):
        if libc.prctl(option, *args) < 0:  # PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP (filter mode)
            raise OSError(ctypes.get_errno(), "seccomp")
"""

_EPERM, _ENOSYS = 1, 38
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_CLONE_NEW = 0x7E020080  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
_X32_BIT = 0x40000000
# BPF opcodes: load a word of seccomp_data, jumps comparing it with k, return k.
_LOAD, _JEQ, _JGE, _JSET, _RETURN = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in seccomp_data (arg 0: its low 32 bits, little-endian)


@dataclass(frozen=True, kw_only=True)
class _Abi:
    """One architecture's audit id and system call numbers; `x32`: its number space holds
    another ABI's calls (x86-64's x32, marked by a bit)."""

    arch: int
    clone: int
    refused: dict[str, int]
    x32: bool


_IO_URING = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
_ABIS = {
    "x86_64": _Abi(
        arch=0xC000003E,
        clone=56,
        refused={
            **_IO_URING,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "unshare": 272,
            "setns": 308,
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "bpf": 321,
            "userfaultfd": 323,
            "perf_event_open": 298,
        },
        x32=True,
    ),
    "aarch64": _Abi(
        arch=0xC00000B7,
        clone=220,
        refused={
            **_IO_URING,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "unshare": 97,
            "setns": 268,
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "bpf": 280,
            "userfaultfd": 282,
            "perf_event_open": 241,
        },
        x32=False,
    ),
}
_CLONE3 = 435


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The filter for this machine (`platform.machine()`) as struct sock_filter instructions,
    None on an architecture it does not know."""
    abi = _ABIS.get(machine or platform.machine())
    if abi is None:
        return None
    # Each instruction as (code, jump if true, jump if false, k); jumps name a label below.
    program: list[tuple[int, str | int, str | int, int]] = [
        (_LOAD, 0, 0, _ARCH),
        (_JEQ, 0, "deny", abi.arch),
        (_LOAD, 0, 0, _NR),
    ]
    if abi.x32:
        program.append((_JGE, "deny", 0, _X32_BIT))
    program += [(_JEQ, "deny", 0, number) for number in sorted(abi.refused.values())]
    program += [
        (_JEQ, "enosys", 0, _CLONE3),
        (_JEQ, 0, "allow", abi.clone),
        (_LOAD, 0, 0, _ARG0),
        (_JSET, "deny", 0, _CLONE_NEW),
    ]
    labels = {"allow": len(program), "enosys": len(program) + 1, "deny": len(program) + 2}
    program += [
        (_RETURN, 0, 0, _RET_ALLOW),
        (_RETURN, 0, 0, _RET_ERRNO | _ENOSYS),
        (_RETURN, 0, 0, _RET_ERRNO | _EPERM),
    ]

    def offset(at: int, target: str | int) -> int:
        return target if isinstance(target, int) else labels[target] - at - 1

    return b"".join(
        struct.pack("=HBBI", code, offset(at, true), offset(at, false), k)
        for at, (code, true, false, k) in enumerate(program)
    )
