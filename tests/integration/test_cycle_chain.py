"""The accounts' hash chains on real SQLite and Postgres: a link per finished, interrupted,
superseded or missed cycle, in the transaction that ends it, by the plain ledger and the replay's,
each recomputable from the stored rows alone."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, select

from openbell.store.db import make_engine
from openbell.store.digests import GENESIS, chained, cycle_records
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus, MissedSlot, SnapshotKind, TraceEntry
from openbell.store.redact import Redactor
from openbell.store.replay_ledger import ReplayLedger
from openbell.store.tables import (
    CYCLE_DIGEST_TABLE,
    CYCLE_TABLE,
    FILL_TABLE,
    MARGIN_CALL_TABLE,
    NAV_MARK_TABLE,
    NAV_SNAPSHOT_TABLE,
    ORDER_TABLE,
    TRACE_TABLE,
)
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
