"""A process's mappings of the files of one device: asked of the kernel, or read from its maps.

Both answers are the same dict (vma start -> (inode, :class:`Vma`)), about
the image of the ``/proc/<pid>/maps`` descriptor they are given:

* :func:`query_maps` asks ``PROCMAP_QUERY`` (Linux 6.11+) for the
  file-backed vmas only, from an address cursor: the kernel skips the
  anonymous ones itself, and nothing is formatted or parsed;
* :func:`parse_maps` reads the whole text (before 6.11), O(all mappings)
  in formatting and parsing.

They agree because both come from the same fields of the vma and its file
(fs/proc/task_mmu.c): ``show_map_vma`` prints ``vm_start``, ``vm_end``, the
permissions, ``vm_pgoff << PAGE_SHIFT`` and the ``s_dev``/``i_ino`` of
``file_user_inode(vm_file)`` only for a vma with a ``vm_file`` (00:00 and 0
otherwise), and ``do_procmap_query`` fills the same from the same. A device
is never 00:00 (anonymous superblocks' minors start at 1), so skipping the
vmas without a file drops none of a device's.

Rules:
  * ``/proc/<pid>/maps`` is bytes: a mapped file's name is in no encoding.
    Names are never asked of ``PROCMAP_QUERY`` (``vma_name_size`` 0).
  * Once its mm is gone (exit, or exec: the descriptor holds the old one),
    a maps read is empty and a query answers ESRCH: no mappings.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct

from ..engine._tree import Vma

_PAGE_SIZE = 4096

#: include/uapi/linux/fs.h (6.11+)::
#:
#:     struct procmap_query {
#:         __u64 size;
#:         __u64 query_flags;      /* in */
#:         __u64 query_addr;       /* in */
#:         __u64 vma_start;        /* out */
#:         __u64 vma_end;          /* out */
#:         __u64 vma_flags;        /* out */
#:         __u64 vma_page_size;    /* out */
#:         __u64 vma_offset;       /* out */
#:         __u64 inode;            /* out */
#:         __u32 dev_major;        /* out */
#:         __u32 dev_minor;        /* out */
#:         __u32 vma_name_size;    /* in/out */
#:         __u32 build_id_size;    /* in/out */
#:         __u64 vma_name_addr;    /* in */
#:         __u64 build_id_addr;    /* in */
#:     };
PROCMAP_QUERY_STRUCT = struct.Struct("=9Q4I2Q")
#: The fields a cursor uses: query_addr (in, at 16; packing pad bytes would
#: zero size and query_flags), then vma_start .. dev_minor (out, from 24).
_QUERY_ADDR = struct.Struct("=Q")
_QUERY_ADDR_OFFSET = 16
_QUERY_VMA = struct.Struct("=24x6Q2I")
#: _IOWR(PROCFS_IOCTL_MAGIC 'f', 17, struct procmap_query)
PROCMAP_QUERY = (3 << 30) | (PROCMAP_QUERY_STRUCT.size << 16) | (ord("f") << 8) | 17
#: enum procmap_query_flags: the vma's permissions in ``vma_flags``, and
#: how a query picks its vma.
PROCMAP_QUERY_VMA_WRITABLE = 0x02
PROCMAP_QUERY_VMA_EXECUTABLE = 0x04
PROCMAP_QUERY_VMA_SHARED = 0x08
PROCMAP_QUERY_COVERING_OR_NEXT_VMA = 0x10
PROCMAP_QUERY_FILE_BACKED_VMA = 0x20


def device_numbers(device: str) -> tuple[int, int] | None:
    """``major:minor`` as maps writes it (``%02x:%02x``), as numbers (None for "")."""
    if not device:
        return None
    major, minor = device.split(":")
    return int(major, 16), int(minor, 16)


def vma_of(start: int, end: int, flags: int, offset: int) -> Vma:
    """A :class:`Vma` from ``PROCMAP_QUERY``'s fields."""
    return Vma(pgoff=offset // _PAGE_SIZE, nr_pages=(end - start) // _PAGE_SIZE,
               write=bool(flags & PROCMAP_QUERY_VMA_WRITABLE),
               execute=bool(flags & PROCMAP_QUERY_VMA_EXECUTABLE),
               shared=bool(flags & PROCMAP_QUERY_VMA_SHARED))


def parse_maps(text: bytes, device: str) -> dict[int, tuple[int, Vma]]:
    """Mappings of files on ``device``: vma start -> (inode, vma).

    ``text`` is a ``/proc/<pid>/maps`` as read: bytes (``show_map_vma``
    prints the path raw, escaping only newlines).
    """
    dev = device.encode()
    found: dict[int, tuple[int, Vma]] = {}
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 5 or fields[3] != dev:
            continue
        start, end = (int(n, 16) for n in fields[0].split(b"-"))
        perms = fields[1]
        found[start] = (int(fields[4]), Vma(
            pgoff=int(fields[2], 16) // _PAGE_SIZE, nr_pages=(end - start) // _PAGE_SIZE,
            write=perms[1:2] == b"w", execute=perms[2:3] == b"x", shared=perms[3:4] == b"s"))
    return found


def read_all(fd: int) -> bytes:
    """A whole seq_file, from its start (empty once its mm is gone)."""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def procmap_query(fd: int, addr: int) -> tuple[int, ...] | int | None:
    """``ioctl(PROCMAP_QUERY)`` for the vma covering ``addr``: the struct's
    fields, or the errno (ENOENT: no vma; ESRCH: the mm is gone), or None if
    the kernel has no such ioctl (before 6.11)."""
    buf = bytearray(PROCMAP_QUERY_STRUCT.size)
    PROCMAP_QUERY_STRUCT.pack_into(buf, 0, PROCMAP_QUERY_STRUCT.size, 0, addr, *(0,) * 12)
    try:
        fcntl.ioctl(fd, PROCMAP_QUERY, buf)
    except OSError as exc:
        return None if exc.errno in (errno.ENOTTY, errno.EINVAL) else exc.errno
    return PROCMAP_QUERY_STRUCT.unpack(buf)


def query_maps(fd: int, device: str) -> tuple[dict[int, tuple[int, Vma]], int] | None:
    """:func:`parse_maps`'s answer by ``PROCMAP_QUERY``, and the number of
    queries it took (one per file-backed vma, one more for the end); None if
    the kernel has no such ioctl.

    The cursor starts at 0 and moves to each answer's ``vma_end``: with
    ``COVERING_OR_NEXT_VMA | FILE_BACKED_VMA`` the kernel answers the first
    vma with a file that ends above it (``query_matching_vma``), so every
    file-backed vma is seen once, in address order, as a maps read sees it.

    Raises:
        OSError: the query failed otherwise (ENOMEM, a fatal signal's EINTR).
    """
    wanted = device_numbers(device)
    buf = bytearray(PROCMAP_QUERY_STRUCT.size)
    PROCMAP_QUERY_STRUCT.pack_into(
        buf, 0, PROCMAP_QUERY_STRUCT.size,
        PROCMAP_QUERY_COVERING_OR_NEXT_VMA | PROCMAP_QUERY_FILE_BACKED_VMA, 0, *(0,) * 12)
    found: dict[int, tuple[int, Vma]] = {}
    queries = 0
    while True:
        queries += 1
        try:
            fcntl.ioctl(fd, PROCMAP_QUERY, buf)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return found, queries
            if exc.errno == errno.ESRCH:
                return {}, queries
            if exc.errno in (errno.ENOTTY, errno.EINVAL) and queries == 1:
                return None
            raise
        start, end, flags, _, offset, ino, major, minor = _QUERY_VMA.unpack_from(buf)
        if (major, minor) == wanted:
            found[start] = (ino, vma_of(start, end, flags, offset))
        _QUERY_ADDR.pack_into(buf, _QUERY_ADDR_OFFSET, end)
