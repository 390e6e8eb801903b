"""The LLM agents' journal batch: the turns handed in during one turn of the event loop are one
transaction, a bad cycle's write fails that cycle only, nothing is written twice, and a replay's
in-memory journal is appended at once (SQLite, Postgres)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine

from openbell.agents.llm.batching import BufferedJournal, JournalBatch, batch_for
from openbell.store.ledger import Ledger
from openbell.store.records import CycleUsage, JournalAppend, TraceEntry
from openbell.store.replay_ledger import ReplayLedger
from openbell_testkit.store import NOW


def _cycles(ledger: Ledger, count: int) -> list[int]:
    cycles = []
    for index in range(count):
        agent_id = ledger.ensure_agent(f"llm-{index}", "llm", NOW)
        account_id = ledger.open_account(agent_id, "us", "USD", Decimal("10000.00"), NOW)
        cycle_id = ledger.claim_cycle(account_id, NOW, "run", NOW + timedelta(hours=1), NOW)
        assert cycle_id is not None
        cycles.append(cycle_id)
    return cycles


def _entry(cycle_id: int, content: str) -> TraceEntry:
    return TraceEntry(cycle_id=cycle_id, role="user", at=NOW, content=content)


async def _turns(batch: JournalBatch, cycle_id: int, turns: int) -> None:
    """One agent: each turn hands its entry and waits until it is stored, then yields (as a model
    request would)."""
    for turn in range(turns):
        handed = batch.hand(cycle_id, [_entry(cycle_id, f"turn {turn}")], CycleUsage(tokens_in=1))
        await batch.stored(handed)
        assert handed.written
        await asyncio.sleep(0)


def test_the_agents_turns_of_one_loop_turn_are_one_transaction(ledger: Ledger) -> None:
    cycles = _cycles(ledger, 5)
    batch = JournalBatch(ledger)

    async def slot() -> None:
        await asyncio.gather(*(_turns(batch, cycle_id, 3) for cycle_id in cycles))

    asyncio.run(slot())
    assert (batch.transactions, batch.appends) == (3, 15)
    for cycle_id in cycles:
        assert [e.content for e in ledger.traces(cycle_id)] == ["turn 0", "turn 1", "turn 2"]
        assert ledger.cycle_usage(cycle_id).tokens_in == 3


def test_a_failed_write_fails_its_own_cycle_only(ledger: Ledger) -> None:
    good, other = _cycles(ledger, 2)
    batch = JournalBatch(ledger)

    async def slot() -> list[BaseException | None]:
        handed = [
            batch.hand(good, [_entry(good, "kept")], None),
            batch.hand(999, [_entry(999, "lost")], CycleUsage(tokens_in=1)),
            batch.hand(other, [_entry(other, "kept too")], None),
        ]
        return list(
            await asyncio.gather(*(batch.stored(one) for one in handed), return_exceptions=True)
        )

    results = asyncio.run(slot())
    assert results[0] is None
    assert results[2] is None
    assert isinstance(results[1], ValueError)
    assert "no cycle 999" in str(results[1])
    assert [e.content for e in ledger.traces(good)] == ["kept"]
    assert [e.content for e in ledger.traces(other)] == ["kept too"]


def test_without_a_running_loop_a_hand_off_is_written_at_once(ledger: Ledger) -> None:
    (cycle_id,) = _cycles(ledger, 1)
    batch = batch_for(ledger)
    assert batch_for(ledger) is batch
    handed = batch.hand(cycle_id, [_entry(cycle_id, "now")], None)
    assert handed.written
    assert [e.content for e in ledger.traces(cycle_id)] == ["now"]


def test_write_now_writes_what_is_pending_once(ledger: Ledger) -> None:
    (cycle_id,) = _cycles(ledger, 1)
    batch = JournalBatch(ledger)

    async def cycle() -> None:
        handed = batch.hand(cycle_id, [_entry(cycle_id, "once")], None)
        batch.write_now()  # a cycle's last flush, before the scheduled write runs
        assert handed.written
        await batch.stored(handed)
        await asyncio.sleep(0)  # the scheduled write finds nothing left

    asyncio.run(cycle())
    assert batch.transactions == 1
    assert [e.content for e in ledger.traces(cycle_id)] == ["once"]
    with pytest.raises(ValueError, match="no cycle 999"):
        batch.hand(999, [_entry(999, "x")], None).check()


def test_a_replays_buffered_cycles_are_appended_at_once_in_order(engine: Engine) -> None:
    replay = ReplayLedger(engine, start_at=NOW)
    owned, plain = _cycles(replay, 2)
    replay.own([replay.cycle_account_id(owned)])
    (buffered,) = _cycles_of(replay, [replay.cycle_account_id(owned)], NOW + timedelta(hours=1))
    assert isinstance(replay, BufferedJournal)
    assert not isinstance(Ledger(engine), BufferedJournal)
    assert replay.journal_buffered(buffered)
    assert not replay.journal_buffered(plain)  # claimed before `own`: in the ledger
    batch = JournalBatch(replay)

    async def slot() -> None:
        first = batch.hand(buffered, [_entry(buffered, "at once")], CycleUsage(tokens_in=2))
        assert first.written  # no loop turn waited for: the append is in memory
        queued = batch.hand(plain, [_entry(plain, "grouped")], None)
        assert not queued.written
        await batch.stored(queued)
        assert queued.written

    asyncio.run(slot())
    assert (batch.transactions, batch.appends) == (2, 2)
    assert [e.content for e in replay.traces(buffered)] == ["at once"]
    assert replay.cycle_usage(buffered).tokens_in == 2
    assert [e.content for e in replay.traces(plain)] == ["grouped"]
    replay.flush()
    assert [e.content for e in Ledger(engine).traces(buffered)] == ["at once"]


def test_a_buffered_cycle_waits_behind_its_own_queued_hand_off(engine: Engine) -> None:
    replay = ReplayLedger(engine, start_at=NOW)
    (cycle_id,) = _cycles(replay, 1)
    account_id = replay.cycle_account_id(cycle_id)
    replay.own([account_id])
    (buffered,) = _cycles_of(replay, [account_id], NOW + timedelta(hours=1))
    batch = JournalBatch(_BufferedFromSecondAsk(replay))

    async def cycle() -> None:
        queued = batch.hand(buffered, [_entry(buffered, "first")], None)
        later = batch.hand(buffered, [_entry(buffered, "second")], None)
        assert not later.written  # behind the cycle's own queued entries, not before them
        await batch.stored(later)
        assert queued.written

    asyncio.run(cycle())
    assert [e.content for e in replay.traces(buffered)] == ["first", "second"]


class _BufferedFromSecondAsk:
    """A replay's journal whose cycle turns buffered after the first hand-off (as a cycle would if
    its account were owned mid-cycle)."""

    def __init__(self, replay: ReplayLedger) -> None:
        self._replay = replay
        self._asked = 0

    def journal_buffered(self, cycle_id: int) -> bool:
        self._asked += 1
        return self._asked > 1 and self._replay.journal_buffered(cycle_id)

    def append_journal(
        self, cycle_id: int, entries: Sequence[TraceEntry], usage: CycleUsage | None = None
    ) -> tuple[TraceEntry, ...]:
        return self._replay.append_journal(cycle_id, entries, usage)

    def append_journals(self, appends: Sequence[JournalAppend]) -> tuple[TraceEntry, ...]:
        return self._replay.append_journals(appends)


def _cycles_of(ledger: Ledger, account_ids: list[int], slot_at: datetime) -> list[int]:
    cycles = []
    for account_id in account_ids:
        cycle_id = ledger.claim_cycle(account_id, slot_at, "run", slot_at + timedelta(hours=1), NOW)
        assert cycle_id is not None
        cycles.append(cycle_id)
    return cycles
