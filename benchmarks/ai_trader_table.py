"""AI-Trader's Table 1, its baseline rows: QQQ, the SSE-50 index and CD5, from the bundled bars.

AI-Trader (arXiv 2512.10971) ranks its agents against one passive baseline per market: QQQ for the
Nasdaq-100 stocks, the SSE-50 index (000016.SH) for the A-shares, and CD5, its buy-and-hold crypto
basket (BTC 74.56 %, ETH 15.97 %, XRP 5.20 %, SOL 3.53 %, ADA 0.76 %). This script computes those
rows over the windows of the data AI-Trader's benchmark branch ships (`Official-AITrader-v1`, head
c8b24a0, and the `hourly_crypto` branch, 4f113dd): the paper's own windows and figures are not in
the material openbell is built from, so none are quoted here (see the README's "AI-Trader's baseline
rows" for what that means for the comparison).

Each row is computed three ways, so a difference can be traced to its cause:

- `openbell`: what `openbell leaderboard` shows as the benchmark row of a replay of that window.
  The series is sampled at the replay's slots (the starts of the bundled bars inside sessions;
  US hourly bars are labelled by their start, 10:00..15:00 New York), each priced by the replay's
  quote rule: the open of the bar starting at the slot (the price an order placed then fills at,
  before slippage). CD5 is the basket's weights normalised to sum to one, each coin's weight times
  its price over its price at the first slot. So the window runs from the first slot's open to the
  last slot's open: the last bar's own move is not in it.
- `close-to-close`: the same bundled bars, valued at each bar's close, from the last close before
  the window (else the window's first close): the textbook convention of a results table.
- `AI-Trader file` (with `--ai-trader DIR`, the copy of AI-Trader's data that `SOURCE.md`
  describes): close-to-close over the same window on AI-Trader's own files: QQQ's hourly Alpha
  Vantage series, its SSE-50 index file (which runs to 2025-11-19, past the bundled index's end),
  and its published CD5 index values (daily, 50,000 USDT bought at the 2025-11-02 open; hourly).

Every ratio uses openbell's conventions (`openbell.ops.return_metrics`, empyrical's): simple
returns between consecutive points, risk-free 0, sample standard deviation, annualised by 252
sessions a year for stocks and 365 days for crypto, times the slots a session has (the bundled US
hourly bars give 6: 1,512; crypto hourly 24: 8,760).

Not a test: run it by hand, `.venv/bin/python benchmarks/ai_trader_table.py [--ai-trader DIR]
[--format markdown|json]`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import rules_for
from openbell.markets.slots import observed_slots_per_session, replay_slots
from openbell.ops.benchmark import benchmark_for, benchmark_navs
from openbell.ops.return_metrics import NavPoint, compute_panel, periods_per_year

CASH = Decimal(10_000)
NEW_YORK = ZoneInfo("America/New_York")
SHANGHAI = ZoneInfo("Asia/Shanghai")
_FAR = datetime(2200, 1, 1, tzinfo=UTC)
_EARLY = datetime(1900, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Baseline:
    """One baseline row: a market's benchmark over AI-Trader's window, at one interval."""

    name: str
    market: str
    interval: str
    start_at: datetime  # the window: bars starting in [start_at, end_at)
    end_at: datetime
    files: tuple[str, ...]  # the bundled bar files it reads
    ai_trader_file: str  # the AI-Trader file of the same series (relative to its data copy)
    window_source: str  # where the window comes from
    #: The AI-Trader file holds each bar's own move (close over open, re-based every bar), not a
    #: level: its returns are chained instead of read from its closes.
    file_per_bar: bool = False

    @property
    def cadence(self) -> str:
        return "daily" if self.interval == "1d" else "hourly"


BASELINES = (
    Baseline(
        name="QQQ (us, hourly)",
        market="us",
        interval="1h",
        start_at=datetime(2025, 10, 1, tzinfo=NEW_YORK),
        end_at=datetime(2025, 11, 11, tzinfo=NEW_YORK),
        files=("us-1h",),
        ai_trader_file="c8b24a0/data/daily_prices_QQQ.json",
        window_source="c8b24a0 US hourly bars: 2025-10-01 10:00 .. 2025-11-10 15:00 New York",
    ),
    Baseline(
        name="SSE-50 000016.SH (cn, daily)",
        market="cn",
        interval="1d",
        start_at=datetime(2025, 10, 9, tzinfo=SHANGHAI),
        end_at=datetime(2025, 11, 20, tzinfo=SHANGHAI),
        files=("cn-1d", "cn-index-1d"),
        ai_trader_file="c8b24a0/data/A_stock/index_daily_sse_50.json",
        window_source="c8b24a0 A-share bars: 2025-10-09 .. 2025-11-19 (30 sessions)",
    ),
    Baseline(
        name="CD5 (crypto, daily)",
        market="crypto",
        interval="1d",
        start_at=datetime(2025, 11, 2, tzinfo=UTC),
        end_at=datetime(2025, 11, 16, tzinfo=UTC),
        files=("crypto-1d",),
        ai_trader_file="c8b24a0/data/crypto/CD5_crypto_index.json",
        window_source="c8b24a0 CD5 index: bought at the 2025-11-02 open (its 2025-11-01 row is the "
        "50,000 base) .. 2025-11-15 UTC",
    ),
    Baseline(
        name="CD5 (crypto, hourly)",
        market="crypto",
        interval="1h",
        start_at=datetime(2025, 10, 26, 18, tzinfo=UTC),
        end_at=datetime(2025, 11, 10, 7, tzinfo=UTC),
        files=("crypto-1h",),
        ai_trader_file="4f113dd/data/crypto/CD5_crypto_index.json",
        window_source="4f113dd CD5 hourly index: 2025-10-26 18:00 .. 2025-11-10 06:00 UTC",
        file_per_bar=True,
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One baseline under one convention: its window as computed and openbell's panel of it."""

    baseline: str
    convention: str
    start: str
    end: str
    points: int
    periods_per_year: float
    cumulative_return: float | None
    annual_return: float | None
    annual_volatility: float | None
    sharpe_ratio: float | None
    max_drawdown: float | None
    note: str = ""


def _window(baseline: Baseline) -> tuple[datetime, datetime]:
    return baseline.start_at.astimezone(UTC), baseline.end_at.astimezone(UTC)


def _row(
    baseline: Baseline, convention: str, navs: Sequence[NavPoint], factor: float, note: str = ""
) -> Row:
    panel = compute_panel(navs, periods_per_year=factor)
    return Row(
        baseline=baseline.name,
        convention=convention,
        start=navs[0].at.isoformat() if navs else "",
        end=navs[-1].at.isoformat() if navs else "",
        points=len(navs),
        periods_per_year=factor,
        cumulative_return=panel.cumulative_return,
        annual_return=panel.annual_return,
        annual_volatility=panel.annual_volatility,
        sharpe_ratio=panel.sharpe_ratio,
        max_drawdown=panel.max_drawdown,
        note=note,
    )


def openbell_row(baseline: Baseline, source: ReplaySource) -> tuple[Row, float, datetime | None]:
    """The benchmark row a replay of the window shows, its annualisation factor, and the end of
    the benchmark's last bundled bar when the window runs past it (a replay would carry its price
    forward from there: the row stops at it instead)."""
    start, end = _window(baseline)
    spec = benchmark_for(baseline.market)
    last_bars = [
        source.bars_between([symbol], baseline.interval, _EARLY, _FAR)[symbol][-1]
        for symbol in spec.weights
    ]
    covered = min(bar.start_at for bar in last_bars)
    slots = replay_slots(source, baseline.market, baseline.interval, start, end)
    kept = [at for at in slots if at <= covered]
    note = ""
    if len(kept) < len(slots):
        note = f"the bundled {spec.name} bars end {covered:%Y-%m-%d}; window cut there"
    factor = periods_per_year(
        baseline.market, baseline.cadence, observed_slots_per_session(baseline.market, kept)
    )
    navs = benchmark_navs(baseline.market, kept, CASH, sources=(source,))
    cut = min(bar.end_at for bar in last_bars) if len(kept) < len(slots) else None
    return _row(baseline, "openbell", navs, factor, note), factor, cut


def close_to_close(
    weights: Mapping[str, Decimal],
    series: Mapping[str, Sequence[tuple[datetime, Decimal]]],
    start: datetime,
    end: datetime,
) -> list[NavPoint]:
    """The basket valued at the closes of the bars ending in `(start, end]` (`series`: each
    component's (bar end, close)), from each component's last close at or before `start`, or, when
    one has none, from the window's first common close."""
    total = sum(weights.values(), Decimal(0))
    base: dict[str, Decimal] = {}
    closes: dict[str, dict[datetime, Decimal]] = {}
    common: set[datetime] | None = None
    for symbol in weights:
        points = series[symbol]
        inside = {ended: close for ended, close in points if start < ended <= end}
        if not inside:
            return []
        closes[symbol] = inside
        common = set(inside) if common is None else common & set(inside)
        before = [close for ended, close in points if ended <= start]
        if before:
            base[symbol] = before[-1]
    ordered = sorted(common or ())
    navs = [NavPoint(at=start, nav=CASH)]
    if len(base) < len(weights):
        base = {symbol: closes[symbol][ordered[0]] for symbol in weights}
        navs = []
    for at in ordered:
        value = sum((w / total * closes[s][at] / base[s] for s, w in weights.items()), Decimal(0))
        navs.append(NavPoint(at=at, nav=CASH * value))
    return navs


def bundled_close_row(baseline: Baseline, source: ReplaySource, factor: float) -> Row:
    start, end = _window(baseline)
    weights = dict(benchmark_for(baseline.market).weights)
    series = {
        symbol: [
            (bar.end_at, bar.close)
            for bar in source.bars_between([symbol], baseline.interval, _EARLY, _FAR)[symbol]
        ]
        for symbol in weights
    }
    return _row(baseline, "close-to-close", close_to_close(weights, series, start, end), factor)


def _file_series(path: Path, baseline: Baseline) -> list[tuple[datetime, Decimal]]:
    """(bar end, close) of an AI-Trader JSON file in the Alpha Vantage layout, in UTC; for a file
    of per-bar moves, (bar end, the level those moves chain to from 1)."""
    document = json.loads(path.read_text(encoding="utf-8"))
    key = next(name for name in document if name.startswith("Time Series"))
    rules = rules_for(baseline.market)
    zone = ZoneInfo(rules.timezone)
    out: list[tuple[datetime, Decimal, Decimal]] = []
    for label, values in document[key].items():
        if baseline.interval == "1h":
            started = datetime.fromisoformat(label).replace(tzinfo=zone)
            ended = started + timedelta(hours=1)  # US and crypto hourly labels are bar starts
        else:
            day = date.fromisoformat(label)
            ended = datetime.combine(day + timedelta(days=1), time(), tzinfo=zone)
            if baseline.market == "cn":
                ended = datetime.combine(day, time(15), tzinfo=zone)
        out.append((ended.astimezone(UTC), Decimal(values["1. open"]), Decimal(values["4. close"])))
    out.sort()
    if not baseline.file_per_bar:
        return [(ended, close) for ended, _, close in out]
    level, chained = Decimal(1), []
    for ended, opened, close in out:
        level *= close / opened
        chained.append((ended, level))
    return chained


def file_row(baseline: Baseline, data: Path, factor: float, end: datetime | None = None) -> Row:
    """Close-to-close on AI-Trader's own file over the window (cut at `end` when given)."""
    start, window_end = _window(baseline)
    name = benchmark_for(baseline.market).name
    series = {name: _file_series(data / baseline.ai_trader_file, baseline)}
    navs = close_to_close({name: Decimal(1)}, series, start, end or window_end)
    note = baseline.ai_trader_file
    if baseline.file_per_bar:
        note += (
            ": each row is that hour's close / open of the basket times 50,000 (re-based every "
            "hour, not a level), chained here"
        )
    convention = "AI-Trader file" if end is None else "AI-Trader file, cut"
    return _row(baseline, convention, navs, factor, note=note)


def rows(ai_trader: Path | None) -> list[Row]:
    out = []
    for baseline in BASELINES:
        source = ReplaySource.from_bundled(baseline.market, names=baseline.files)
        row, factor, cut = openbell_row(baseline, source)
        out.append(row)
        out.append(bundled_close_row(baseline, source, factor))
        if ai_trader is not None:
            out.append(file_row(baseline, ai_trader, factor))
            if cut is not None:  # like for like: the file over the bundled span
                out.append(file_row(baseline, ai_trader, factor, end=cut))
    return out


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value * 100:.2f}"


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def markdown(found: Sequence[Row]) -> str:
    lines = [
        (
            "| baseline | convention | from | to | points | return % | ann. % | vol. % | Sharpe "
            "| max DD % |"
        ),
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in found:
        lines.append(
            f"| {row.baseline} | {row.convention} | {row.start[:16]} | {row.end[:16]} "
            f"| {row.points} | {_pct(row.cumulative_return)} | {_pct(row.annual_return)} "
            f"| {_pct(row.annual_volatility)} | {_ratio(row.sharpe_ratio)} "
            f"| {_pct(row.max_drawdown)} |"
        )
    notes = [f"- {row.baseline}, {row.convention}: {row.note}" for row in found if row.note]
    return "\n".join(lines + (["", *notes] if notes else []))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--ai-trader",
        type=Path,
        help="AI-Trader's data copy (one folder per short commit, as its SOURCE.md says)",
    )
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    args = parser.parse_args(argv)
    found = rows(args.ai_trader)
    if args.format == "json":
        sys.stdout.write(json.dumps([asdict(row) for row in found], indent=2) + "\n")
    else:
        sys.stdout.write(markdown(found) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
