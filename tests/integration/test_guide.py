"""docs/testing-your-events.md, followed to the letter in a fresh directory.

The guide's blocks marked ``<!-- guide: NAME -->`` are taken as they are
written: the build commands, the record commands, and the test file, which
a pytest of its own (in a directory that knows nothing of this repository's
configuration) must pass with the installed plugin.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tracefs_fuse.decode import Event, read_lines

from ..ordinary_user import User

pytestmark = pytest.mark.uses_fuse

ROOT = Path(__file__).parents[2]
GUIDE = ROOT / "docs" / "testing-your-events.md"


def guide_block(name: str) -> str:
    match = re.search(rf"<!-- guide: {re.escape(name)} -->\n```\w*\n(.*?)```", GUIDE.read_text(),
                      re.DOTALL)
    assert match is not None, f"the guide has no block {name}"
    return match.group(1)


def shell(block: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The guide's shell lines, with this checkout where it says /path/to."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    return subprocess.run(["sh", "-ec", block.replace("/path/to/tracefs-fuse", str(ROOT))],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def built(tmp_path: Path) -> Path:
    result = shell(guide_block("build"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "hello").exists()
    return tmp_path


def test_guide_record_commands(built: Path) -> None:
    result = shell(guide_block("record"), built)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "tracefs-fuse: recorded 2 events to events.jsonl\n"
    shown = result.stdout.splitlines()[2:]
    assert [line.split(": ", 1)[1] for line in shown] == [
        'user_events:hello times=1 who="world"', 'user_events:hello times=2 who="world"']
    events = [r for r in read_lines((built / "events.jsonl").read_bytes())]
    assert all(isinstance(e, Event) and e.comm == "hello" for e in events)


def run_pytest(directory: Path) -> subprocess.CompletedProcess[str]:
    # Not this repository's pytest configuration: a user's directory, with
    # the plugin found through its entry point.
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--basetemp", str(directory / "pytest-tmp"), "test_hello.py"],
                          cwd=directory, capture_output=True, text=True, timeout=300)


def test_guide_test_passes_as_written(built: Path) -> None:
    (built / "test_hello.py").write_text(guide_block("test_hello.py"))
    result = run_pytest(built)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_guide_failure_message_shows_the_events(built: Path) -> None:
    test = guide_block("test_hello.py").replace('who="world"', 'who="everyone"')
    (built / "test_hello.py").write_text(test)
    result = run_pytest(built)
    assert result.returncode == 1
    guide = GUIDE.read_text()
    shown = guide[guide.index("E       AssertionError"):].split("```")[0].splitlines()
    got = [line for line in result.stdout.splitlines() if line.startswith("E ")]
    # The guide shows this run's message, but for the pid and the times.
    assert len(got) == len(shown)
    for line, expected in zip(got, shown):
        if "user_events:hello" in expected:
            assert line.split(": ", 1)[1] == expected.split(": ", 1)[1]
        else:
            assert line == expected


def test_guide_test_passes_as_an_ordinary_user(built: Path,
                                              ordinary_user: User) -> None:
    """The plugin without sudo: ``tracefs-fuse run`` in a user namespace."""
    home = Path(tempfile.mkdtemp(prefix="tfuse-guide-"))
    try:
        shutil.copy(built / "hello", home / "hello")
        (home / "test_hello.py").write_text(guide_block("test_hello.py"))
        for path in (home, home / "hello", home / "test_hello.py"):
            os.chown(path, ordinary_user.uid, ordinary_user.gid)
        python = shlex.join(ordinary_user.tracefs_fuse()[:-2])
        result = ordinary_user.run(
            ["sh", "-c", f"cd {shlex.quote(str(home))} && exec {python} -m pytest -q "
                         f"-p no:cacheprovider --basetemp {shlex.quote(str(home / 't'))} "
                         "test_hello.py"], timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "1 passed" in result.stdout
    finally:
        shutil.rmtree(home)
