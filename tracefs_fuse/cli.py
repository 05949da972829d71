"""The ``tracefs-fuse`` command: mount, umount, run.

* ``tracefs-fuse mount MOUNTPOINT [options]``: serve a tracefs there, in the
  background once it is mounted (``--foreground`` to stay).
* ``tracefs-fuse umount MOUNTPOINT``.
* ``tracefs-fuse run [options] -- CMD [ARGS…]``: run CMD in a private mount
  namespace where our tracefs is mounted at ``/sys/kernel/tracing`` and
  ``/sys/kernel/debug/tracing``; exit with CMD's status, tearing everything
  down however CMD ends.

Rules: options become a :class:`~tracefs_fuse.config.MountConfig` (validated
once, errors exit 2 without a traceback); a daemon started in the background
gets the same config as JSON.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys

import msgspec

from .config import MountConfig

log = logging.getLogger("tracefs_fuse")


def _mount_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--abi", choices=["auto", "5.18", "6.1", "mainline"], default="auto",
                        help="user_events ABI era(s) to accept (default: all, told apart "
                             "by struct user_reg.size)")
    parser.add_argument("--uid", type=int, default=0, help="owner of every file")
    parser.add_argument("--gid", type=int, default=0, help="group of every file (tracefs gid=)")
    parser.add_argument("--mode", type=lambda s: int(s, 8), default=0o700,
                        help="root directory mode, octal (tracefs mode=; default 700)")
    parser.add_argument("--cpus", type=int, default=None, dest="nr_cpus",
                        help="per-CPU buffers (default: the machine's possible CPUs)")
    parser.add_argument("--user-events-max", type=int, default=32768)
    parser.add_argument("--buffer-size-kb", type=int, default=1410)
    parser.add_argument("--debug", action="store_true", help="log every request")
    parser.add_argument("--no-fast-path", dest="fast_path", action="store_false",
                        help="serve every write with the engine (no native fast path)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracefs-fuse", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    mount = sub.add_parser("mount", help="serve a tracefs at MOUNTPOINT")
    mount.add_argument("mountpoint")
    mount.add_argument("--foreground", "-f", action="store_true")
    mount.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    mount.add_argument("--log", default=os.devnull,
                       help="where a background daemon writes its log (default: nowhere)")
    _mount_options(mount)
    umount = sub.add_parser("umount", help="unmount a tracefs-fuse mount")
    umount.add_argument("mountpoint")
    run = sub.add_parser("run", help="run CMD with tracefs-fuse at /sys/kernel/tracing")
    _mount_options(run)
    run.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]")
    return parser


def _config(args: argparse.Namespace, mountpoint: str) -> MountConfig:
    fields = {k.replace("_", "-"): getattr(args, k)
              for k in ("abi", "uid", "gid", "mode", "nr_cpus", "user_events_max",
                        "buffer_size_kb", "debug", "fast_path")}
    fields["mountpoint"] = mountpoint
    try:
        return msgspec.convert(fields, MountConfig)
    except msgspec.ValidationError as exc:
        print(f"tracefs-fuse: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _setup_logging(debug: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                        format="tracefs-fuse[%(process)d] %(levelname)s %(name)s: %(message)s")


def cmd_mount(args: argparse.Namespace) -> int:
    config = _config(args, os.path.abspath(args.mountpoint))
    if args.foreground:
        return _serve_foreground(config, args.ready_fd)
    read_fd, write_fd = os.pipe()
    # The daemon outlives us: it must not hold our caller's terminal or pipes
    # (a shell's $(...) would wait for it forever).
    with open(args.log, "ab") as log_file:
        child = subprocess.Popen(
            [sys.executable, "-m", "tracefs_fuse", "mount", "--foreground",
             "--ready-fd", str(write_fd), *_rebuild(args)],
            pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=log_file,
            stderr=log_file, start_new_session=True)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as ready:
        answer = ready.read()
    if answer == b"ok":
        return 0
    child.wait()
    print(f"tracefs-fuse: mount failed{': ' + answer.decode() if answer else ''}",
          file=sys.stderr)
    return 1


def _rebuild(args: argparse.Namespace) -> list[str]:
    """The options of ``args`` again, for the background daemon's command line."""
    out = [os.path.abspath(args.mountpoint), "--abi", args.abi, "--uid", str(args.uid),
           "--gid", str(args.gid), "--mode", f"{args.mode:o}",
           "--user-events-max", str(args.user_events_max),
           "--buffer-size-kb", str(args.buffer_size_kb)]
    if args.nr_cpus is not None:
        out += ["--cpus", str(args.nr_cpus)]
    if args.debug:
        out.append("--debug")
    return out


def _serve_foreground(config: MountConfig, ready_fd: int | None) -> int:
    import trio

    from .fuse._daemon import Daemon  # imports pyfuse3 through the bridge

    _setup_logging(config.debug)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(Daemon(config).run)
            if ready_fd is not None:
                os.write(ready_fd, b"ok")
                os.close(ready_fd)

    try:
        trio.run(main)
    except Exception as exc:
        log.error("%s", exc, exc_info=config.debug)
        if ready_fd is not None:
            os.write(ready_fd, str(exc).encode())
        return 1
    return 0


def cmd_umount(args: argparse.Namespace) -> int:
    return subprocess.run(["fusermount3", "-u", args.mountpoint]).returncode


def cmd_run(args: argparse.Namespace) -> int:
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        print("tracefs-fuse run: no command given (tracefs-fuse run -- CMD [ARGS...])",
              file=sys.stderr)
        return 2
    from .fuse._run import run_in_namespace

    config = _config(args, "/sys/kernel/tracing")
    _setup_logging(config.debug)
    return run_in_namespace(config, argv)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "mount":
        return cmd_mount(args)
    if args.command == "umount":
        return cmd_umount(args)
    return cmd_run(args)
