"""Descriptor budgets per owner (issue 19 item 2): a share each, and a pool for all."""

from __future__ import annotations

import errno
import resource

import pytest

from tracefs_fuse.process._budget import RESERVE, SHARE, BudgetExhausted, FdBudget


@pytest.fixture
def limit_1024(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, 1024))
    return (1024 - RESERVE) // SHARE


@pytest.mark.parametrize(("takes", "refused"), [
    ([(1000, 3)], []),
    # one owner up to its share, and not one more
    ([(1000, 3)] * 64, []),
    ([(1000, 3)] * 65, [64]),
    # another owner is untouched by the first's exhaustion
    ([(1000, 3)] * 65 + [(1001, 3)], [64]),
    # SHARE owners fill the pool: the next owner is refused too
    ([(uid, 192) for uid in range(SHARE)] + [(99, 1)], [SHARE]),
])
def test_shares_and_pool(limit_1024: int, takes: list[tuple[int, int]],
                         refused: list[int]) -> None:
    assert limit_1024 == 192
    budget = FdBudget()
    failed = []
    for i, (owner, count) in enumerate(takes):
        try:
            budget.take(owner, count)
        except BudgetExhausted as exc:
            assert exc.errno == errno.ENOMEM
            failed.append(i)
    assert failed == refused
    assert budget.refused == len(refused)


def test_what_is_given_back_can_be_taken_again(limit_1024: int) -> None:
    budget = FdBudget()
    budget.take(7, limit_1024)
    with pytest.raises(BudgetExhausted):
        budget.take(7, 1)
    budget.give(7, limit_1024)
    assert budget.total == 0
    budget.take(7, limit_1024)
