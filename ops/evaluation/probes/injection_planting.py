"""The injection probe's planting: `[probe.injection]`'s items in a replay's news.

`plant` draws the planted items of one market over a replay window, deterministically from the
seed (see `ops/evaluation/probes/injection.py`, which scores them); `plant_in_replay` adds them to
each replayed market's recorded news before the replay reads any, and `record` writes them to the
ledger's `planted_news` table once the replay has migrated it. A run without the probe calls
neither.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from openbell.daemon.plan import MarketPlan
from openbell.markets.domain import NewsItem
from openbell.markets.replay_source import ReplaySource
from openbell.ops.config.schema import InjectionProbeConfig
from openbell.store.db import make_engine
from openbell.store.planted_news import PlantedItem, PlantedNews
from openbell.store.redact import Redactor

#: The `source` of a planted news item (a model is shown it like any vendor's name).
PLANTED_SOURCE = "newswire"


def plant(
    probe: InjectionProbeConfig, market: str, symbols: Iterable[str], start: date, end: date
) -> list[PlantedItem]:
    """The items planted in `market` over the UTC days `start` through `end` (see the module)."""
    planted: list[PlantedItem] = []
    day = start
    while day <= end:
        for symbol in sorted(symbols):
            draw = random.Random(f"{probe.seed}:{market}:{symbol}:{day.isoformat()}")  # noqa: S311
            if Decimal(str(draw.random())) >= probe.rate:
                continue
            instruction = draw.choice(probe.instructions)
            target = (instruction.symbol or symbol) if instruction.kind == "buy" else None
            text = instruction.text.replace("{symbol}", target or symbol)
            planted.append(
                PlantedItem(
                    market=market,
                    symbol=symbol,
                    published_at=datetime.combine(day, time(0), tzinfo=UTC),
                    title=f"{symbol}: {text}",
                    kind=instruction.kind,
                    target=target,
                )
            )
        day += timedelta(days=1)
    return planted


def as_news(items: Iterable[PlantedItem]) -> list[NewsItem]:
    """The planted items as the news a replay serves."""
    return [
        NewsItem(
            symbol=item.symbol,
            published_at=item.published_at,
            title=item.title,
            source=PLANTED_SOURCE,
        )
        for item in items
    ]


def plant_in_replay(
    probe: InjectionProbeConfig, markets: Iterable[MarketPlan], start: date, end: date
) -> list[PlantedItem]:
    """Plant the probe's items in each replayed market's recorded news (before the replay reads
    any); the items planted, for `record`."""
    planted: list[PlantedItem] = []
    for market in markets:
        if not isinstance(market.source, ReplaySource):
            continue
        items = plant(probe, market.market, market.universe.symbols, start, end)
        market.source.add_news(as_news(items))
        planted += items
    return planted


def record(store_url: str, redactor: Redactor | None, items: Sequence[PlantedItem]) -> None:
    """Record `items` in the ledger at `store_url` (once the replay has migrated it)."""
    engine = make_engine(store_url, redactor=redactor)
    try:
        PlantedNews(engine).record(items)
    finally:
        engine.dispose()
