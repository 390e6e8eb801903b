"""Masking: the alias map is stable within an account and differs across accounts, arguments
round-trip (unmask(mask(x)) == x), every date form is relabelled, real tickers written by a model
are not served, and news and fundamentals are refused under any blinding."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openbell.agents.aliases import AliasMap, derive_key
from openbell.agents.llm.hooks import IdentityMasker
from openbell.agents.masking import (
    UNRESOLVED,
    AliasMasker,
    MaskingLevel,
    build_masker,
)
from openbell.agents.tools import PortfolioOut, PositionOut
from openbell.markets.domain import utc
from openbell.markets.rules import rules_for
from openbell.markets.universes import Universe, load_universe

US = load_universe("nasdaq100")
CN = load_universe("sse50")
AT = utc(2025, 10, 1, 13, 30)


def masker(
    level: MaskingLevel = MaskingLevel.BLINDED,
    universe: Universe = US,
    account_id: int = 1,
    seed: str = "s",
    rebase: bool | None = None,
) -> AliasMasker:
    built = build_masker(
        level,
        universe=universe,
        rules=rules_for(universe.market),
        account_id=account_id,
        seed=seed,
        rebase=rebase,
    )
    assert isinstance(built, AliasMasker)
    return built


def test_bright_is_the_identity() -> None:
    found = build_masker("bright", universe=US, rules=rules_for("us"), account_id=1)
    assert isinstance(found, IdentityMasker)


def test_the_map_is_stable_within_an_account_and_shuffled_across_accounts() -> None:
    first, again = masker(account_id=1).aliases, masker(account_id=1).aliases
    other, reseeded = masker(account_id=2).aliases, masker(account_id=1, seed="t").aliases
    assert first == again
    assert first.aliases != other.aliases
    assert first.aliases != reseeded.aliases
    assert first.epoch != other.epoch or first.aliases != other.aliases
    aliases = list(first.aliases.values())
    assert len(set(aliases)) == len(aliases) == len(US.symbols) + 1  # and the benchmark QQQ
    assert all(re.fullmatch(r"asset_\d{4}", alias) for alias in aliases)


def test_tickers_codes_and_names_become_the_same_alias() -> None:
    cn = masker(universe=CN)
    alias = cn.aliases.aliases["600519.SH"]
    text = "600519.SH (600519, 贵州茅台) at 1520.5; cash 600519.50"
    assert cn.mask_text(text) == f"{alias} ({alias}, {alias}) at 1520.5; cash 600519.50"
    us = masker()
    assert us.mask_text("AAPL and Apple; GOOGL is Alphabet; AAPLX, xAAPL stay") == (
        f"{us.aliases.aliases['AAPL']} and {us.aliases.aliases['AAPL']}; "
        f"{us.aliases.aliases['GOOGL']} is {us.aliases.aliases['GOOG']}; AAPLX, xAAPL stay"
    )


@pytest.mark.parametrize(
    "text",
    [
        "2025-10-01T13:30:00+00:00",
        "2025-10-01T13:30:00Z",
        "2025-10-01 13:30",
        "2025-10-01T09:30:00-04:00",
        "2025-10-01T13:30:00.250000Z",
        "2025-10-01",
        "2025/10/01",
        "20251001",
        "October 1, 2025",
        "Oct 1st 2025",
        "1 October 2025",
    ],
)
def test_every_date_form_is_relabelled(text: str) -> None:
    found = masker(MaskingLevel.DATE_BLIND).mask_text(f"at {text}.")
    assert re.fullmatch(r"at day_[+-]\d+(T\d\d:\d\d(:\d\d(\.\d+)?)?)?\.", found), found


def test_times_are_market_local_and_days_count_from_the_epoch() -> None:
    m = masker(MaskingLevel.DATE_BLIND)
    summer = m.mask_text("2025-10-01T13:30:00Z")  # 09:30 in New York (EDT)
    winter = m.mask_text("2025-12-01T14:30:00Z")  # 09:30 in New York (EST)
    assert summer.endswith("T09:30")
    assert winter.endswith("T09:30")
    day = int(summer.removeprefix("day_").split("T")[0])
    assert int(winter.removeprefix("day_").split("T")[0]) == day + 61
    assert m.mask_text("2025-10-02") == f"day_{day + 1:+d}"


def test_numbers_that_are_not_dates_are_left_alone() -> None:
    m = masker(MaskingLevel.DATE_BLIND)
    for text in ("20251301", "12345678", "2025-13-45", "price 20250101.5", "qty 202510011"):
        assert m.mask_text(text) == text


@pytest.mark.parametrize("level", list(MaskingLevel)[1:])
def test_arguments_round_trip(level: MaskingLevel) -> None:
    m = masker(level)
    real: dict[str, object] = {
        "symbol": "AAPL",
        "symbols": ["MSFT", "QQQ"],
        "reason": "buy AAPL before 2025-10-02",
        "at": "2025-10-01T13:30:00+00:00",
        "day": "2025-10-01",
        "shares": 3,
    }
    masked = json.loads(m.mask_text(json.dumps(real)))
    assert m.unmask_arguments("place_order", masked) == real


@given(
    account_id=st.integers(1, 10_000),
    symbol=st.sampled_from(US.symbols),
    # hypothesis takes naive bounds and attaches the zone itself
    at=st.datetimes(
        datetime(2000, 1, 1),  # noqa: DTZ001
        datetime(2040, 1, 1),  # noqa: DTZ001
        timezones=st.just(UTC),
    ),
)
def test_round_trip_properties(account_id: int, symbol: str, at: datetime) -> None:
    m = masker(account_id=account_id)
    stamp = at.isoformat()
    args: dict[str, object] = {"symbol": symbol, "at": stamp}
    masked = {key: m.mask_text(str(value)) for key, value in args.items()}
    assert symbol not in masked["symbol"]
    assert stamp[:10] not in masked["at"]
    assert m.unmask_arguments("get_bars", masked) == args


def test_a_real_ticker_written_under_stock_blindness_is_not_served() -> None:
    m = masker(MaskingLevel.STOCK_BLIND)
    assert m.unmask_arguments("get_bars", {"symbol": "AAPL"}) == {"symbol": UNRESOLVED}
    # A never-member (IBM) is answered as a member's real ticker is: nothing tells them apart.
    assert m.unmask_arguments("get_quote", {"symbols": ["Apple", "IBM"]}) == {
        "symbols": [UNRESOLVED, UNRESOLVED]
    }
    assert m.unmask_arguments("get_bars", {"symbol": "asset_0000"}) == {"symbol": UNRESOLVED}
    alias = m.mask_text("AAPL")
    assert m.unmask_arguments("get_bars", {"symbol": alias}) == {"symbol": "AAPL"}
    # Free text (an order's reason) is rewritten, not refused.
    reason = m.unmask_arguments("place_order", {"symbol": alias, "reason": f"buy {alias}"})
    assert reason == {"symbol": "AAPL", "reason": "buy AAPL"}
    dates = masker(MaskingLevel.DATE_BLIND)
    assert dates.unmask_arguments("get_bars", {"symbol": "AAPL"}) == {"symbol": "AAPL"}


def test_ktd_fin_stock_ids_take_aliases_only_under_stock_blindness() -> None:
    m = masker(MaskingLevel.STOCK_BLIND)
    alias = m.mask_text("AAPL")
    assert m.unmask_arguments("get_stock_snapshot", {"stock_id": "AAPL"}) == {
        "stock_id": UNRESOLVED
    }
    assert m.unmask_arguments("compare_candidates", {"stock_ids": [alias, "IBM"]}) == {
        "stock_ids": ["AAPL", UNRESOLVED]
    }
    orders = {"orders": [{"stock_id": alias, "side": "BUY", "reason": f"buy {alias}"}]}
    assert m.unmask_arguments("risk_check", orders) == {
        "orders": [{"stock_id": "AAPL", "side": "BUY", "reason": "buy AAPL"}]
    }


@pytest.mark.parametrize("level", list(MaskingLevel)[1:])
@pytest.mark.parametrize("tool", ["get_news", "get_fundamentals"])
def test_news_and_fundamentals_are_refused_under_any_blinding(
    level: MaskingLevel, tool: str
) -> None:
    m = masker(level)
    assert m.unmask_arguments(tool, {"symbol": "asset_0001"}) == {"masked_by_level": level.value}
    refused = json.loads(m.mask_result(tool, '{"items": [{"title": "Apple soars"}]}'))
    assert refused["code"] == "masked"
    assert refused["as_of"] is None
    assert "Apple" not in json.dumps(refused)


def test_results_are_masked_with_escapes_decoded() -> None:
    cn = masker(universe=CN, rebase=False)
    raw = {"name": "贵州茅台", "quote": 'say \\u0041 "x"', "at": "2025-10-10T01:30:00Z"}
    text = json.dumps(raw)
    found = cn.mask_result("get_quote", text)
    assert "\\u" not in found.replace("\\\\u0041", "")
    parsed = json.loads(found)
    assert parsed["name"] == cn.aliases.aliases["600519.SH"]
    assert parsed["quote"] == 'say \\u0041 "x"'
    assert parsed["at"].startswith("day_")
    assert parsed["at"].endswith("T09:30")


def test_the_epoch_defaults_to_the_universe_date_moved_back() -> None:
    found = derive_key(US, account_id=3, seed=0)
    assert 100 <= (US.as_of - found.epoch).days < 1000
    mapped = AliasMap.of(found, US, timezone="America/New_York")
    assert mapped.epoch == found.epoch
    assert mapped.spellings["Apple"] == mapped.aliases["AAPL"] == found.aliases["AAPL"]


def test_listings_follow_the_accounts_alias_order_not_the_files() -> None:
    firsts = set()
    for account_id in range(1, 9):
        m = masker(account_id=account_id)
        listed = m.listing(US.symbols)
        aliases = [m.aliases.aliases[symbol] for symbol in listed]
        assert aliases == sorted(aliases)
        assert sorted(listed) == sorted(US.symbols)
        firsts.add(listed[0])
    assert len(firsts) > 4  # the stock listed first is not always the file's first (AAPL)


def test_a_key_extended_by_a_new_member_keeps_every_alias_and_the_epoch() -> None:
    smaller = replace(US, instruments=US.instruments[1:])
    first = derive_key(smaller, account_id=1, seed="s")
    grown = derive_key(US, account_id=1, seed="s", stored=first)
    assert {symbol: grown.aliases[symbol] for symbol in first.aliases} == dict(first.aliases)
    assert (grown.epoch, grown.money_unit) == (first.epoch, first.money_unit)
    added = US.instruments[0].symbol
    assert added not in first.aliases
    assert grown.aliases[added] not in first.aliases.values()
    # a universe file dated later moves no day label of a stored key
    later = replace(US, as_of=US.as_of + timedelta(days=30))
    assert derive_key(later, account_id=1, seed="s", stored=grown) == grown


def test_a_stored_key_wins_over_the_seed() -> None:
    stored = derive_key(US, account_id=1, seed="s")
    reseeded = build_masker(
        MaskingLevel.BLINDED,
        universe=US,
        rules=rules_for("us"),
        account_id=1,
        seed="t",
        key=stored,
    )
    assert isinstance(reseeded, AliasMasker)
    assert dict(reseeded.aliases.aliases) == dict(stored.aliases)
    assert reseeded.aliases.epoch == stored.epoch
    assert masker(seed="t").aliases.aliases != stored.aliases


def test_rebasing_is_on_by_default_only_when_blinded() -> None:
    assert masker(MaskingLevel.BLINDED).unit is not None
    assert masker(MaskingLevel.STOCK_BLIND).unit is None
    assert masker(MaskingLevel.DATE_BLIND).unit is None
    assert masker(MaskingLevel.STOCK_BLIND, rebase=True).unit is not None
    assert masker(MaskingLevel.BLINDED, rebase=False).unit is None
    with pytest.raises(ValueError, match="bright"):
        build_masker("bright", universe=US, rules=rules_for("us"), account_id=1, rebase=True)


def test_a_blinded_portfolio_is_rebased_and_listed_by_alias() -> None:
    m = masker()
    assert m.unit is not None
    held = [
        PositionOut(
            symbol=s,
            quantity=Decimal(3),
            mark=Decimal(p),
            value=3 * Decimal(p),
            weight=Decimal("0.1"),
        )
        for s, p in (("AAPL", "254.63"), ("MSFT", "517.95"), ("ZS", "301.10"))
    ]
    real = PortfolioOut(
        as_of=AT,
        currency="USD",
        cash=Decimal("7000.76"),
        positions=held,
        positions_value=sum((p.value for p in held), Decimal(0)),
        nav=Decimal(10000),
    )
    found = json.loads(m.mask_result("get_portfolio", real.model_dump_json()))
    assert Decimal(found["cash"]) == m.unit.show(real.cash)
    shown = [p["symbol"] for p in found["positions"]]
    assert shown == sorted(m.aliases.aliases[s] for s in ("AAPL", "MSFT", "ZS"))
    assert {Decimal(p["mark"]) for p in found["positions"]} == {m.unit.show(p.mark) for p in held}
    text = json.dumps(found)
    for real_amount in ("254.63", "517.95", "301.10", "7000.76", "10000"):
        assert real_amount not in text


def test_a_rebased_tool_result_that_cannot_be_read_is_withheld() -> None:
    found = json.loads(masker().mask_result("get_quote", '{"quotes": "AAPL at 254.63"}'))
    assert found["code"] == "masked"
    assert "254.63" not in json.dumps(found)
