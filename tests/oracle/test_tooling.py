"""The oracle's own pieces that need no kernel (these run in ``make test``)."""

from __future__ import annotations

import gzip
import stat
from pathlib import Path

import pytest

from .kernel import _config, _initramfs
from .test_selftests import parse


def read_newc(data: bytes) -> list[tuple[str, int, tuple[int, int], bytes]]:
    """(name, mode, rdev, body) per entry, up to the trailer; checks the padding."""
    entries = []
    pos = 0
    while True:
        assert data[pos:pos + 6] == b"070701" and pos % 4 == 0
        fields = [int(data[pos + 6 + 8 * i:pos + 14 + 8 * i], 16) for i in range(13)]
        mode, filesize, rdev, namesize = fields[1], fields[6], (fields[9], fields[10]), fields[11]
        name_start = pos + 110
        name = data[name_start:name_start + namesize - 1].decode()
        assert data[name_start + namesize - 1] == 0
        body_start = (name_start + namesize + 3) & ~3
        body = data[body_start:body_start + filesize]
        pos = (body_start + filesize + 3) & ~3
        if name == "TRAILER!!!":
            assert pos == len(data)
            return entries
        entries.append((name, mode, rdev, body))


def test_base_initramfs_has_busybox_init_and_a_console() -> None:
    entries = read_newc(gzip.decompress(_initramfs.base(b"\x7fELF busybox")))
    by_name = {name: (mode, rdev, body) for name, mode, rdev, body in entries}
    assert by_name["bin/busybox"] == (stat.S_IFREG | 0o755, (0, 0), b"\x7fELF busybox")
    assert by_name["init"][0] == stat.S_IFREG | 0o755
    assert by_name["init"][2].startswith(b"#!/bin/busybox sh\n")
    assert by_name["dev/console"][:2] == (stat.S_IFCHR | 0o600, (5, 1))
    assert stat.S_ISDIR(by_name["oracle"][0])


def test_run_files_go_flat_under_oracle_with_the_script(tmp_path: Path) -> None:
    (tmp_path / "client").write_bytes(b"x" * 5)  # odd sizes exercise the padding
    (tmp_path / "client").chmod(0o755)
    (tmp_path / "data.txt").write_text("abc")
    entries = read_newc(gzip.decompress(
        _initramfs.run_files([tmp_path / "client", tmp_path / "data.txt"], "./client\n")))
    assert [(n, m) for n, m, _, _ in entries] == [
        ("oracle", stat.S_IFDIR | 0o755), ("oracle/client", stat.S_IFREG | 0o755),
        ("oracle/data.txt", stat.S_IFREG | 0o644), ("oracle/run", stat.S_IFREG | 0o755)]
    assert [body for *_, body in entries] == [b"", b"xxxxx", b"abc", b"./client\n"]


def test_config_check_names_what_kconfig_dropped(tmp_path: Path) -> None:
    fragment = _config.fragment("6.1", "")
    assert "CONFIG_COMPILE_TEST=y\n" in fragment and "CONFIG_USER_EVENTS=y\n" in fragment
    config = tmp_path / ".config"
    config.write_text(fragment)
    _config.check(fragment, config)
    config.write_text(fragment.replace("CONFIG_USER_EVENTS=y\n", "# CONFIG_USER_EVENTS is not set\n"))
    with pytest.raises(Exception, match="dropped CONFIG_USER_EVENTS=y"):
        _config.check(fragment, config)


@pytest.mark.parametrize(("line", "case", "result"), [
    ("ok 1 user.register_events", "register_events", "pass"),
    ("not ok 3 user.write_fault", "write_fault", "fail"),
    ("ok 2 user.flags # SKIP Skipping due to: user_events is not installed", "flags", "skip"),
])
def test_selftest_tap_lines(line: str, case: str, result: str) -> None:
    outcome = parse(f"TAP version 13\n1..1\n# noise\n{line}\n# Totals: pass:1\n", True)
    assert outcome.cases == {case: result}
    assert outcome.passed == (result == "pass")
