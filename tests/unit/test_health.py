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


def test_a_slot_in_progress_shows_in_healthz_and_metrics_until_it_ends() -> None:
    watched = board(since=TUESDAY)
    slot_at = TUESDAY + DAY
    watched.slot_started("crypto", slot_at, slot_at + timedelta(seconds=2))
    _healthy, body = watched.status(slot_at + timedelta(minutes=1))
    assert body["running"] == ["crypto"]
    assert body["markets"]["crypto"]["last_bell"]["state"] == "running"
    assert 'openbell_slot_in_progress{market="crypto"} 1.0' in watched.metrics().decode()
    done(watched, slot_at)
    _healthy, body = watched.status(slot_at + timedelta(minutes=2))
    bell = body["markets"]["crypto"]["last_bell"]
    assert (body["running"], body["status"], bell["state"]) == ([], "ok", "done")
    assert bell["started_at"] == (slot_at + timedelta(seconds=2)).isoformat()
    assert 'openbell_slot_in_progress{market="crypto"} 0.0' in watched.metrics().decode()


def test_decisions_not_run_say_what_became_of_them() -> None:
    """Issue 28: a restart inside the grace found the slot's 5 cycles `interrupted` by the
    stop before; /healthz said nothing of it."""
    slot_at = TUESDAY + DAY
    watched = board(since=slot_at - timedelta(minutes=30))
    outcomes = tuple(
        CycleOutcome(account_id=n, agent=f"a{n}", cycle_id=None, status=None) for n in range(5)
    )
    report = SlotReport(market="crypto", slot_at=slot_at, outcomes=outcomes)
    watched.slot_finished(report, rejections=0, latency_s=0.1, not_run={"interrupted": 5})
    _healthy, body = watched.status(slot_at + timedelta(minutes=5))
    market = body["markets"]["crypto"]
    assert market["last_bell"]["state"] == "not_run"
    assert market["last_bell"]["not_run"] == {"interrupted": 5}
    assert market["skipped"] == {"not_run:interrupted": 5}
    assert (body["status"], body["degraded"]) == ("degraded", ["crypto"])
    text = watched.metrics().decode()
    assert 'openbell_decisions_not_run_total{market="crypto",reason="interrupted"} 5.0' in text


def test_an_interrupted_slot_and_missed_cycles_count_as_skips() -> None:
    watched = board(since=TUESDAY)
    slot_at = TUESDAY + DAY
    watched.slot_started("crypto", slot_at, slot_at)
    watched.cycles_marked("crypto", CycleStatus.INTERRUPTED, 3)
    watched.slot_interrupted("crypto", slot_at, {"interrupted": 3})
    watched.cycles_marked("crypto", CycleStatus.MISSED, 2)
    _healthy, body = watched.status(slot_at + timedelta(minutes=5))
    market = body["markets"]["crypto"]
    assert (market["last_bell"]["state"], market["last_bell"]["cause"]) == (
        "interrupted",
        "daemon_stopping",
    )
    assert market["skipped"] == {"interrupted": 3, "missed": 2}
    assert 'openbell_slots_total{market="crypto",outcome="interrupted"} 1.0' in (
        watched.metrics().decode()
    )


def test_decisions_a_peer_daemon_ran_are_no_trouble() -> None:
    slot_at = TUESDAY + DAY
    watched = board(since=slot_at - timedelta(minutes=30))
    outcomes = (
        CycleOutcome(account_id=1, agent="a1", cycle_id=1, status=CycleStatus.DONE),
        CycleOutcome(account_id=2, agent="a2", cycle_id=None, status=None),
    )
    report = SlotReport(market="crypto", slot_at=slot_at, outcomes=outcomes)
    watched.slot_finished(report, rejections=0, latency_s=0.1, not_run={"done": 1})
    _healthy, body = watched.status(slot_at + timedelta(minutes=5))
    market = body["markets"]["crypto"]
    assert (body["status"], market["last_bell"]["state"]) == ("ok", "done")
    assert market["last_bell"]["not_run"] == {"done": 1}
    assert market["skipped"] == {}
