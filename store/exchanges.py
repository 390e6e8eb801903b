"""Recorded model answers: every exchange of a ledger's LLM agents, read back for a re-run.

This module owns reading what `openbell replay --answers` needs from the ledger it re-runs: each
recorded exchange (`RecordedAnswer`: the response body and the revision headers it carried) by
the digest of its request, from the `assistant` trace rows that hold one (revision 0023), and
each masked account's key by (agent, market), since a masked agent's requests depend on it. Two
exchanges with one digest asked the same thing; the later answer is kept (a request asked twice
got the same answer in a deterministic run, and the later one is what the run went on with).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from openbell.store.masking_keys import MaskingKey, read_masking_key
from openbell.store.tables import AccountRow, AgentRow, TraceRow


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedAnswer:
    """One recorded response: its body as received and the revision headers it carried
    (`name=value; ...`, as the trace's `revision` keeps them; None: none)."""

    response: str
    revision: str | None = None

    def headers(self) -> dict[str, str]:
        """The revision headers again, from `revision`."""
        if self.revision is None:
            return {}
        found: dict[str, str] = {}
        for part in self.revision.split("; "):
            name, sep, value = part.partition("=")
            if sep:
                found[name] = value
        return found


def recorded_answers(engine: Engine) -> dict[str, RecordedAnswer]:
    """Every recorded exchange of the ledger by request digest (the later of two with one)."""
    with Session(engine) as session:
        rows = session.exec(
            select(TraceRow.request_digest, TraceRow.response, TraceRow.revision)
            .where(col(TraceRow.request_digest).is_not(None), col(TraceRow.response).is_not(None))
            .order_by(col(TraceRow.cycle_id), col(TraceRow.seq))
        ).all()
    return {
        digest: RecordedAnswer(response=response, revision=revision)
        for digest, response, revision in rows
        if digest is not None and response is not None
    }


def recorded_keys(engine: Engine) -> Mapping[tuple[str, str], MaskingKey]:
    """Each masked account's key by (agent name, market)."""
    with Session(engine) as session:
        accounts = session.exec(
            select(AccountRow.id, AgentRow.name, AccountRow.market).join(
                AgentRow, col(AgentRow.id) == col(AccountRow.agent_id)
            )
        ).all()
    found: dict[tuple[str, str], MaskingKey] = {}
    for account_id, agent, market in accounts:
        if account_id is None:
            continue
        key = read_masking_key(engine, account_id)
        if key is not None:
            found[(agent, market)] = key
    return found
