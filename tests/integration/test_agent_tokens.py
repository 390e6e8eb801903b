"""Agent tokens, on SQLite and Postgres: a token names its own agent only, a new one revokes the
earlier one, a revoked or unknown one names nobody, an unknown agent gets none; the ledger holds
only the token's SHA-256 digest, and a token that reaches a trace row is stored redacted."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine, String, Text, select
from sqlmodel import SQLModel

from openbell.markets.domain import utc
from openbell.markets.errors import NoSuchAgent
from openbell.store.core_tables import AGENT_TOKEN_TABLE
from openbell.store.ledger import Ledger
from openbell.store.records import TraceEntry
from openbell.store.redact import REDACTED

NOW = utc(2026, 11, 30, 20)
LATER = NOW + timedelta(hours=1)


def all_text(engine: Engine) -> str:
    """Every value of every text column of every table, one per line."""
    values: list[str] = []
    with engine.connect() as connection:
        for table in SQLModel.metadata.sorted_tables:
            columns = [c for c in table.columns if isinstance(c.type, String | Text)]
            for row in connection.execute(select(*columns)) if columns else ():
                values.extend(str(value) for value in row if value is not None)
    return "\n".join(values)


def token_rows(engine: Engine) -> list[tuple[str, object]]:
    """(token_hash, revoked_at) of every token row, in the order they were issued."""
    table = AGENT_TOKEN_TABLE
    query = select(table.c.token_hash, table.c.revoked_at).order_by(table.c.id)
    with engine.connect() as connection:
        return [(row.token_hash, row.revoked_at) for row in connection.execute(query)]


def test_a_token_names_its_agent_and_is_stored_only_as_its_digest(
    ledger: Ledger, engine: Engine
) -> None:
    ledger.ensure_agent("claude", "mcp", NOW)
    ledger.ensure_agent("codex", "mcp", NOW)

    claude = ledger.issue_agent_token("claude", NOW)
    codex = ledger.issue_agent_token("codex", NOW)

    assert claude.startswith("obt_")
    assert len(claude) == len("obt_") + 43
    assert claude != codex
    assert ledger.agent_for_token(claude) == "claude"
    assert ledger.agent_for_token(codex) == "codex"
    stored = all_text(engine)
    assert claude not in stored
    assert claude.removeprefix("obt_") not in stored
    assert [h for h, _ in token_rows(engine)] == [
        hashlib.sha256(claude.encode()).hexdigest(),
        hashlib.sha256(codex.encode()).hexdigest(),
    ]


@pytest.mark.parametrize(
    "text",
    ["", "obt_", "Bearer obt_x", "obt_" + "A" * 43, "obc_" + "A" * 43, "not-a-token"],
)
def test_any_other_text_names_nobody(ledger: Ledger, text: str) -> None:
    ledger.ensure_agent("claude", "mcp", NOW)
    token = ledger.issue_agent_token("claude", NOW)
    assert ledger.agent_for_token(text) is None
    assert ledger.agent_for_token(token[:-1]) is None
    assert ledger.agent_for_token(token + "A") is None


def test_a_new_token_revokes_the_earlier_one(ledger: Ledger, engine: Engine) -> None:
    ledger.ensure_agent("claude", "mcp", NOW)
    first = ledger.issue_agent_token("claude", NOW)
    second = ledger.issue_agent_token("claude", LATER)

    assert ledger.agent_for_token(first) is None
    assert ledger.agent_for_token(second) == "claude"
    assert [revoked for _, revoked in token_rows(engine)] == [LATER, None]


def test_a_revoked_token_names_nobody(ledger: Ledger) -> None:
    ledger.ensure_agent("claude", "mcp", NOW)
    ledger.ensure_agent("codex", "mcp", NOW)
    claude = ledger.issue_agent_token("claude", NOW)
    codex = ledger.issue_agent_token("codex", NOW)

    assert ledger.revoke_agent_token("claude", LATER) is True
    assert ledger.revoke_agent_token("claude", LATER) is False

    assert ledger.agent_for_token(claude) is None
    assert ledger.agent_for_token(codex) == "codex"


def test_an_unknown_agent_gets_no_token(ledger: Ledger, engine: Engine) -> None:
    with pytest.raises(NoSuchAgent, match=r"no agent 'ghost' in the ledger"):
        ledger.issue_agent_token("ghost", NOW)
    with pytest.raises(NoSuchAgent, match=r"no agent 'ghost' in the ledger"):
        ledger.revoke_agent_token("ghost", NOW)
    assert token_rows(engine) == []


def test_a_token_in_a_trace_row_is_stored_redacted(ledger: Ledger, engine: Engine) -> None:
    agent_id = ledger.ensure_agent("claude", "mcp", NOW)
    account_id = ledger.open_account(agent_id, "us", "USD", Decimal(100_000), NOW)
    cycle_id = ledger.claim_cycle(account_id, NOW, "run", LATER, NOW)
    assert cycle_id is not None
    token = ledger.issue_agent_token("claude", NOW)
    cycle_token = "obc_" + token.removeprefix("obt_")[::-1]

    ledger.append_journal(
        cycle_id,
        [
            TraceEntry(
                cycle_id=cycle_id,
                role="tool",
                at=NOW,
                tool="wait_for_cycle",
                arguments=f'{{"authorization": "{token}"}}',
                result=f"export OPENBELL_MCP_TOKEN={cycle_token}; done",
            ),
            TraceEntry(cycle_id=cycle_id, role="assistant", at=NOW, content=f"my token: {token}"),
        ],
    )

    stored = ledger.traces(cycle_id)
    assert stored[0].arguments == f'{{"authorization": "{REDACTED}"}}'
    assert stored[0].result == f"export OPENBELL_MCP_TOKEN={REDACTED}; done"
    assert stored[1].content == f"my token: {REDACTED}"
    text = all_text(engine)
    assert token not in text
    assert cycle_token not in text
    assert ledger.agent_for_token(token) == "claude"  # the token itself still works
