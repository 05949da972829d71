"""perf_event_open for our events inside ``tracefs-fuse run`` (docs/perf.md).

Owns: the seccomp filter CMD runs under and the native supervisor thread that
answers it (``_supervisor.c``), and the service that turns its questions into
engine calls in the trio thread (``_service``).
May import: ``engine``, ``lib``.
"""
