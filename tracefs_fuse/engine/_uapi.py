"""The user_events uapi: ioctl numbers, flags and the binary argument layouts.

Rules:
  * Every layout is the kernel's, byte for byte; the C declaration is quoted
    beside its ``struct`` format. Decoding never validates semantics: the
    registration code applies the kernel's checks in the kernel's order.
  * Three ABI eras exist and are told apart by ``struct user_reg.size``
    (see :class:`Abi`).

Kernel: include/uapi/linux/user_events.h (6.4+, PERSIST 6.7, MULTI_FORMAT 6.9);
include/linux/user_events.h of 5.18 and 6.1.
"""

from __future__ import annotations

import enum
import struct

PAGE_SIZE = 4096

#: ``'*'``: the magic of every user_events ioctl.
DIAG_IOC_MAGIC = 0x2A


def _ioc(direction: int, nr: int, size: int) -> int:
    # asm-generic/ioctl.h: dir << 30 | size << 16 | type << 8 | nr
    return direction << 30 | size << 16 | DIAG_IOC_MAGIC << 8 | nr


_IOC_WRITE, _IOC_READ = 1, 2
_POINTER_SIZE = 8
# The size encoded in these numbers is sizeof(pointer), not of the struct: the
# macros name `struct user_reg *`, `char *` and `struct user_unreg *`.
DIAG_IOCSREG = _ioc(_IOC_READ | _IOC_WRITE, 0, _POINTER_SIZE)  # 0xC0082A00
DIAG_IOCSDEL = _ioc(_IOC_WRITE, 1, _POINTER_SIZE)  # 0x40082A01
DIAG_IOCSUNREG = _ioc(_IOC_WRITE, 2, _POINTER_SIZE)  # 0x40082A02

USER_EVENTS_SYSTEM = "user_events"
USER_EVENTS_MULTI_SYSTEM = "user_events_multi"
USER_EVENTS_PREFIX = "u:"

# enum user_reg_flag
USER_EVENT_REG_PERSIST = 1 << 0
USER_EVENT_REG_MULTI_FORMAT = 1 << 1
USER_EVENT_REG_MAX = 1 << 2

#: strndup_user() limit for names passed by ioctl, NUL included.
MAX_EVENT_DESC = 512

#: x86-64 TASK_SIZE_MAX with 4-level page tables; access_ok() refuses beyond.
TASK_SIZE_MAX = (1 << 47) - PAGE_SIZE


class Abi(enum.Enum):
    """The user_events ABI eras, recognised by ``struct user_reg.size``."""

    V5_18 = "5.18"  # 24-byte unpacked user_reg, byte-per-event status page
    V6_1 = "6.1"  # 20-byte packed user_reg, bit-per-event status page (6.1-6.3)
    MAINLINE = "mainline"  # 28-byte packed user_reg, enable bit in the caller (6.4+)

    @property
    def has_status_page(self) -> bool:
        return self is not Abi.MAINLINE


# struct user_reg {                      /* mainline, __attribute__((__packed__)) */
#         __u32 size;
#         __u8  enable_bit;
#         __u8  enable_size;
#         __u16 flags;
#         __u64 enable_addr;
#         __u64 name_args;
#         __u32 write_index;
# } __attribute__((__packed__));
USER_REG = struct.Struct("<IBBHQQI")
USER_REG_WRITE_INDEX_OFFSET = 24
assert USER_REG.size == 28

# struct user_reg {                      /* 5.18, include/linux/user_events.h */
#         __u32 size;
#         __u64 name_args;               /* 4 bytes of padding before it */
#         __u32 status_index;
#         __u32 write_index;
# };
USER_REG_5_18 = struct.Struct("<I4xQII")
USER_REG_5_18_STATUS_OFFSET = 16
USER_REG_5_18_WRITE_INDEX_OFFSET = 20
assert USER_REG_5_18.size == 24

# struct user_reg {                      /* 6.1 - 6.3 */
#         __u32 size;
#         __u64 name_args;
#         __u32 status_bit;
#         __u32 write_index;
# } __attribute__((__packed__));
USER_REG_6_1 = struct.Struct("<IQII")
USER_REG_6_1_STATUS_OFFSET = 12
USER_REG_6_1_WRITE_INDEX_OFFSET = 16
assert USER_REG_6_1.size == 20

# struct user_unreg {
#         __u32 size;
#         __u8  disable_bit;
#         __u8  __reserved;
#         __u16 __reserved2;
#         __u64 disable_addr;
# } __attribute__((__packed__));
USER_UNREG = struct.Struct("<IBBHQ")
assert USER_UNREG.size == 16


def abi_of_size(size: int) -> Abi | None:
    """The era a ``user_reg.size`` announces in an ``auto`` mount, or None.

    Programs built against each era set ``size = sizeof(reg)``; the three sizes
    do not overlap, and every mainline size is at least 28.
    """
    if size >= USER_REG.size:
        return Abi.MAINLINE
    if size == USER_REG_5_18.size:
        return Abi.V5_18
    if size == USER_REG_6_1.size:
        return Abi.V6_1
    return None
