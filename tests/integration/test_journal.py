"""The LLM journal: trace rows and usage appended per cycle, together (SQLite, Postgres)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from openbell.store.ledger import Ledger
from openbell.store.records import CycleUsage, TraceEntry
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
