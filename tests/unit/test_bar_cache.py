"""The in-memory bar cache and the write-through source: finality and news de-duplication."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from decimal import Decimal

from openbell.markets.cache import CachingSource, MemoryBarCache
from openbell.markets.domain import Bar, NewsItem, utc
from openbell.markets.replay_source import ReplaySource
from openbell_testkit.bars import flat_bar


def bar(hour: int, close: str) -> Bar:
    return flat_bar(
        "BTC/USDT", utc(2025, 7, 8, hour), timedelta(hours=1), Decimal(close), Decimal(1)
    )


def test_a_bar_is_final_only_after_its_end_and_then_never_replaced() -> None:
    cache = MemoryBarCache()
    window = (utc(2025, 7, 8), utc(2025, 7, 9))
    cache.put_bars(
        source="x", interval="1h", bars=[bar(1, "10")], fetched_at=utc(2025, 7, 8, 1, 30)
    )
    assert cache.get_bars(["BTC/USDT"], "1h", *window) == {}
    partial = cache.get_bars(["BTC/USDT"], "1h", *window, final_only=False)["BTC/USDT"]
    assert not partial[0].is_final
    cache.put_bars(source="x", interval="1h", bars=[bar(1, "11")], fetched_at=utc(2025, 7, 8, 2))
    cache.put_bars(source="x", interval="1h", bars=[bar(1, "12")], fetched_at=utc(2025, 7, 8, 1))
    final = cache.get_bars(["BTC/USDT"], "1h", *window)["BTC/USDT"]
    assert [(c.bar.close, c.is_final) for c in final] == [(Decimal(11), True)]


def test_the_caching_source_records_what_it_reads() -> None:
    news = NewsItem(symbol="BTC/USDT", published_at=utc(2025, 7, 8, 3), title="Bitcoin steady")
    inner = ReplaySource(market="crypto", bars={"1h": [bar(1, "10"), bar(2, "11")]}, news=[news])
    cache = MemoryBarCache()
    source = CachingSource(inner, cache, now=lambda: utc(2025, 7, 8, 2, 30))
    window = (utc(2025, 7, 8), utc(2025, 7, 9))
    asyncio.run(source.bars(["BTC/USDT"], "1h", *window))
    for _ in range(2):
        asyncio.run(source.news(None, *window, limit=5))
    kept = cache.get_bars(["BTC/USDT"], "1h", *window, final_only=False)["BTC/USDT"]
    assert [c.is_final for c in kept] == [True, False]  # 02:00-03:00 had not ended at 02:30
    assert cache.get_news(None, *window, limit=5) == (news,)
    assert source.name == inner.name
