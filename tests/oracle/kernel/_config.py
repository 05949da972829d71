"""The kernel configuration: ``allnoconfig`` plus what a user_events test needs.

``make allnoconfig KCONFIG_ALLCONFIG=FILE`` answers "no" to every question
except the ones FILE answers; what FILE asks for and cannot have (a missing
dependency) is silently dropped by Kconfig, so every line is checked in the
resulting ``.config``.

Why each group is here:

* boot and console: a 64-bit SMP kernel (races need two CPUs) that finds
  its CPUs in QEMU's ACPI tables (the BIOS's MP table may list only the
  boot CPU when its own AP wake-up loses a race under TCG), an
  initramfs, 8250 serial ports (ttyS0 is the console, ttyS1 and ttyS2
  carry the program's output and exit status: ``_vm.py``);
* what busybox and static glibc programs use: ELF and ``#!`` scripts, proc,
  sysfs, devtmpfs, tmpfs, futexes (threads), POSIX timers, the fd-based
  event calls, file locks, madvise (ftrace_test's write_fault), membarrier,
  rseq, process_vm_readv;
* what is tested: ftrace, user_events, synthetic events and hist triggers
  (the synthetic-event captures), perf events (``perf_test``), debugfs
  (6.1's selftests and sample use ``/sys/kernel/debug/tracing``);
* what the golden files in tests/data were captured with: uprobe events
  (listed by the synthetic-event captures), and no kallsyms (trace_marker
  records print their ip as an address, which tests/engine/test_output.py
  replays). Only ``EXPERT`` lets kallsyms be switched off; it also hides
  defaults such as shmem, hence the explicit lines.

Linux 6.1 puts ``USER_EVENTS`` behind ``depends on BROKEN || COMPILE_TEST``
("API needs to be straighten out"); ``COMPILE_TEST`` satisfies it without
editing the source, and makes ``trace_events_user.c`` include
``include/linux/user_events.h``, where 6.1 keeps the ABI header.
"""

from __future__ import annotations

from pathlib import Path

from ._log import OracleError

BASE = (
    "CONFIG_EXPERT=y",
    "CONFIG_64BIT=y",
    "CONFIG_SMP=y",
    "CONFIG_NR_CPUS=4",
    "CONFIG_ACPI=y",
    "CONFIG_PRINTK=y",
    "CONFIG_BUG=y",
    "CONFIG_TTY=y",
    "CONFIG_SERIAL_8250=y",
    "CONFIG_SERIAL_8250_CONSOLE=y",
    "CONFIG_BLK_DEV_INITRD=y",
    "CONFIG_RD_GZIP=y",
    "CONFIG_BINFMT_ELF=y",
    "CONFIG_BINFMT_SCRIPT=y",
    "CONFIG_PROC_FS=y",
    "CONFIG_SYSFS=y",
    "CONFIG_DEVTMPFS=y",
    "CONFIG_TMPFS=y",
    "CONFIG_SHMEM=y",
    "CONFIG_MULTIUSER=y",
    "CONFIG_FUTEX=y",
    "CONFIG_POSIX_TIMERS=y",
    "CONFIG_EPOLL=y",
    "CONFIG_EVENTFD=y",
    "CONFIG_SIGNALFD=y",
    "CONFIG_TIMERFD=y",
    "CONFIG_AIO=y",
    "CONFIG_FILE_LOCKING=y",
    "CONFIG_ADVISE_SYSCALLS=y",
    "CONFIG_MEMBARRIER=y",
    "CONFIG_RSEQ=y",
    "CONFIG_FHANDLE=y",
    "CONFIG_CROSS_MEMORY_ATTACH=y",
    "CONFIG_DEBUG_FS=y",
    "CONFIG_PERF_EVENTS=y",
    "CONFIG_FTRACE=y",
    "CONFIG_USER_EVENTS=y",
    "CONFIG_SYNTH_EVENTS=y",
    "CONFIG_HIST_TRIGGERS=y",
    "CONFIG_UPROBE_EVENTS=y",
    "# CONFIG_KALLSYMS is not set",
)

PER_KERNEL = {
    "6.12": (),
    "6.1": ("CONFIG_COMPILE_TEST=y",),
}

# Variants: a kernel with more options, for captures that need them. The
# synthetic-event captures read kprobe_events and events/*/*/inject, which
# the base kernel must not have (its tracefs is the reference for "absent").
VARIANTS = {
    "": (),
    "probes": ("CONFIG_KPROBES=y", "CONFIG_KPROBE_EVENTS=y", "CONFIG_TRACE_EVENT_INJECT=y"),
}


def fragment(kernel: str, variant: str) -> str:
    """The ``KCONFIG_ALLCONFIG`` file's text for one kernel and variant."""
    return "".join(f"{line}\n" for line in (*BASE, *PER_KERNEL[kernel], *VARIANTS[variant]))


def check(fragment_text: str, config: Path) -> None:
    """Every requested option made it into ``.config``.

    Raises:
        OracleError: naming the options Kconfig dropped.
    """
    present = set(config.read_text().splitlines())
    dropped = [line for line in fragment_text.splitlines() if line not in present]
    if dropped:
        raise OracleError(f"Kconfig dropped {', '.join(dropped)} (unmet dependencies); "
                          f"see {config}")
