"""Shorting as data: `ShortRules` defaults per market, `[markets.<m>.shorting]` overrides and the
per-agent `allow_short` opt-in (never for A-shares)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from openbell.markets.domain import Fill, Position, Side, utc
from openbell.markets.errors import InvalidConfig
from openbell.markets.rules import CN, CRYPTO, US, ShortRules, rules_for, with_shorting
from openbell.ops.config.schema import load_config
from openbell.ops.wiring.planning import rules_for_market

US_MARKET = """\
[markets.us]
universe = "nasdaq100"
cadence = "daily"
source = "yfinance"
initial_cash = "10000"
"""

CN_MARKET = """
[markets.cn]
universe = ["600519"]
cadence = "daily"
source = "akshare"
initial_cash = "100000"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "openbell.toml"
    path.write_text(text)
    return path


def agent(name: str, markets: str, extra: str = "") -> str:
    return f'\n[[agents]]\nname = "{name}"\nkind = "cash"\nmarkets = {markets}\n{extra}'


def test_us_and_crypto_short_by_default_and_a_shares_never() -> None:
    assert US.shorting == ShortRules(
        borrow_fee_bps_per_year=Decimal(30),
        initial_margin=Decimal("0.5"),
        maintenance_margin=Decimal("0.3"),
    )
    assert CRYPTO.shorting is not None
    assert CRYPTO.shorting.borrow_fee_bps_per_year == Decimal(1000)
    assert CRYPTO.shorting.maintenance_margin == Decimal("0.25")
    assert CN.shorting is None
    with pytest.raises(ValueError, match="A-shares cannot be shorted"):
        with_shorting(rules_for("cn"), initial_margin=Decimal("0.5"))


@pytest.mark.parametrize(
    ("fee", "initial", "maintenance"),
    [("-1", "0.5", "0.3"), ("30", "0.3", "0.5"), ("30", "1.5", "0.3"), ("30", "0.5", "0")],
)
def test_short_rules_refuse_inconsistent_numbers(fee: str, initial: str, maintenance: str) -> None:
    with pytest.raises(ValueError, match="must"):
        ShortRules(
            borrow_fee_bps_per_year=Decimal(fee),
            initial_margin=Decimal(initial),
            maintenance_margin=Decimal(maintenance),
        )


def test_shorting_section_overrides_the_market_numbers(tmp_path: Path) -> None:
    text = (
        US_MARKET
        + '\n[markets.us.shorting]\nborrow_fee_bps_per_year = "50"\ninitial_margin = "0.6"\n'
        + agent("bear", '["us"]', "allow_short = true\n")
    )
    config = load_config(write(tmp_path, text))
    rules = rules_for_market("us", config.markets.configured()["us"])
    assert rules.shorting == ShortRules(
        borrow_fee_bps_per_year=Decimal(50),
        initial_margin=Decimal("0.6"),
        maintenance_margin=Decimal("0.3"),
    )
    assert config.agents[0].allow_short is True


def test_agents_do_not_short_unless_they_opt_in(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, US_MARKET + agent("cash", '["us"]')))
    assert config.agents[0].allow_short is False
    assert rules_for_market("us", config.markets.configured()["us"]) == US


@pytest.mark.parametrize(
    ("section", "needle"),
    [
        ('initial_margin = "0.2"', "maintenance (0.3) <= initial (0.2)"),
        ('maintenance_margin = "1.5"', "at most 1"),
        ("borrow_fee_bps_per_year = 0.5", "float is not exact"),
        ('borrow_fee_bps_per_year = "-3"', "should not be negative"),
        ('margin = "0.5"', "margin"),
    ],
)
def test_bad_shorting_numbers_are_config_errors(tmp_path: Path, section: str, needle: str) -> None:
    text = US_MARKET + f"\n[markets.us.shorting]\n{section}\n"
    with pytest.raises(InvalidConfig, match=r"markets\.us\.shorting") as info:
        load_config(write(tmp_path, text))
    assert needle in str(info.value)


def test_a_shares_refuse_a_shorting_section_and_a_shorting_agent(tmp_path: Path) -> None:
    text = US_MARKET + CN_MARKET + '\n[markets.cn.shorting]\ninitial_margin = "0.5"\n'
    with pytest.raises(InvalidConfig, match="A-shares cannot be shorted by retail accounts"):
        load_config(write(tmp_path, text))
    text = US_MARKET + CN_MARKET + agent("bear", '["us", "cn"]', "allow_short = true\n")
    with pytest.raises(InvalidConfig) as info:
        load_config(write(tmp_path, text))
    assert "agents[0].allow_short" in str(info.value) or "allow_short" in str(info.value)
    assert "agent 'bear' trades cn: A-shares cannot be shorted" in str(info.value)


def test_fill_cash_and_position_signs_per_side() -> None:
    def fill(side: Side) -> Fill:
        return Fill(
            symbol="AAPL",
            side=side,
            quantity=Decimal(3),
            price=Decimal(10),
            notional=Decimal(30),
            fees=Decimal(1),
            currency="USD",
            filled_at=utc(2026, 1, 5, 15),
            price_source="quote",
        )

    deltas = {side: (fill(side).cash_delta, fill(side).signed_quantity) for side in Side}
    assert deltas == {
        Side.BUY: (Decimal(-31), Decimal(3)),
        Side.SELL: (Decimal(29), Decimal(-3)),
        Side.SHORT: (Decimal(29), Decimal(-3)),
        Side.COVER: (Decimal(-31), Decimal(3)),
    }


def test_a_position_may_be_short_with_a_non_negative_cost() -> None:
    short = Position(symbol="AAPL", quantity=Decimal(-5), cost=Decimal(500))
    assert short.is_short
    with pytest.raises(ValueError, match="cost"):
        Position(symbol="AAPL", quantity=Decimal(-5), cost=Decimal(-1))
