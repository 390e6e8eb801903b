"""A cycle's record and its digest: the canonical serialization that `cycle_digest` chains.

Pure (no database): the ledger builds records from the rows it just wrote (`store/chain.py`),
`openbell season verify` from an archive's Parquet rows (`ops/seasons/archive`), with the same
functions, so that a stranger can recompute every digest. The record of a cycle is its `cycle` row
(without the claim's bookkeeping, which says which run held it and when: `claimed_by`,
`lease_until`, `started_at`, `finished_at`; so two runs of one replay chain alike), its orders (by
`seq`), the fills of those orders (by id), its margin calls (by id), its trace (by `seq`: each
model message, tool call and result; a trace row is known by its cycle and `seq`, not by its id,
which a replay leaves to the database), and the account's `slot` NAV snapshot at the cycle's slot
with its marks (by symbol), each row restricted to the columns of `RECORD_COLUMNS`. Its
serialization (`canonical`) is JSON with sorted keys, no whitespace and ASCII escapes; a decimal is
its exact value in plain notation without an exponent or trailing zeros (`"0"` for zero), an
instant its UTC ISO-8601 text (`2025-01-02T14:30:00+00:00`, with microseconds when it has them). A
link's digest is `sha256(bytes.fromhex(prev) + canonical(record))` in lowercase hex, `prev` the
account's previous digest (`GENESIS`, 64 zeros, for its first). docs/guide/season-archive.md says
the same for readers without Python.
"""

from __future__ import annotations

import hashlib
from _json import encode_basestring_ascii, make_encoder
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Final

from openbell.store.records import USAGE_COLUMNS

#: The version of the record's definition; an archive's heads name it.
RECORD_FORMAT: Final = 1
#: The `prev` of an account's first link.
GENESIS: Final = "0" * 64

#: The columns of each table that a cycle's record holds, in the order the archive writes them.
RECORD_COLUMNS: Final[Mapping[str, tuple[str, ...]]] = {
    "cycle": (
        "id",
        "account_id",
        "slot_at",
        "status",
        "error_class",
        "error_message",
        "reason",
        *USAGE_COLUMNS,
    ),
    "order": (
        "id",
        "cycle_id",
        "account_id",
        "seq",
        "idempotency_key",
        "symbol",
        "side",
        "quantity",
        "target_weight",
        "reason",
        "confidence",
        "placed_at",
        "status",
        "reject_reason",
        "reject_message",
        "rejected_at",
    ),
    "fill": (
        "id",
        "order_id",
        "account_id",
        "idempotency_key",
        "symbol",
        "side",
        "quantity",
        "price",
        "notional",
        "fees",
        "currency",
        "filled_at",
        "price_source",
    ),
    "margin_call": (
        "id",
        "account_id",
        "cycle_id",
        "order_id",
        "at",
        "equity",
        "requirement",
        "reason",
    ),
    "trace": (
        "cycle_id",
        "seq",
        "role",
        "content",
        "tool",
        "arguments",
        "result",
        "tokens_in",
        "tokens_out",
        "latency_ms",
        "at",
        "model",
        "fingerprint",
        "revision",
    ),
    "nav_snapshot": (
        "id",
        "account_id",
        "at",
        "kind",
        "cash",
        "positions_value",
        "nav",
        "last_fill_id",
        "last_action_id",
    ),
    "nav_mark": ("snapshot_id", "symbol", "quantity", "price", "value"),
}

Row = Mapping[str, Any]


def decimal_text(value: Decimal) -> str:
    """`value` exactly, in plain notation without an exponent or trailing zeros; "0" for zero.

    `str` writes most values (a price, a quantity, cash) in plain notation already, and twice as
    fast as `format`: only its exponent forms are written again (the hash chain writes every
    decimal of every record)."""
    text = str(value)
    if "E" in text or "e" in text:  # the exponent's letter follows the context's `capitals`
        text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _instant_text(value: datetime) -> str:
    if value.tzinfo is UTC:
        return value.isoformat()
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"a record holds the naive instant {value.isoformat()}")
    return value.astimezone(UTC).isoformat()


def _text(value: Any) -> str:
    """The text of a value JSON has no type for: a decimal, an instant, a date."""
    if type(value) is Decimal:
        return decimal_text(value)
    if isinstance(value, datetime):
        return _instant_text(value)
    if isinstance(value, date):
        return value.isoformat()
    raise TypeError(f"a record cannot hold a {type(value).__name__}: {value!r}")


def _plain(value: Any) -> Any:
    """`value` as the record's JSON holds it."""
    if value is None or isinstance(value, bool | int | str):
        return value
    return _text(value)


def plain_row(row: Row) -> dict[str, Any]:
    """Every column of `row` (rows outside any record)."""
    return dict(row)


def row_digest(row: Mapping[str, Any]) -> str:
    """The sha256 (hex) of a row's canonical form: what an archive lists to name a changed row."""
    return hashlib.sha256(canonical(row)).hexdigest()


def row_key(table: str, row: Mapping[str, Any]) -> str:
    """How a row of `table` is named: its id (`nav_mark`: `snapshot_id/symbol`; `trace`:
    `cycle_id/seq`; `cycle_digest`: its cycle's id)."""
    if table == "cycle":
        return str(row["id"])
    if table == "nav_mark":
        return f"{row['snapshot_id']}/{row['symbol']}"
    if table == "cycle_digest":
        return str(row["cycle_id"])
    if table == "trace":
        return f"{row['cycle_id']}/{row['seq']}"
    return str(row["id"])


def row_values(table: str, row: Row) -> dict[str, Any]:
    """The recorded columns of `row` of `table` (values as stored: `canonical` writes decimals
    and instants as text)."""
    return {column: row[column] for column in RECORD_COLUMNS[table]}


#: The canonical encoder: `json.JSONEncoder(sort_keys=True, separators=(",", ":"),
#: default=_text)`'s C encoder, made once (`JSONEncoder.encode` makes it again at every call:
#: about a fifth of the time of a record's serialization, which the hash chain does for every
#: cycle), without the check for circular containers, which a record (plain rows) never holds.
_ENCODER: Final = make_encoder(
    None,  # markers: no check for circular containers
    _text,  # default
    encode_basestring_ascii,  # ASCII escapes
    None,  # indent
    ":",
    ",",
    True,  # sort_keys
    False,  # skipkeys
    True,  # allow_nan
)


def canonical(value: Any) -> bytes:
    """The canonical serialization of a record (or of any of its parts): JSON, sorted keys, no
    whitespace, ASCII escapes."""
    return "".join(_ENCODER(value, 0)).encode("ascii")


def chained(prev: str, record: Mapping[str, Any]) -> str:
    """The digest of `record` chained to `prev` (hex): `sha256(bytes.fromhex(prev) + canonical)`."""
    return hashlib.sha256(bytes.fromhex(prev) + canonical(record)).hexdigest()


@dataclass(frozen=True, slots=True)
class RowDigest:
    """A row of a record (or of an archive) and its own digest (`row_digest`): what an archive
    lists to name the row that changed (the links' digests are what prove it)."""

    table: str
    row_id: str
    digest: str

    def as_list(self) -> list[str]:
        """The JSON form kept in a link: `[table, row id, digest]`."""
        return [self.table, self.row_id, self.digest]


@dataclass(frozen=True, slots=True)
class CycleRecord:
    """A cycle's record (`record`, plain values) with the account and slot it belongs to."""

    cycle_id: int
    account_id: int
    slot_at: datetime
    record: dict[str, Any]

    def row_digests(self) -> list[RowDigest]:
        """Each row's own digest, in the record's order (the cycle, its orders, fills, margin
        calls, trace, snapshot and marks)."""
        found: list[RowDigest] = []
        for part, table in _PARTS:
            rows = self.record[part]
            if rows is None:
                continue
            for row in [rows] if part in _SINGLE else rows:
                found.append(RowDigest(table, row_key(table, row), row_digest(row)))
        return found


#: A record's parts and their tables, in the order its row digests are listed.
_PARTS: Final = (
    ("cycle", "cycle"),
    ("orders", "order"),
    ("fills", "fill"),
    ("margin_calls", "margin_call"),
    ("traces", "trace"),
    ("nav_snapshot", "nav_snapshot"),
    ("nav_marks", "nav_mark"),
)
_SINGLE: Final = frozenset({"cycle", "nav_snapshot"})


def cycle_records(
    cycles: Iterable[Row],
    orders: Iterable[Row] = (),
    fills: Iterable[Row] = (),
    margin_calls: Iterable[Row] = (),
    traces: Iterable[Row] = (),
    snapshots: Iterable[Row] = (),
    marks: Iterable[Row] = (),
) -> dict[int, CycleRecord]:
    """The record of each of `cycles` from rows of the other tables (any superset of theirs:
    rows of other cycles are left out), by cycle id. A cycle's snapshot is the account's `slot`
    snapshot at the cycle's slot (instants compare as instants, whatever their zone)."""
    chosen = {int(row["id"]): row for row in cycles}
    records: dict[int, dict[str, Any]] = {
        cycle_id: {
            "cycle": row_values("cycle", row),
            "orders": [],
            "fills": [],
            "margin_calls": [],
            "traces": [],
            "nav_snapshot": None,
            "nav_marks": [],
        }
        for cycle_id, row in chosen.items()
    }
    owners = _by_cycle(records, "orders", "order", orders, "cycle_id")
    _by_cycle(records, "fills", "fill", fills, "order_id", owners)
    _by_cycle(records, "margin_calls", "margin_call", margin_calls, "cycle_id")
    _by_cycle(records, "traces", "trace", traces, "cycle_id")
    slots = {(int(row["account_id"]), row["slot_at"]): key for key, row in chosen.items()}
    by_snapshot: dict[int, int] = {}
    for row in snapshots:
        if row["kind"] != "slot":
            continue
        owner = slots.get((int(row["account_id"]), row["at"]))
        if owner is not None:
            records[owner]["nav_snapshot"] = row_values("nav_snapshot", row)
            by_snapshot[int(row["id"])] = owner
    _by_cycle(records, "nav_marks", "nav_mark", marks, "snapshot_id", by_snapshot)
    out: dict[int, CycleRecord] = {}
    for cycle_id, record in records.items():
        for part, key in _SORT_KEYS:
            listed: list[dict[str, Any]] = record[part]
            if len(listed) > 1:
                listed.sort(key=lambda row, key=key: row[key])  # type: ignore[misc]
        row = chosen[cycle_id]
        out[cycle_id] = CycleRecord(
            cycle_id=cycle_id,
            account_id=int(row["account_id"]),
            slot_at=row["slot_at"],
            record=record,
        )
    return out


#: How each list of a record is ordered.
_SORT_KEYS: Final = (
    ("orders", "seq"),
    ("fills", "id"),
    ("margin_calls", "id"),
    ("traces", "seq"),
    ("nav_marks", "symbol"),
)


def _by_cycle(
    records: dict[int, dict[str, Any]],
    part: str,
    table: str,
    rows: Iterable[Row],
    key: str,
    owners: Mapping[int, int] | None = None,
) -> dict[int, int]:
    """Add each of `rows` whose cycle has a record to its `part` (its cycle is its `key`
    column's, or the cycle `owners` gives that column's value); the cycle of each added row's id
    (for the rows that refer to these)."""
    added: dict[int, int] = {}
    columns = RECORD_COLUMNS[table]
    for row in rows:
        value = row[key]
        owner = value if owners is None else owners.get(value)
        record = records.get(owner) if owner is not None else None
        if record is not None:
            record[part].append({column: row[column] for column in columns})
            if "id" in row:
                added[row["id"]] = owner  # type: ignore[assignment]
    return added


@dataclass(frozen=True, slots=True)
class Link:
    """One link of an account's chain, as `cycle_digest` stores it."""

    cycle_id: int
    account_id: int
    seq: int
    prev: str
    digest: str


def link_of(record: CycleRecord, seq: int, prev: str) -> Link:
    """The link that chains `record` after `prev` as the account's `seq`-th."""
    return Link(
        cycle_id=record.cycle_id,
        account_id=record.account_id,
        seq=seq,
        prev=prev,
        digest=chained(prev, record.record),
    )


def chain_links(records: Sequence[CycleRecord], heads: Mapping[int, tuple[int, str]]) -> list[Link]:
    """The links of `records`, in their order, each after its account's head (`heads`: account ->
    (seq, digest), moved on as it goes; an account without one starts at 1 after `GENESIS`)."""
    tips = dict(heads)
    links: list[Link] = []
    for record in records:
        seq, prev = tips.get(record.account_id, (0, GENESIS))
        link = link_of(record, seq + 1, prev)
        tips[record.account_id] = (link.seq, link.digest)
        links.append(link)
    return links
