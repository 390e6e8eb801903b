"""A live daemon's hole sweep across a split: the closed account is watched up to the slot of the
split and its successor from that slot on (a slot it missed is a hole); without the split noted,
the closed account's later slots would be swept as `missed`."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from openbell.daemon.holes import HoleSweep, MissedCause, WatchedMarket
from openbell.daemon.splitting import AccountSplit
from openbell.markets.domain import utc
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus

DAY = timedelta(days=1)
FIRST = utc(2025, 11, 3)  # crypto: a slot a day at 00:00 UTC
SPLIT_AT = FIRST + 2 * DAY
NOW = FIRST + 5 * DAY  # the slots' graces have ended through FIRST + 4 days


def run_cycles(ledger: Ledger, account_id: int, days: range) -> None:
    for day in days:
        slot_at = FIRST + day * DAY
        cycle_id = ledger.claim_cycle(account_id, slot_at, "run", slot_at + DAY, slot_at)
        assert cycle_id is not None
        ledger.finish_cycle(cycle_id, CycleStatus.DONE, slot_at, held_by="run")


def sweep(
    ledger: Ledger, accounts: dict[int, object], split: AccountSplit | None
) -> dict[str, int]:
    holes = HoleSweep(
        ledger,
        [
            WatchedMarket(
                market="crypto",
                cadence="daily",
                grace=timedelta(minutes=15),
                accounts={account_id: FIRST for account_id in accounts},
            )
        ],
    )
    if split is not None:
        holes.split(split)
    return holes.sweep(NOW, lambda market, slot_at, paused: MissedCause.DAEMON_DOWN, ())


def test_a_split_account_and_its_successor_have_no_holes(ledger: Ledger) -> None:
    old = ledger.open_account(
        ledger.ensure_agent("gpt", "llm", FIRST), "crypto", "USDT", Decimal(10000), FIRST
    )
    new = ledger.open_account(
        ledger.ensure_agent("gpt~2", "llm", SPLIT_AT), "crypto", "USDT", Decimal(10000), SPLIT_AT
    )
    run_cycles(ledger, old, range(3))  # days 0, 1 and 2, the day of the split
    run_cycles(ledger, new, range(2, 4))  # from the day of the split on, but not day 4
    split = AccountSplit(
        market="crypto", account_id=old, successor_id=new, successor="gpt~2", at=SPLIT_AT
    )
    # The closed account has no hole; its successor, watched from the split, misses day 4.
    assert sweep(ledger, {old: None}, split) == {"crypto": 1}
    assert ledger.find_cycle(new, FIRST + 4 * DAY) is not None
    # Without the split noted, the closed account's two later slots would be holes.
    assert sweep(ledger, {old: None}, None) == {"crypto": 2}
