"""Health that tells the truth (issue 28, problem 4): a live daemon on a fast fake clock whose
vendor is dark for one slot shows that slot `data_unavailable`, with the cause, in `/healthz`
and `/metrics`; a stop during a slot checkpoints its cycles `interrupted` within the stop grace
and writes no error line (no `CancelledError` traceback)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import timedelta

import httpx
from structlog.testing import capture_logs

from openbell.agents.baselines import build_agent
from openbell.agents.protocol import DecisionContext
from openbell.daemon.clock import ScaledClock
from openbell.daemon.events import DaemonEvent
from openbell_testkit.live import (
    DARK_FROM,
    START_AT,
    crypto_plan,
    cycles,
    dark_plan,
    migrated,
    running,
    sleep_until,
)
from openbell_testkit.offline import closed_port

SPEED = 600.0  # an hourly slot every 6 s, a 30-minute grace in 3 s


def get(url: str) -> httpx.Response:
    deadline = time.monotonic() + 30
    while True:
        try:
            return httpx.get(url, timeout=5)
        except httpx.ConnectError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_a_dark_slot_is_data_unavailable_with_its_cause_in_healthz_and_metrics(
    sqlite_url: str,
) -> None:
    url = migrated(sqlite_url)
    port = closed_port()
    clock = ScaledClock(START_AT - timedelta(minutes=1), speed=SPEED)
    base = f"http://127.0.0.1:{port}"
    with running(dark_plan(url, port), clock):
        sleep_until(clock, START_AT + timedelta(minutes=45))
        first = get(f"{base}/healthz").json()["markets"]["crypto"]
        sleep_until(clock, DARK_FROM + timedelta(minutes=45))  # past the dark slot's grace
        dark_response = get(f"{base}/healthz")
        dark = dark_response.json()
        metrics = get(f"{base}/metrics").text
    assert first["last_bell"]["state"] == "done"
    assert first["last_bell"]["cycles"] == {"done": 2}
    bell = dark["markets"]["crypto"]["last_bell"]
    assert (bell["slot_at"], bell["state"], bell["cause"]) == (
        DARK_FROM.isoformat(),
        "data_unavailable",
        "dns",
    )
    assert "Name or service not known" in bell["message"]
    assert bell["cycles"] == {"skipped": 2}
    # Past its grace with no success, the market is overdue (503), and says why.
    assert (dark_response.status_code, dark["status"]) == (503, "overdue")
    assert dark["degraded"] == ["crypto"]
    assert dark["markets"]["crypto"]["skipped"] == {"data_unavailable": 2}
    assert 'openbell_slots_total{market="crypto",outcome="data_unavailable"} 1.0' in metrics
    assert 'openbell_slot_in_progress{market="crypto"} 0.0' in metrics
    assert {row.status for row in cycles(url) if row.slot_at == DARK_FROM} == {"skipped"}


class Stuck:
    """An agent whose decision never ends (a model that hangs)."""

    name = "stuck"
    kind = "python"

    async def decide(self, ctx: DecisionContext) -> None:
        await asyncio.sleep(3600)


def test_a_stop_during_a_slot_checkpoints_its_cycles_and_logs_no_error(sqlite_url: str) -> None:
    url = migrated(sqlite_url)
    events: list[DaemonEvent] = []
    agents = (build_agent("buy_and_hold", "buy-and-hold", market="crypto"), Stuck())
    plan = replace(
        crypto_plan(url, agents=agents, stop_grace_s=0.5),
        events=events.append,  # type: ignore[arg-type]
    )
    clock = ScaledClock(START_AT - timedelta(seconds=30), speed=60.0)
    with capture_logs() as logs, running(plan, clock):
        sleep_until(clock, START_AT + timedelta(seconds=90))  # the slot runs, `stuck` hangs
        stopping_s = time.monotonic()
    stop_s = time.monotonic() - stopping_s
    assert stop_s < 0.5 + 5 + 3, stop_s  # the grace, the cancellation's bound, the rest
    errors = [line for line in logs if line["log_level"] in ("error", "critical")]
    assert errors == [], errors
    assert not [line for line in logs if "exc_info" in line or "exception" in line]
    statuses = {row.status for row in cycles(url) if row.slot_at == START_AT}
    assert statuses == {"done", "interrupted"}
    ended = [
        e
        for e in events
        if e.kind == "slot_finished" and e.fields["slot_at"] == START_AT.isoformat()
    ]
    assert ended[-1].fields["state"] == "interrupted"
    assert ended[-1].fields["cycles"] == {"interrupted": 1}
    assert [e.kind for e in events][-1] == "daemon_stopped"


def test_a_stop_while_the_vendor_is_away_ends_the_retries_and_finishes_the_cycles(
    sqlite_url: str,
) -> None:
    """Issue 28: Ctrl-C during a slot whose vendor was away waited the 30 s stop grace while the
    reads were retried. A stop now ends the retries: the cycles finish `skipped` at once."""
    url = migrated(sqlite_url)
    plan = dark_plan(url, dark=(START_AT, START_AT + timedelta(hours=1)), stop_grace_s=30.0)
    plan = replace(plan, markets=(replace(plan.markets[0], grace=timedelta(hours=1)),))
    clock = ScaledClock(START_AT - timedelta(seconds=30), speed=60.0)  # a grace of 60 s
    with capture_logs() as logs, running(plan, clock):
        deadline_s = time.monotonic() + 30
        while not any(line["event"] == "vendor_read_failed" for line in logs):
            assert time.monotonic() < deadline_s, "the slot never read the vendor"
            time.sleep(0.05)
        stopping_s = time.monotonic()
    stop_s = time.monotonic() - stopping_s
    assert stop_s < 5, stop_s  # not the 30 s stop grace, nor the slot's 60 s grace
    assert {row.status for row in cycles(url) if row.slot_at == START_AT} == {"skipped"}
    errors = [line for line in logs if line["log_level"] in ("error", "critical")]
    assert errors == [], errors
    # The slot's quote read gave up at the stop (and the 00:00 close's bars read, if it was
    # still retrying then), each at warning.
    given_up = [line for line in logs if line.get("given_up") == "daemon_stopping"]
    assert "quote" in {line["read"] for line in given_up}
    assert {line["log_level"] for line in given_up} == {"warning"}
