"""The accounts' hash chains on real SQLite and Postgres: a link per finished, interrupted,
superseded or missed cycle, in the transaction that ends it, by the plain ledger and the replay's,
each recomputable from the stored rows alone."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, select

from openbell.agents.broker import PaperBroker
from openbell.agents.protocol import DecisionContext
from openbell.daemon.runner import CycleRunner, MarketDesk
from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Bar, Instrument
from openbell.markets.errors import CycleSkipped
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import rules_for
from openbell.markets.universes import Universe
from openbell.store.core_tables import (
    CYCLE_DIGEST_TABLE,
    CYCLE_TABLE,
    FILL_TABLE,
    MARGIN_CALL_TABLE,
    NAV_MARK_TABLE,
    NAV_SNAPSHOT_TABLE,
    ORDER_TABLE,
    TRACE_TABLE,
)
from openbell.store.db import make_engine
from openbell.store.digests import GENESIS, chained, cycle_records
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus, MissedSlot, SnapshotKind, TraceEntry
from openbell.store.redact import Redactor
from openbell.store.replay_ledger import ReplayLedger
from openbell_testkit.store import INSTRUMENTS, NOW, fill_for, make_order

AAPL = INSTRUMENTS["us"][0]


def _account(ledger: Ledger, name: str = "alpha") -> int:
    agent_id = ledger.ensure_agent(name, "random", NOW)
    return ledger.open_account(agent_id, "us", "USD", Decimal(10000), NOW)


def _cycle(ledger: Ledger, account_id: int, day: int, *, price: str = "101.37") -> int:
    """A claimed cycle at day `day` with a filled order, two trace entries and its slot NAV."""
    at = NOW + timedelta(days=day)
    cycle_id = ledger.claim_cycle(account_id, at, "run", at + timedelta(minutes=5), at)
    assert cycle_id is not None
    order = make_order(instrument=AAPL, quantity=Decimal(2), placed_at=at)
    ledger.record_order(
        cycle_id=cycle_id, seq=1, order=order, outcome=fill_for(order, Decimal(price))
    )
    ledger.append_journal(
        cycle_id,
        [
            TraceEntry(cycle_id=cycle_id, role="user", at=at, content="prices: AAPL 101"),
            TraceEntry(cycle_id=cycle_id, role="assistant", at=at, content='{"buy": "AAPL"}'),
        ],
    )
    ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, {"AAPL": Decimal("100.5")})
    return cycle_id


def _rows(engine: Engine, table: Any) -> list[Any]:
    with engine.connect() as connection:
        return [row._mapping for row in connection.execute(select(table))]


def _links(engine: Engine) -> list[Any]:
    with engine.connect() as connection:
        return [
            row._mapping
            for row in connection.execute(
                select(CYCLE_DIGEST_TABLE).order_by(
                    CYCLE_DIGEST_TABLE.c.account_id, CYCLE_DIGEST_TABLE.c.seq
                )
            )
        ]


def _recomputed(engine: Engine) -> dict[int, Any]:
    return cycle_records(
        cycles=_rows(engine, CYCLE_TABLE),
        orders=_rows(engine, ORDER_TABLE),
        fills=_rows(engine, FILL_TABLE),
        margin_calls=_rows(engine, MARGIN_CALL_TABLE),
        traces=_rows(engine, TRACE_TABLE),
        snapshots=_rows(engine, NAV_SNAPSHOT_TABLE),
        marks=_rows(engine, NAV_MARK_TABLE),
    )


def _check_chains(engine: Engine) -> list[Any]:
    """Every link follows its account's previous one and is the digest of its cycle's record
    as the rows stand; the links."""
    links = _links(engine)
    records = _recomputed(engine)
    tips: dict[int, tuple[int, str]] = {}
    for link in links:
        seq, prev = tips.get(link["account_id"], (0, GENESIS))
        assert (link["seq"], link["prev"]) == (seq + 1, prev)
        assert link["digest"] == chained(prev, records[link["cycle_id"]].record)
        tips[link["account_id"]] = (link["seq"], link["digest"])
    return links


def test_each_finished_cycle_is_chained_after_its_accounts_previous_one(ledger: Ledger) -> None:
    engine = ledger._engine
    alpha, beta = _account(ledger), _account(ledger, "beta")
    first = _cycle(ledger, alpha, 0)
    assert _links(engine) == [], "a claimed cycle has no link"
    assert ledger.finish_cycle(first, CycleStatus.DONE, NOW, held_by="run")
    other = _cycle(ledger, beta, 0)
    ledger.finish_cycle(other, CycleStatus.SKIPPED, NOW, reason="budget_exhausted")
    second = _cycle(ledger, alpha, 1)
    ledger.finish_cycle(second, CycleStatus.FAILED, NOW, error_class="X", error_message="y")
    ledger.finish_cycle(second, CycleStatus.FAILED, NOW)  # again: no second link
    links = _check_chains(engine)
    assert [(link["cycle_id"], link["seq"]) for link in links] == [
        (first, 1),
        (second, 2),
        (other, 1),
    ]
    assert links[1]["prev"] == links[0]["digest"]
    record = _recomputed(engine)[first]
    assert [row.table for row in record.row_digests()] == [
        "cycle",
        "order",
        "fill",
        "trace",
        "trace",
        "nav_snapshot",
        "nav_mark",
    ]


def test_missed_interrupted_and_superseded_cycles_are_chained_too(ledger: Ledger) -> None:
    engine = ledger._engine
    account_id = _account(ledger)
    missed = ledger.record_missed(account_id, NOW, NOW)
    assert missed is not None
    ledger.record_missed_many(
        [
            MissedSlot(account_id=account_id, slot_at=NOW + timedelta(days=1), reason="gap"),
            MissedSlot(account_id=account_id, slot_at=NOW + timedelta(days=2), reason="gap"),
        ],
        NOW,
    )
    day3 = NOW + timedelta(days=3)
    held = ledger.claim_cycle(account_id, day3, "run", day3 + timedelta(minutes=5), day3)
    assert held is not None
    assert ledger.interrupt_cycle(held, day3, held_by="run")
    day4 = NOW + timedelta(days=4)
    stale = ledger.claim_cycle(account_id, day4, "dead", day4 + timedelta(minutes=5), day4)
    day5 = NOW + timedelta(days=5)
    fresh = ledger.claim_cycle(account_id, day5, "run", day5 + timedelta(minutes=5), day5)
    assert fresh is not None
    links = _check_chains(engine)
    assert [link["seq"] for link in links] == [1, 2, 3, 4, 5]
    assert links[-2]["cycle_id"] == held
    assert links[-1]["cycle_id"] == stale, "superseded by the later claim: interrupted"


def test_changing_a_chained_row_breaks_its_link(ledger: Ledger) -> None:
    engine = ledger._engine
    account_id = _account(ledger)
    cycle_id = _cycle(ledger, account_id, 0)
    ledger.finish_cycle(cycle_id, CycleStatus.DONE, NOW)
    _check_chains(engine)
    with engine.begin() as connection:
        connection.execute(FILL_TABLE.update().values(price=Decimal("101.38")))
    link = _links(engine)[0]
    record = _recomputed(engine)[cycle_id].record
    assert link["digest"] != chained(GENESIS, record)


def test_the_replay_ledger_chains_what_it_writes_in_the_batch(engine: Engine) -> None:
    replay = ReplayLedger(engine, start_at=NOW)
    ids = [_account(replay), _account(replay, "beta")]
    replay.own(ids)
    for day in range(3):
        for account_id in ids:
            cycle_id = _cycle(replay, account_id, day, price=f"10{day}.5")
            replay.finish_cycle(cycle_id, CycleStatus.DONE, NOW + timedelta(days=day))
        if day == 1:
            assert _links(engine) == [], "nothing before the flush"
            replay.flush()
    replay.check()
    links = _check_chains(engine)
    assert sorted((link["account_id"], link["seq"]) for link in links) == [
        (account, seq) for account in sorted(ids) for seq in (1, 2, 3)
    ]
    slots = {row["id"]: row["slot_at"] for row in _rows(engine, CYCLE_TABLE)}
    by_account = [link for link in links if link["account_id"] == ids[0]]
    assert [slots[link["cycle_id"]] for link in by_account] == sorted(
        slots[link["cycle_id"]] for link in by_account
    )


def test_a_replay_batch_whose_text_the_engine_masked_is_chained_as_stored(db_url: str) -> None:
    """A secret in a model's answer is masked on its way into the ledger: the batch's link is of
    the row as stored (read back), not as the replay held it."""
    secret = "sk-live-0123456789abcdef"  # noqa: S105  (a made-up key the engine masks)
    upgrade(db_url)
    engine = make_engine(db_url, redactor=Redactor([secret]))
    try:
        replay = ReplayLedger(engine, start_at=NOW)
        account_id = _account(replay)
        replay.own([account_id])
        cycle_id = _cycle(replay, account_id, 0)
        replay.append_journal(
            cycle_id,
            [TraceEntry(cycle_id=cycle_id, role="assistant", at=NOW, content=f"key {secret}")],
        )
        replay.finish_cycle(cycle_id, CycleStatus.DONE, NOW)
        replay.flush()
        stored = [row["content"] for row in _rows(engine, TRACE_TABLE)]
        assert not any(secret in (text or "") for text in stored)
        assert len(_check_chains(engine)) == 1
    finally:
        engine.dispose()


@dataclass
class _Buyer:
    """Buys a little BTC each cycle and says so in its trace; `error` makes its cycle fail."""

    name: str
    error: Exception | None = None
    kind: str = "test"

    async def decide(self, ctx: DecisionContext) -> None:
        ctx.journal.append_journal(
            ctx.cycle_id,
            [TraceEntry(cycle_id=ctx.cycle_id, role="assistant", at=ctx.now, content="buy")],
        )
        await ctx.tools.place_order("BTC/USDT", "buy", shares=Decimal("0.01"), reason="test")
        if self.error is not None:
            raise self.error
        await ctx.tools.finish("bought")


@dataclass
class _Absent:
    name: str
    kind: str = "mcp"

    async def decide(self, ctx: DecisionContext) -> None:
        raise CycleSkipped("agent_absent")


def _live_desk(ledger: Ledger, first: datetime) -> MarketDesk:
    bars = [
        Bar(
            symbol="BTC/USDT",
            start_at=first + (day - 1) * timedelta(days=1),
            end_at=first + day * timedelta(days=1),
            open=Decimal(50000 + 100 * day),
            high=Decimal(50200 + 100 * day),
            low=Decimal(49800 + 100 * day),
            close=Decimal(50050 + 100 * day),
            volume=Decimal(1000),
        )
        for day in range(4)
    ]
    source = ReplaySource(market="crypto", bars={"1d": bars})
    rules = rules_for("crypto")
    return MarketDesk(
        market="crypto",
        gateway=PointInTimeGateway(source),
        broker=PaperBroker(
            ledger=ledger,
            rules=rules,
            calendar=calendar_for(rules.calendar_id),
            fill_price=source.first_price_at_or_after,
        ),
        universe=Universe(
            name="one-coin",
            market="crypto",
            as_of=first.date(),
            instruments=(Instrument(symbol="BTC/USDT", market="crypto", currency="USDT"),),
        ),
        rules=rules,
    )


def test_the_live_runner_chains_done_failed_and_skipped_cycles_with_their_rows(
    ledger: Ledger,
) -> None:
    """The daemon's cycle runner (the live path): each cycle it ends is linked, in the finishing
    transaction, with its orders, fills, trace and slot snapshot in the record."""
    engine = ledger._engine
    first = datetime(2025, 1, 6, tzinfo=UTC)
    agents = [_Buyer("buyer"), _Buyer("buggy", error=RuntimeError("bug")), _Absent("away")]
    accounts = []
    for agent in agents:
        agent_id = ledger.ensure_agent(agent.name, agent.kind, first)
        accounts.append(
            (ledger.open_account(agent_id, "crypto", "USDT", Decimal(10000), first), agent)
        )
    runner = CycleRunner(
        ledger=ledger,
        desks={"crypto": _live_desk(ledger, first)},
        run_id="run-a",
        lease=timedelta(minutes=15),
    )
    for day in range(3):
        slot_at = first + day * timedelta(days=1)
        asyncio.run(runner.run_slot("crypto", slot_at, accounts, slot_at))
    links = _check_chains(engine)
    assert len(links) == 9
    records = _recomputed(engine)
    statuses = sorted({records[link["cycle_id"]].record["cycle"]["status"] for link in links})
    assert statuses == ["done", "failed", "skipped"]
    bought = [
        records[link["cycle_id"]].record for link in links if link["account_id"] == accounts[0][0]
    ]
    assert all(record["fills"] and record["traces"] for record in bought)
    assert all(record["nav_snapshot"] is not None for record in bought)
