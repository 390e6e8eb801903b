"""The LLM journal: trace rows and usage appended per cycle, together (SQLite, Postgres)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, event

from openbell.store.ledger import Ledger
from openbell.store.records import CycleUsage, JournalAppend, TraceEntry
from openbell_testkit.store import NOW


def _cycle(ledger: Ledger) -> int:
    agent_id = ledger.ensure_agent("llm", "llm", NOW)
    account_id = ledger.open_account(agent_id, "us", "USD", Decimal("10000.00"), NOW)
    cycle_id = ledger.claim_cycle(account_id, NOW, "run", NOW + timedelta(hours=1), NOW)
    assert cycle_id is not None
    return cycle_id


def _entry(cycle_id: int, role: str, content: str) -> TraceEntry:
    return TraceEntry(cycle_id=cycle_id, role=role, at=NOW, content=content)


def test_entries_are_numbered_after_the_stored_ones_and_usage_adds_up_exactly(
    ledger: Ledger,
) -> None:
    cycle_id = _cycle(ledger)
    first = ledger.append_journal(
        cycle_id,
        [_entry(cycle_id, "system", "rules"), _entry(cycle_id, "user", "now")],
        CycleUsage(tokens_in=100, tokens_out=7, cost=Decimal("0.000027")),
    )
    assert [entry.seq for entry in first] == [1, 2]
    # A run of the cycle after an interruption appends after the first run's rows.
    again = ledger.append_journal(
        cycle_id,
        [_entry(cycle_id, "assistant", "hi")],
        CycleUsage(tokens_in=50, llm_latency_ms=200, cost=Decimal("0.0000135"), parse_failures=1),
    )
    assert [entry.seq for entry in again] == [3]
    assert ledger.append_journal(cycle_id, [], CycleUsage(invalid_tool_calls=2)) == ()
    stored = ledger.traces(cycle_id)
    assert [(entry.seq, entry.role, entry.content) for entry in stored] == [
        (1, "system", "rules"),
        (2, "user", "now"),
        (3, "assistant", "hi"),
    ]
    usage = ledger.cycle_usage(cycle_id)
    assert (usage.tokens_in, usage.tokens_out, usage.llm_latency_ms) == (150, 7, 200)
    assert (usage.parse_failures, usage.invalid_tool_calls) == (1, 2)
    assert usage.cost == Decimal("0.0000405")


def test_entries_without_usage_leave_the_usage_columns_alone(ledger: Ledger) -> None:
    cycle_id = _cycle(ledger)
    ledger.append_journal(cycle_id, [_entry(cycle_id, "user", "now")])
    assert ledger.cycle_usage(cycle_id) == CycleUsage()
    assert ledger.cycle_usage(cycle_id).cost is None


def test_an_unknown_cycle_or_a_foreign_entry_is_refused_and_nothing_is_written(
    ledger: Ledger,
) -> None:
    cycle_id = _cycle(ledger)
    with pytest.raises(ValueError, match="no cycle 999"):
        ledger.append_journal(999, [_entry(999, "user", "x")], CycleUsage(tokens_in=1))
    with pytest.raises(ValueError, match=f"belong to cycle {cycle_id}"):
        ledger.append_journal(
            cycle_id, [_entry(cycle_id, "user", "x"), _entry(999, "user", "y")], CycleUsage()
        )
    assert ledger.traces(cycle_id) == []
    assert ledger.cycle_usage(cycle_id) == CycleUsage()


def test_many_cycles_appends_are_one_transaction_numbered_per_cycle(
    ledger: Ledger, engine: Engine
) -> None:
    first, second = _cycle(ledger), _second_cycle(ledger)
    ledger.append_journal(second, [_entry(second, "system", "rules")], CycleUsage(tokens_in=5))
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", _record(statements))
    stored = ledger.append_journals(
        [
            JournalAppend(
                cycle_id=first,
                entries=(_entry(first, "system", "a"), _entry(first, "user", "b")),
                usage=CycleUsage(tokens_in=10, cost=Decimal("0.1")),
            ),
            JournalAppend(cycle_id=second, entries=(_entry(second, "user", "c"),)),
            # the same cycle again in one batch: numbered after its first append, usage added
            JournalAppend(
                cycle_id=first,
                entries=(_entry(first, "assistant", "d"),),
                usage=CycleUsage(tokens_in=1, cost=Decimal("0.01")),
            ),
            JournalAppend(cycle_id=second, usage=CycleUsage(parse_failures=1)),
        ]
    )
    assert [(entry.cycle_id, entry.seq, entry.content) for entry in stored] == [
        (first, 1, "a"),
        (first, 2, "b"),
        (second, 2, "c"),
        (first, 3, "d"),
    ]
    writes = [s for s in statements if not s.lstrip().upper().startswith(("BEGIN", "SAVEPOINT"))]
    assert len(writes) == 3, writes  # usage and next seqs read, usage update, one insert
    assert [e.content for e in ledger.traces(first)] == ["a", "b", "d"]
    assert [e.content for e in ledger.traces(second)] == ["rules", "c"]
    assert ledger.cycle_usage(first).tokens_in == 11
    assert ledger.cycle_usage(first).cost == Decimal("0.11")
    assert (ledger.cycle_usage(second).tokens_in, ledger.cycle_usage(second).parse_failures) == (
        5,
        1,
    )


def test_a_batch_with_an_unknown_cycle_writes_nothing(ledger: Ledger) -> None:
    cycle_id = _cycle(ledger)
    with pytest.raises(ValueError, match="no cycle 999"):
        ledger.append_journals(
            [
                JournalAppend(cycle_id=cycle_id, entries=(_entry(cycle_id, "user", "x"),)),
                JournalAppend(cycle_id=999, usage=CycleUsage(tokens_in=1)),
            ]
        )
    assert ledger.traces(cycle_id) == []
    with pytest.raises(ValueError, match=f"belong to cycle {cycle_id}"):
        JournalAppend(cycle_id=cycle_id, entries=(_entry(999, "user", "y"),))


def _second_cycle(ledger: Ledger) -> int:
    agent_id = ledger.ensure_agent("llm-2", "llm", NOW)
    account_id = ledger.open_account(agent_id, "us", "USD", Decimal("10000.00"), NOW)
    cycle_id = ledger.claim_cycle(account_id, NOW, "run", NOW + timedelta(hours=1), NOW)
    assert cycle_id is not None
    return cycle_id


def _record(statements: list[str]) -> Any:
    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    return before
