"""The tracefs engine: the kernel's rules for user_events and tracing, with no I/O.

This package is pure, synchronous and deterministic. It never imports pyfuse3,
trio, time, threading, ctypes or anything that performs I/O; clocks, CPU numbers
and process memory are handed to it. It takes bytes and commands, returns bytes
and records, and reports every refusal as a :class:`TracefsError` carrying the
errno the kernel would return.
"""
