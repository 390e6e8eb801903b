"""Tool results within a size budget, always valid JSON: a long lookback of real bundled bars keeps
the newest bars and says how many older ones were left out (through the toolbox, through the LLM
loop, and masked); news and fundamentals are capped the same way, newest kept; and any other
result too large for a message reaches the model as a structured notice, never cut mid-JSON."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from datetime import date, timedelta
from decimal import Decimal

import pytest

from openbell.agents.baselines import SMA_SLOW
from openbell.agents.llm.run import Budgets
from openbell.agents.masking import AliasMasker, build_masker, masker_for
from openbell.agents.tools import MAX_RESULT_CHARS, BarsOut, FundamentalsOut, NewsOut
from openbell.markets.domain import NewsItem, utc
from openbell.markets.fundamentals import FundamentalsReport, RecordedFundamentals
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.replay_source import ReplaySource
from openbell.store.ledger import Ledger
from openbell_testkit.agents import US_OPEN, make_arena
from openbell_testkit.llm import tool_turn
from openbell_testkit.modes import run_llm

D = Decimal
#: A crypto slot long after the bundled BTC daily bars begin (2010): 1,000 bars end before it.
SLOT = utc(2024, 12, 1)
NEWEST = utc(2024, 11, 30)
LOOKBACK = 1000


pytestmark = pytest.mark.sqlite_only


def btc_bars_served(ledger: Ledger, lookback: int) -> tuple[BarsOut, str]:
    """`get_bars` of BTC/USDT daily at `SLOT` as a model gets it, and its JSON."""
    arena = make_arena(ledger, "crypto")

    async def scenario() -> object:
        tools = await arena.toolbox(SLOT)
        return await tools.serve(
            "get_bars", {"symbol": "BTC/USDT", "interval": "1d", "lookback": lookback}
        )

    found = asyncio.run(scenario())
    assert isinstance(found, BarsOut), found
    return found, found.model_dump_json()


def test_a_long_lookback_keeps_the_newest_bars_in_valid_json(ledger: Ledger) -> None:
    found, text = btc_bars_served(ledger, LOOKBACK)
    assert len(text) <= MAX_RESULT_CHARS
    shown = json.loads(text)
    bars = shown["bars"]
    assert bars[-1]["start_at"] == "2024-11-30T00:00:00Z"
    assert found.bars[-1].start_at == NEWEST
    # the bars kept are the newest of the 1,000 asked for, consecutive, and the rest are counted
    source = make_arena(ledger, "crypto", agent="source").source
    every = source.bars_between(["BTC/USDT"], "1d", utc(2010, 1, 1), SLOT)["BTC/USDT"]
    ended = [bar for bar in every if bar.end_at <= SLOT][-LOOKBACK:]
    assert len(ended) == LOOKBACK
    assert 0 < len(bars) < LOOKBACK
    assert list(found.bars) == ended[-len(bars) :]
    assert shown["omitted"] == LOOKBACK - len(bars)


def test_a_200_bar_lookback_is_served_whole(ledger: Ledger) -> None:
    found, text = btc_bars_served(ledger, SMA_SLOW)  # as many as the SMA(50,200) baseline asks
    assert (len(found.bars), found.omitted) == (SMA_SLOW, 0)
    assert json.loads(text)["omitted"] == 0


def test_python_agents_get_every_bar_asked_for(ledger: Ledger) -> None:
    arena = make_arena(ledger, "crypto")

    async def scenario() -> object:
        tools = await arena.toolbox(SLOT)
        return await tools.get_bars("BTC/USDT", "1d", LOOKBACK)

    found = asyncio.run(scenario())
    assert isinstance(found, BarsOut), found
    assert (len(found.bars), found.omitted, found.bars[-1].start_at) == (LOOKBACK, 0, NEWEST)


def bars_script(symbol: str = "BTC/USDT") -> list[object]:
    return [tool_turn(("get_bars", {"symbol": symbol, "interval": "1d", "lookback": LOOKBACK}))]


def test_a_long_lookback_reaches_the_model_as_valid_json(ledger: Ledger) -> None:
    ran = run_llm(make_arena(ledger, "crypto"), bars_script(), SLOT)
    shown = ran.model.tool_results(1)[0]  # json.loads of what the model was sent
    assert shown["bars"][-1]["start_at"] == "2024-11-30T00:00:00Z"
    assert shown["omitted"] == LOOKBACK - len(shown["bars"]) > 0


def test_a_long_lookback_reaches_a_blinded_model_as_valid_json(ledger: Ledger) -> None:
    arena = make_arena(ledger, "crypto")
    masker = build_masker(
        "blinded", universe=arena.universe, rules=arena.rules, account_id=arena.account_id, seed=3
    )
    assert isinstance(masker, AliasMasker)
    alias = masker.aliases.aliases["BTC/USDT"]
    ran = run_llm(arena, bars_script(alias), SLOT, masker=masker_for("blinded", seed=3))
    text = ran.messages(1)[-1]["content"]
    assert "BTC" not in text
    assert re.search(r"\d{4}-\d{2}-\d{2}", text) is None  # no calendar date
    shown = json.loads(text)
    assert shown["bars"][-1]["start_at"] == masker.aliases.datetime_label(NEWEST)
    assert shown["bars"][-1]["symbol"] == alias
    assert shown["omitted"] == LOOKBACK - len(shown["bars"]) > 0


def test_news_keep_the_newest_items_within_the_budget(ledger: Ledger) -> None:
    long_title = "Apple " + "x" * 1990  # 50 such items are about twice the budget
    news = [
        NewsItem(
            symbol="AAPL",
            published_at=US_OPEN - timedelta(minutes=10 * i),
            title=f"{i} {long_title}",
            source="test",
        )
        for i in range(60)
    ]
    source = ReplaySource.from_bundled("us", names=["us-1d"], news=news)
    arena = make_arena(ledger, "us")
    arena = dataclasses.replace(arena, source=source, gateway=PointInTimeGateway(source))

    async def scenario() -> object:
        tools = await arena.toolbox(US_OPEN)
        return await tools.serve("get_news", {"symbol": "AAPL", "lookback_hours": 24, "limit": 50})

    found = asyncio.run(scenario())
    assert isinstance(found, NewsOut), found
    text = found.model_dump_json()
    assert len(text) <= MAX_RESULT_CHARS
    shown = json.loads(text)
    titles = [item["title"].split(" ", 1)[0] for item in shown["items"]]
    assert titles == [str(i) for i in range(len(titles))]  # the newest, newest first
    assert 0 < len(titles) < 50
    assert shown["omitted"] == 50 - len(titles)


def test_fundamentals_keep_the_newest_reports_within_the_budget(ledger: Ledger) -> None:
    figures = {f"figure_{n:04d}": D("123456789.123456") for n in range(600)}
    reports = [
        FundamentalsReport(
            symbol="AAPL",
            period_end=date(2025, 9, 27) - timedelta(days=91 * i),
            published_at=US_OPEN - timedelta(days=40 + 91 * i),
            currency="USD",
            values=figures,
        )
        for i in range(4)
    ]
    arena = make_arena(ledger, "us")

    async def scenario() -> object:
        fundamentals = RecordedFundamentals.of(reports, point_in_time=True)
        tools = await arena.toolbox(US_OPEN, fundamentals=fundamentals)
        return await tools.serve("get_fundamentals", {"symbol": "AAPL"})

    found = asyncio.run(scenario())
    assert isinstance(found, FundamentalsOut), found
    text = found.model_dump_json()
    assert len(text) <= MAX_RESULT_CHARS
    shown = json.loads(text)
    assert 0 < len(shown["reports"]) < 4
    assert shown["reports"][0]["period_end"] == "2025-09-27"
    assert shown["omitted"] == 4 - len(shown["reports"])


def test_any_other_oversized_result_is_a_structured_notice(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    symbols = list(arena.universe.symbols)
    script = [tool_turn(("get_quote", {"symbols": symbols}))]
    ran = run_llm(arena, script, US_OPEN, budgets=Budgets(max_message_chars=2000))
    shown = ran.model.tool_results(1)[0]  # valid JSON, not a cut
    assert shown["code"] == "result_too_large"
    assert "get_quote" in shown["message"]
    assert "2000" in shown["message"]
    stored = next(t for t in ran.traces if t.role == "tool" and t.tool == "get_quote")
    assert stored.result is not None
    assert len(json.loads(stored.result)["quotes"]) == len(symbols)  # the trace keeps it whole
