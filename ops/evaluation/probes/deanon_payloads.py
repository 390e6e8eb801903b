"""What the de-anonymisation probe shows: each payload, as its tool serves it to a masked agent.

This module owns the payloads of `ops.evaluation.probes.deanon` (`PAYLOADS`), each built at a
trial's decision time from the point-in-time gateway and masked by the trial's masker exactly as the
tool's result is for an agent: `bars` (`get_bars`: the `lookback` bars ended by then, within the
result budget), `quotes` (`get_quote`: the quote known then and, where the market has price limits,
the stock's board and its band on the previous daily close), `news` (`get_news` over
`news_lookback`; the masked levels replace it with a `masked` error) and `ktd`, KTD-Fin's own probe
payload: the results of `get_market_context`, `screen_candidates` (its defaults: the top 10 by
momentum over volatility) and `get_stock_snapshot` (`lookback` daily bars) of the `ktd-fin` decision
mode's tools (`agents.ktd.research`), for an account holding only cash, each masked as that tool's
result and shown together as one JSON object keyed by tool.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Final
from zoneinfo import ZoneInfo

from openbell.agents.ktd.contract import (
    GetMarketContextArgs,
    GetStockSnapshotArgs,
    ScreenCandidatesArgs,
)
from openbell.agents.ktd.research import KtdResearch
from openbell.agents.llm.hooks import Masker
from openbell.agents.tools import (
    MAX_RESULT_CHARS,
    BarsOut,
    NewsItemOut,
    NewsOut,
    QuoteOut,
    QuotesOut,
)
from openbell.markets.domain import AccountState, Instrument, Money, Quote
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.price_limits import limit_band
from openbell.markets.rules import board_of
from openbell.markets.universes import MARKET_CURRENCY

if TYPE_CHECKING:
    from openbell.ops.evaluation.probes.deanon import ProbeSetup, Trial

#: The payloads a probe may show, and the tool (or tools) whose result each is.
PAYLOADS: Final = {
    "bars": "get_bars",
    "quotes": "get_quote",
    "news": "get_news",
    "ktd": "get_market_context, screen_candidates and get_stock_snapshot",
}
#: The tools of the `ktd` payload, in the order shown.
KTD_PAYLOAD_TOOLS: Final = ("get_market_context", "screen_candidates", "get_stock_snapshot")


async def shown_payload(
    setup: ProbeSetup, gateway: PointInTimeGateway, trial: Trial, masker: Masker
) -> str:
    """`trial`'s payload as `masker`'s agent is shown it at `trial.as_of` (module docstring)."""
    if setup.payload == "ktd":
        return await _ktd(setup, gateway, trial, masker)
    return masker.mask_result(setup.tool, await _unmasked(setup, gateway, trial))


async def _unmasked(setup: ProbeSetup, gateway: PointInTimeGateway, trial: Trial) -> str:
    """The unmasked JSON of the one tool result `trial` is shown by."""
    view = gateway.at(trial.as_of)
    if setup.payload == "bars":
        found = await view.bars(trial.symbol, setup.interval, setup.lookback)
        bars = tuple(bar for bar in found.bars if bar.end_at <= trial.as_of)
        result = BarsOut.of(
            as_of=trial.as_of, symbol=trial.symbol, interval=setup.interval, bars=bars
        )
        return result.within(MAX_RESULT_CHARS).model_dump_json()
    if setup.payload == "quotes":
        quotes = (await view.quote([trial.symbol])).quotes
        shown = [await _quote_out(setup, gateway, trial, quote) for quote in quotes.values()]
        missing = [] if quotes else [trial.symbol]
        return QuotesOut(as_of=trial.as_of, quotes=shown, missing=missing).model_dump_json()
    news = await view.news([trial.symbol], setup.news_lookback)
    items = [
        NewsItemOut(
            symbol=item.symbol,
            published_at=item.published_at,
            title=item.title,
            source=item.source,
            url=item.url,
        )
        for item in sorted(news.items, key=lambda item: item.published_at, reverse=True)
    ]
    return NewsOut(as_of=trial.as_of, items=items).within(MAX_RESULT_CHARS).model_dump_json()


async def _quote_out(
    setup: ProbeSetup, gateway: PointInTimeGateway, trial: Trial, quote: Quote
) -> QuoteOut:
    """The quote as `get_quote` shows it: with the board, and the limit band on the previous
    daily close (the last one ended before the quote's session), where the market has limits."""
    if setup.rules.price_limits is None:
        return QuoteOut.of(quote)
    instrument = setup.universe.instrument(trial.symbol)
    previous = None
    if "1d" in setup.source.intervals:
        zone = ZoneInfo(setup.rules.timezone)
        daily = (await gateway.at(trial.as_of).bars(trial.symbol, "1d", 2)).bars
        earlier = [bar for bar in daily if bar.start_at.astimezone(zone).date() < trial.day]
        previous = earlier[-1].close if earlier else None
    if previous is None:
        return QuoteOut.of(quote, board=board_of(trial.symbol))
    return QuoteOut.of(quote, limit_band(instrument, setup.rules, previous))


async def _ktd(setup: ProbeSetup, gateway: PointInTimeGateway, trial: Trial, masker: Masker) -> str:
    """KTD-Fin's probe payload: three research tools' masked results in one JSON object."""
    if "1d" not in setup.source.intervals:
        raise ValueError(f"the ktd payload needs daily bars; {setup.source.name} has none")
    currency = MARKET_CURRENCY[setup.market]

    def instrument(symbol: str) -> Instrument | None:
        return setup.universe.instrument(symbol) if symbol in setup.universe else None

    research = KtdResearch(
        gateway=gateway.at(trial.as_of),
        rules=setup.rules,
        offered=setup.universe.symbols,
        instrument=instrument,
        state=lambda: AccountState(
            market=setup.market, cash=Money(amount=Decimal(1_000_000), currency=currency)
        ),
        sellable=lambda position: Decimal(0),
        benchmark=setup.universe.benchmark,
        now=trial.as_of,
    )
    results = (
        await research.get_market_context(GetMarketContextArgs()),
        await research.screen_candidates(ScreenCandidatesArgs()),
        await research.get_stock_snapshot(
            GetStockSnapshotArgs(stock_id=trial.symbol, lookback=setup.lookback)
        ),
    )
    shown = [
        f'"{tool}": {masker.mask_result(tool, result.model_dump_json())}'
        for tool, result in zip(KTD_PAYLOAD_TOOLS, results, strict=True)
    ]
    return "{" + ", ".join(shown) + "}"
