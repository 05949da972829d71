"""What the engine needs from processes' memory, and nothing more.

Rules:
  * The engine never touches memory itself. It is handed a
    :class:`ProcessMemory` by whoever drives it: the FUSE adapter supplies one
    built on ``process_vm_readv``/``process_vm_writev``; tests supply a fake
    address space.
  * Processes are named by their thread-group id (the kernel keys user_events
    enablers by ``mm``; one thread group is one ``mm`` here).
  * Both primitives stop at the first byte that faults and report how far they
    got, exactly like the kernel's partial ``copy_from_user``; the engine turns
    short transfers into the errno the kernel would return at that step.
"""

from __future__ import annotations

from typing import NewType, Protocol

Tgid = NewType("Tgid", int)


class ProcessMemory(Protocol):
    def read(self, tgid: Tgid, addr: int, size: int) -> bytes:
        """Return the bytes at ``addr``, stopping at the first unreadable one."""
        ...

    def write(self, tgid: Tgid, addr: int, data: bytes) -> int:
        """Write ``data`` at ``addr``; return how many bytes landed before a fault.

        Must fail (return short) on read-only mappings, as the kernel's
        ``FOLL_WRITE`` pin does, rather than force the write.
        """
        ...


class EnableBits(Protocol):
    """Where enable bits are written (default: a read-modify-write of the
    byte through :class:`ProcessMemory`, ``_user_events.ByteReadModifyWrite``).

    A driver may make the caller's own writes after the engine call instead
    (the kernel's caller faults its page in without holding anyone else up):
    it then reports them done, and a write that fails later is answered by
    ``UserEventsData.enable_write_failed``.
    """

    def write_bit(self, tgid: Tgid, addr: int, bit: int, value: bool) -> bool:
        """Set (``value``) or clear bit ``bit`` of the 32- or 64-bit value at
        ``addr`` (the kernel's ``enable_addr``/``enable_bit``); False if it
        cannot be written."""
        ...
