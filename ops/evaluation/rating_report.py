"""The calibration of a rating agent's ratings against later returns, as a report record.

This module owns `calibration_record`, which `openbell report AGENT` adds to the panel of an
account of kind `rating`. Each rating of each stored report (`store.rating_reports`) is paired
with its symbol's return over the next period: from the report's slot to the account's next slot,
each priced as the benchmark is (`ops.evaluation.benchmark.carried_prices` over the report's
sources: at a slot, the open of a bar starting then, else the close of the last bar ended by then,
carried forward). The last report, and a symbol without a price at either end, has no next return
and is left out. The record gives:

- `rating_pairs`: how many (rating, next return) pairs were scored;
- `rating_<step>_count` and `rating_<step>_mean_return` for each of the five steps;
- `rating_buy_hit_rate`: the share of buy and strong-buy calls whose next return was positive;
  `rating_sell_hit_rate`: the share of sell and strong-sell calls whose next return was negative;
- `rating_rank_correlation`: Spearman's rank correlation between the rating's step (-2 .. 2) and
  the next return (ties get their average rank; None with fewer than two pairs or no spread).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from openbell.agents.kinds import RATING_KIND, RATINGS_TOOL
from openbell.agents.rating.report import Rating, stored_report
from openbell.markets.replay_source import ReplaySource
from openbell.ops.evaluation.benchmark import carried_prices, report_sources
from openbell.ops.evaluation.stats import spearman
from openbell.store.rating_reports import rating_reports, slot_times

__all__ = [
    "RATING_KIND",
    "Scored",
    "calibration",
    "calibration_record",
    "scored_ratings",
    "spearman",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Scored:
    """One rating with its symbol's next-period return."""

    symbol: str
    slot_at: datetime
    rating: Rating
    next_return: float


def scored_ratings(
    engine: Engine, account_id: int, market: str, source: ReplaySource | None = None
) -> list[Scored]:
    """Every stored rating of the account with its next-period return (module docstring)."""
    reports = rating_reports(engine, account_id, RATINGS_TOOL)
    slots = slot_times(engine, account_id)
    following = dict(itertools.pairwise(slots))
    pairs = [(report, following.get(report.slot_at)) for report in reports]
    stamps = sorted({at for report, then in pairs if then for at in (report.slot_at, then)})
    parsed = [(report.slot_at, then, stored_report(report.text)) for report, then in pairs]
    symbols = sorted({rating.symbol for _, _, found in parsed for rating, _ in found})
    sources = report_sources(engine, market, stamps, source, symbols)
    prices = {
        symbol: dict(zip(stamps, carried_prices(sources, symbol, stamps), strict=True))
        for symbol in (symbols if sources else ())
    }
    out: list[Scored] = []
    for slot_at, then, found in parsed:
        if then is None:
            continue
        for rating, _ in found:
            series = prices.get(rating.symbol, {})
            start, end = series.get(slot_at), series.get(then)
            if start is None or end is None or start <= 0:
                continue
            out.append(
                Scored(
                    symbol=rating.symbol,
                    slot_at=slot_at,
                    rating=rating.rating,
                    next_return=float(end / start - 1),
                )
            )
    return out


def calibration(scored: Sequence[Scored]) -> dict[str, Any]:
    """The calibration figures of `scored` (module docstring)."""
    record: dict[str, Any] = {"rating_pairs": len(scored)}
    for rating in Rating:
        returns = [one.next_return for one in scored if one.rating is rating]
        record[f"rating_{rating.value}_count"] = len(returns)
        record[f"rating_{rating.value}_mean_return"] = _round(_mean(returns))
    buys = [one.next_return > 0 for one in scored if one.rating.step > 0]
    sells = [one.next_return < 0 for one in scored if one.rating.step < 0]
    record["rating_buy_hit_rate"] = _round(_mean([float(hit) for hit in buys]))
    record["rating_sell_hit_rate"] = _round(_mean([float(hit) for hit in sells]))
    record["rating_rank_correlation"] = _round(
        spearman([float(one.rating.step) for one in scored], [one.next_return for one in scored])
    )
    return record


def calibration_record(
    engine: Engine, account_id: int, market: str, source: ReplaySource | None = None
) -> dict[str, Any]:
    """The calibration of the account's ratings, as `report` shows it."""
    return calibration(scored_ratings(engine, account_id, market, source))


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
