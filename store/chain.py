"""The accounts' hash chains: a link per finished or missed cycle, written in its transaction.

Internal to `openbell.store`. `seal_cycles` is called by every write that ends a cycle (finishing,
interrupting, superseding or recording it missed: `cycles.py`; a replay's batch:
`replay_batch.py`), on that write's connection, inside its transaction: it reads back the rows of
the cycles' records as the ledger stored them (after the engine's masking of secrets, so the digest
is of what an export reads), builds each record (`digests.cycle_records`) and appends its link
after the account's head. A replay's batch, which holds every row of its cycles, builds their
records from them instead (`link_rows`, inserted with the batch) unless the engine may have masked
one. Either locks the accounts' rows first (Postgres), so two writers never take one head.
`chain_heads` reads each account's last link, for exports. Cycles finished before migration 0025
have no link; an account's chain starts at its first cycle ended after it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Sequence
from typing import Any, Final

from sqlalchemy import Connection, and_, bindparam, func, select

from openbell.store.core_tables import (
    ACCOUNT_TABLE,
    CYCLE_DIGEST_TABLE,
    CYCLE_TABLE,
    FILL_TABLE,
    MARGIN_CALL_TABLE,
    NAV_MARK_TABLE,
    NAV_SNAPSHOT_TABLE,
    ORDER_TABLE,
    TRACE_TABLE,
)
from openbell.store.digests import CycleRecord, chain_links, cycle_records

#: Cycles read per statement (a few parameters each, far below either database's limit).
_CHUNK: Final = 500
_SEALED_STATUSES: Final = ("done", "failed", "skipped", "interrupted", "missed")

_enabled = True


@contextlib.contextmanager
def chain_disabled() -> Iterator[None]:
    """Write no links while inside (for measuring the chain's cost only:
    benchmarks/chain_bench.py); a ledger written so has cycles without links."""
    global _enabled  # a measurement switch, not configuration
    _enabled = False
    try:
        yield
    finally:
        _enabled = True


def seal_cycles(connection: Connection, cycle_ids: Sequence[int]) -> int:
    """Append a link for each of `cycle_ids` that is finished (or missed) and has none yet, in
    the order given, on `connection` (the caller's transaction); how many were appended."""
    if not _enabled or not cycle_ids:
        return 0
    wanted = list(dict.fromkeys(cycle_ids))
    rows = _read(connection, wanted)
    records = cycle_records(**rows)
    return seal_records(connection, [records[key] for key in wanted if key in records])


def seal_records(connection: Connection, ordered: Sequence[CycleRecord]) -> int:
    """Append a link for each of `ordered` (records of cycles without one, as the ledger stores
    them) in order, on `connection`; how many."""
    rows = link_rows(connection, ordered)
    if rows:
        connection.execute(CYCLE_DIGEST_TABLE.insert(), rows)
    return len(rows)


def link_rows(connection: Connection, ordered: Sequence[CycleRecord]) -> list[dict[str, Any]]:
    """The `cycle_digest` rows that chain `ordered` after their accounts' heads, for the caller
    to insert in this transaction (a replay's batch builds the records from the rows it has just
    written, when the engine masked none of them, and inserts these with them); the accounts'
    rows are locked first on Postgres."""
    if not _enabled or not ordered:
        return []
    accounts = sorted({record.account_id for record in ordered})
    if connection.dialect.name == "postgresql":
        connection.execute(_LOCK_ACCOUNTS, {"accounts": accounts})
    heads = chain_heads(connection, accounts)
    return [
        {
            "cycle_id": link.cycle_id,
            "account_id": link.account_id,
            "seq": link.seq,
            "prev": link.prev,
            "digest": link.digest,
        }
        for link in chain_links(ordered, heads)
    ]


def chain_heads(connection: Connection, account_ids: Collection[int]) -> dict[int, tuple[int, str]]:
    """Each account's last link, `(seq, digest)` (accounts without one are left out)."""
    heads: dict[int, tuple[int, str]] = {}
    ids = sorted(account_ids)
    for start in range(0, len(ids), _CHUNK):
        for row in connection.execute(_HEADS, {"accounts": ids[start : start + _CHUNK]}):
            heads[row.account_id] = (row.seq, row.digest)
    return heads


def _read(connection: Connection, cycle_ids: Sequence[int]) -> dict[str, list[Any]]:
    """The rows of the records of `cycle_ids` that are finished and have no link yet."""
    rows: dict[str, list[Any]] = {
        "cycles": [],
        "orders": [],
        "fills": [],
        "margin_calls": [],
        "traces": [],
        "snapshots": [],
        "marks": [],
    }
    for start in range(0, len(cycle_ids), _CHUNK):
        chunk = {"cycles": list(cycle_ids[start : start + _CHUNK])}
        cycles = [row._mapping for row in connection.execute(_CYCLES, chunk)]
        if not cycles:
            continue
        chunk = {"cycles": [row["id"] for row in cycles]}
        rows["cycles"].extend(cycles)
        for name, statement in (
            ("orders", _ORDERS),
            ("fills", _FILLS),
            ("margin_calls", _MARGIN_CALLS),
            ("traces", _TRACES),
        ):
            rows[name].extend(row._mapping for row in connection.execute(statement, chunk))
        snapshots = [row._mapping for row in connection.execute(_SNAPSHOTS, chunk)]
        rows["snapshots"].extend(snapshots)
        snapshot_ids = [row["id"] for row in snapshots]
        if snapshot_ids:
            rows["marks"].extend(
                row._mapping for row in connection.execute(_MARKS, {"snapshots": snapshot_ids})
            )
    return rows


def _in(column: Any, name: str) -> Any:
    return column.in_(bindparam(name, expanding=True))


_LOCK_ACCOUNTS: Final = (
    select(ACCOUNT_TABLE.c.id)
    .where(_in(ACCOUNT_TABLE.c.id, "accounts"))
    .order_by(ACCOUNT_TABLE.c.id)
    .with_for_update()
)
_LAST: Final = (
    select(CYCLE_DIGEST_TABLE.c.account_id, func.max(CYCLE_DIGEST_TABLE.c.seq).label("seq"))
    .where(_in(CYCLE_DIGEST_TABLE.c.account_id, "accounts"))
    .group_by(CYCLE_DIGEST_TABLE.c.account_id)
    .subquery()
)
_HEADS: Final = select(
    CYCLE_DIGEST_TABLE.c.account_id, CYCLE_DIGEST_TABLE.c.seq, CYCLE_DIGEST_TABLE.c.digest
).join(
    _LAST,
    and_(
        CYCLE_DIGEST_TABLE.c.account_id == _LAST.c.account_id,
        CYCLE_DIGEST_TABLE.c.seq == _LAST.c.seq,
    ),
)
_CYCLES: Final = select(CYCLE_TABLE).where(
    _in(CYCLE_TABLE.c.id, "cycles"),
    CYCLE_TABLE.c.status.in_(_SEALED_STATUSES),
    ~select(CYCLE_DIGEST_TABLE.c.cycle_id)
    .where(CYCLE_DIGEST_TABLE.c.cycle_id == CYCLE_TABLE.c.id)
    .exists(),
)
_ORDERS: Final = select(ORDER_TABLE).where(_in(ORDER_TABLE.c.cycle_id, "cycles"))
_FILLS: Final = (
    select(FILL_TABLE)
    .join(ORDER_TABLE, FILL_TABLE.c.order_id == ORDER_TABLE.c.id)
    .where(_in(ORDER_TABLE.c.cycle_id, "cycles"))
)
_MARGIN_CALLS: Final = select(MARGIN_CALL_TABLE).where(_in(MARGIN_CALL_TABLE.c.cycle_id, "cycles"))
_TRACES: Final = select(TRACE_TABLE).where(_in(TRACE_TABLE.c.cycle_id, "cycles"))
_SNAPSHOTS: Final = (
    select(NAV_SNAPSHOT_TABLE)
    .join(
        CYCLE_TABLE,
        and_(
            NAV_SNAPSHOT_TABLE.c.account_id == CYCLE_TABLE.c.account_id,
            NAV_SNAPSHOT_TABLE.c.at == CYCLE_TABLE.c.slot_at,
        ),
    )
    .where(_in(CYCLE_TABLE.c.id, "cycles"), NAV_SNAPSHOT_TABLE.c.kind == "slot")
)
_MARKS: Final = select(NAV_MARK_TABLE).where(_in(NAV_MARK_TABLE.c.snapshot_id, "snapshots"))
