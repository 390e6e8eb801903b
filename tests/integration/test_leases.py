"""Leases on Postgres: a cycle's claim is renewed while it runs, so a live daemon keeps a long
cycle; a daemon that stops renewing (frozen, or killed) has its cycle completed by a peer within
the slot's grace; a slot that fails (the database dropped its connections mid-cycle) releases its
claims, and the cycles are completed within the grace instead of staying `claimed`.

The daemons run in threads on one fast fake clock (`SPEED` clock seconds per real second), with the
default lease: 60 clock seconds, five real ones.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import psycopg
import pytest
from sqlalchemy.engine import make_url

from openbell.agents.baselines import build_agent
from openbell.agents.protocol import Agent, DecisionContext
from openbell.daemon.clock import ScaledClock
from openbell_testkit.live import START_AT, crypto_plan, migrated, query, running, verifies
from openbell_testkit.postgres import terminate_connections

pytestmark = pytest.mark.postgres

SPEED = 12.0
GRACE = timedelta(minutes=30)  # crypto_plan's: 150 real seconds
WITHIN_S = 60.0  # real seconds a test waits for an outcome: 12 clock minutes, inside the grace


def buy_and_hold() -> Agent:
    return build_agent("buy_and_hold", "buy-and-hold", market="crypto")


@dataclass
class HeldAgent:
    """`inner`, held at the start of its decision: `frozen` blocks the daemon's whole thread (its
    loop stops: no lease renewal, as for a process stopped or killed), otherwise it only waits."""

    inner: Agent
    freeze_loop: bool
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def kind(self) -> str:
        return self.inner.kind

    async def decide(self, ctx: DecisionContext) -> None:
        self.entered.set()
        if self.freeze_loop:
            self.release.wait(timeout=3 * WITHIN_S)
        else:
            await asyncio.to_thread(self.release.wait, 3 * WITHIN_S)
        await self.inner.decide(ctx)


@dataclass(frozen=True)
class Cycle:
    status: str
    claimed_by: str
    finished_at: datetime | None


def cycles_at(url: str, slot_at: datetime) -> list[Cycle]:
    rows = query(
        url,
        "SELECT status, claimed_by, finished_at FROM cycle WHERE slot_at = :slot "
        "ORDER BY account_id",
        slot=slot_at,
    )
    return [Cycle(row.status, row.claimed_by, row.finished_at) for row in rows]


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = WITHIN_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {what}"
        time.sleep(0.2)


def test_a_peer_completes_a_stopped_daemons_cycle_within_the_grace(pg_url: str) -> None:
    url = migrated(pg_url)
    clock = ScaledClock(START_AT - timedelta(seconds=12), speed=SPEED)
    held = HeldAgent(buy_and_hold(), freeze_loop=True)
    stopped = crypto_plan(url, agents=(held,), run_id="stopped")
    peer = crypto_plan(url, agents=(buy_and_hold(),), run_id="peer")
    try:
        with running(stopped, clock):
            assert held.entered.wait(WITHIN_S), "the first daemon never ran its cycle"
            with running(peer, clock):
                wait_for(
                    "the peer completes the cycle",
                    lambda: [c.status for c in cycles_at(url, START_AT)] == ["done"],
                )
                (cycle,) = cycles_at(url, START_AT)
                assert cycle.claimed_by == "peer"
                assert cycle.finished_at is not None
                assert cycle.finished_at <= START_AT + GRACE
                held.release.set()  # the stopped daemon wakes up to find its claim gone
    finally:
        held.release.set()
    (cycle,) = cycles_at(url, START_AT)
    assert (cycle.status, cycle.claimed_by) == ("done", "peer")
    assert verifies(url)


def test_a_cycle_longer_than_its_lease_keeps_its_claim(pg_url: str) -> None:
    url = migrated(pg_url)
    clock = ScaledClock(START_AT - timedelta(seconds=12), speed=SPEED)
    slow = HeldAgent(buy_and_hold(), freeze_loop=False)
    try:
        with running(crypto_plan(url, agents=(slow,), run_id="slow"), clock):
            assert slow.entered.wait(WITHIN_S), "the daemon never ran its cycle"
            with running(crypto_plan(url, agents=(buy_and_hold(),), run_id="peer"), clock):
                time.sleep(3 * 60 / SPEED)  # three leases, and the peer's sweeps in between
                assert [(c.status, c.claimed_by) for c in cycles_at(url, START_AT)] == [
                    ("claimed", "slow")
                ]
                slow.release.set()
                wait_for(
                    "the slow cycle completes",
                    lambda: [c.status for c in cycles_at(url, START_AT)] == ["done"],
                )
    finally:
        slow.release.set()
    assert [(c.status, c.claimed_by) for c in cycles_at(url, START_AT)] == [("done", "slow")]
    assert verifies(url)


def test_a_failed_slot_releases_its_claims_and_they_complete_within_the_grace(
    pg_url: str,
) -> None:
    url = migrated(pg_url)
    clock = ScaledClock(START_AT - timedelta(seconds=12), speed=SPEED)
    held = HeldAgent(buy_and_hold(), freeze_loop=False)
    random = build_agent("random", "random", market="crypto", seed=7)
    try:
        with running(crypto_plan(url, agents=(held, random), run_id="survivor"), clock):
            assert held.entered.wait(WITHIN_S), "the daemon never ran its cycle"
            # The cycle's writes wait on this lock, and the database drops the connections.
            lock = hold_lock(url, "nav_snapshot")
            try:
                held.release.set()
                wait_for("a cycle waits on the lock", lambda: waiting_on_a_lock(url))
                assert terminate_connections(url) >= 1
            finally:
                lock.rollback()
                lock.close()
            wait_for(
                "the failed slot's cycles complete",
                lambda: [c.status for c in cycles_at(url, START_AT)] == ["done", "done"],
            )
            finished = [c.finished_at for c in cycles_at(url, START_AT)]
            assert all(at is not None and at <= START_AT + GRACE for at in finished)
    finally:
        held.release.set()
    assert verifies(url)


def _conninfo(url: str) -> tuple[str, str, str]:
    parsed = make_url(url)
    conninfo = parsed.set(drivername="postgresql", query={}).render_as_string(False)
    return conninfo, str(parsed.query["options"]), str(parsed.query["application_name"])


def hold_lock(url: str, table: str) -> psycopg.Connection[tuple[object, ...]]:
    """A connection of the test's own (another application_name) holding an exclusive lock on
    `table` until it rolls back."""
    conninfo, options, _name = _conninfo(url)
    held = psycopg.connect(conninfo, options=options, application_name="openbell-test-lock")
    held.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
    return held


def waiting_on_a_lock(url: str) -> bool:
    conninfo, _options, name = _conninfo(url)
    with psycopg.connect(conninfo, autocommit=True, application_name="openbell-test-watch") as db:
        row = db.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name = %s AND wait_event_type = 'Lock'",
            (name,),
        ).fetchone()
    return row is not None and row[0] > 0
