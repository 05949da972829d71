"""The client processes we follow and whose memory we touch.

Owns: following forks, execs and exits (``_tracking``, with the process
connector ``_proc_events`` narrowed by the socket filter ``_proc_filter``, or a
``/proc`` scan ``_proc_scan``), what a thread is
(``_tasks``: comm, CPU, tgid from ``/proc/<tid>/stat``, parsed once in ``_stat``),
and each client's memory, pinned per image (``_memory``), the descriptors kept for
clients budgeted per uid (``_budget``).
May import: ``engine``, ``lib``. Never the FUSE protocol: the daemon hands in
what this layer needs from it (the watchdog's brackets, ``watch_accesses``).
"""
