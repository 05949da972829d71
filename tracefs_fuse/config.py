"""Mount configuration: what the ``mount`` and ``run`` commands hand the daemon.

Rules:
  * One frozen msgspec Struct, validated at decode time; the daemon receives it
    as JSON (``--config-json``) when it runs in another process, so the CLI and
    the daemon can never disagree about a field.
  * Defaults are the kernel's: ``user_events_max`` 32768, 1410 KB per CPU of
    buffer (a new trace instance's size), ``auto`` ABI (every era accepted).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

AbiName = Literal["auto", "5.18", "6.1", "mainline"]


class MountConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                  rename="kebab"):
    """How to serve one tracefs.

    Attributes:
        mountpoint: where to mount.
        abi: ``auto`` accepts every user_events ABI era side by side (told apart
            by ``struct user_reg.size``); the others pin one era, with that
            kernel's rules and errnos.
        uid, gid: owner of every file (tracefs' ``uid=``/``gid=`` options).
        mode: permission bits of the root directory (tracefs' ``mode=``).
        nr_cpus: per-CPU buffers to serve; defaults to the machine's possible CPUs.
        user_events_max: the ``kernel.user_events_max`` sysctl.
        buffer_size_kb: initial ring buffer size per CPU.
        debug: log every request.
        fast_path: answer enabled-event writes natively (docs/performance.md).
    """

    mountpoint: str
    abi: AbiName = "auto"
    uid: Annotated[int, msgspec.Meta(ge=0)] = 0
    gid: Annotated[int, msgspec.Meta(ge=0)] = 0
    mode: Annotated[int, msgspec.Meta(ge=0, le=0o7777)] = 0o700
    nr_cpus: Annotated[int, msgspec.Meta(ge=1, le=8192)] | None = None
    user_events_max: Annotated[int, msgspec.Meta(ge=0)] = 32768
    buffer_size_kb: Annotated[int, msgspec.Meta(ge=1)] = 1410
    debug: bool = False
    #: Enabled-event writes answered natively (``--no-fast-path``: by the engine).
    fast_path: bool = True


_decoder = msgspec.json.Decoder(MountConfig)
_encoder = msgspec.json.Encoder()


def decode(data: bytes | str) -> MountConfig:
    return _decoder.decode(data)


def encode(config: MountConfig) -> bytes:
    return _encoder.encode(config)
