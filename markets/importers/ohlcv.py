"""A generic OHLCV file (CSV or Parquet) as a canonical bar file, with its conventions stated.

This module owns `import_ohlcv`, what `openbell data import FILE` runs: a table with the columns
`symbol, time, open, high, low, close, volume` (any others are ignored) becomes one bar file
(`barfile.py`) of one market and interval. Nothing about the file is guessed: the bar-label
convention (`start`: a row's time is when its bar starts; `end`: when it ends) is always stated,
and the time zone is stated whenever the times are naive (a time with an offset, or a
timezone-aware Parquet column, keeps its own). A daily row names the exchange session of its local
date (the date of the instant just before its time, for an end label), and its bar is that
session, open to close (a crypto day is 00:00 to 24:00 UTC); an hourly row's bar is the hour
starting (or ending) at its time. Every value is read exactly (CSV text, Parquet decimals; a
Parquet float becomes `Decimal(str(x))`). The file is refused, with the row's number, for a
missing column, a naive time without a zone, an unparseable value, a non-positive price, a
negative volume, inconsistent high/low, a duplicate bar or a daily date that is not a session.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow.parquet as pq

from openbell.markets.barfile import ADJUSTMENTS, LABELS, BarFileMeta, write_bars
from openbell.markets.domain import Bar, check_market
from openbell.markets.errors import SourceFormatError
from openbell.markets.importers.common import sessions
from openbell.markets.rules import rules_for

COLUMNS: Final = ("symbol", "time", "open", "high", "low", "close", "volume")
_PRICES: Final = ("open", "high", "low", "close")
_INTERVALS: Final = {"1h": timedelta(hours=1), "1d": timedelta(days=1)}
_MICROSECOND: Final = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class OhlcvLayout:
    """How to read a generic OHLCV file: its market, interval, label convention, the zone of its
    naive times (None: the file's times must carry their own) and its adjustment."""

    market: str
    interval: str
    label: str
    timezone: str | None = None
    adjustment: str = "unknown"

    def __post_init__(self) -> None:
        check_market(self.market)
        if self.interval not in _INTERVALS:
            raise SourceFormatError(f"--interval must be one of {sorted(_INTERVALS)}")
        if self.label not in LABELS:
            raise SourceFormatError(
                f"--label must be 'start' or 'end' (is a row's time its bar's start or end?), "
                f"got {self.label!r}"
            )
        if self.adjustment not in ADJUSTMENTS:
            raise SourceFormatError(f"--adjustment must be one of {sorted(ADJUSTMENTS)}")
        if self.timezone is not None:
            try:
                ZoneInfo(self.timezone)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise SourceFormatError(f"--tz {self.timezone!r} is not an IANA zone") from exc


def import_ohlcv(path: Path, layout: OhlcvLayout, out_dir: Path) -> tuple[Path, int]:
    """Write the bars of the OHLCV file at `path` to `out_dir/<stem>.parquet`; the file written
    and its number of bars. Raises `SourceFormatError` (see the module docstring)."""
    bars = parse_ohlcv(path, layout)
    meta = BarFileMeta(
        market=layout.market,
        interval=layout.interval,
        timezone=layout.timezone or "UTC",
        label=layout.label,
        adjustment=layout.adjustment,
        source=f"import:{path.name}",
        provenance=f"openbell data import {path.name}",
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{path.stem}.parquet"
    write_bars(target, bars, meta)
    return target, len(bars)


def parse_ohlcv(path: Path, layout: OhlcvLayout) -> list[Bar]:
    """The bars of the file at `path`, checked (see the module docstring)."""
    zone = None if layout.timezone is None else ZoneInfo(layout.timezone)
    seen: dict[tuple[str, datetime], int] = {}
    bars: list[Bar] = []
    for number, row in _rows(path):
        where = f"{path.name} row {number}"
        at = _instant(row["time"], zone, where)
        bar = _bar(row, _span(at, layout, where), where)
        first = seen.setdefault((bar.symbol, bar.start_at), number)
        if first != number:
            raise SourceFormatError(
                f"{where}: duplicate bar: {bar.symbol} at {bar.start_at.isoformat()} is also "
                f"row {first}"
            )
        bars.append(bar)
    if not bars:
        raise SourceFormatError(f"{path.name}: no rows")
    return bars


def _rows(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """(row number, row) of a CSV (numbered as lines, the header being line 1) or Parquet file."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            _check_columns(reader.fieldnames or (), path)
            for number, row in enumerate(reader, start=2):
                yield number, row
    elif suffix == ".parquet":
        table = pq.read_table(path)
        _check_columns(table.column_names, path)
        for number, row in enumerate(table.select(list(COLUMNS)).to_pylist(), start=1):
            yield number, row
    else:
        raise SourceFormatError(f"{path.name}: expected a .csv or .parquet file")


def _check_columns(found: Sequence[str], path: Path) -> None:
    missing = [name for name in COLUMNS if name not in found]
    if missing:
        raise SourceFormatError(
            f"{path.name}: missing column(s) {', '.join(missing)}; an OHLCV file has the columns "
            f"{', '.join(COLUMNS)}"
        )


def _instant(value: Any, zone: ZoneInfo | None, where: str) -> datetime:
    """A row's time as an aware instant; a naive one in `zone`, refused without one."""
    if isinstance(value, datetime):
        at = value
    elif isinstance(value, date):
        at = datetime.combine(value, time(0))
    else:
        try:
            at = datetime.fromisoformat(str(value).strip())
        except ValueError as exc:
            raise SourceFormatError(f"{where}: time {value!r} is not an ISO 8601 time") from exc
    if at.tzinfo is None:
        if zone is None:
            raise SourceFormatError(
                f"{where}: time {value!s} has no zone: state it with --tz (for example "
                "--tz America/New_York or --tz UTC)"
            )
        at = at.replace(tzinfo=zone)
    return at.astimezone(UTC)


def _span(at: datetime, layout: OhlcvLayout, where: str) -> tuple[datetime, datetime]:
    """The `[start_at, end_at)` of the bar a row stamped `at` stands for."""
    length = _INTERVALS[layout.interval]
    if layout.interval == "1h":
        return (at, at + length) if layout.label == "start" else (at - length, at)
    rules = rules_for(layout.market)
    local_zone = ZoneInfo(layout.timezone) if layout.timezone is not None else UTC
    stamp = at if layout.label == "start" else at - _MICROSECOND
    if rules.calendar_id == "24/7":
        day = stamp.astimezone(UTC).date()
        start = datetime.combine(day, time(0), tzinfo=UTC)
        return start, start + length
    day = stamp.astimezone(local_zone).date()
    session = sessions(rules.calendar_id).get(day)
    if session is None:
        raise SourceFormatError(f"{where}: {day.isoformat()} is not a {layout.market} session")
    return session.open_at, session.close_at


def _bar(row: Mapping[str, Any], span: tuple[datetime, datetime], where: str) -> Bar:
    symbol = str(row["symbol"] or "").strip()
    if not symbol:
        raise SourceFormatError(f"{where}: empty symbol")
    values = {name: _decimal(row[name], name, where) for name in (*_PRICES, "volume")}
    for name in _PRICES:
        if values[name] <= 0:
            raise SourceFormatError(f"{where}: {name} {values[name]} is not a positive price")
    if values["volume"] < 0:
        raise SourceFormatError(f"{where}: volume {values['volume']} is negative")
    low, high = values["low"], values["high"]
    if low > min(values["open"], values["close"]) or high < max(values["open"], values["close"]):
        raise SourceFormatError(f"{where}: high {high} and low {low} do not hold open and close")
    return Bar(
        symbol=symbol,
        start_at=span[0],
        end_at=span[1],
        open=values["open"],
        high=high,
        low=low,
        close=values["close"],
        volume=values["volume"],
    )


def _decimal(value: Any, name: str, where: str) -> Decimal:
    try:
        if isinstance(value, float):
            found = Decimal(str(value))
        elif isinstance(value, Decimal | int) and not isinstance(value, bool):
            found = Decimal(value)
        else:
            found = Decimal(str(value).strip())
    except InvalidOperation as exc:
        raise SourceFormatError(f"{where}: {name} {value!r} is not a number") from exc
    if not found.is_finite():
        raise SourceFormatError(f"{where}: {name} {value!r} is not a finite number")
    return found
