"""TaskTable against real threads pinned to known CPUs with awkward names.

The helper is ``tests/clients/mem_task.c``: a leader and a second thread, each
pinned with ``sched_setaffinity`` and named with ``PR_SET_NAME``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.process.test_memory import Client, spawn_on_pid
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.process._tasks import UNKNOWN_COMM, TaskFacts, TaskTable

CPUS = (0, 1) if (os.cpu_count() or 1) > 1 else (0, 0)


@pytest.fixture
def tasks() -> Iterator[TaskTable]:
    table = TaskTable()
    yield table
    table.close()


@pytest.fixture
def task(c_client: Callable[[str], Path],
         spawn: Callable[..., Client]) -> Callable[..., Client]:
    def start(cpu: int = CPUS[0], comm: str | bytes = "main",
              thread_cpu: int = CPUS[1], thread_comm: str | bytes = "thread") -> Client:
        return spawn(c_client("mem_task"), str(cpu), comm, str(thread_cpu), thread_comm)
    return start


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("cpu, thread_cpu", [CPUS, CPUS[::-1]])
def test_tasks_cpu_comm_and_tgid_of_pinned_threads(tasks: TaskTable, task: Callable[..., Client],
                                                    cpu: int, thread_cpu: int) -> None:
    client = task(cpu, "a) b (c", thread_cpu, "(x) y)")
    tid = int(client.banner["tid"])
    assert tasks.facts(client.pid) == TaskFacts(tid=client.pid, tgid=client.pid, cpu=cpu,
                                                comm="a) b (c")
    assert tasks.facts(tid) == TaskFacts(tid=tid, tgid=client.pid, cpu=thread_cpu,
                                         comm="(x) y)")
    assert tasks.tgid(tid) == client.pid
    assert tasks.statistics().hits == 1


def test_tasks_comm_bytes_survive(tasks: TaskTable, task: Callable[..., Client]) -> None:
    client = task(comm=b"\xff\xfe) \n(")
    assert os.fsencode(tasks.facts(client.pid).comm) == b"\xff\xfe) \n("


def test_tasks_vanished_task_keeps_its_last_facts(tasks: TaskTable,
                                                  task: Callable[..., Client]) -> None:
    client = task(comm="leaving")
    before = tasks.facts(client.pid)
    client.quit()
    assert tasks.facts(client.pid) == before
    assert tasks.tgid(client.pid) is None
    stats = tasks.statistics()
    assert (stats.stale, stats.vanished, stats.cached) == (1, 1, 0)


def test_tasks_unknown_task_gets_placeholders(tasks: TaskTable) -> None:
    tid = 0x3FFFFFFF
    assert tasks.facts(tid) == TaskFacts(tid=tid, tgid=Tgid(tid), cpu=0, comm=UNKNOWN_COMM)
    assert tasks.tgid(tid) is None


def test_tasks_recycled_tid_is_looked_up_afresh(tasks: TaskTable, spawn: Callable[..., Client],
                                                c_client: Callable[[str], Path]) -> None:
    exe = c_client("mem_task")
    first = spawn(exe, str(CPUS[0]), "first", str(CPUS[1]), "t")
    assert tasks.facts(first.pid).comm == "first"
    first.quit()
    second = spawn_on_pid(spawn, first.pid, exe, str(CPUS[1]), "second", str(CPUS[0]), "t")
    assert tasks.facts(second.pid) == TaskFacts(tid=second.pid, tgid=second.pid, cpu=CPUS[1],
                                                comm="second")
    assert tasks.statistics().stale == 1


def test_tasks_cache_is_bounded(task: Callable[..., Client]) -> None:
    clients = [task() for _ in range(3)]
    before = fd_count()
    table = TaskTable(capacity=2)
    for client in clients:
        table.facts(client.pid)
    assert table.statistics().cached == 2
    assert fd_count() == before + 2
    # The evicted one is simply looked up again.
    assert table.facts(clients[0].pid).tgid == clients[0].pid
    assert table.statistics().misses == 4
    table.forget(clients[0].pid)
    table.forget(clients[0].pid)
    assert fd_count() == before + 1
    table.close()
    assert fd_count() == before


def test_tasks_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError):
        TaskTable(capacity=0)
