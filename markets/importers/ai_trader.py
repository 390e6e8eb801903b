"""Importer for the market data published in HKUDS/AI-Trader, and the bundled dataset built from it.

This module owns the AI-Trader file families (see the SOURCE.md that comes with the copied files):
Alpha Vantage JSON for US stocks, the SSE-50 index and crypto; Tushare CSV for A-share daily bars;
Eastmoney CSV for A-share hourly bars. Each parser turns one file into UTC `[start_at, end_at)`:
US hourly stamps are bar starts in New York (the 15:00 bar ends at the 16:00 close), A-share hourly
stamps are bar ends in Shanghai (10:30 is 09:30-10:30), a stock's daily date becomes its
`exchange_calendars` session (XNYS, XSHG; half days close early) and a crypto date the UTC day.
A-share volumes in lots of 100 become shares; the live, partial last bar of Alpha Vantage's daily
crypto series is dropped. `build_dataset` writes the bundled files under `markets/data/bars/`.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any, Final
from zoneinfo import ZoneInfo

from openbell.markets.barfile import BarFileMeta, write_bars
from openbell.markets.domain import Bar
from openbell.markets.errors import SourceFormatError
from openbell.markets.importers.common import (
    DUPLICATE,
    NOT_A_SESSION,
    OUTSIDE_SESSION,
    BarCollector,
    ImportReport,
    Parsed,
    merge,
    sessions,
)

REPO: Final = "HKUDS/AI-Trader"
#: Full commit of each folder of the copied data (the folder is named for the short hash).
COMMITS: Final = {
    "c8b24a0": "c8b24a00b106279ec17f434421b8978e0b5e341d",
    "a0a1c85": "a0a1c85686c4d3f74a0758c437b4b70b354b50ac",
    "81d570b": "81d570bb5009bf1346583fc3ec72a3dc0daa5b37",
    "c3561c6": "c3561c66d3f4e3ab78c45bd1d3c0b7f303cafb66",
    "4f113dd": "4f113dd2843fd942d92dc6c758cc227c4f191c0a",
    "761ea56": "761ea561a4b7e5d5c2a1f5d1405783c40d968a7d",
}
SSE50_INDEX: Final = "000016.SH"
LOT: Final = 100  # an A-share lot (手): Tushare's `vol` and Eastmoney's volume count lots

NEW_YORK: Final = ZoneInfo("America/New_York")
SHANGHAI: Final = ZoneInfo("Asia/Shanghai")
_HOUR: Final = timedelta(hours=1)
_DAY: Final = timedelta(days=1)
_OHLCV: Final = ("1. open", "2. high", "3. low", "4. close", "5. volume")
_DAILY: Final = "Time Series (Daily)"
_HOURLY: Final = "Time Series (60min)"
_CN_DAILY_COLUMNS: Final = ("ts_code", "trade_date", "open", "high", "low", "close", "vol")
_CN_HOURLY_COLUMNS: Final = ("stock_code", "trade_date", "open", "close", "high", "low", "volume")


# --- Alpha Vantage JSON -------------------------------------------------------------------------


def _av_series(path: Path, key: str, out: BarCollector) -> list[tuple[str, list[Any]]]:
    """The (label, [open, high, low, close, volume]) rows of an Alpha Vantage file, sorted by label.

    The vendor dict is unordered; a label repeated in the file keeps its first value and counts as
    a duplicate (plain `json.load` would silently keep the last).
    """
    repeated = 0

    def first_wins(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal repeated
        obj: dict[str, Any] = {}
        for name, value in pairs:
            if name in obj:
                repeated += 1
            else:
                obj[name] = value
        return obj

    with path.open(encoding="utf-8") as handle:
        document = json.load(handle, object_pairs_hook=first_wins)
    series = document.get(key) if isinstance(document, dict) else None
    if not isinstance(series, dict):
        raise SourceFormatError(f"{path}: no {key!r} object; not an Alpha Vantage series file")
    out.drop(DUPLICATE, repeated)
    try:
        return [(label, [series[label][name] for name in _OHLCV]) for label in sorted(series)]
    except (KeyError, TypeError) as exc:
        raise SourceFormatError(f"{path}: bar without the fields {_OHLCV}") from exc


def _symbol_from_name(path: Path, prefix: str) -> str:
    if not (path.name.startswith(prefix) and path.suffix == ".json"):
        raise SourceFormatError(f"{path}: expected a file named {prefix}<SYMBOL>.json")
    return path.stem[len(prefix) :]


def _local(label: str, zone: ZoneInfo) -> datetime:
    return datetime.fromisoformat(label).replace(tzinfo=zone).astimezone(UTC)


def _daily_sessions(
    rows: list[tuple[str, list[Any]]], symbol: str, calendar: str, out: BarCollector
) -> None:
    known = sessions(calendar)
    for label, values in rows:
        session = known.get(date.fromisoformat(label))
        if session is None:
            out.drop(NOT_A_SESSION)
        else:
            out.add(symbol, session.open_at, session.close_at, values)


def parse_us_hourly(path: Path) -> Parsed:
    """US hourly (`c8b24a0/data/daily_prices_<SYM>.json`): New York labels are bar starts.

    A bar runs one hour from its label, cut at the session close (on a half day); a bar that does
    not start inside an XNYS session is dropped.
    """
    symbol = _symbol_from_name(path, "daily_prices_")
    out = BarCollector()
    known = sessions("XNYS")
    for label, values in _av_series(path, _HOURLY, out):
        start_at = _local(label, NEW_YORK)
        session = known.get(datetime.fromisoformat(label).date())
        if session is None:
            out.drop(NOT_A_SESSION)
            continue
        end_at = min(start_at + _HOUR, session.close_at)
        if end_at <= start_at or not session.holds(start_at, end_at):
            out.drop(OUTSIDE_SESSION)
            continue
        out.add(symbol, start_at, end_at, values)
    return out.result()


def parse_us_daily(path: Path) -> Parsed:
    """US daily (`a0a1c85/data/daily_prices_<SYM>.json`): a date is its XNYS session."""
    symbol = _symbol_from_name(path, "daily_prices_")
    out = BarCollector()
    _daily_sessions(_av_series(path, _DAILY, out), symbol, "XNYS", out)
    return out.result()


def parse_cn_index_daily(path: Path, symbol: str = SSE50_INDEX) -> Parsed:
    """SSE-50 index daily (`index_daily_sse_50.json`): a date is its XSHG session, 09:30-15:00.

    The volume is kept as the file gives it (in shares for `c3561c6`; other pulls count lots).
    """
    out = BarCollector()
    _daily_sessions(_av_series(path, _DAILY, out), symbol, "XSHG", out)
    return out.result()


def parse_crypto_daily(path: Path, *, last_bar_partial: bool = True) -> Parsed:
    """Crypto daily (`daily_prices_<COIN>.json`): a date is the UTC day `[00:00, next 00:00)`.

    Alpha Vantage's DIGITAL_CURRENCY_DAILY always ends with the day in progress when it was
    fetched, so its last bar is dropped unless `last_bar_partial` is False.
    """
    symbol = f"{_symbol_from_name(path, 'daily_prices_')}/USDT"
    out = BarCollector()
    for label, values in _av_series(path, _DAILY, out):
        start_at = datetime.combine(date.fromisoformat(label), time(), tzinfo=UTC)
        out.add(symbol, start_at, start_at + _DAY, values)
    return out.result(last_bar_partial=last_bar_partial)


def parse_crypto_hourly(path: Path) -> Parsed:
    """Crypto hourly (`4f113dd/.../hourly_prices_<COIN>.json`): UTC labels are bar starts."""
    symbol = f"{_symbol_from_name(path, 'hourly_prices_')}/USDT"
    out = BarCollector()
    for label, values in _av_series(path, _HOURLY, out):
        start_at = datetime.fromisoformat(label).replace(tzinfo=UTC)
        out.add(symbol, start_at, start_at + _HOUR, values)
    return out.result()


# --- A-share CSV ---------------------------------------------------------------------------------


def _csv_rows(path: Path, columns: Sequence[str]) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [name for name in columns if name not in (reader.fieldnames or ())]
        if missing:
            raise SourceFormatError(f"{path}: missing columns {missing}; has {reader.fieldnames}")
        return list(reader)


def parse_cn_daily(path: Path) -> Parsed:
    """A-share daily (Tushare `daily_prices_sse_50.csv`): a trade date is its XSHG session.

    `vol` counts lots of 100 shares and becomes shares; `amount` (thousand CNY) is not kept.
    """
    out = BarCollector()
    known = sessions("XSHG")
    for row in _csv_rows(path, _CN_DAILY_COLUMNS):
        session = known.get(date.fromisoformat(row["trade_date"]))
        if session is None:
            out.drop(NOT_A_SESSION)
            continue
        values = [row[name] for name in ("open", "high", "low", "close", "vol")]
        out.add(row["ts_code"], session.open_at, session.close_at, values, volume_factor=LOT)
    return out.result()


def parse_cn_hourly(path: Path) -> Parsed:
    """A-share hourly (Eastmoney `A_stock_hourly.csv`): Shanghai labels are bar ends.

    The 10:30 bar is 09:30-10:30, 11:30 is 10:30-11:30, 14:00 is 13:00-14:00 and 15:00 is
    14:00-15:00; a bar that is not inside an XSHG session or spans the lunch break is dropped.
    Volume counts lots of 100 shares and becomes shares.
    """
    out = BarCollector()
    known = sessions("XSHG")
    for row in _csv_rows(path, _CN_HOURLY_COLUMNS):
        end_at = _local(row["trade_date"], SHANGHAI)
        start_at = end_at - _HOUR
        session = known.get(datetime.fromisoformat(row["trade_date"]).date())
        if session is None:
            out.drop(NOT_A_SESSION)
        elif not session.holds(start_at, end_at):
            out.drop(OUTSIDE_SESSION)
        else:
            values = [row[name] for name in ("open", "high", "low", "close", "volume")]
            out.add(row["stock_code"], start_at, end_at, values, volume_factor=LOT)
    return out.result()


# --- The bundled dataset -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Source:
    commit: str  # the short hash naming the folder
    pattern: str  # a glob under that folder
    parse: Callable[[Path], Parsed]


@dataclass(frozen=True, slots=True)
class _Output:
    name: str
    market: str
    interval: str
    timezone: str
    label: str
    adjustment: str
    source: str
    parts: tuple[_Source, ...]  # in priority order: a later part only adds bars not seen before


_AV = "Alpha Vantage"
OUTPUTS: Final = (
    _Output("us-1h", "us", "1h", "America/New_York", "start", "adjusted",
            f"{_AV} TIME_SERIES_INTRADAY 60min, extended_hours=false",
            (_Source("c8b24a0", "data/daily_prices_*.json", parse_us_hourly),)),
    _Output("us-1d", "us", "1d", "America/New_York", "start", "raw",
            f"{_AV} TIME_SERIES_DAILY",
            (_Source("a0a1c85", "data/daily_prices_*.json", parse_us_daily),)),
    _Output("cn-1d", "cn", "1d", "Asia/Shanghai", "start", "raw",
            "Tushare Pro daily (vol in lots, converted to shares)",
            (_Source("81d570b", "data/A_stock/daily_prices_sse_50.csv", parse_cn_daily),
             _Source("c8b24a0", "data/A_stock/A_stock_data/daily_prices_sse_50.csv",
                     parse_cn_daily))),
    _Output("cn-1h", "cn", "1h", "Asia/Shanghai", "end", "forward-adjusted",
            "Eastmoney via efinance get_quote_history(klt=60) (volume lots converted to shares)",
            (_Source("c8b24a0", "data/A_stock/A_stock_data/A_stock_hourly.csv",
                     parse_cn_hourly),)),
    _Output("cn-index-1d", "cn", "1d", "Asia/Shanghai", "start", "raw",
            "Tushare Pro index_daily for 000016.SH, in Alpha Vantage JSON layout",
            (_Source("c3561c6", "data/A_stock/index_daily_sse_50.json", parse_cn_index_daily),)),
    _Output("crypto-1d", "crypto", "1d", "UTC", "start", "raw",
            f"{_AV} DIGITAL_CURRENCY_DAILY (before 2024-12-23 another feed, volume in quote units)",
            (_Source("761ea56", "data/crypto/coin/daily_prices_*.json", parse_crypto_daily),)),
    _Output("crypto-1h", "crypto", "1h", "UTC", "start", "raw",
            f"{_AV} CRYPTO_INTRADAY 60min, market USDT (volume unreliable)",
            (_Source("4f113dd", "data/crypto/coin/hourly_prices_*.json", parse_crypto_hourly),)),
)  # fmt: skip


def build_dataset(source_dir: Path, out_dir: Path) -> ImportReport:
    """Parse the AI-Trader copy under `source_dir` and write one bar file per output to `out_dir`.

    `source_dir` holds one folder per short commit hash (`c8b24a0/`, ...), as SOURCE.md describes.
    A source pattern that matches no file raises `SourceFormatError`.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    files_read: list[str] = []
    written: dict[str, int] = {}
    dropped: dict[str, dict[str, int]] = {}
    for output in OUTPUTS:
        counts: Counter[str] = Counter()
        parts: list[list[Bar]] = []
        provenance: list[str] = []
        for part in output.parts:
            paths = sorted((source_dir / part.commit).glob(part.pattern))
            if not paths:
                raise SourceFormatError(
                    f"{source_dir / part.commit}: no file matches {part.pattern}"
                )
            bars: list[Bar] = []
            for path in paths:
                parsed = part.parse(path)
                bars.extend(parsed.bars)
                counts.update(parsed.dropped)
                files_read.append(path.relative_to(source_dir).as_posix())
            parts.append(bars)
            provenance.append(f"{REPO}@{COMMITS[part.commit]}:{part.pattern} ({len(paths)} files)")
        merged = merge(parts, counts)
        meta = BarFileMeta(
            market=output.market,
            interval=output.interval,
            timezone=output.timezone,
            label=output.label,
            adjustment=output.adjustment,
            source=output.source,
            provenance="; ".join(provenance),
        )
        write_bars(out_dir / f"{output.name}.parquet", merged, meta)
        written[output.name] = len(merged)
        dropped[output.name] = {reason: n for reason, n in sorted(counts.items()) if n}
    return ImportReport(files_read=tuple(files_read), bars_written=written, bars_dropped=dropped)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m openbell.markets.importers.ai_trader SOURCE_DIR OUT_DIR`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("source_dir", type=Path, help="the AI-Trader copy (folders per commit)")
    parser.add_argument("out_dir", type=Path, help="where to write the bar files")
    args = parser.parse_args(argv)
    report = build_dataset(args.source_dir, args.out_dir)
    print(report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
