"""AI-Trader's Table 1, its baseline rows: QQQ, the SSE-50 index and CD5, from the bundled bars.

AI-Trader (arXiv 2512.10971, in ../shared/reference/papers/) ranks its agents against one passive
baseline per market: QQQ for the Nasdaq-100 stocks (hourly, 1 Oct - 7 Nov 2025), the SSE-50 index
(000016.SH) for the A-shares (daily, the same window) and CD5, its buy-and-hold crypto basket (BTC
74.56 %, ETH 15.97 %, XRP 5.20 %, SOL 3.53 %, ADA 0.76 %; daily, 1-14 Nov 2025). Its Table 1 gives
each baseline's cumulative return, Sortino ("SR"), volatility and max drawdown (`PAPER`). The
bundled bars reproduce every one of those figures to the paper's precision under the `ai-trader`
metrics convention (`openbell.ops.evaluation.conventions`), which is what `openbell leaderboard
--convention ai-trader` prints for a replay of each window.

Each baseline's window is the span of bars that reproduces the paper's figures (`Baseline.start_at`,
`end_at`; `paper_window` is what the paper states). Each row is then computed several ways, so that
a difference can be traced to its cause, one step at a time:

- `paper`: the figures of the paper's Table 1.
- `AI-Trader formulas`: the `ai-trader` convention on the bundled bars, as the leaderboard measures
  it: the benchmark valued at the closes of its bars starting at the replay's slots, from the
  last close ended by the first slot, a basket in its published weights (`ops.evaluation.benchmark.
  close_navs`), measured as AI-Trader's `tools/calculate_metrics.py` measures: simple returns,
  population standard deviations, Sortino as the mean return over the population deviation of
  the negative returns only, risk-free 0, annualised by 252 x 6.5 = 1,638 periods a year for any
  hourly series, 252 for daily stocks, 365 for daily crypto (`ai_trader_row`).
- `close-to-close`: the same closes (a basket's weights normalised), with openbell's formulas
  (`openbell.ops.evaluation.return_metrics`, empyrical's): sample standard deviations, Sortino over
  the downside deviation of all periods, annualised by 252 sessions (365 days for crypto) times the
  bars a session has (the bundled US hourly bars give 6: 1,512; crypto hourly 24: 8,760).
- `openbell`: what `openbell leaderboard` shows as the benchmark row of a replay of that window
  under the default convention. The series is sampled at the replay's slots (the starts of the
  bundled bars inside sessions; US hourly bars are labelled by their start, 10:00..15:00 New York),
  each priced by the replay's quote rule: the open of the bar starting at the slot (the price an
  order placed then fills at, before slippage). CD5 is the basket's weights normalised to sum to
  one, each coin's weight times its price over its price at the first slot. So the window runs
  from the first slot's open to the last slot's open: the last bar's own move is not in it.
- `AI-Trader file` (with `--ai-trader DIR`, the copy of AI-Trader's data that `SOURCE.md`
  describes): close-to-close, openbell's formulas, over the same window on AI-Trader's own files:
  QQQ's hourly Alpha Vantage series, its SSE-50 index file, and its published CD5 index values
  (daily, 50,000 USDT bought at the 2025-11-02 open; hourly).

Not a test: run it by hand, `.venv/bin/python benchmarks/ai_trader_table.py [--ai-trader DIR]
[--format markdown|json]`; `tests/unit/test_ai_trader_table.py` pins its rows.
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
from openbell.ops.evaluation.benchmark import benchmark_for, benchmark_navs, close_navs
from openbell.ops.evaluation.conventions import CONVENTIONS, annualisation_factor
from openbell.ops.evaluation.return_metrics import NavPoint, compute_panel, periods_per_year

CASH = Decimal(10_000)
NEW_YORK = ZoneInfo("America/New_York")
SHANGHAI = ZoneInfo("Asia/Shanghai")
_FAR = datetime(2200, 1, 1, tzinfo=UTC)
_EARLY = datetime(1900, 1, 1, tzinfo=UTC)

#: Where the paper's figures come from.
PAPER_SOURCE = "AI-Trader, arXiv 2512.10971, Table 1 (its Baseline column)"
AI_TRADER = CONVENTIONS["ai-trader"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PaperFigures:
    """A baseline's figures in the paper's Table 1, in percent where the paper gives percent."""

    cumulative_return_pct: float
    sortino_ratio: float
    volatility_pct: float
    max_drawdown_pct: float
    note: str = ""


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
    paper_window: str  # the window as the paper states it
    window_source: str  # how start_at and end_at relate to it
    paper: PaperFigures | None = None
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
        end_at=datetime(2025, 11, 7, tzinfo=NEW_YORK),
        files=("us-1h",),
        ai_trader_file="c8b24a0/data/daily_prices_QQQ.json",
        paper_window="hourly, 1 Oct - 7 Nov 2025",
        window_source="the paper's figures are those of the hourly closes from the first one of "
        "2025-10-01 to the last one of 2025-11-06: its stated end, 7 Nov, is where the series "
        "stops, not a session in it",
        paper=PaperFigures(
            cumulative_return_pct=1.87,
            sortino_ratio=1.51,
            volatility_pct=17.16,
            max_drawdown_pct=-3.94,
        ),
    ),
    Baseline(
        name="SSE-50 000016.SH (cn, daily)",
        market="cn",
        interval="1d",
        start_at=datetime(2025, 10, 1, tzinfo=SHANGHAI),
        end_at=datetime(2025, 11, 8, tzinfo=SHANGHAI),
        files=("cn-1d", "cn-index-1d"),
        ai_trader_file="c8b24a0/data/A_stock/index_daily_sse_50.json",
        paper_window="daily, 1 Oct - 7 Nov 2025",
        window_source="the paper's window; its first session is 2025-10-09 (the National Day "
        "holiday closes 1-8 Oct), valued from the 2025-09-30 close",
        paper=PaperFigures(
            cumulative_return_pct=1.65,
            sortino_ratio=2.19,
            volatility_pct=13.03,
            max_drawdown_pct=-2.01,
        ),
    ),
    Baseline(
        name="CD5 (crypto, daily)",
        market="crypto",
        interval="1d",
        start_at=datetime(2025, 11, 2, tzinfo=UTC),
        end_at=datetime(2025, 11, 16, tzinfo=UTC),
        files=("crypto-1d",),
        ai_trader_file="c8b24a0/data/crypto/CD5_crypto_index.json",
        paper_window="daily, 1-14 Nov 2025",
        window_source="AI-Trader's published CD5 index, whose last row gives the paper's figure: "
        "its 2025-11-01 row is the 50,000 base, bought at the 2025-11-02 00:00 UTC open; its "
        "2025-11-15 row is that day's close (14 daily bars, 2-15 Nov)",
        paper=PaperFigures(
            cumulative_return_pct=-14.30,
            sortino_ratio=-12.71,
            volatility_pct=54.93,
            max_drawdown_pct=-15.71,
        ),
    ),
    Baseline(
        name="CD5 (crypto, hourly)",
        market="crypto",
        interval="1h",
        start_at=datetime(2025, 10, 26, 18, tzinfo=UTC),
        end_at=datetime(2025, 11, 10, 7, tzinfo=UTC),
        files=("crypto-1h",),
        ai_trader_file="4f113dd/data/crypto/CD5_crypto_index.json",
        paper_window="not in the paper's Table 1 (its crypto run is daily)",
        window_source="4f113dd CD5 hourly index: 2025-10-26 18:00 .. 2025-11-10 06:00 UTC",
        file_per_bar=True,
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One baseline under one convention: its window as computed and its figures (None: none)."""

    baseline: str
    convention: str
    start: str
    end: str
    points: int | None
    periods_per_year: float | None
    cumulative_return: float | None
    annual_return: float | None
    annual_volatility: float | None
    sharpe_ratio: float | None
    sortino_ratio: float | None
    max_drawdown: float | None
    note: str = ""


def _window(baseline: Baseline) -> tuple[datetime, datetime]:
    return baseline.start_at.astimezone(UTC), baseline.end_at.astimezone(UTC)


def _row(
    baseline: Baseline,
    convention: str,
    navs: Sequence[NavPoint],
    factor: float,
    note: str = "",
    *,
    measured: str = "openbell",
) -> Row:
    panel = compute_panel(navs, periods_per_year=factor, convention=CONVENTIONS[measured])
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
        sortino_ratio=panel.sortino_ratio,
        max_drawdown=panel.max_drawdown,
        note=note,
    )


def paper_row(baseline: Baseline) -> Row | None:
    """The paper's figures for `baseline`, as a row (None: the baseline is not in its table)."""
    paper = baseline.paper
    if paper is None:
        return None
    return Row(
        baseline=baseline.name,
        convention="paper",
        start="",
        end="",
        points=None,
        periods_per_year=None,
        cumulative_return=paper.cumulative_return_pct / 100,
        annual_return=None,
        annual_volatility=paper.volatility_pct / 100,
        sharpe_ratio=None,
        sortino_ratio=paper.sortino_ratio,
        max_drawdown=paper.max_drawdown_pct / 100,
        note=paper.note,
    )


def ai_trader_factor(baseline: Baseline) -> float:
    """The periods a year AI-Trader's metric code annualises by (the `ai-trader` convention's):
    252 x 6.5 for any hourly series (its `--is-hourly`), else 365 for crypto and 252 for stocks."""
    return annualisation_factor(AI_TRADER, baseline.market, baseline.cadence, 0.0)


def ai_trader_row(baseline: Baseline, navs: Sequence[NavPoint]) -> Row:
    """`navs` measured under the `ai-trader` convention (see the module docstring)."""
    factor = ai_trader_factor(baseline)
    return _row(baseline, "AI-Trader formulas", navs, factor, measured=AI_TRADER.name)


def slots_of(baseline: Baseline, source: ReplaySource) -> list[datetime]:
    """The slots a replay of the baseline's window rings at."""
    start, end = _window(baseline)
    return replay_slots(source, baseline.market, baseline.interval, start, end)


def bundled_closes(
    baseline: Baseline, source: ReplaySource, *, published: bool = False
) -> list[NavPoint]:
    """The benchmark valued close to close over the window's slots, as the leaderboard's
    close-to-close conventions value it (`ops.evaluation.benchmark.close_navs`)."""
    return close_navs(
        baseline.market,
        slots_of(baseline, source),
        baseline.interval,
        CASH,
        sources=(source,),
        published=published,
    )


def openbell_row(baseline: Baseline, source: ReplaySource) -> tuple[Row, float]:
    """The benchmark row a replay of the window shows, and its annualisation factor. Raises
    `ValueError` when the benchmark's bundled bars end before the window's last slot (a replay
    would carry their last price forward, flat)."""
    spec = benchmark_for(baseline.market)
    covered = min(
        source.bars_between([symbol], baseline.interval, _EARLY, _FAR)[symbol][-1].start_at
        for symbol in spec.weights
    )
    slots = slots_of(baseline, source)
    if slots[-1] > covered:
        raise ValueError(
            f"{baseline.name}: the bundled {spec.name} bars end {covered:%Y-%m-%d %H:%M} UTC, "
            f"before the window's last slot {slots[-1]:%Y-%m-%d %H:%M} UTC"
        )
    factor = periods_per_year(
        baseline.market, baseline.cadence, observed_slots_per_session(baseline.market, slots)
    )
    navs = benchmark_navs(baseline.market, slots, CASH, sources=(source,))
    return _row(baseline, "openbell", navs, factor), factor


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


def file_row(baseline: Baseline, data: Path, factor: float) -> Row:
    """Close-to-close on AI-Trader's own file over the window."""
    start, end = _window(baseline)
    name = benchmark_for(baseline.market).name
    series = {name: _file_series(data / baseline.ai_trader_file, baseline)}
    navs = close_to_close({name: Decimal(1)}, series, start, end)
    note = baseline.ai_trader_file
    if baseline.file_per_bar:
        note += (
            ": each row is that hour's close / open of the basket times 50,000 (re-based every "
            "hour, not a level), chained here"
        )
    return _row(baseline, "AI-Trader file", navs, factor, note=note)


def rows(ai_trader: Path | None) -> list[Row]:
    """Every baseline's rows, in `BASELINES` order: paper, AI-Trader formulas, close-to-close,
    openbell, and AI-Trader file when its data copy is given."""
    out = []
    for baseline in BASELINES:
        source = ReplaySource.from_bundled(baseline.market, names=baseline.files)
        replayed, factor = openbell_row(baseline, source)
        closes = bundled_closes(baseline, source)
        paper = paper_row(baseline)
        if paper is not None:
            out.append(paper)
        out.append(ai_trader_row(baseline, bundled_closes(baseline, source, published=True)))
        out.append(_row(baseline, "close-to-close", closes, factor))
        out.append(replayed)
        if ai_trader is not None:
            out.append(file_row(baseline, ai_trader, factor))
    return out


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value * 100:.2f}"


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def markdown(found: Sequence[Row]) -> str:
    lines = [
        (
            "| baseline | convention | from | to | points | return % | ann. % | vol. % | Sharpe "
            "| Sortino | max DD % |"
        ),
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in found:
        points = "" if row.points is None else str(row.points)
        lines.append(
            f"| {row.baseline} | {row.convention} | {row.start[:16]} | {row.end[:16]} "
            f"| {points} | {_pct(row.cumulative_return)} | {_pct(row.annual_return)} "
            f"| {_pct(row.annual_volatility)} | {_ratio(row.sharpe_ratio)} "
            f"| {_ratio(row.sortino_ratio)} | {_pct(row.max_drawdown)} |"
        )
    notes = [f"- {row.baseline}, {row.convention}: {row.note}" for row in found if row.note]
    windows = [f"- {b.name}: {b.paper_window}; here {b.window_source}" for b in BASELINES]
    paper = f"The paper's figures: {PAPER_SOURCE}."
    return "\n".join([*lines, "", *notes, "", "Windows (the paper's; here):", *windows, "", paper])


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
