"""The ``tracefs-fuse`` command line.

One pair of functions per subcommand, listed in :data:`COMMANDS`: ``add_<name>``
builds its parser, ``cmd_<name>`` runs it and returns the exit status; a new
subcommand is a new pair and one line in ``COMMANDS``.

* ``run [options] -- CMD``: CMD with our tracefs at ``/sys/kernel/tracing``, in
  a private mount namespace (and, without sudo, a user namespace).
* ``mount DIR`` and ``umount DIR``.
* ``run --record FILE -- CMD``: what CMD emits, as JSON Lines; ``show FILE``
  prints such a recording (``cli/_record.py``).
* mount(8)'s form, ``tracefs-fuse SOURCE DIR -o OPTIONS`` (what Debian's
  ``mount.fuse3`` runs for ``mount -t fuse.tracefs-fuse`` and for fstab), is
  ``mount DIR -o OPTIONS``.

Rules:
  * Filesystem options are :class:`~tracefs_fuse.daemon._config.MountConfig` fields: an
    option's ``dest`` is the field's name, its default and bounds are the
    field's, and ``-o NAME=VALUE`` is the same option again. An option added
    the same way is reachable through ``-o`` with no further code.
  * Exit status 2 is a usage error, printed by the subcommand's own parser (its
    usage, then ``error: argument --X: ...``). Exit status 1 is an environment
    problem or a failed mount, said in one line (``tracefs-fuse mount: what:
    how to fix``), never a traceback. ``run`` otherwise exits with CMD's status.
  * The environment is checked before pyfuse3 and the bridge are loaded.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import logging
import os
import sys
import typing
from typing import Callable, NamedTuple

import msgspec

from .. import __version__
from ..daemon import _logging, _systemd
from ..daemon._config import AbiName, LogLevel, MountConfig, ProcessSource
from ..daemon._config import decode as decode_config
from ..daemon._config import encode as encode_config
from ..daemon._mount_options import MOUNT_FLAGS, has_no_effect
from ..host import _environment
from ..host._environment import EnvironmentProblem, one_line
from . import _record

log = logging.getLogger("tracefs_fuse")

PROG = "tracefs-fuse"
TRACING = "/sys/kernel/tracing"

_FIELDS = {f.name: f for f in msgspec.structs.fields(MountConfig)}
_FIELD_TYPES = {f.name: f.type for f in typing.cast(
    msgspec.inspect.StructType, msgspec.inspect.type_info(MountConfig)).fields}


# -- option values, checked against MountConfig's own bounds ----------------------------------


def _bounds(field: str) -> tuple[int | None, int | None]:
    info = _FIELD_TYPES[field]
    if isinstance(info, msgspec.inspect.UnionType):  # int | None
        info = next(t for t in info.types if isinstance(t, msgspec.inspect.IntType))
    assert isinstance(info, msgspec.inspect.IntType)
    return info.ge, info.le


def _number(field: str, *, octal: bool = False) -> Callable[[str], int]:
    """An argparse ``type`` for an integer field: its bounds, and messages that say them."""
    low, high = _bounds(field)
    show = (lambda n: f"{n:o}") if octal else str

    def convert(text: str) -> int:
        try:
            value = int(text, 8 if octal else 10)
        except ValueError:
            kind = "an octal mode (like 750)" if octal else "a whole number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            if high is None:
                allowed = f"at least {show(low)}"
            else:
                allowed = f"from {show(low)} to {show(high)}"
            raise argparse.ArgumentTypeError(f"{text} is out of range: {allowed}")
        return value

    convert.__name__ = "octal mode" if octal else "number"
    return convert


def _default(field: str) -> object:
    return _FIELDS[field].default


class _OptionWords(argparse.Action):
    """``-o WORD[,WORD...]``: our options by name, and mount flags, the FUSE way.

    ``NAME=VALUE`` (or ``NAME`` for a flag) is ``--NAME VALUE``, converted and
    checked by that option; see :mod:`tracefs_fuse.daemon._mount_options` for
    the rest. Later words win, as later options do.
    """

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        assert isinstance(values, str)
        for word in filter(None, values.split(",")):
            name, has_value, value = word.partition("=")
            if word in MOUNT_FLAGS:
                namespace.mount_flags = (*namespace.mount_flags, word)
            elif not has_no_effect(word):
                self._apply(parser, namespace, word, name, value if has_value else None)

    def _apply(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
               word: str, name: str, value: str | None) -> None:
        # argparse keeps no public index of options by name.
        action = parser._option_string_actions.get("--" + name.replace("_", "-"))
        if action is None or action.help == argparse.SUPPRESS or action.dest == "help":
            raise argparse.ArgumentError(self, f"{word}: unknown option")
        if action.nargs == 0:
            if value is not None:
                raise argparse.ArgumentError(self, f"{word}: {name} takes no value")
            action(parser, namespace, None, "-o")
            return
        if value is None:
            raise argparse.ArgumentError(self, f"{word}: {name} needs a value ({name}=...)")
        try:
            converted = action.type(value) if callable(action.type) else value
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentError(self, f"{word}: {exc}") from None
        if action.choices is not None and converted not in action.choices:
            choices = ", ".join(map(str, action.choices))
            raise argparse.ArgumentError(self, f"{word}: choose from {choices}")
        action(parser, namespace, typing.cast(str, converted), "-o")


def _add_filesystem_options(parser: argparse.ArgumentParser, *,
                            owner: tuple[str, str]) -> None:
    """The options of the filesystem served, shared by ``mount`` and ``run``.

    Args:
        owner: the default user and group of the files, in words.
    """
    group = parser.add_argument_group("filesystem options (also as -o NAME=VALUE,...)")
    group.add_argument(
        "--abi", choices=typing.get_args(AbiName), default=_default("abi"),
        help="user_events ABI era(s) to accept; auto takes all three side by side, told "
             "apart by struct user_reg.size (default: %(default)s)")
    group.add_argument("--uid", type=_number("uid"), metavar="UID",
                       help=f"owner of every file, as tracefs' uid= (default: {owner[0]})")
    group.add_argument("--gid", type=_number("gid"), metavar="GID",
                       help=f"group of every file, as tracefs' gid= (default: {owner[1]})")
    group.add_argument(
        "--mode", type=_number("mode", octal=True), default=_default("mode"), metavar="MODE",
        help=f"permission bits of the root directory, octal, as tracefs' mode= "
             f"(default: {_default('mode'):o})")
    group.add_argument("--cpus", type=_number("nr_cpus"), dest="nr_cpus", metavar="N",
                       help="number of per-CPU ring buffers (default: the machine's "
                            "possible CPUs)")
    group.add_argument(
        "--buffer-size-kb", type=_number("buffer_size_kb"), metavar="KB",
        default=_default("buffer_size_kb"),
        help="initial size of each per-CPU ring buffer, as buffer_size_kb (default: "
             "%(default)s, a new instance's)")
    group.add_argument(
        "--user-events-max", type=_number("user_events_max"), metavar="N",
        default=_default("user_events_max"),
        help="most user events at once, the kernel.user_events_max sysctl (default: "
             "%(default)s)")
    group.add_argument(
        "--process-source", choices=typing.get_args(ProcessSource),
        default=_default("process_source"),
        help="how forks and execs of clients are followed: the netlink process connector "
             "(initial namespaces, CAP_NET_ADMIN), /proc (anywhere), or auto: the connector "
             "where it can be joined (default: %(default)s)")
    group.add_argument(
        "--no-fast-path", dest="fast_path", action="store_false", default=None,
        help="serve every write with the engine, none natively (for debugging; "
             "docs/performance.md)")
    group.add_argument(
        "-o", action=_OptionWords, metavar="OPT[,OPT...]",
        help="options the FUSE way: any filesystem or logging option by name "
             "(mode=750,gid=100,abi=6.1,cpus=4,debug), and the mount flags ro, nosuid, "
             "nodev, noexec, sync, noatime, ... (default: none)")
    parser.set_defaults(mount_flags=())
    logs = parser.add_argument_group("logging")
    logs.add_argument(
        "--log-level", choices=typing.get_args(LogLevel), default=_default("log_level"),
        help="what the daemon logs: info adds one line per refused request, debug "
             "everything (default: %(default)s)")
    logs.add_argument("--debug", dest="log_level", action="store_const", const="debug",
                      help="the same as --log-level debug")
    logs.add_argument("--debug-fuse", action="store_true",
                      help="also log libfuse's dump of every FUSE request (very verbose)")


def _config(args: argparse.Namespace, mountpoint: str, *, owner: tuple[int, int],
            allow_other: bool = True) -> MountConfig:
    """The config the parsed options describe (dests named as MountConfig fields)."""
    fields: dict[str, object] = {
        name: getattr(args, name) for name in _FIELDS if getattr(args, name, None) is not None}
    fields.setdefault("uid", owner[0])
    fields.setdefault("gid", owner[1])
    fields.update(mountpoint=mountpoint, allow_other=allow_other)
    fields.update(_record.events_config(args))
    try:
        return msgspec.convert({k.replace("_", "-"): v for k, v in fields.items()}, MountConfig)
    except msgspec.ValidationError as exc:  # the option types check first; a bug if it fires
        parser: argparse.ArgumentParser = args.parser
        parser.error(str(exc))


def _problem(command: str, exc: BaseException) -> int:
    """Say an environment problem or a failure in one line; exit status 1."""
    print(f"{PROG} {command}: {one_line(exc)}", file=sys.stderr)
    return 1


# -- run ------------------------------------------------------------------------------------


RUN_DESCRIPTION = f"""\
Run CMD in a private mount namespace where tracefs-fuse is mounted at
{TRACING} and /sys/kernel/debug/tracing, and exit with CMD's status.
Nothing stays mounted afterwards, however CMD ends.

Without sudo, tracefs-fuse first creates a user namespace, in which CMD runs
as root (uid 0) with every capability there: programs and test suites that
check for root behave as under sudo, while files CMD creates outside belong
to you. This needs unprivileged user namespaces (most distributions allow
them) and a /dev/fuse you may open (its usual mode is 0666).

The daemon's log is held back while CMD runs and written to stderr after it
exits, so that it never interleaves with CMD's own output; --log changes that.
After CMD, a summary names the registrations refused and the --events
patterns that matched no user event.

A SIGINT, SIGTERM or SIGHUP sent to tracefs-fuse run itself (kill -INT PID)
is passed on to CMD, as timeout(1) does; Ctrl-C at the terminal reaches CMD
directly, once.
"""


def add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "run", help=f"run a command with tracefs-fuse at {TRACING}",
        description=RUN_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
        usage=f"{PROG} run [options] -- CMD [ARGS...]")
    parser.add_argument(
        "--log", metavar="FILE",
        help="write the daemon's log to FILE while CMD runs, or to stderr as it happens "
             "with '-' (default: stderr, after CMD exits)")
    _add_filesystem_options(parser, owner=("0, root: without sudo, that is you",
                                           "0: without sudo, your group"))
    _record.add_events_option(parser)
    _record.add_record_option(parser)
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]",
                        help="the command to run")
    parser.set_defaults(handler=cmd_run, parser=parser)


def cmd_run(args: argparse.Namespace) -> int:
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        args.parser.error("no command given (tracefs-fuse run [options] -- CMD [ARGS...])")
    if not _environment.has_cap_sys_admin() and (args.uid or args.gid):
        args.parser.error("argument --uid/--gid: without sudo, run's user namespace has "
                          "only uid and gid 0 (you)")
    config = _config(args, TRACING, owner=(0, 0))
    held_back = None
    if args.log == "-":
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
    elif args.log:
        try:
            handler = logging.FileHandler(args.log)  # opened here, outside the namespaces
        except OSError as exc:
            return _problem("run", exc)
    else:
        handler = held_back = _logging.HeldBack()
    _logging.setup(config.log_level, handler)
    from ..daemon._run import run_in_namespace

    try:
        return run_in_namespace(config, argv, _record.open_record(args),
                                tuple(args.events or ()))
    finally:
        if held_back is not None:
            held_back.write_to(sys.stderr)


# -- mount ----------------------------------------------------------------------------------


MOUNT_DESCRIPTION = """\
Serve a tracefs at DIR, an existing directory. Returns once it is mounted; the
daemon stays in the background until DIR is unmounted (tracefs-fuse umount
DIR) or it gets SIGTERM.

As root, every user may use the mount (FUSE's allow_other). An ordinary user
mounts the way sshfs does, through fusermount3: only that user's processes
may then use it, unless /etc/fuse.conf has user_allow_other.
"""


def add_mount(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "mount", help="serve a tracefs at a directory", description=MOUNT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage=f"{PROG} mount [options] DIR")
    parser.add_argument("mountpoint", metavar="DIR", help="where to mount (it must exist)")
    parser.add_argument(
        "--foreground", "-f", action="store_true",
        help="stay in the foreground, log to stderr and tell systemd when ready "
             "(Type=notify) (default: return once mounted)")
    parser.add_argument(
        "--log", metavar="FILE", default=os.devnull,
        help="where the background daemon writes its log (default: nowhere; with -f: "
             "stderr)")
    parser.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--config-json", help=argparse.SUPPRESS)
    _add_filesystem_options(parser, owner=("you; 0 under sudo", "your group; 0 under sudo"))
    _record.add_events_option(parser)
    parser.set_defaults(handler=cmd_mount, parser=parser)


def cmd_mount(args: argparse.Namespace) -> int:
    if args.config_json is not None:  # the background daemon, checked by its parent
        return _serve_foreground(decode_config(args.config_json), args.ready_fd)
    mountpoint = os.path.realpath(args.mountpoint)
    try:
        _environment.check_fuse_device()
        _environment.check_mountpoint(mountpoint)
        allow_other = _check_mount_permission(mountpoint)
    except EnvironmentProblem as exc:
        return _problem("mount", exc)
    config = _config(args, mountpoint, owner=(os.geteuid(), os.getegid()),
                     allow_other=allow_other)
    if args.foreground:
        return _serve_foreground(config, args.ready_fd)
    return _serve_background(config, args.log)


def _check_mount_permission(mountpoint: str) -> bool:
    """May we mount at all, and may every user get in (``allow_other``)?"""
    if _environment.has_cap_sys_admin():
        return True
    if os.geteuid() == 0:
        raise EnvironmentProblem(
            "mounting needs CAP_SYS_ADMIN, which this root lacks (a container?): give it "
            "--cap-add SYS_ADMIN, or use 'tracefs-fuse run', which needs neither")
    _environment.check_user_mount(mountpoint)
    if _environment.user_allow_other():
        return True
    print(f"{PROG} mount: note: only your own processes (uid {os.geteuid()}) may use this "
          f"mount, not even root's: other users need user_allow_other in "
          f"{_environment.FUSE_CONF}", file=sys.stderr)
    return False


def python_command(module: str) -> list[str]:
    """This interpreter running ``module`` of the installed package, whatever the
    current directory: ``-P`` keeps a checkout's unbuilt source tree (no native
    bridge) from shadowing it."""
    return [sys.executable, "-P", "-m", module]


def _last_words(said: bytes) -> str | None:
    """The last line a dead daemon printed (a traceback's ends with the error)."""
    lines = said.decode(errors="replace").strip().splitlines()
    return lines[-1].strip() if lines else None


def _serve_background(config: MountConfig, log_path: str) -> int:
    """Start the daemon detached; return once it serves (0) or has failed (1).

    Until it serves, the daemon's stderr is a file of ours: a daemon that dies
    before it can answer (an interpreter that cannot import the package) is
    explained by its last line. Once serving, it writes stderr to its log.
    """
    # Imported where used, as below: ``run`` needs neither (issue 21: start-up).
    import subprocess
    import tempfile

    read_fd, write_fd = os.pipe()
    # The daemon outlives us: it must not hold our caller's terminal or pipes
    # (a shell's $(...) would wait for it forever).
    try:
        with (os.fdopen(read_fd, "rb") as ready, open(log_path, "ab") as log_file,
              tempfile.TemporaryFile() as startup):
            try:
                child = subprocess.Popen(
                    [*python_command("tracefs_fuse"), "mount", "--foreground",
                     "--ready-fd", str(write_fd), "--config-json",
                     encode_config(config).decode(), config.mountpoint],
                    pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=log_file,
                    stderr=startup, start_new_session=True)
            finally:
                os.close(write_fd)
            answer = ready.read()
            if answer == b"ok":
                return 0
            child.wait()
            startup.seek(0)
            said = startup.read()
    except OSError as exc:
        return _problem("mount", exc)
    reason = answer.decode(errors="replace")
    if not reason:
        reason = f"the daemon exited with {child.returncode}"
        last = _last_words(said)
        if last:
            reason += f": {last}"
    print(f"{PROG} mount: {reason}", file=sys.stderr)
    return 1


def _serve_foreground(config: MountConfig, ready_fd: int | None) -> int:
    """Serve until unmounted or SIGTERM; readiness on ``ready_fd`` and to systemd.

    Until it serves, what libfuse and fusermount3 print on stderr is kept, so
    that a failed mount is explained in one line (to the parent through
    ``ready_fd``, and on stderr).
    """
    import tempfile

    _logging.setup(config.log_level, logging.StreamHandler(sys.stderr))
    import trio

    from ..daemon._daemon import Daemon  # loads the bridge, then pyfuse3

    if ready_fd is not None:
        # Started by _serve_background: its startup file has done its work (we
        # got this far); from here on, failures are told through ready_fd and
        # everything else goes to our log, which is stdout.
        os.dup2(1, 2)
    startup = tempfile.TemporaryFile()
    stderr = os.dup(2)
    os.dup2(startup.fileno(), 2)

    def restore_stderr() -> bytes:
        if startup.closed:
            return b""
        os.dup2(stderr, 2)
        os.close(stderr)
        startup.seek(0)
        said = startup.read()
        startup.close()
        os.write(2, said)
        return said

    told: list[bytes] = []  # the answer on ready_fd, said once

    def tell(answer: bytes) -> None:
        if ready_fd is not None and not told:
            os.write(ready_fd, answer)
            os.close(ready_fd)
        told.append(answer)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(Daemon(config).run)
            restore_stderr()
            tell(b"ok")
            _systemd.notify("READY=1", f"STATUS=serving {config.mountpoint}")

    try:
        trio.run(main)
    except Exception as exc:
        said = restore_stderr().decode(errors="replace").strip().splitlines()
        if _logging.is_bug(exc):
            reason = _logging.bug_line(exc)
        elif said and not said[-1].startswith(f"{PROG}[") and not told:
            reason = said[-1]  # libfuse's or fusermount3's own words say why better than ours
        else:
            reason = one_line(exc)
        if told:  # the mount served: this is no failed mount
            log.error("stopped serving %s: %s", config.mountpoint, reason)
        else:
            log.error("mount failed: %s", reason,
                      exc_info=config.log_level == "debug" and not _logging.is_bug(exc))
            tell(reason.encode())
        return 1
    _systemd.notify("STOPPING=1")
    return 0


# -- umount ---------------------------------------------------------------------------------


def add_umount(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "umount", help="unmount a tracefs-fuse mount (its daemon exits)",
        description="Unmount the tracefs-fuse mount at DIR; its daemon then exits.")
    parser.add_argument("mountpoint", metavar="DIR", help="a tracefs-fuse mount point")
    parser.set_defaults(handler=cmd_umount, parser=parser)


def cmd_umount(args: argparse.Namespace) -> int:
    import subprocess

    mountpoint = os.path.realpath(args.mountpoint)
    try:
        _environment.check_is_ours(mountpoint)
        result = subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True,
                                text=True)
    except (EnvironmentProblem, OSError) as exc:
        return _problem("umount", exc)
    if result.returncode != 0:
        said = result.stderr.strip().splitlines() or [f"fusermount3 exited {result.returncode}"]
        print(f"{PROG} umount: {said[-1].removeprefix('fusermount3: ')}", file=sys.stderr)
        return 1
    return 0


# -- the command ----------------------------------------------------------------------------


class Command(NamedTuple):
    name: str
    add: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]


COMMANDS = (Command("run", add_run), Command("mount", add_mount), Command("umount", add_umount),
            Command("show", _record.add_show))

EPILOG = f"""\
examples:
  {PROG} run -- ./my-instrumented-program      (no sudo needed)
  {PROG} mount ~/tracing && cat ~/tracing/user_events_status
  {PROG} umount ~/tracing
  mount -t fuse.tracefs-fuse tracefs /mnt/tracing -o mode=750,gid=100

'{PROG} COMMAND --help' describes each command and its options.
"""


def versions() -> str:
    """``tracefs-fuse X (pyfuse3 Y, libfuse Z)``, without loading pyfuse3 or the bridge."""
    import importlib.metadata  # 20 ms, for --version alone

    try:
        pyfuse3 = importlib.metadata.version("pyfuse3")
    except importlib.metadata.PackageNotFoundError:
        pyfuse3 = "not installed"
    try:
        # const char *fuse_pkgversion(void), libfuse 3's own version string.
        pkgversion = ctypes.CDLL("libfuse3.so.3").fuse_pkgversion
        pkgversion.restype = ctypes.c_char_p
        libfuse = pkgversion().decode()
    except (OSError, AttributeError):
        libfuse = "not found"
    return f"{PROG} {__version__} (pyfuse3 {pyfuse3}, libfuse {libfuse})"


class _Version(argparse.Action):
    """``--version``: the versions are looked up only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(versions())
        parser.exit()


@functools.cache
def build_parser() -> argparse.ArgumentParser:
    """The parser, built once per process (a run server's forks use the one
    built before them: 8 ms a run otherwise)."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="A user-space tracefs for Linux user_events, served over FUSE.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show the version, and those of pyfuse3 and libfuse, and exit")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add(sub)
    for subparser in sub.choices.values():
        # An unknown option is reported by the command's own parser, with its usage.
        subparser.set_defaults(command_parser=subparser)
    return parser


def _from_mount_helper(argv: list[str]) -> list[str]:
    """``SOURCE DIR -o OPTIONS`` (mount.fuse3's call) as ``mount DIR -o OPTIONS``."""
    names = {command.name for command in COMMANDS}
    if (len(argv) >= 3 and argv[0] not in names and not argv[0].startswith("-")
            and "-o" in argv[2:]):
        return ["mount", *argv[1:]]
    return argv


def console() -> typing.NoReturn:
    """The ``tracefs-fuse`` command: :func:`main`, then out without the
    interpreter's teardown.

    That teardown (freeing every module's objects, one by one) took 95-130 ms
    after a ``run`` had returned, more than the rest of a ``run -- true``
    (issue 21); nothing of ours needs it: the recording, the log and the
    output are written and closed by then, and every process we started has
    been reaped. What Python would still print is flushed here.
    """
    status = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a closed pipe: Python's own exit says 120
            status = status or 120
    os._exit(status)


def main(argv: list[str] | None = None) -> int:
    args, unknown = build_parser().parse_known_args(
        _from_mount_helper(sys.argv[1:] if argv is None else argv))
    if unknown:
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    status: int = args.handler(args)
    return status

