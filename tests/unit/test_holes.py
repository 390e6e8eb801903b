"""What a hole is put down to, and the waits between a failing slot's tries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from openbell.daemon.holes import Causes, MissedCause
from openbell.daemon.ringing import MIN_RETRY_S, RETRY_MAX_S, Backoff

STARTED_AT = datetime(2025, 11, 3, 3, 10, tzinfo=UTC)
GRACE = timedelta(minutes=15)


def causes() -> Causes:
    found = Causes({"crypto": GRACE})
    found.started(STARTED_AT)
    return found


@pytest.mark.parametrize(
    ("slot_at", "paused", "cause"),
    [
        # Its grace ended before the run started ringing: no daemon rang it.
        (STARTED_AT - GRACE - timedelta(hours=1), False, MissedCause.DAEMON_DOWN),
        (STARTED_AT - GRACE - timedelta(hours=1), True, MissedCause.DAEMON_DOWN),
        # The run answered for it (it catches up a slot still in its grace when it starts).
        (STARTED_AT - GRACE, False, MissedCause.DAEMON_STALLED),
        (STARTED_AT + timedelta(hours=1), False, MissedCause.DAEMON_STALLED),
        (STARTED_AT + timedelta(hours=1), True, MissedCause.ACCOUNT_PAUSED),
    ],
)
def test_a_hole_is_put_down_to_what_the_run_knows(
    slot_at: datetime, paused: bool, cause: MissedCause
) -> None:
    assert causes().of("crypto", slot_at, paused) is cause


def test_a_slot_the_run_could_not_run_is_put_down_to_why_until_it_runs() -> None:
    found = causes()
    slot_at = STARTED_AT + timedelta(hours=2)
    found.failed("crypto", slot_at, MissedCause.STORE_UNAVAILABLE)
    assert found.of("crypto", slot_at, True) is MissedCause.STORE_UNAVAILABLE
    assert found.of("crypto", slot_at + timedelta(hours=1), False) is MissedCause.DAEMON_STALLED
    found.ran("crypto", slot_at)
    assert found.of("crypto", slot_at, False) is MissedCause.DAEMON_STALLED


def test_before_the_run_rings_every_hole_is_the_daemon_being_down() -> None:
    assert Causes({"crypto": GRACE}).of("crypto", STARTED_AT, False) is MissedCause.DAEMON_DOWN


def test_the_waits_double_up_to_the_cap_and_end_with_the_grace() -> None:
    backoff = Backoff(speed=1.0)
    waits = [backoff.wait_s() for _ in range(8)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, RETRY_MAX_S, RETRY_MAX_S, RETRY_MAX_S]
    assert Backoff(speed=1.0).wait_s(left_s=0.25) == 0.25


def test_the_waits_are_real_seconds_under_a_fast_clock_with_a_floor() -> None:
    backoff = Backoff(speed=10.0)
    assert backoff.wait_s() == 0.1
    assert Backoff(speed=1000.0).wait_s() == MIN_RETRY_S
