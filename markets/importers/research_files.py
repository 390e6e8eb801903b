"""A user's news and fundamentals files (JSONL or Parquet) as `NewsItem`s and reports.

This module owns `read_news` and `read_reports`, what `openbell data import-news` and
`import-fundamentals` run before recording the items in the store's cache, where a replay finds
them. Each item is shown to an agent only from its publication time (`published_at`, an ISO 8601
time with an offset, or naive in the `--tz` zone; in Parquet also a timestamp column, with a zone
or naive in the `--tz` zone), as the live daemon's news and reports are: the file vouches for that
time. A news row has `symbol` (empty or null: market-wide), `published_at`,
`title`, and optionally `url` and `source`. A fundamentals row has `symbol`, `period_end` (a date),
`published_at`, `currency`, and its figures: either a `values` object (JSONL) or every other
column (a number, or a decimal string; null is skipped). A bad row is refused with its number.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Final
from zoneinfo import ZoneInfo

import pyarrow.parquet as pq

from openbell.markets.domain import NewsItem
from openbell.markets.errors import SourceFormatError
from openbell.markets.fundamentals import FundamentalsReport

_REPORT_KEYS: Final = frozenset({"symbol", "period_end", "published_at", "currency", "values"})


def read_news(path: Path, *, timezone: str | None = None) -> list[NewsItem]:
    """The news items of the file at `path`; see the module docstring."""
    zone = None if timezone is None else ZoneInfo(timezone)
    items = []
    for where, row in _rows(path, ("published_at", "title")):
        symbol = row.get("symbol") or None
        published_at = _instant(row["published_at"], zone, where)  # says where itself
        try:
            items.append(
                NewsItem(
                    symbol=None if symbol is None else str(symbol),
                    published_at=published_at,
                    title=str(row["title"] or ""),
                    url=str(row.get("url") or ""),
                    source=str(row.get("source") or ""),
                )
            )
        except ValueError as exc:
            raise SourceFormatError(f"{where}: {exc}") from exc
    return items


def read_reports(path: Path, *, timezone: str | None = None) -> list[FundamentalsReport]:
    """The fundamentals reports of the file at `path`; see the module docstring."""
    zone = None if timezone is None else ZoneInfo(timezone)
    reports = []
    for where, row in _rows(path, ("symbol", "period_end", "published_at", "currency")):
        raw = row.get("values")
        figures = (
            raw
            if isinstance(raw, Mapping)
            else {key: value for key, value in row.items() if key not in _REPORT_KEYS}
        )
        values = {
            str(name): _decimal(value, str(name), where)
            for name, value in figures.items()
            if value is not None
        }
        period_end = _date(row["period_end"], where)  # these say where themselves
        published_at = _instant(row["published_at"], zone, where)
        try:
            reports.append(
                FundamentalsReport(
                    symbol=str(row["symbol"]),
                    period_end=period_end,
                    published_at=published_at,
                    currency=str(row["currency"]),
                    values=values,
                    source=f"import:{path.name}",
                )
            )
        except ValueError as exc:
            raise SourceFormatError(f"{where}: {exc}") from exc
    return reports


def _rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[str, dict[str, Any]]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        with path.open(encoding="utf-8") as handle:
            lines = list(handle)
        rows = []
        for number, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    rows.append((number, json.loads(line, parse_float=Decimal)))
                except json.JSONDecodeError as exc:
                    raise SourceFormatError(f"{path.name} line {number}: not JSON: {exc}") from exc
    elif suffix == ".parquet":
        rows = list(enumerate(pq.read_table(path).to_pylist(), start=1))
    else:
        raise SourceFormatError(f"{path.name}: expected a .jsonl or .parquet file")
    if not rows:
        raise SourceFormatError(f"{path.name}: no rows")
    for number, row in rows:
        where = f"{path.name} row {number}"
        if not isinstance(row, dict):
            raise SourceFormatError(f"{where}: expected an object")
        missing = [name for name in required if row.get(name) is None]
        if missing:
            raise SourceFormatError(f"{where}: missing {', '.join(missing)}")
        yield where, row


def _instant(value: Any, zone: ZoneInfo | None, where: str) -> datetime:
    if isinstance(value, datetime):
        at = value
    else:
        try:
            at = datetime.fromisoformat(str(value).strip())
        except ValueError as exc:
            raise SourceFormatError(
                f"{where}: published_at {value!r} is not an ISO 8601 time"
            ) from exc
    if at.tzinfo is None:
        if zone is None:
            raise SourceFormatError(
                f"{where}: published_at {value!s} has no zone: state it with --tz"
            )
        at = at.replace(tzinfo=zone)
    return at.astimezone(UTC)


def _date(value: Any, where: str) -> date:
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    try:
        return date.fromisoformat(str(value).strip())
    except ValueError as exc:
        raise SourceFormatError(f"{where}: period_end {value!r} is not a date") from exc


def _decimal(value: Any, name: str, where: str) -> Decimal:
    try:
        found = Decimal(str(value)) if isinstance(value, float) else Decimal(str(value).strip())
    except InvalidOperation as exc:
        raise SourceFormatError(f"{where}: {name} {value!r} is not a number") from exc
    if not found.is_finite():
        raise SourceFormatError(f"{where}: {name} {value!r} is not a finite number")
    return found
