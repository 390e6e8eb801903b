"""Builders for live-daemon tests: a plan over the bundled crypto hourly bars on a fast fake clock,
the daemon run in a thread, and what its ledger holds afterwards."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Row, text
from sqlmodel import Session, col, select

from openbell.agents.baselines import build_agent
from openbell.agents.protocol import Agent
from openbell.daemon.clock import Clock, ScaledClock
from openbell.daemon.live import run_live
from openbell.daemon.plan import LEASE_S, LivePlan, MarketPlan
from openbell.daemon.stopping import StopRequest
from openbell.markets.domain import Bar, Quote
from openbell.markets.errors import DataUnavailable
from openbell.markets.replay_source import ReplaySource
from openbell.markets.sources import ForwardingSource, MarketDataSource
from openbell.markets.universes import load_universe
from openbell.store import tables
from openbell.store.db import make_engine
from openbell.store.verify import verify_ledger
from openbell_testkit.migrated import migrate_to_head

#: A Monday inside the bundled crypto hourly bars (they end 2025-11-10 07:00 UTC).
START_AT = datetime(2025, 11, 3, 0, 0, tzinfo=UTC)


#: The hour the vendor of `DarkSource` cannot be reached.
DARK_FROM = START_AT + timedelta(hours=1)
DARK_UNTIL = START_AT + timedelta(hours=2)
#: How long `running` waits for its daemon's start-up (minutes on a loaded machine would be a bug).
START_TIMEOUT_S = 60.0


class DarkSource(ForwardingSource):
    """The bundled bars, with the vendor unreachable (`dns`) for reads at [`dark_from`,
    `dark_until`) (by default DARK_FROM, DARK_UNTIL)."""

    def __init__(
        self,
        source: MarketDataSource,
        dark_from: datetime = DARK_FROM,
        dark_until: datetime = DARK_UNTIL,
    ) -> None:
        super().__init__(source)
        self._dark_from = dark_from
        self._dark_until = dark_until

    def _dark(self, at: datetime) -> None:
        if self._dark_from <= at < self._dark_until:
            raise DataUnavailable(
                "vendor unreachable: [Errno -2] Name or service not known", cause="dns"
            )

    async def bars(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_at: datetime
    ) -> Mapping[str, Sequence[Bar]]:
        self._dark(end_at)
        return await self._source.bars(symbols, interval, start_at, end_at)

    async def quote(self, symbols: Sequence[str], at: datetime) -> Mapping[str, Quote]:
        self._dark(at)
        return await self._source.quote(symbols, at)


def dark_plan(
    url: str,
    port: int | None = None,
    *,
    dark: tuple[datetime, datetime] = (DARK_FROM, DARK_UNTIL),
    **changes: Any,
) -> LivePlan:
    """`crypto_plan` over a `DarkSource` dark over `dark`, serving HTTP on `port` when given."""
    plan = crypto_plan(url)
    market = replace(plan.markets[0], source=DarkSource(plan.markets[0].source, *dark))
    listen = None if port is None else ("127.0.0.1", port)
    return replace(plan, markets=(market,), http_listen=listen, **changes)


def crypto_plan(
    store_url: str,
    *,
    agents: tuple[Agent, ...] | None = None,
    grace: timedelta = timedelta(minutes=30),
    run_id: str | None = None,
    stop_grace_s: float = 5.0,
    lease_s: float = LEASE_S,
) -> LivePlan:
    source = ReplaySource.from_bundled("crypto", names=["crypto-1h"])
    chosen = agents or (
        build_agent("buy_and_hold", "buy-and-hold", market="crypto"),
        build_agent("random", "random", market="crypto", seed=7),
    )
    market = MarketPlan(
        market="crypto",
        source=source,
        universe=load_universe("crypto10"),
        cadence="hourly",
        initial_cash=Decimal(10000),
        agents=chosen,
        fill_price=source.first_price_at_or_after,
        grace=grace,
    )
    return LivePlan(
        store_url=store_url,
        markets=(market,),
        http_listen=None,
        stop_grace_s=stop_grace_s,
        heartbeat_s=0.5,
        run_id=run_id,
        lease_s=lease_s,
    )


@contextmanager
def running(plan: LivePlan, clock: Clock) -> Iterator[StopRequest]:
    """Run the daemon in a thread, from the moment it has started (recorded its start: it rings
    from then on), and stop it (and wait) when the block ends.

    The block begins after the start-up, however long a loaded machine makes it: a block that ended
    inside it would stop the daemon there (`StartupStopped`) instead of ending its run.
    """
    stop = StopRequest()
    errors: list[BaseException] = []
    before = _starts(plan.store_url)

    def target() -> None:
        try:
            run_live(plan, clock, stop=stop)
        except BaseException as exc:  # noqa: BLE001  (re-raised in the test thread)
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while thread.is_alive() and _starts(plan.store_url) <= before:
            if time.monotonic() > deadline:
                raise AssertionError(f"the daemon did not start within {START_TIMEOUT_S} s")
            time.sleep(0.02)
        yield stop
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive(), "the daemon did not stop"
    if errors:
        raise errors[0]


@dataclass(frozen=True)
class CycleRow:
    account_id: int
    slot_at: datetime
    status: str
    claimed_by: str
    reason: str | None = None
    started_at: datetime | None = None


def cycles(store_url: str) -> list[CycleRow]:
    engine = make_engine(store_url)
    try:
        with Session(engine) as session:
            rows = session.exec(select(tables.CycleRow).order_by(col(tables.CycleRow.id))).all()
    finally:
        engine.dispose()
    return [
        CycleRow(
            row.account_id, row.slot_at, row.status, row.claimed_by, row.reason, row.started_at
        )
        for row in rows
    ]


def query(store_url: str, sql: str, **params: object) -> Sequence[Row[Any]]:
    """The rows of one SQL query on `store_url`, on an engine of its own (disposed after)."""
    engine = make_engine(store_url)
    try:
        with engine.connect() as connection:
            return connection.execute(text(sql), params).all()
    finally:
        engine.dispose()


def sleep_until(clock: ScaledClock, at: datetime) -> None:
    """Sleep (in real time) until `clock` shows `at`; at once if it has."""
    time.sleep(max(0.0, (at - clock.now()).total_seconds() / clock.speed))


def _starts(store_url: str) -> int:
    """How many daemon starts the ledger on `store_url` has recorded."""
    [(count,)] = query(store_url, "SELECT count(*) FROM daemon_run")
    return int(count)


def fills(store_url: str) -> int:
    [(count,)] = query(store_url, 'SELECT count(*) FROM "fill"')
    return int(count)


def verifies(store_url: str) -> bool:
    engine = make_engine(store_url)
    try:
        return verify_ledger(engine).ok
    finally:
        engine.dispose()


def migrated(store_url: str) -> str:
    """`store_url` (an empty database) at the head revision (`migrated.migrate_to_head`)."""
    migrate_to_head(store_url)
    return store_url
