"""The benchmark suite (issue 7): ``python -m bench``, or ``make bench``.

Every figure is measured side by side, in the same run, against references:
the real kernel's tracefs (a private instance), a bare pyfuse3 filesystem and
a minimal C libfuse filesystem (the FUSE floor). See docs/performance.md for
what is measured, the latest results and how to read them.

Modules: ``_servers`` (builds, mounts, the kernel instance, the C client),
``_suite`` (the benchmarks), ``_profile`` (py-spy of the daemon),
``_results`` (msgspec results and tables), ``_machine``. C sources
(``client.c``, ``floor_fuse.c``) are compiled by gcc into a temporary
directory at every run; ``floor_pyfuse3.py`` is the pyfuse3 floor.
"""
