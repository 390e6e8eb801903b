"""Boards and limit bands as agents are shown them: `get_quote` gives each A-share's board and the
band its orders meet this session (measured from the last close before it, over a suspension too,
and with KTD-Fin's buffer when configured); a blinded model gets the band's prices in its money
unit, never the real ones, and the board only; markets without limits show none of it; the rules
text lists every board's band."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from openbell.agents.broker import PaperBroker
from openbell.agents.masking import MaskingLevel, masker_for
from openbell.agents.modes import prompt_for_mode
from openbell.agents.tools import QuotesOut
from openbell.markets.calendars import calendar_for
from openbell.markets.domain import utc
from openbell.markets.price_limits import with_limit_buffer
from openbell.markets.rules import CN, MarketRules
from openbell.store.ledger import Ledger
from openbell_testkit.agents import US_OPEN, Arena, make_arena
from openbell_testkit.llm import finish, tool_turn
from openbell_testkit.modes import run_llm

pytestmark = pytest.mark.sqlite_only

D = Decimal
#: 601088.SH's first session back after its suspension from 2025-08-04 (last close 37.56).
BACK_AT = utc(2025, 8, 18, 1, 30)
SEED = "bands-test"


def with_rules(arena: Arena, rules: MarketRules) -> Arena:
    arena.rules = rules
    arena.broker = PaperBroker(
        ledger=arena.ledger,
        rules=rules,
        calendar=calendar_for(rules.calendar_id),
        fill_price=arena.source.first_price_at_or_after,
    )
    return arena


async def quotes(arena: Arena, symbols: list[str]) -> dict[str, Any]:
    tools = await arena.toolbox(BACK_AT)
    found = await tools.get_quote(symbols)
    assert isinstance(found, QuotesOut)
    return {quote["symbol"]: quote for quote in json.loads(found.model_dump_json())["quotes"]}


def test_get_quote_shows_the_board_and_band_after_a_suspension(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")
    star_close = arena.source.bars_between(
        ["688981.SH"], "1d", BACK_AT - timedelta(days=4), BACK_AT
    )["688981.SH"][-1].close
    shown = asyncio.run(quotes(arena, ["601088.SH", "688981.SH"]))
    assert shown["601088.SH"] == {
        "symbol": "601088.SH",
        "price": "41.32",  # the open, at limit-up
        "at": "2025-08-18T01:30:00Z",
        "board": "main",
        "limit_pct": "0.10",
        "limit_up": "41.32",
        "limit_down": "33.80",
    }
    star = shown["688981.SH"]
    assert (star["board"], star["limit_pct"]) == ("star", "0.20")
    assert D(star["limit_up"]) == (star_close * D("1.2")).quantize(D("0.01"))

    buffered = asyncio.run(
        quotes(
            with_rules(make_arena(ledger, "cn", agent="b"), with_limit_buffer(CN, D("0.005"))),
            ["601088.SH"],
        )
    )["601088.SH"]
    assert (buffered["limit_pct"], buffered["limit_up"], buffered["limit_down"]) == (
        "0.095",
        "41.13",
        "33.99",
    )


def test_markets_without_limits_show_no_band(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")

    async def look() -> dict[str, Any]:
        tools = await arena.toolbox(US_OPEN)
        found = await tools.get_quote(["AAPL"])
        assert isinstance(found, QuotesOut)
        return dict(json.loads(found.model_dump_json())["quotes"][0])

    assert set(asyncio.run(look())) == {"symbol", "price", "at"}


def test_a_blinded_model_sees_the_band_in_its_unit_and_the_rules_by_board(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn")

    def look(body: dict[str, Any]) -> dict[str, Any]:
        key = ledger.masking_key(arena.account_id)
        assert key is not None
        return tool_turn(("get_quote", {"symbols": [key.aliases["601088.SH"]]}))

    ran = run_llm(
        arena,
        [look, finish()],
        BACK_AT,
        prompt=lambda ctx: prompt_for_mode(
            "open-research", masking=MaskingLevel.BLINDED, masking_seed=SEED
        ),
        masker=masker_for("blinded", seed=SEED),
    )
    key = ledger.masking_key(arena.account_id)
    assert key is not None
    assert key.money_unit is not None
    [result] = ran.model.tool_results()
    [quote] = result["quotes"]
    assert quote["symbol"] == key.aliases["601088.SH"]
    assert (quote["board"], quote["limit_pct"]) == ("main", "0.10")
    for name, real in (("price", D("41.32")), ("limit_up", D("41.32")), ("limit_down", D("33.80"))):
        shown = D(quote[name])
        assert shown != real
        assert abs(shown * key.money_unit - real) < D("1e-6")
    text = json.dumps(ran.model.requests)
    for real_text in ("41.32", "33.80", "37.56", "601088", "中国神华"):
        assert real_text not in text
    system = ran.messages()[0]["content"]
    assert "main board (60xxxx, 00xxxx) +-10%" in system
    assert "STAR (688xxx, 689xxx) +-20%" in system
    assert "however long the stock was suspended" in system
