"""Mappings of ``trace_pipe_raw`` by hostile or careless clients (issue 11, items 5 and 6).

The kernel's rules (kernel/trace/trace.c ``tracing_buffers_mmap``,
``tracing_buffers_mmap_close``; ring_buffer.c ``ring_buffer_map_get_reader``):
a buffer counts as mapped from ``mmap()`` until the mapping closes (munmap,
exit, exec); GET_READER is ENODEV unless some mapping is open; a resize is
EBUSY while one is.
"""

from __future__ import annotations

import errno
import os

import pytest

from ..integration.conftest import Mount
from .conftest import expect_line, run_as, spawn_as, wait_in_request

pytestmark = pytest.mark.uses_fuse


def _resize(mount: Mount, kb: int) -> int:
    """``echo KB > buffer_size_kb`` as root: 0 or the errno."""
    try:
        mount.write("buffer_size_kb", f"{kb}\n")
    except OSError as exc:
        return exc.errno or -1
    return 0


def test_a_mapped_file_with_a_non_utf8_name_breaks_nothing(open_mount: Mount, client_as) -> None:  # type: ignore[no-untyped-def]
    """Item 5: ``/proc/<pid>/maps`` is bytes; a name in no encoding is still a name."""
    client = spawn_as(None, client_as("adv_mmap"), open_mount, "weird", "open", "map", "touch",
                      "reader", "wait")
    try:
        lines = expect_line(client, "waiting")
        assert lines == ["weird: ok", "open: ok", "map: ok", "touch: ok", "reader: 0",
                         "waiting"]
        assert _resize(open_mount, 2048) == errno.EBUSY  # mapped: the kernel's EBUSY, not EIO
    finally:
        client.communicate("\n", timeout=30)
    assert _resize(open_mount, 2048) == 0
    assert "UnicodeDecodeError" not in open_mount.log_text()


def test_a_mapper_that_exits_leaves_the_buffer_unmapped(open_mount: Mount, client_as) -> None:  # type: ignore[no-untyped-def]
    """Item 6: the mapping closes with its process; GET_READER is ENODEV again."""
    client = client_as("adv_mmap")
    mapper = run_as(None, client, open_mount, "open", "map", "touch", "reader")
    assert mapper.stdout.splitlines() == ["open: ok", "map: ok", "touch: ok", "reader: 0"]
    other = run_as(None, client, open_mount, "open", "reader")
    assert other.stdout.splitlines() == ["open: ok", "reader: ENODEV"]


def test_a_mapper_killed_while_mapped_leaves_the_buffer_unmapped(open_mount: Mount, client_as) -> None:  # type: ignore[no-untyped-def]
    client = spawn_as(None, client_as("adv_mmap"), open_mount, "open", "map", "touch", "wait")
    expect_line(client, "waiting")
    assert _resize(open_mount, 1024) == errno.EBUSY
    client.kill()
    client.communicate(timeout=30)
    other = run_as(None, client_as("adv_mmap"), open_mount, "open", "reader")
    assert other.stdout.splitlines() == ["open: ok", "reader: ENODEV"]
    assert _resize(open_mount, 1024) == 0


def test_an_unmapped_buffer_refuses_get_reader_from_anyone(open_mount: Mount, client_as) -> None:  # type: ignore[no-untyped-def]
    """munmap() without exit: another process's GET_READER sees it too."""
    client = spawn_as(None, client_as("adv_mmap"), open_mount, "open", "map", "touch", "reader",
                      "unmap", "wait")
    try:
        assert expect_line(client, "waiting")[-3:] == ["reader: 0", "unmap: ok", "waiting"]
        other = run_as(None, client_as("adv_mmap"), open_mount, "open", "reader")
        assert other.stdout.splitlines() == ["open: ok", "reader: ENODEV"]
    finally:
        client.communicate("\n", timeout=30)


def test_get_reader_of_another_processes_mapping_is_the_kernels(open_mount: Mount, client_as) -> None:  # type: ignore[no-untyped-def]
    """The mapped state is the buffer's, not the caller's (``cpu_buffer->mapped``)."""
    client = spawn_as(None, client_as("adv_mmap"), open_mount, "open", "map", "touch", "wait")
    try:
        expect_line(client, "waiting")
        other = run_as(None, client_as("adv_mmap"), open_mount, "open", "reader")
        assert other.stdout.splitlines() == ["open: ok", "reader: 0"]
    finally:
        client.communicate("\n", timeout=30)


def test_many_mappings_do_not_change_the_answers(open_mount: Mount, client_as) -> None:  # type: ignore[no-untyped-def]
    """Item 8's client (60k mappings): the same answers as with ten, no errors."""
    result = run_as(None, client_as("adv_mmap"), open_mount, "many=60000", "open", "map", "touch",
                    "readers=200", "unmap", "reader")
    assert result.stdout.splitlines()[:4] == ["many: 60000", "open: ok", "map: ok", "touch: ok"]
    assert result.stdout.splitlines()[4].startswith("readers: 200 errors=0 ")
    assert result.stdout.splitlines()[5:] == ["unmap: ok", "reader: ENODEV"]
    assert os.path.ismount(open_mount.path)


def _marker_on_cpu0(mount: Mount) -> None:
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    try:
        mount.write("trace_marker", "wake the reader")
    finally:
        os.sched_setaffinity(0, affinity)


def test_a_blocking_get_reader_waits_for_data(open_mount: Mount, client_as) -> None:  # type: ignore[no-untyped-def]
    """tracing_buffers_ioctl: without O_NONBLOCK, ring_buffer_wait comes first
    (this machine's 6.18 blocks on an empty buffer, buffer_percent 0 or 50)."""
    open_mount.write("buffer_percent", "0")
    client = spawn_as(None, client_as("adv_mmap"), open_mount, "open-blocking", "map", "touch",
                      "reader")
    try:
        expect_line(client, "touch: ok")
        wait_in_request(client.pid)
        assert client.poll() is None
        _marker_on_cpu0(open_mount)
        out, _ = client.communicate(timeout=30)
        assert out.splitlines() == ["reader: 0"]
    finally:
        client.kill()
        client.communicate()


def test_a_blocking_get_reader_is_interrupted_by_a_signal(open_mount: Mount, client_as) -> None:  # type: ignore[no-untyped-def]
    client = spawn_as(None, client_as("adv_mmap"), open_mount, "open-blocking", "map", "touch",
                      "reader")
    expect_line(client, "touch: ok")
    wait_in_request(client.pid)
    client.kill()
    client.communicate(timeout=30)
    other = run_as(None, client_as("adv_mmap"), open_mount, "open", "reader")
    assert other.stdout.splitlines() == ["open: ok", "reader: ENODEV"]
