"""systemd's readiness protocol, for ``Type=notify`` units.

Rules:
  * A no-op unless ``$NOTIFY_SOCKET`` is set (systemd sets it for the main
    process of a ``Type=notify`` service).
  * Never raises: a daemon whose manager cannot be told still serves; the
    failure is logged (systemd then times the start out and says so).

Spec: man 3 sd_notify: one datagram of newline-separated ``VAR=VALUE``
assignments to the ``AF_UNIX`` socket named in ``$NOTIFY_SOCKET``, where a
leading ``@`` names an abstract socket.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)


def notify(*assignments: str) -> bool:
    """Send ``READY=1``, ``STOPPING=1``, ``STATUS=…`` to the service manager.

    Returns:
        Whether a manager was there to be told.
    """
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    import socket  # only a unit's daemon needs it, never ``run`` (issue 21: start-up)

    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall("\n".join(assignments).encode())
    except OSError as exc:
        log.warning("cannot notify the service manager at %s: %s", address, exc.strerror)
        return False
    return True
