"""``tracefs-fuse run -- CMD``: the daemon and one command, in a private namespace.

Rules:
  * The command is our child, in our process group, with default signal
    dispositions. Ctrl-C reaches it from the terminal; we ignore SIGINT
    ourselves and wait for it to decide. SIGTERM and SIGHUP sent to us are
    passed on to it.
  * However the command ends, we unmount and exit with its status (128+N if a
    signal N killed it). If the daemon fails while the command runs, the
    command is killed (its tracefs is gone) and we exit 1 with the reason.
  * The command gets ``PR_SET_PDEATHSIG`` = SIGKILL: if we are killed, it does
    not run on against a dead mount.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys

import trio

from ..config import MountConfig
from . import _namespace
from ._daemon import Daemon
from ._session import terminate

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1


def _child_setup() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def exit_status(returncode: int) -> int:
    """A shell's ``$?`` for a child's return code (negative: killed by a signal)."""
    return 128 - returncode if returncode < 0 else returncode


def run_in_namespace(config: MountConfig, argv: list[str]) -> int:
    try:
        _namespace.unshare_mounts()
        mountpoint = _namespace.prepare_tracing_dir()
    except OSError as exc:
        print(f"tracefs-fuse run: cannot set up a private mount namespace: {exc}",
              file=sys.stderr)
        return 1
    config = _replace_mountpoint(config, mountpoint)
    try:
        return trio.run(_run, config, argv)
    except Exception as exc:
        log.debug("run failed", exc_info=True)
        print(f"tracefs-fuse run: {exc}", file=sys.stderr)
        return 1


def _replace_mountpoint(config: MountConfig, mountpoint: str) -> MountConfig:
    import msgspec

    return msgspec.structs.replace(config, mountpoint=mountpoint)


async def _run(config: MountConfig, argv: list[str]) -> int:
    daemon = Daemon(config)
    status = 1
    async with trio.open_nursery() as nursery:
        await nursery.start(daemon.run, False)
        _namespace.bind_debug_tracing(config.mountpoint)
        _namespace.writable_ftrace_enabled()
        try:
            process = await trio.lowlevel.open_process(argv, preexec_fn=_child_setup)
        except OSError as exc:
            print(f"tracefs-fuse run: {argv[0]}: {exc.strerror}", file=sys.stderr)
            terminate()
            return 127 if exc.errno == 2 else 126
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP, signal.SIGINT) as signals:
            nursery.start_soon(_forward_signals, signals, process)
            status = exit_status(await process.wait())
        terminate()
        nursery.cancel_scope.deadline = trio.current_time() + 10
    return status


async def _forward_signals(signals: trio.abc.ReceiveChannel[int],
                           process: trio.Process) -> None:
    async for signum in signals:
        if signum != signal.SIGINT:  # the terminal already sent SIGINT to it
            process.send_signal(signum)
