"""Finding the host kernel's highest event id (host/_host_events.py)."""

from __future__ import annotations

from pathlib import Path

from tracefs_fuse.host import _host_events


def make_events(root: Path, ids: dict[str, str]) -> None:
    for path, text in ids.items():
        (root / "events" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "events" / path).write_text(text)


def test_highest_event_id_reads_every_events_id(tmp_path: Path) -> None:
    make_events(tmp_path, {
        "ftrace/print/id": "5\n",
        "sched/sched_switch/id": "312\n",
        "syscalls/sys_enter_sync/id": "1025\n",
        "syscalls/enable": "0\n",        # a system's files are not events
        "sched/enable": "0\n",
        "writeback/flush_foreign/id": "1000\n",
        "ftrace/function/format": "",    # an event without an id (ftrace's own)
    })
    (tmp_path / "events/header_page").write_text("")
    assert _host_events.highest_event_id(str(tmp_path)) == 1025


def test_highest_event_id_of_no_tracefs_is_none(tmp_path: Path) -> None:
    assert _host_events.highest_event_id(str(tmp_path)) is None
    make_events(tmp_path, {"sched/enable": "0\n"})
    assert _host_events.highest_event_id(str(tmp_path)) is None


def test_only_a_real_tracefs_is_the_hosts(tmp_path: Path, real_tracefs_root: Path) -> None:
    assert _host_events.is_tracefs(str(real_tracefs_root))
    assert not _host_events.is_tracefs(str(tmp_path))
    assert not _host_events.is_tracefs(str(tmp_path / "missing"))


def test_a_detached_tracefs_shows_the_same_ids(real_tracefs_root: Path) -> None:
    """Where no tracefs is mounted, a private one nobody sees answers the same."""
    with _host_events.detached_tracefs() as path:
        assert _host_events.is_tracefs(path)
        detached = _host_events.highest_event_id(path)
    assert detached == _host_events.highest_event_id(str(real_tracefs_root))
    assert detached is not None and detached > 0



def test_ids_that_cannot_be_read_are_skipped(tmp_path: Path) -> None:
    """A daemon that cannot read part of the host's tracefs still starts."""
    make_events(tmp_path, {"sched/sched_switch/id": "312\n", "odd/text/id": "not a number\n"})
    (tmp_path / "events/odd/dir/id").mkdir(parents=True)  # read() says EISDIR
    assert _host_events.highest_event_id(str(tmp_path)) == 312
