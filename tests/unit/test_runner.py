"""The runner's claim order: each run walks a slot's accounts from its own start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from openbell.daemon.runner import claim_order

SLOT = datetime(2026, 11, 30, 14, 30, tzinfo=UTC)


def test_runs_claim_a_slots_accounts_from_different_starts() -> None:
    accounts = [(account_id, object()) for account_id in range(1, 9)]
    slots = [SLOT + timedelta(hours=hour) for hour in range(4)]
    starts: set[tuple[int, ...]] = set()
    for at in slots:
        orders = [claim_order(accounts, f"daemon-{n}", at) for n in range(3)]  # type: ignore[arg-type]
        for order in orders:
            assert sorted(order, key=lambda pair: pair[0]) == accounts  # every account, once
            start = accounts.index(order[0])
            assert order == accounts[start:] + accounts[:start]  # a rotation: the order is kept
        assert orders[0] == claim_order(accounts, "daemon-0", at)  # type: ignore[arg-type]
        starts.add(tuple(order[0][0] for order in orders))
    # The three runs do not all start at one account at every slot.
    assert any(len(set(first)) > 1 for first in starts)
    assert claim_order(accounts[:1], "daemon-0", SLOT) == accounts[:1]  # type: ignore[arg-type]
