"""Agent tokens: the bearer token an outside agent connects with, stored only as its hash.

Internal to `openbell.store`: `Ledger` is made of `AgentTokens` (with `Accounts`, `Cycles` and
`Orders`). An agent that connects (kind `mcp`) has at most one current token.
`issue_agent_token` makes a new one, `"obt_"` and 32 random bytes in URL-safe Base64, revokes the
agent's earlier one in the same transaction, and hands the new one back in clear, once: the
`agent_token` table keeps only its SHA-256 hex digest, with when it was issued and revoked. A
token is high in entropy, so an unsalted digest is enough: nothing can be learnt from it, and a
lookup by digest finds the one agent a token names. The prefix makes a token recognisable to the
redactor (`store/redact.py`), which masks it in every log line, trace and stored text.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
from typing import Final

from sqlalchemy import Connection, insert, select, update

from openbell.markets.domain import check_utc
from openbell.markets.errors import NoSuchAgent
from openbell.store.core_tables import AGENT_TABLE, AGENT_TOKEN_TABLE
from openbell.store.rows import LedgerTables, row_id

#: What every agent token starts with (the redactor masks tokens by it).
AGENT_TOKEN_PREFIX: Final = "obt_"  # noqa: S105  (a prefix, not a secret)
#: Random bytes in a token: 43 characters of URL-safe Base64 after the prefix.
TOKEN_BYTES: Final = 32


def token_hash(token: str) -> str:
    """The SHA-256 hex digest of `token`, as the ledger stores it."""
    return hashlib.sha256(token.encode()).hexdigest()


class AgentTokens(LedgerTables):
    """The agents' bearer tokens, stored as hashes."""

    def issue_agent_token(self, agent_name: str, now: datetime) -> str:
        """A new token for the agent called `agent_name`, in clear (it is never readable again).

        The agent's earlier token stops working in the same transaction. Raises `NoSuchAgent`
        when the ledger has no such agent.
        """
        check_utc("now", now)
        token = AGENT_TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        with self._writing() as connection:
            agent_id = _locked_agent(connection, agent_name)
            _revoke(connection, agent_id, now)
            connection.execute(
                insert(AGENT_TOKEN_TABLE).values(
                    agent_id=agent_id, token_hash=token_hash(token), issued_at=now
                )
            )
        return token

    def agent_for_token(self, token: str) -> str | None:
        """The name of the agent whose current token `token` is; None for any other text."""
        if not token.startswith(AGENT_TOKEN_PREFIX):
            return None
        digest = token_hash(token)
        query = (
            select(AGENT_TOKEN_TABLE.c.token_hash, AGENT_TABLE.c.name)
            .join(AGENT_TABLE, AGENT_TABLE.c.id == AGENT_TOKEN_TABLE.c.agent_id)
            .where(
                AGENT_TOKEN_TABLE.c.token_hash == digest, AGENT_TOKEN_TABLE.c.revoked_at.is_(None)
            )
        )
        with self._reading() as connection:
            found = connection.execute(query).first()
        # The lookup is by digest (nothing an attacker can steer); the final comparison is
        # constant-time all the same.
        if found is None or not hmac.compare_digest(found[0], digest):
            return None
        name: str = found[1]
        return name

    def revoke_agent_token(self, agent_name: str, now: datetime) -> bool:
        """Revoke the current token of the agent called `agent_name` at `now`; whether it had one.

        Raises `NoSuchAgent` when the ledger has no such agent.
        """
        check_utc("now", now)
        with self._writing() as connection:
            return _revoke(connection, _locked_agent(connection, agent_name), now)


def _locked_agent(connection: Connection, name: str) -> int:
    """The id of the agent called `name`, its row locked (writers of its tokens take turns)."""
    query = select(AGENT_TABLE.c.id).where(AGENT_TABLE.c.name == name).with_for_update()
    found = connection.execute(query).scalar()
    if found is None:
        raise NoSuchAgent(f"no agent {name!r} in the ledger")
    return row_id(found)


def _revoke(connection: Connection, agent_id: int, now: datetime) -> bool:
    """Stamp the agent's current token revoked at `now`; whether there was one."""
    result = connection.execute(
        update(AGENT_TOKEN_TABLE)
        .where(AGENT_TOKEN_TABLE.c.agent_id == agent_id, AGENT_TOKEN_TABLE.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    return bool(result.rowcount)
