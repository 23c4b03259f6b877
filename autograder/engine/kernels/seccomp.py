"""A seccomp filter that refuses the kernel keyring's system calls inside a grading sandbox.

The keyrings are the operating system's, not a sandbox's: every process of one user shares
that user's keyring, so a key that one grading kernel adds (``add_key``), a later kernel of
the same user reads back (``keyctl``, ``request_key``): a channel between two students that
no namespace closes. bubblewrap loads this filter (``--seccomp FD``) before it starts the
sandbox's first process, and it holds for every process after: those three calls fail with
EPERM. So does every call made with another architecture's numbers (32-bit ``int 0x80`` or
x32 calls on x86_64), whose numbers for the same calls differ.

The filter is a classic BPF program over ``struct seccomp_data`` (linux/seccomp.h), built
here with ``struct.pack``; ``ARCHITECTURES`` lists the machines it knows.
"""

import errno
import os
import platform
import struct
from dataclasses import dataclass

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
NR_OFFSET, ARCH_OFFSET = 0, 4
# BPF opcodes (linux/bpf_common.h): load a word at an absolute offset, compare, return
LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
JUMP_IF_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JUMP_IF_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
RETURN = 0x06  # BPF_RET | BPF_K
ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
REFUSE = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO with EPERM


@dataclass(frozen=True)
class Architecture:
    """What the filter needs to know of a machine: its AUDIT_ARCH_* value, the numbers of
    add_key, request_key and keyctl, and where a second numbering begins (x32), if any."""

    audit: int
    keyring_calls: tuple[int, int, int]
    foreign_from: int | None = None


ARCHITECTURES = {
    "x86_64": Architecture(0xC000003E, (248, 249, 250), foreign_from=0x40000000),
    "aarch64": Architecture(0xC00000B7, (217, 218, 219)),
}


def supported(machine: str | None = None) -> bool:
    """Whether the filter knows ``machine`` (this one by default)."""
    return (machine or platform.machine()) in ARCHITECTURES


def program(machine: str | None = None) -> bytes:
    """The filter for ``machine`` (this one by default), as the bytes of its ``sock_filter``
    instructions; KeyError for a machine not in ARCHITECTURES."""
    arch = ARCHITECTURES[machine or platform.machine()]
    refused = [(JUMP_IF_EQUAL, number) for number in arch.keyring_calls]
    if arch.foreign_from is not None:
        refused.insert(0, (JUMP_IF_AT_LEAST, arch.foreign_from))
    last = 3 + len(refused) + 1  # the index of the refusal; a jump counts from the next instruction
    instructions = [
        (LOAD_WORD, 0, 0, ARCH_OFFSET),
        (JUMP_IF_EQUAL, 0, last - 2, arch.audit),  # another architecture: refused
        (LOAD_WORD, 0, 0, NR_OFFSET),
        *((op, last - index - 1, 0, value) for index, (op, value) in enumerate(refused, start=3)),
        (RETURN, 0, 0, ALLOW),
        (RETURN, 0, 0, REFUSE),
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in instructions)


def filter_fd() -> int:
    """A file descriptor from which bubblewrap reads this machine's filter (``--seccomp FD``):
    the read end of a pipe that holds it. The caller passes it to bwrap and closes it after."""
    read, write = os.pipe()
    try:
        os.write(write, program())  # a few hundred bytes: far below a pipe's capacity
    finally:
        os.close(write)
    return read
