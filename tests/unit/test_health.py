"""The health board: a market is overdue only for slots the daemon was there to ring (since a
daemon first rang it on this ledger), and /healthz says each market's next bell."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from openbell.daemon.health import HealthBoard, MarketWatch
from openbell.daemon.runner import CycleOutcome, SlotReport
from openbell.store.records import CycleStatus

DAY = timedelta(days=1)
GRACE = timedelta(hours=1)
TUESDAY = datetime(2026, 12, 1, tzinfo=UTC)


def midnight_at_or_before(_market: str, at: datetime) -> datetime:
    return at.replace(hour=0, minute=0, second=0, microsecond=0)


def midnight_after(_market: str, at: datetime) -> datetime:
    return midnight_at_or_before(_market, at) + DAY


def board(since: datetime | None) -> HealthBoard:
    watch = MarketWatch(cadence=DAY, grace=GRACE, since=since)
    return HealthBoard({"crypto": watch}, midnight_at_or_before, midnight_after)


def done(board_: HealthBoard, slot_at: datetime) -> None:
    outcome = CycleOutcome(account_id=1, agent="cash", cycle_id=1, status=CycleStatus.DONE)
    report = SlotReport(market="crypto", slot_at=slot_at, outcomes=(outcome,))
    board_.slot_finished(report, rejections=0, latency_s=0.1)


def test_a_fresh_install_is_not_overdue_for_a_slot_that_rang_before_it() -> None:
    first_run_at = TUESDAY + timedelta(hours=21)
    fresh = board(since=first_run_at)
    healthy, body = fresh.status(first_run_at + timedelta(minutes=5))
    assert healthy
    assert body["status"] == "ok"
    assert body["markets"]["crypto"]["next_bell"] == (TUESDAY + DAY).isoformat()
    assert body["markets"]["crypto"]["watched_since"] == first_run_at.isoformat()
    # Without the first run's time, the 00:00 slot counts against it (the old behaviour).
    assert not board(since=None).status(first_run_at + timedelta(minutes=5))[0]


def test_a_slot_after_the_first_run_without_a_success_is_overdue() -> None:
    watched = board(since=TUESDAY + timedelta(hours=21))
    late_at = TUESDAY + DAY + GRACE + timedelta(minutes=30)
    assert watched.overdue(late_at) == {"crypto": TUESDAY + DAY}
    done(watched, TUESDAY + DAY)
    assert watched.overdue(late_at) == {}


def test_a_slot_still_in_its_grace_at_the_first_run_was_the_daemons_to_ring() -> None:
    caught_up = board(since=TUESDAY + timedelta(minutes=30))  # the 00:00 slot's grace was open
    assert caught_up.overdue(TUESDAY + timedelta(hours=2)) == {"crypto": TUESDAY}
    missed = board(since=TUESDAY + GRACE + timedelta(minutes=1))  # it had closed
    assert missed.overdue(TUESDAY + timedelta(hours=2)) == {}
