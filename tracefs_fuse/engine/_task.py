"""Who is calling: the facts about a task the kernel would read from ``current``."""

from __future__ import annotations

import msgspec

from ._memory import Tgid


class Task(msgspec.Struct, frozen=True, kw_only=True):
    """The calling thread, as the adapter found it.

    ``pid`` is the thread id (``current->pid``: what FUSE reports and what
    records carry in ``common_pid``); ``tgid`` names the process (its ``mm``).
    """

    pid: int
    tgid: Tgid
    #: perfmon_capable(): CAP_PERFMON or CAP_SYS_ADMIN in the caller's creds.
    perfmon: bool = False
    #: The CPU the task was running on when it wrote (records land there).
    cpu: int = 0
    comm: str = ""
