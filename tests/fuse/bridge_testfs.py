"""Test-only pyfuse3 filesystem that exercises the native bridge.

Run as ``python bridge_testfs.py MOUNTPOINT --events-fd N
[--import-pyfuse3-first]``, with only MAX_TASKS pyfuse3 workers; tests/fuse/test_bridge.py drives it
with the C clients in tests/clients/bridge_*.c.  Every file sits in the root:

==========  =================================================================
``ioctl``   IOC_REG: 8-byte copy-in, answer written with process_vm_writev,
            reply without data; IOC_DATA: reply with data; IOC_NOP (replied
            inline) and IOC_NOP_TASK (from a trio task); else ENOTTY.
``dual``    direct_io + keep_cache, 4096 bytes: read(2) gets TEXT, page-cache
            fills (lock_owner 0, i.e. mmap faults) get the binary page.
``ctl``     write ``store OFF HEX``: update the page, notify_store it;
            ``queue OFF HEX...``: one batch per HEX for the bridge's storer
            thread, the write's reply sent by it after the last;
            ``double``: reply twice (event ``double-reply <error>``); ``late
            PID``: see ``late``; anything else makes the handler raise.
``block``   direct_io: read blocks until interrupted; EAGAIN if the per-read
            flags carry O_NONBLOCK.
``late``    direct_io: read blocks, interrupts not watched until ctl gets
            ``late PID`` (event ``late-watch <pid> <already interrupted>``).
``par``     direct_io + FOPEN_PARALLEL_DIRECT_WRITES: writes are held until
            two are in flight (or PAR_TIMEOUT_S passes).
``serial``  like ``par`` without the flag (SERIAL_TIMEOUT_S).
``sink``    direct_io: writes answered at once (benchmarks); ``drop`` is
            never answered, leaving it to the bridge's garbage-collection net.
``status``  bridge_status() as JSON.
==========  =================================================================

Events, one line each on ``--events-fd``, let the tests wait for the daemon
instead of sleeping: ``ready``, ``blocked <pid>``, ``interrupted <pid>``,
``reply-refused <pid>`` (a reply tried inside interrupted()),
``late-blocked <pid>``, ``late-watch <pid> <bool>``, ``double-reply <error>``,
``nonblock <flags>``, ``writes <file> <count>``.  Logs go to stderr.

Rules: handler callbacks never block; blocked reads and held writes are
replied from tasks in the filesystem's own nursery.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import logging
import os
import stat
import struct
import sys
from collections.abc import Callable

if "--import-pyfuse3-first" in sys.argv:
    import pyfuse3  # noqa: F401  (deliberately before the bridge)

import msgspec
import trio

from tracefs_fuse.fuse import _session
from tracefs_fuse.fuse._session import Request, pyfuse3

ROOT = pyfuse3.ROOT_INODE
FILES = {b"ioctl": 2, b"dual": 3, b"ctl": 4, b"block": 5, b"par": 6,
         b"serial": 7, b"sink": 8, b"status": 9, b"late": 10}
IOCTL, DUAL, CTL, BLOCK, PAR, SERIAL, SINK, STATUS, LATE = FILES.values()
HELD_WRITES = {PAR: "par", SERIAL: "serial"}
SIZES = {DUAL: 4096, PAR: 1 << 20, SERIAL: 1 << 20}

PAGE_SIZE = 4096
TEXT = b"dual-text-for-read(2)\n"
# Fewer pyfuse3 workers than the tests block readers: bridged requests must
# not hold one.
MAX_TASKS = 4
PAR_TIMEOUT_S = 10.0     # must never expire when parallel writes work
SERIAL_TIMEOUT_S = 0.5   # negative control: expires once per write


def _ioc(direction: int, kind: str, nr: int, size: int) -> int:
    return direction << 30 | size << 16 | ord(kind) << 8 | nr


IOC_REG = _ioc(3, "*", 0, 8)    # _IOWR('*', 0, struct bridge_reg *)
IOC_DATA = _ioc(3, "*", 2, 16)  # _IOWR('*', 2, uint64_t[2])
IOC_NOP = _ioc(0, "*", 3, 0)    # _IO('*', 3)
IOC_NOP_TASK = _ioc(0, "*", 4, 0)  # _IO('*', 4)


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.process_vm_writev.restype = ctypes.c_ssize_t
_libc.process_vm_writev.argtypes = [
    ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_ulong,
    ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.c_ulong]


def poke(pid: int, addr: int, data: bytes) -> None:
    """Write `data` at `addr` in thread `pid` (as the daemon will)."""
    buf = ctypes.create_string_buffer(data, len(data))
    local = _IoVec(ctypes.addressof(buf), len(data))
    remote = _IoVec(addr, len(data))
    if _libc.process_vm_writev(pid, local, 1, remote, 1, 0) != len(data):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class TestFs(pyfuse3.Operations):
    """Namespace and open flags; data goes through `Bridged`."""

    def __init__(self) -> None:
        super().__init__()
        self._next_fh = 1

    def _attr(self, inode: int) -> pyfuse3.EntryAttributes:
        attr = pyfuse3.EntryAttributes()
        attr.st_ino = inode
        attr.st_mode = (stat.S_IFDIR | 0o755 if inode == ROOT
                        else stat.S_IFREG | 0o666)
        attr.st_size = SIZES.get(inode, 0)
        # Constant size and times: libfuse's default AUTO_INVAL_DATA would
        # otherwise drop stored pages.
        attr.entry_timeout = attr.attr_timeout = 3600
        return attr

    async def getattr(self, inode: int, ctx: object = None
                      ) -> pyfuse3.EntryAttributes:
        if inode != ROOT and inode not in FILES.values():
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self._attr(inode)

    async def lookup(self, parent_inode: int, name: bytes, ctx: object = None
                     ) -> pyfuse3.EntryAttributes:
        if parent_inode != ROOT or name not in FILES:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self._attr(FILES[name])

    async def opendir(self, inode: int, ctx: object) -> int:
        if inode != ROOT:
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        return 0

    async def readdir(self, fh: int, start_id: int,
                      token: pyfuse3.ReaddirToken) -> None:
        for name, inode in list(FILES.items())[start_id:]:
            if not pyfuse3.readdir_reply(token, name, self._attr(inode),
                                         inode - 1):
                break

    async def releasedir(self, fh: int) -> None:
        pass

    async def open(self, inode: int, flags: int, ctx: object
                   ) -> pyfuse3.FileInfo:
        fh = self._next_fh
        self._next_fh += 1
        if inode == PAR:
            _session.set_open_flags(fh, _session.FOPEN_PARALLEL_DIRECT_WRITES)
        return pyfuse3.FileInfo(fh=fh, direct_io=True,
                                keep_cache=inode == DUAL,
                                nonseekable=inode in (BLOCK, LATE))

    async def release(self, fh: int) -> None:
        pass


class Bridged:
    """The bridge handler: ioctl/read/write/interrupted, never blocking."""

    def __init__(self, nursery: trio.Nursery, emit: Callable[[str], None]
                 ) -> None:
        self._nursery = nursery
        self._emit = emit
        self._page = bytearray(b"\xab" * PAGE_SIZE)
        self._status: dict[int, bytes] = {}
        self._blocked: dict[Request, trio.CancelScope] = {}
        self._late: dict[int, Request] = {}
        self._held: dict[int, list[tuple[Request, int]]] = {}
        self._held_full: dict[int, trio.Event] = {}

    def ioctl(self, req: Request, ino: int, fh: int, cmd: int, arg: int,
              in_data: bytes, out_size: int, flags: int) -> None:
        if ino != IOCTL or cmd not in (IOC_REG, IOC_DATA, IOC_NOP,
                                       IOC_NOP_TASK):
            req.reply_err(errno.ENOTTY)
        elif cmd == IOC_NOP:
            req.reply_ioctl(0)
        elif cmd == IOC_NOP_TASK:
            self._nursery.start_soon(self._reply_nop, req)
        elif cmd == IOC_DATA:
            v0, v1 = struct.unpack("<QQ", in_data)
            req.reply_ioctl(0, struct.pack("<QQ", v0 + 1, v1 + 1))
        else:
            # struct bridge_reg { u32 size; u32 marker; u64 result; u32 tid; }
            # Only size and marker were copied in (_IOC_SIZE = 8).
            if len(in_data) != 8:
                req.reply_err(errno.EINVAL)
                return
            size, marker = struct.unpack("<II", in_data)
            poke(req.pid, arg + 4, struct.pack("<I", 0xFEEDFACE))
            poke(req.pid, arg + 8, struct.pack("<QI", marker + size, req.pid))
            req.reply_ioctl(7)

    async def _reply_nop(self, req: Request) -> None:
        req.reply_ioctl(0)

    def read(self, req: Request, ino: int, fh: int, offset: int, size: int,
             flags: int, lock_owner: int) -> None:
        if ino == DUAL:
            data = self._page if lock_owner == 0 else TEXT
            req.reply_data(bytes(data[offset:offset + size]))
        elif ino == STATUS:
            # One snapshot per open file, so sequential reads stay coherent.
            if offset == 0 or fh not in self._status:
                self._status[fh] = msgspec.json.encode(
                    _session.bridge_status())
            req.reply_data(self._status[fh][offset:offset + size])
        elif ino == BLOCK:
            self._read_block(req, flags)
        elif ino == LATE:
            self._late[req.pid] = req
            self._emit(f"late-blocked {req.pid}")
        else:
            req.reply_data(b"")

    def _read_block(self, req: Request, flags: int) -> None:
        if flags & os.O_NONBLOCK:
            self._emit(f"nonblock {flags:#x}")
            req.reply_err(errno.EAGAIN)
            return
        if req.watch_interrupts():
            req.reply_err(errno.EINTR)
            return
        scope = trio.CancelScope()
        self._blocked[req] = scope
        self._nursery.start_soon(self._block, req, scope)
        self._emit(f"blocked {req.pid}")

    async def _block(self, req: Request, scope: trio.CancelScope) -> None:
        try:
            with scope:
                await trio.sleep_forever()
        finally:
            del self._blocked[req]
        self._emit(f"interrupted {req.pid}")
        req.reply_err(errno.EINTR)

    def interrupted(self, req: Request) -> None:
        try:
            req.reply_err(errno.EINTR)
        except RuntimeError:
            self._emit(f"reply-refused {req.pid}")
        scope = self._blocked.get(req)
        if scope is not None:
            scope.cancel()

    def write(self, req: Request, ino: int, fh: int, offset: int, data: bytes,
              flags: int) -> None:
        if ino == SINK:
            if data != b"drop":
                req.reply_write(len(data))
        elif ino == CTL:
            self._store(req, data)
        elif ino in HELD_WRITES:
            self._hold(req, ino, len(data))
        else:
            req.reply_err(errno.EBADF)

    def _store(self, req: Request, command: bytes) -> None:
        if command == b"double":
            req.reply_write(len(command))
            try:
                req.reply_write(len(command))
            except RuntimeError as exc:
                self._emit(f"double-reply {exc}")
            return
        if command.startswith(b"late "):
            late = self._late.pop(int(command.split()[1]))
            already = late.watch_interrupts()
            self._emit(f"late-watch {late.pid} {already}")
            late.reply_err(errno.EINTR)
            req.reply_write(len(command))
            return
        if command.startswith(b"queue "):
            _, offset, *hexes = command.split()
            batches = [[(DUAL, int(offset), bytes.fromhex(h.decode()))] for h in hexes]
            self._page[int(offset):int(offset) + len(batches[-1][0][2])] = batches[-1][0][2]
            for batch in batches[:-1]:
                _session.native.store(batch)
            _session.native.store(batches[-1], req, _session.native.REPLY_WRITE, len(command))
            return
        verb, offset, hexdata = command.split()
        data = bytes.fromhex(hexdata.decode())
        off = int(offset)
        if verb != b"store" or off + len(data) > PAGE_SIZE:
            req.reply_err(errno.EINVAL)
            return
        # Keep our copy authoritative: every mmap() of a direct_io file drops
        # the page cache and faults the page in again from us.
        self._page[off:off + len(data)] = data
        try:
            pyfuse3.notify_store(DUAL, off, data)
        except OSError as exc:
            req.reply_err(exc.errno or errno.EIO)
            return
        req.reply_write(len(command))

    def _hold(self, req: Request, ino: int, count: int) -> None:
        held = self._held.setdefault(ino, [])
        held.append((req, count))
        if len(held) == 1:
            self._held_full[ino] = trio.Event()
            self._nursery.start_soon(self._release_held, ino)
        elif len(held) == 2:
            self._held_full[ino].set()

    async def _release_held(self, ino: int) -> None:
        timeout = PAR_TIMEOUT_S if ino == PAR else SERIAL_TIMEOUT_S
        with trio.move_on_after(timeout):
            await self._held_full[ino].wait()
        held = self._held.pop(ino)
        self._emit(f"writes {HELD_WRITES[ino]} {len(held)}")
        for req, count in held:
            req.reply_write(count)


async def _serve(nursery: trio.Nursery, handler: Bridged, mountpoint: str,
                 *, task_status: trio.TaskStatus[object]) -> None:
    await _session.serve(TestFs(), handler, mountpoint,
                         ["fsname=bridgetest", "subtype=bridgetest"],
                         max_tasks=MAX_TASKS, task_status=task_status)
    # Unmounted: blocked reads and held writes have nobody left to answer.
    nursery.cancel_scope.cancel()


async def main(mountpoint: str, events_fd: int) -> None:
    def emit(line: str) -> None:
        os.write(events_fd, line.encode() + b"\n")

    async with trio.open_nursery() as nursery:
        handler = Bridged(nursery, emit)
        await nursery.start(_serve, nursery, handler, mountpoint)
        emit("ready")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mountpoint")
    parser.add_argument("--events-fd", type=int, required=True)
    parser.add_argument("--import-pyfuse3-first", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        trio.run(main, args.mountpoint, args.events_fd)
    except* _session.BridgeInactiveError as group:
        sys.exit(f"bridge inactive: {group.exceptions[0]}")
