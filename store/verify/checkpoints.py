"""Storing where a verification stopped (`verify_checkpoint`), each row checksummed.

`save_checkpoints` replaces the table's rows with one per account of a `CheckpointSet`: the
watermarks and the account's `Checkpoint` as canonical JSON (decimals as their exact text,
instants in ISO 8601) and a SHA-256 checksum of the row. `load_checkpoints` reads them back, or
says why it cannot: no rows, a row whose checksum does not match (damaged, or edited by hand
without the recipe), text that does not parse, or rows of different verifications. A caller
that gets no checkpoints verifies in full. The checksum is no signature: someone who edits a
row and recomputes it is caught by the next full verification, not by this.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlalchemy import Engine, delete, insert, select

from openbell.store.core_tables import VERIFY_CHECKPOINT_TABLE
from openbell.store.verify.account import Checkpoint, CheckpointSet

#: Part of every checksum: a change of the format makes every stored checkpoint unusable.
FORMAT = "openbell verify checkpoint 1"


def save_checkpoints(engine: Engine, points: CheckpointSet, at: datetime) -> int:
    """Replace the stored checkpoints with `points`, verified at `at`; how many were stored."""
    watermarks = _canonical(points.watermarks)
    rows = []
    for account_id, point in sorted(points.accounts.items()):
        state = _canonical(_state(point))
        rows.append(
            {
                "account_id": account_id,
                "verified_at": at,
                "watermarks": watermarks,
                "state": state,
                "checksum": _checksum(account_id, at, watermarks, state),
            }
        )
    with engine.begin() as connection:
        connection.execute(delete(VERIFY_CHECKPOINT_TABLE))
        if rows:
            connection.execute(insert(VERIFY_CHECKPOINT_TABLE), rows)
    return len(rows)


def load_checkpoints(engine: Engine) -> tuple[CheckpointSet | None, str]:
    """The stored checkpoints, or None and why they cannot be used."""
    table = VERIFY_CHECKPOINT_TABLE
    with engine.connect() as connection:
        rows = connection.execute(
            select(
                table.c.account_id,
                table.c.verified_at,
                table.c.watermarks,
                table.c.state,
                table.c.checksum,
            ).order_by(table.c.account_id)
        ).all()
    if not rows:
        return None, "no checkpoint stored"
    accounts: dict[int, Checkpoint] = {}
    for account_id, at, watermarks, state, checksum in rows:
        if checksum != _checksum(account_id, at, watermarks, state):
            return None, f"the checkpoint of account {account_id} does not match its checksum"
        if (watermarks, at) != (rows[0].watermarks, rows[0].verified_at):
            return None, "the checkpoints are of different verifications"
        try:
            accounts[account_id] = _point(json.loads(state))
        except (ValueError, KeyError, TypeError, InvalidOperation) as exc:
            return None, f"the checkpoint of account {account_id} does not parse: {exc}"
    try:
        marks = {str(key): int(value) for key, value in json.loads(rows[0].watermarks).items()}
    except (ValueError, AttributeError, TypeError) as exc:
        return None, f"the checkpoints' watermarks do not parse: {exc}"
    return CheckpointSet(watermarks=marks, accounts=accounts, at=rows[0].verified_at), ""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _checksum(account_id: int, at: datetime, watermarks: str, state: str) -> str:
    text = "\n".join([FORMAT, str(account_id), at.isoformat(), watermarks, state])
    return hashlib.sha256(text.encode()).hexdigest()


def _instant(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _state(point: Checkpoint) -> dict[str, Any]:
    return {
        "initial_cash": str(point.initial_cash),
        "allow_short": point.allow_short,
        "cash": str(point.cash),
        "held": {symbol: str(quantity) for symbol, quantity in point.held.items()},
        "entry": None if point.entry is None else list(point.entry),
        "fill_id": point.fill_id,
        "action_id": point.action_id,
        "through_at": _instant(point.through_at),
        "fees_through": _instant(point.fees_through),
        "latest_at": _instant(point.latest_at),
        "counts": dict(point.counts),
    }


def _read_instant(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _point(state: dict[str, Any]) -> Checkpoint:
    entry = state["entry"]
    return Checkpoint(
        initial_cash=Decimal(state["initial_cash"]),
        allow_short=bool(state["allow_short"]),
        cash=Decimal(state["cash"]),
        held={str(symbol): Decimal(quantity) for symbol, quantity in state["held"].items()},
        entry=None if entry is None else (int(entry[0]), int(entry[1]), int(entry[2])),
        fill_id=state["fill_id"],
        action_id=state["action_id"],
        through_at=_read_instant(state["through_at"]),
        fees_through=_read_instant(state["fees_through"]),
        latest_at=_read_instant(state["latest_at"]),
        counts={str(table): int(count) for table, count in state["counts"].items()},
    )
