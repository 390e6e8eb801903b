"""The folder `openbell data download` fills and a `replay:PATH` source reads.

This module owns the folder's layout and what it records of its own filling:

```
DIR/<market>-<interval>-<SYMBOL>.parquet   bars, one canonical bar file per symbol (`barfile`)
DIR/corporate_actions.csv                  splits and cash dividends (`corporate_action_files`)
DIR/news/<SYMBOL>.jsonl                    news items, as `openbell data import-news` reads them
DIR/fundamentals/<SYMBOL>.jsonl            fundamentals reports, as `import-fundamentals` reads
DIR/shares/<SYMBOL>.jsonl                  shares outstanding by date (fundamentals' input)
DIR/download.json                          the date ranges fetched, by kind and symbol
```

(`SYMBOL` with `/` written `-`: `BTC-USDT`.) The manifest records every range asked and answered,
also those that held nothing (a symbol without news, a holiday), so that a second download asks
a vendor only for what is missing; it is written after each piece, atomically, so a download cut
off anywhere resumes where it stopped. Files are merged, never overwritten: a range fetched
again replaces the rows it covers and keeps the others. `read_research` gives a replay the
folder's news and reports (`research_files`' formats, JSONL or Parquet, a user's own files
included), each shown from its publication time.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Sequence
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Final

from openbell.markets.barfile import BarFileMeta, read_bars, write_bars
from openbell.markets.corporate_action_files import COLUMNS as ACTION_COLUMNS
from openbell.markets.corporate_actions import ActionKind, CorporateAction
from openbell.markets.domain import Bar, NewsItem
from openbell.markets.errors import SourceFormatError
from openbell.markets.fundamentals import FundamentalsReport
from openbell.markets.importers.research_files import read_news, read_reports

MANIFEST: Final = "download.json"
ACTIONS: Final = "corporate_actions.csv"
NEWS_DIR: Final = "news"
FUNDAMENTALS_DIR: Final = "fundamentals"
SHARES_DIR: Final = "shares"
_FORMAT: Final = 1

Span = tuple[date, date]  # first and last day, inclusive


def slug(symbol: str) -> str:
    """`symbol` as a file name: `BTC/USDT` is `BTC-USDT`."""
    return symbol.replace("/", "-")


def missing(covered: Sequence[Span], first: date, last: date) -> list[Span]:
    """The parts of `[first, last]` that `covered` (any order, may overlap) leaves out."""
    out: list[Span] = []
    cursor = first
    for begin, end in sorted(covered):
        if end < cursor:
            continue
        if begin > last:
            break
        if begin > cursor:
            out.append((cursor, begin - timedelta(days=1)))
        cursor = max(cursor, end + timedelta(days=1))
        if cursor > last:
            return out
    if cursor <= last:
        out.append((cursor, last))
    return out


def merged(spans: Iterable[Span]) -> list[Span]:
    """`spans` as the fewest disjoint spans, touching ones joined."""
    out: list[Span] = []
    for begin, end in sorted(spans):
        if out and begin <= out[-1][1] + timedelta(days=1):
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((begin, end))
    return out


class DownloadFolder:
    """A download folder at `path` (created on first write); see the module docstring."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fetched = self._read_manifest()

    # -- the manifest ---------------------------------------------------------------------

    def _read_manifest(self) -> dict[str, list[Span]]:
        file = self.path / MANIFEST
        if not file.exists():
            return {}
        try:
            document = json.loads(file.read_text(encoding="utf-8"))
            if document.get("format") != _FORMAT:
                raise SourceFormatError(f"{file}: not a download manifest of format {_FORMAT}")
            return {
                key: [(date.fromisoformat(a), date.fromisoformat(b)) for a, b in spans]
                for key, spans in document["fetched"].items()
            }
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SourceFormatError(f"{file}: damaged download manifest: {exc}") from exc

    def covered(self, key: str) -> list[Span]:
        """The day ranges fetched for `key` ("bars:1d:AAPL", "news:AAPL", ...)."""
        return list(self._fetched.get(key, ()))

    def to_fetch(self, key: str, first: date, last: date) -> list[Span]:
        """The parts of `[first, last]` not fetched yet for `key`."""
        return missing(self.covered(key), first, last)

    def fetched(self, key: str, first: date, last: date) -> None:
        """Record `[first, last]` as fetched for `key`, on disk at once."""
        self._fetched[key] = merged([*self.covered(key), (first, last)])
        lines = [
            f"  {json.dumps(key)}: {json.dumps([[a.isoformat(), b.isoformat()] for a, b in spans])}"
            for key, spans in sorted(self._fetched.items())
        ]
        text = f'{{"format": {_FORMAT}, "fetched": {{\n' + ",\n".join(lines) + "\n}}\n"
        _write_text(self.path / MANIFEST, text)

    # -- bars -----------------------------------------------------------------------------

    def bars_file(self, market: str, interval: str, symbol: str) -> Path:
        return self.path / f"{market}-{interval}-{slug(symbol)}.parquet"

    def bars(self, market: str, interval: str, symbol: str) -> list[Bar]:
        """The symbol's bars in the folder, oldest first (none without a file)."""
        file = self.bars_file(market, interval, symbol)
        if not file.exists():
            return []
        return list(read_bars(file).bars(symbol))

    def add_bars(self, meta: BarFileMeta, symbol: str, bars: Sequence[Bar]) -> int:
        """Merge `bars` into the symbol's file (a bar at the same start is replaced); how many
        bars the file holds."""
        kept = {bar.start_at: bar for bar in self.bars(meta.market, meta.interval, symbol)}
        kept.update({bar.start_at: bar for bar in bars})
        if not kept:
            return 0
        self.path.mkdir(parents=True, exist_ok=True)
        file = self.bars_file(meta.market, meta.interval, symbol)
        partial = file.with_name(file.name + ".partial")
        write_bars(partial, list(kept.values()), meta)
        os.replace(partial, file)
        return len(kept)

    # -- corporate actions ----------------------------------------------------------------

    def actions(self) -> list[dict[str, str]]:
        """The rows of the folder's corporate-actions file."""
        file = self.path / ACTIONS
        if not file.exists():
            return []
        with file.open(encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(line for line in handle if not line.startswith("#")))

    def add_actions(self, found: Iterable[CorporateAction]) -> None:
        """Merge `found` into the corporate-actions file, one row per (symbol, ex-date, kind)."""
        rows = {(r["symbol"], r["ex_date"], r["kind"]): r for r in self.actions()}
        for action in found:
            rows[action.symbol, action.ex_date.isoformat(), action.kind.value] = {
                "symbol": action.symbol,
                "ex_date": action.ex_date.isoformat(),
                "kind": action.kind.value,
                "ratio": _text(action.ratio) if action.kind is ActionKind.SPLIT else "",
                "cash": _text(action.cash) if action.kind is ActionKind.CASH_DIVIDEND else "",
                "source": action.source,
            }
        if not rows:
            return
        lines = [",".join(ACTION_COLUMNS)]
        for key in sorted(rows):
            lines.append(",".join(rows[key].get(column, "") for column in ACTION_COLUMNS))
        _write_text(self.path / ACTIONS, "\n".join(lines) + "\n")

    # -- news, fundamentals and shares -----------------------------------------------------

    def add_news(self, symbol: str, items: Iterable[NewsItem]) -> int:
        """Merge `items` into the symbol's news file (one per publication time and title)."""
        file = self.path / NEWS_DIR / f"{slug(symbol)}.jsonl"
        known = {(i.published_at, i.title): i for i in (read_news(file) if _rows(file) else [])}
        known.update({(i.published_at, i.title): i for i in items})
        rows = [
            {
                "symbol": item.symbol,
                "published_at": item.published_at.isoformat(),
                "title": item.title,
                "url": item.url,
                "source": item.source,
            }
            for _, item in sorted(known.items(), key=lambda pair: pair[0][0])
        ]
        _write_jsonl(file, rows)
        return len(rows)

    def add_reports(self, symbol: str, reports: Iterable[FundamentalsReport]) -> int:
        """Merge `reports` into the symbol's fundamentals file (one per publication time)."""
        file = self.path / FUNDAMENTALS_DIR / f"{slug(symbol)}.jsonl"
        old = read_reports(file) if _rows(file) else []
        known = {report.published_at: report for report in old}
        known.update({report.published_at: report for report in reports})
        rows = [
            {
                "symbol": report.symbol,
                "period_end": report.period_end.isoformat(),
                "published_at": report.published_at.isoformat(),
                "currency": report.currency,
                "values": {name: _text(value) for name, value in report.values.items()},
            }
            for _, report in sorted(known.items())
        ]
        _write_jsonl(file, rows)
        return len(rows)

    def shares(self, symbol: str) -> list[tuple[date, Decimal]]:
        """The symbol's shares outstanding by date, oldest first."""
        file = self.path / SHARES_DIR / f"{slug(symbol)}.jsonl"
        if not _rows(file):
            return []
        out = []
        for line in file.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out.append((date.fromisoformat(row["date"]), Decimal(row["shares"])))
        return sorted(out)

    def add_shares(self, symbol: str, found: Iterable[tuple[date, Decimal]]) -> None:
        """Merge `found` into the symbol's shares file (one count per date)."""
        known = dict(self.shares(symbol))
        known.update(found)
        rows = [{"date": d.isoformat(), "shares": _text(n)} for d, n in sorted(known.items())]
        _write_jsonl(self.path / SHARES_DIR / f"{slug(symbol)}.jsonl", rows)


def read_research(path: Path) -> tuple[list[NewsItem], list[FundamentalsReport]]:
    """The news and fundamentals reports of a folder's `news/` and `fundamentals/` (each file
    `.jsonl` or `.parquet`; none when the folder has neither)."""
    news: list[NewsItem] = []
    reports: list[FundamentalsReport] = []
    for file in _research_files(path / NEWS_DIR):
        news.extend(read_news(file))
    for file in _research_files(path / FUNDAMENTALS_DIR):
        reports.extend(read_reports(file))
    return news, reports


def _research_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    found = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".jsonl", ".parquet"))
    return [p for p in found if p.suffix.lower() == ".parquet" or _rows(p)]


def _rows(file: Path) -> bool:
    """Whether `file` exists and holds a line of text (an empty file is no rows)."""
    return file.exists() and bool(file.read_text(encoding="utf-8").strip())


def _text(value: Decimal) -> str:
    return format(value.normalize() if value == value.to_integral() else value, "f")


def _write_jsonl(file: Path, rows: Sequence[object]) -> None:
    if not rows:
        return
    _write_text(file, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def _write_text(file: Path, text: str) -> None:
    """Write `text` to `file` whole or not at all (a temporary file, then a rename)."""
    file.parent.mkdir(parents=True, exist_ok=True)
    partial = file.with_name(file.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, file)
