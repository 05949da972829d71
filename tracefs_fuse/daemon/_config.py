"""Mount configuration: what the ``mount`` and ``run`` commands hand the daemon.

Rules:
  * One frozen msgspec Struct, validated when it is built from the command
    line (``msgspec.convert``); a daemon started in the background receives it
    as JSON (the hidden ``mount --config-json``), so the CLI and the daemon can
    never disagree about a field.
  * The bounds below are the only ones: the command line derives its checks,
    and their messages, from them.
  * Defaults are the kernel's: ``user_events_max`` 32768, 1410 KB per CPU of
    buffer (a new trace instance's size), ``auto`` ABI (every era accepted).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from ..engine import EnablePattern

AbiName = Literal["auto", "5.18", "6.1", "mainline"]
LogLevel = Literal["error", "warning", "info", "debug"]
ProcessSource = Literal["auto", "connector", "procfs"]
#: Generic mount flags libfuse 3.14 passes to mount(2) (it refuses the rest).
MountFlag = Literal["ro", "rw", "suid", "nosuid", "dev", "nodev", "exec", "noexec",
                    "async", "sync", "dirsync", "atime", "noatime"]
#: uid_t and gid_t are 32 bits, and (uid_t)-1 means "no id".
_ID = Annotated[int, msgspec.Meta(ge=0, le=2**32 - 2)]


class MountConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                  rename="kebab"):
    """How to serve one tracefs.

    Attributes:
        mountpoint: where to mount (absolute, symlinks resolved).
        abi: ``auto`` accepts every user_events ABI era side by side (told apart
            by ``struct user_reg.size``); the others pin one era, with that
            kernel's rules and errnos.
        uid, gid: owner of every file (tracefs' ``uid=``/``gid=`` options).
        mode: permission bits of the root directory (tracefs' ``mode=``).
        nr_cpus: per-CPU buffers to serve; defaults to the machine's possible CPUs.
        user_events_max: the ``kernel.user_events_max`` sysctl.
        buffer_size_kb: initial ring buffer size per CPU.
        log_level: ``info`` logs one line per refused request, ``debug`` every
            request.
        debug_fuse: also let libfuse dump every FUSE request it sees.
        allow_other: let every user's processes in (FUSE's ``allow_other``);
            the CLI turns it off where ``fusermount3`` would refuse it.
        mount_flags: generic mount flags (``ro``, ``nosuid``, …) for mount(2).
        process_source: how forks and execs of clients are followed:
            ``connector`` (the netlink process connector: initial namespaces,
            CAP_NET_ADMIN), ``procfs`` (``/proc``, anywhere), ``auto`` (the
            connector where it can be joined).
        events: user events to enable the moment they are created, as
            ``set_event`` words with globs (``user_events:*``); an option the
            kernel lacks (see ``engine/_auto_enable.py``).
        fast_path: answer enabled-event writes natively (docs/performance.md);
            ``--no-fast-path`` leaves every write to the engine.
    """

    mountpoint: str
    abi: AbiName = "auto"
    uid: _ID = 0
    gid: _ID = 0
    mode: Annotated[int, msgspec.Meta(ge=0, le=0o7777)] = 0o700
    nr_cpus: Annotated[int, msgspec.Meta(ge=1, le=8192)] | None = None
    user_events_max: Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)] = 32768
    buffer_size_kb: Annotated[int, msgspec.Meta(ge=1)] = 1410
    log_level: LogLevel = "warning"
    debug_fuse: bool = False
    allow_other: bool = True
    mount_flags: tuple[MountFlag, ...] = ()
    process_source: ProcessSource = "auto"
    events: tuple[str, ...] = ()
    #: Enabled-event writes answered natively (``--no-fast-path``: by the engine).
    fast_path: bool = True

    def __post_init__(self) -> None:
        for pattern in self.events:
            EnablePattern.parse(pattern)  # ValueError: msgspec reports it with its path


_decoder = msgspec.json.Decoder(MountConfig)
_encoder = msgspec.json.Encoder()


def decode(data: bytes | str) -> MountConfig:
    return _decoder.decode(data)


def encode(config: MountConfig) -> bytes:
    return _encoder.encode(config)
