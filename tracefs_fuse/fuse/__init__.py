"""The FUSE protocol: pyfuse3 requests in, engine calls, kernel-side I/O out.

Owns: the session and the native bridge (``_session``, ``_bridge.c``, the
receiver thread and fast path in ``_native/``), requests and operations
(``_requests``, ``_operations``, ``_inodes``, ``_whole_write``), mappings,
a process's maps, and page pushes (``_mmap``, ``_procmaps``, ``_pagepush``),
errno mapped once (``_errno``), the fast path's table (``_fast_path``).
May import: ``engine``, ``lib``, ``process``. Never ``host`` or ``daemon``:
the daemon hands in what the host knows (the mount's device, say).
"""
