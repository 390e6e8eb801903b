"""Universes load from their bundled TOML files; malformed ones and unknown names are refused."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest

from openbell.markets.domain import Instrument
from openbell.markets.errors import ConfigError
from openbell.markets.universes import (
    Universe,
    known_universes,
    load_universe,
    parse_universe,
)


def test_the_bundled_universes_are_known() -> None:
    assert known_universes() == ("crypto10", "djia20", "nasdaq100", "sse50")


@pytest.mark.parametrize(
    ("name", "market", "currency", "as_of", "count", "benchmark"),
    [
        ("nasdaq100", "us", "USD", date(2025, 10, 1), 101, "QQQ"),
        ("sse50", "cn", "CNY", date(2025, 9, 30), 50, "000016.SH"),
        ("crypto10", "crypto", "USDT", date(2025, 11, 1), 10, None),
        ("djia20", "us", "USD", date(2025, 3, 1), 20, None),
    ],
)
def test_each_universe_loads(
    name: str, market: str, currency: str, as_of: date, count: int, benchmark: str | None
) -> None:
    universe = load_universe(name)
    assert (universe.name, universe.market, universe.as_of) == (name, market, as_of)
    assert len(universe.instruments) == count
    assert universe.benchmark == benchmark
    assert universe.source
    assert {instrument.currency for instrument in universe.instruments} == {currency}
    assert all(isinstance(instrument, Instrument) for instrument in universe.instruments)


def test_nasdaq100_is_ai_traders_list() -> None:
    universe = load_universe("nasdaq100")
    assert {"GOOG", "GOOGL", "PYPL", "AAPL", "ZS"} <= set(universe.symbols)
    assert "QQQ" not in universe
    assert universe.instrument("AAPL").name == "Apple"


def test_sse50_has_names_weights_and_no_st() -> None:
    universe = load_universe("sse50")
    moutai = universe.instrument("600519.SH")
    assert moutai.name == "贵州茅台"
    assert universe.weights_pct["600519.SH"] == Decimal("9.856")
    assert sum(universe.weights_pct.values()) == Decimal("100.001")
    assert not any(instrument.is_st for instrument in universe.instruments)
    assert all(symbol.endswith(".SH") for symbol in universe.symbols)


def test_crypto10_pairs() -> None:
    symbols = load_universe("crypto10").symbols
    coins = ["BTC", "ETH", "XRP", "SOL", "ADA", "SUI", "LINK", "AVAX", "LTC", "DOT"]
    assert symbols == tuple(f"{coin}/USDT" for coin in coins)


def test_djia20_is_stockbenchs_list() -> None:
    symbols = load_universe("djia20").symbols
    assert symbols[:5] == ("GS", "MSFT", "HD", "V", "SHW")
    assert len(set(symbols)) == 20


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown universe 'sp500'.*crypto10, djia20"):
        load_universe("sp500")


def test_a_path_is_not_a_name() -> None:
    with pytest.raises(ConfigError, match="unknown universe"):
        load_universe("../universes/sse50")


def universe_data(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "tiny",
        "market": "cn",
        "as_of": date(2025, 9, 30),
        "source": "test",
        "instruments": [
            {"symbol": "600519.SH", "name": "贵州茅台", "weight_pct": "60"},
            {"symbol": "600028.SH", "name": "*ST 示例", "is_st": True},
        ],
    }
    data.update(overrides)
    return data


def test_parse_keeps_st_flags_and_weights() -> None:
    universe = parse_universe(universe_data())
    assert isinstance(universe, Universe)
    assert universe.instrument("600028.SH").is_st
    assert universe.weights_pct == {"600519.SH": Decimal(60)}
    with pytest.raises(KeyError, match="not in universe tiny"):
        universe.instrument("000001.SZ")


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"exchange": "SSE"}, ValueError, "unknown keys"),
        ({"market": "fx"}, ValueError, "unknown market"),
        ({"as_of": datetime(2025, 9, 30)}, TypeError, "TOML date"),  # noqa: DTZ001
        ({"instruments": [{"symbol": "A", "sector": "x"}]}, ValueError, "unknown keys"),
        ({"instruments": [{"symbol": "A", "weight_pct": 1.5}]}, TypeError, "decimal string"),
        ({"instruments": [{"symbol": "A"}, {"symbol": "A"}]}, ValueError, "more than once"),
        ({"instruments": []}, ValueError, "no instruments"),
    ],
)
def test_parse_refuses_malformed_data(
    overrides: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        parse_universe(universe_data(**overrides))
