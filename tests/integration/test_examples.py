"""docs/examples: each program builds cleanly and emits what its comment says.

They run through the ``user_events`` fixture (the pytest plugin this
package installs), as a user's tests would run them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tracefs_fuse.testing.pytest_plugin import UserEvents

pytestmark = pytest.mark.uses_fuse

EXAMPLES = Path(__file__).parents[2] / "docs" / "examples"


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("examples")
    for source in sorted(EXAMPLES.glob("*.c")):
        subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-O1", "-Wall", "-Wextra", "-Werror",
                        "-pedantic", "-o", str(out / source.stem), str(source)], check=True)
    return out


def test_example_hello(examples: Path, user_events: UserEvents) -> None:
    run = user_events.run([examples / "hello", "there", "3"])
    assert [e.fields for e in run.events] == [
        {"times": n, "who": "there"} for n in (1, 2, 3)]
    assert {e.comm for e in run.events} == {"hello"}
    assert run.stdout == "".join(f"hello, there ({n})\n" for n in (1, 2, 3))


def test_example_hello_writes_nothing_while_disabled(examples: Path,
                                                     user_events: UserEvents) -> None:
    run = user_events.run([examples / "hello"], events=["!*:*"])
    assert run.events == [] and run.stdout == "hello, world (1)\n"


def test_example_request_rel_loc_strings(examples: Path, user_events: UserEvents) -> None:
    long_path = "/" + "x" * 600
    run = user_events.run([examples / "request", "/index.html", "/missing/page", long_path])
    assert [e.fields for e in run.events.named("http_request")] == [
        {"status": 200, "bytes": 1000, "micros": 250, "path": "/index.html"},
        {"status": 404, "bytes": 2000, "micros": 500, "path": "/missing/page"},
        {"status": 200, "bytes": 3000, "micros": 750, "path": long_path},
    ]


def test_example_worker_forked_child_emits(examples: Path, user_events: UserEvents) -> None:
    run = user_events.run([examples / "worker", "4"])
    for worker in (0, 1):
        mine = run.events.where(worker=worker)
        assert [e.fields["item"] for e in mine] == [0, 1, 2, 3]
        assert len({e.pid for e in mine}) == 1
    assert run.events.where(worker=0)[0].pid != run.events.where(worker=1)[0].pid


def test_example_eventheader(examples: Path, user_events: UserEvents) -> None:
    run = user_events.run([examples / "eventheader", "hi there", "42"])
    greeting = run.events.one("MyCompany_Greeter:Greeting")
    assert greeting.name == "MyCompany_Greeter_L4K1"
    assert greeting.fields == {"message": "hi there", "count": 42,
                               "origin": {"x": -3, "y": 7}, "scores": [1, 2, 3]}
    info = greeting.eventheader
    assert (info.provider, info.event, info.level, info.keyword, info.opcode) == (
        "MyCompany_Greeter", "Greeting", 4, 1, 0)
    assert info.activity_id == "6f2a1c3e-474d-4b5a-8e11-029c0d5e7701"
    assert greeting.error is None
