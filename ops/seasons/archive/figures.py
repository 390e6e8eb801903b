"""The leaderboard figures an archive can prove: each account's final NAV and return panel, from
NAV snapshot rows alone, measured as `ops.reports.market_reports` measures them (the same functions:
the cadence, the annualisation factor, the convention's series and `compute_panel`).

`archive_figures` recomputes them from rows (an archive's Parquet, no database);
`published_figures` takes them from the live leaderboards, in the same shape, for the archive to
carry. The benchmark's row and the figures measured against it (excess return, information
ratio, the composite and the ranks) are priced from market data the archive does not hold: they
are published beside, not recomputed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Final

from openbell.markets.slots import observed_slots_per_session
from openbell.ops.evaluation.convention_series import account_series
from openbell.ops.evaluation.conventions import Convention, annualisation_factor
from openbell.ops.evaluation.return_metrics import (
    NavPoint,
    compute_panel,
    infer_cadence,
    periods_per_year,
)
from openbell.ops.reports.exporting import decimal_text
from openbell.ops.reports.market_reports import Leaderboard

#: The panel's figures an archive recomputes (the keys of a row's `panel`).
PANEL_FIGURES: Final = (
    "periods",
    "cumulative_return",
    "annual_return",
    "annual_volatility",
    "sharpe_ratio",
    "sortino_ratio",
    "max_drawdown",
    "calmar_ratio",
)
_MARKETS: Final = ("us", "cn", "crypto")

Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class FigureMismatch:
    """A published figure the archive's rows do not give."""

    market: str
    agent: str | None
    figure: str
    published: Any
    recomputed: Any

    def __str__(self) -> str:
        where = self.market if self.agent is None else f"{self.market} {self.agent}"
        return (
            f"{where}: {self.figure} published {self.published!r}, recomputed {self.recomputed!r}"
        )


#: How far past the window a close-to-close series looks for its last slot's period end, as
#: `ops.reports.market_reports` looks.
_PERIOD_END_LOOKAHEAD: Final = timedelta(days=2)

Window = tuple[datetime | None, datetime | None]


def archive_figures(
    accounts: Sequence[Row],
    agents: Sequence[Row],
    snapshots: Sequence[Row],
    convention: Convention,
    windows: Mapping[str, Window] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each market's figures from `account`, `agent` and `nav_snapshot` rows, by market: its
    window, cadence, periods a year and, by agent name, each account's final NAV and panel,
    over the market's window in `windows` (`[start, end)`, either None: open; a season's board
    is ranked over its dates), else over every snapshot."""
    names = {int(agent["id"]): str(agent["name"]) for agent in agents}
    slots: dict[int, list[Row]] = defaultdict(list)
    closes: dict[int, list[Row]] = defaultdict(list)
    every: dict[int, list[Row]] = defaultdict(list)
    for row in snapshots:
        account_id = int(row["account_id"])
        every[account_id].append(row)
        (slots if row["kind"] == "slot" else closes)[account_id].append(row)
    for kept in (*slots.values(), *closes.values()):
        kept.sort(key=lambda row: row["at"])
    out: dict[str, dict[str, Any]] = {}
    for market in _MARKETS:
        found = [account for account in accounts if account["market"] == market]
        if not found:
            continue
        start, end = (windows or {}).get(market, (None, None))
        until = None if end is None else end + _PERIOD_END_LOOKAHEAD
        inside = {
            int(a["id"]): [r for r in slots[int(a["id"])] if _within(r["at"], start, end)]
            for a in found
        }
        points = {
            account_id: [_point(r) for r in rows if r["nav"] > 0]
            for account_id, rows in inside.items()
        }
        stamps = sorted({point.at for series in points.values() for point in series})
        cadence = infer_cadence(stamps)
        observed = _periods(market, cadence, stamps)
        factor = annualisation_factor(convention, market, cadence, observed)
        rows: dict[str, Any] = {}
        for account in found:
            account_id = int(account["id"])
            navs = points[account_id]
            base = _base(every[account_id], navs, Decimal(account["initial_cash"]))
            measured = account_series(
                convention,
                navs,
                [
                    _point(r)
                    for r in closes[account_id]
                    if r["nav"] > 0 and _within(r["at"], start, until)
                ],
                base,
            )
            panel = compute_panel(measured, periods_per_year=factor, convention=convention)
            last = inside[account_id][-1]["nav"] if inside[account_id] else None
            rows[names[int(account["agent_id"])]] = {
                "account_id": account_id,
                "final_nav": None if last is None else decimal_text(Decimal(last)),
                **{key: getattr(panel, key) for key in PANEL_FIGURES},
            }
        out[market] = {
            "start": None if start is None else start.isoformat(),
            "end": None if end is None else end.isoformat(),
            "convention": convention.name,
            "cadence": cadence,
            "periods_per_year": factor,
            "rows": rows,
        }
    return out


def _within(at: datetime, start: datetime | None, end: datetime | None) -> bool:
    return (start is None or at >= start) and (end is None or at < end)


def windows_of(published: Mapping[str, Any]) -> dict[str, Window]:
    """Each market's window as `figures.json` publishes it."""
    return {
        market: (_instant(board.get("start")), _instant(board.get("end")))
        for market, board in published.items()
    }


def _instant(text: Any) -> datetime | None:
    return None if text is None else datetime.fromisoformat(str(text))


def _periods(market: str, cadence: str, stamps: Sequence[datetime]) -> float:
    return periods_per_year(market, cadence, observed_slots_per_session(market, stamps))


def _point(row: Row) -> NavPoint:
    return NavPoint(at=row["at"], nav=Decimal(row["nav"]))


def _base(every: Sequence[Row], series: Sequence[NavPoint], initial_cash: Decimal) -> Decimal:
    """The account's value before its first measured slot, as `ops.reports.market_reports` takes it:
    its newest snapshot of any kind before it (a close at the same instant counts as before), else
    (or when not positive) its initial cash."""
    if not series:
        return initial_cash
    first = series[0].at
    earlier = [
        row for row in every if row["at"] < first or (row["at"] == first and row["kind"] == "close")
    ]
    if not earlier:
        return initial_cash
    newest = max(earlier, key=lambda row: (row["at"], row["kind"] == "slot"))
    nav = Decimal(newest["nav"])
    return initial_cash if nav <= 0 else nav


def published_figures(boards: Sequence[Leaderboard]) -> dict[str, dict[str, Any]]:
    """The same figures as `archive_figures`, from the live leaderboards (their benchmark rows,
    the composite and the ranks beside, published only)."""
    out: dict[str, dict[str, Any]] = {}
    for board in boards:
        rows: dict[str, Any] = {}
        beside: list[dict[str, Any]] = []
        for row in board.rows:
            ranking = row.ranking
            if row.agent is None:
                beside.append(
                    {
                        "name": ranking.name,
                        "final_nav": None if row.final_nav is None else decimal_text(row.final_nav),
                        **{key: getattr(row.panel, key) for key in PANEL_FIGURES},
                    }
                )
                continue
            rows[row.agent] = {
                "account_id": row.account_id,
                "final_nav": None if row.final_nav is None else decimal_text(row.final_nav),
                **{key: getattr(row.panel, key) for key in PANEL_FIGURES},
            }
        out[board.market] = {
            "start": None if board.start is None else board.start.isoformat(),
            "end": None if board.end is None else board.end.isoformat(),
            "convention": board.convention.name,
            "cadence": board.cadence,
            "periods_per_year": board.periods_per_year,
            "rows": rows,
            "published_only": {
                "benchmark": beside,
                "ranks": {row.ranking.name: row.ranking.rank for row in board.rows},
                "composite": {row.ranking.name: row.ranking.composite for row in board.rows},
            },
        }
    return out


def compare_figures(
    published: Mapping[str, Any], recomputed: Mapping[str, Any]
) -> FigureMismatch | None:
    """The first published figure that the recomputed ones do not give (markets, then agents,
    then figures in order); None when all agree (floats to 1e-12, relatively)."""
    for market in sorted(set(published) | set(recomputed)):
        theirs, ours = published.get(market), recomputed.get(market)
        if theirs is None or ours is None:
            return FigureMismatch(market, None, "market", theirs is not None, ours is not None)
        for key in ("start", "end", "convention", "cadence", "periods_per_year"):
            if not _same(theirs[key], ours[key]):
                return FigureMismatch(market, None, key, theirs[key], ours[key])
        for agent in sorted(set(theirs["rows"]) | set(ours["rows"])):
            mine, given = ours["rows"].get(agent), theirs["rows"].get(agent)
            if mine is None or given is None:
                return FigureMismatch(market, agent, "row", given is not None, mine is not None)
            for key in ("account_id", "final_nav", *PANEL_FIGURES):
                if not _same(given[key], mine[key]):
                    return FigureMismatch(market, agent, key, given[key], mine[key])
    return None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15) or (math.isnan(a) and math.isnan(b))
    return bool(a == b)
