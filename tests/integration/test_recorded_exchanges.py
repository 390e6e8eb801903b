"""The recorded exchanges of a ledger, read back on SQLite and Postgres: each `assistant` row's
response by its request digest (a response longer than the trace's cut kept whole), and each
masked account's key by agent and market."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from sqlalchemy import Engine

from openbell.agents.llm.recorder import MAX_TRACE_CHARS
from openbell.markets.domain import utc
from openbell.store.exchanges import RecordedAnswer, recorded_answers, recorded_keys
from openbell.store.ledger import Ledger
from openbell.store.masking_keys import MaskingKey
from openbell.store.records import TraceEntry

SLOT = utc(2025, 10, 1, 13, 30)


def test_recorded_answers_and_keys_are_read_back(engine: Engine, ledger: Ledger) -> None:
    agent_id = ledger.ensure_agent("gpt", "llm", SLOT)
    account_id = ledger.open_account(agent_id, "us", "USD", Decimal(10000), SLOT)
    cycle_id = ledger.claim_cycle(account_id, SLOT, "run", utc(2025, 10, 2), SLOT)
    assert cycle_id is not None
    long_response = '{"choices":[{"message":{"content":"' + "x" * MAX_TRACE_CHARS + '"}}]}'
    entries = [
        TraceEntry(cycle_id=cycle_id, role="user", at=SLOT, content="hello"),
        TraceEntry(
            cycle_id=cycle_id,
            role="assistant",
            at=SLOT,
            content="Hold.",
            request_digest="sha256:aa",
            response='{"first":1}',
            revision="openai-model=m-0601",
        ),
        TraceEntry(
            cycle_id=cycle_id,
            role="assistant",
            at=SLOT,
            request_digest="sha256:bb",
            response=long_response,
        ),
        TraceEntry(
            cycle_id=cycle_id,
            role="assistant",
            at=SLOT,
            request_digest="sha256:aa",
            response='{"again":2}',
        ),
    ]
    ledger.append_journal(cycle_id, entries)
    stored = [t for t in ledger.traces(cycle_id) if t.role == "assistant"]
    assert [t.request_digest for t in stored] == ["sha256:aa", "sha256:bb", "sha256:aa"]

    assert recorded_answers(engine) == {
        "sha256:aa": RecordedAnswer(response='{"again":2}'),  # the later of two
        "sha256:bb": RecordedAnswer(response=long_response),
    }
    assert RecordedAnswer(
        response="", revision="openai-model=m-0601; x-model-version=7"
    ).headers() == {
        "openai-model": "m-0601",
        "x-model-version": "7",
    }

    assert recorded_keys(engine) == {}
    key = MaskingKey(
        account_id=account_id,
        epoch=date(2023, 5, 1),
        money_unit=Decimal("2.5"),
        aliases={"AAPL": "asset_0007"},
    )
    ledger.save_masking_key(key)
    assert recorded_keys(engine) == {("gpt", "us"): key}
