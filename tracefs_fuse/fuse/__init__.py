"""The FUSE adapter: pyfuse3 requests in, engine calls, kernel-side I/O out.

Everything that touches the kernel lives here (caller memory, page pushes,
blocking waits); the rules live in :mod:`tracefs_fuse.engine`.
"""
