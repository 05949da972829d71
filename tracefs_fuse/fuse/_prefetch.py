"""What a registration reads of its caller, read in one trip to its lane.

A user_events ioctl reads its caller's memory only in the caller's lane
(``_requests``: the engine raises ``Unfetched`` for what it has not got, the
lane reads it, the call runs again). A ``DIAG_IOCSREG`` reads three times
(the size, the struct, the name): three round trips to a worker thread. Its
first need, the size at ``arg``, is answered with everything the engine will
read after it (``UserEventsData.registration_reads``: the kernel's reads, in
its order, in every era), so the
call runs once more with all of it.

Rules:
  * Only what the kernel reads, in its order, stopping where it would refuse
    (a short read, a non-zero struct tail, a field check); the registry's
    EADDRINUSE check is the exception (the name is read then too).
  * Runs on a worker of the caller's lane; what it asks the engine reads
    only the mount's fixed ABIs.
"""

from __future__ import annotations

from collections.abc import Callable

from ..process._memory import read_in_lane

#: (address, size) -> bytes read there (short at a fault).
Fetched = dict[tuple[int, int], bytes]


def fetch_registration(tid: int, arg: int,
                       reads: Callable[[int, int, Callable[[int, int], bytes]], None]) -> Fetched:
    """The size at ``arg`` and what the registration reads after it
    (``reads``: ``UserEventsData.registration_reads``)."""
    fetched: Fetched = {}

    def read(addr: int, size: int) -> bytes:
        data = fetched[addr, size] = read_in_lane(tid, addr, size)
        return data

    head = read(arg, 4)
    if len(head) == 4:
        reads(arg, int.from_bytes(head, "little"), read)
    return fetched
