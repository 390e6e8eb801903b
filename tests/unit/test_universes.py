"""Universes load from their bundled TOML files; malformed ones and unknown names are refused.

A file states the window it can vouch for (`coverage`) and, for a member that joins or leaves
inside it, the dates and where they come from; the universe offered on a day holds the members of
that day that have bars by then."""

from __future__ import annotations

from datetime import date, datetime, timedelta
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
        "coverage": {"from": date(2025, 9, 30), "source": "test"},
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


# -- membership dates and coverage (issue 9, item 4) ---------------------------------------------


def dated_data(**overrides: Any) -> dict[str, Any]:
    """A universe file with a coverage window and members that join and leave inside it."""
    return universe_data(
        instruments=[
            {"symbol": "600519.SH", "name": "贵州茅台"},
            {
                "symbol": "601127.SH",
                "from": date(2025, 12, 15),
                "dates_source": "SSE notice of 2025-11-28: joins after the close of 2025-12-12",
            },
            {
                "symbol": "600104.SH",
                "until": date(2025, 12, 15),
                "dates_source": "SSE notice of 2025-11-28: leaves after the close of 2025-12-12",
            },
        ],
        coverage={
            "from": date(2025, 9, 30),
            "until": date(2026, 6, 15),
            "source": "index weights of 2025-09-30 and the review notice of 2025-11-28",
        },
        **overrides,
    )


def test_parse_reads_membership_dates_and_coverage() -> None:
    universe = parse_universe(dated_data())
    assert universe.coverage is not None
    assert (universe.coverage.from_date, universe.coverage.until_date) == (
        date(2025, 9, 30),
        date(2026, 6, 15),
    )
    assert "2025-09-30" in universe.coverage.source
    joined = universe.memberships["601127.SH"]
    assert (joined.from_date, joined.until_date) == (date(2025, 12, 15), None)
    assert "joins" in joined.source
    assert "600519.SH" not in universe.memberships  # undated: a member at every date
    # `until` is the first day a member is out, as a bar's end is the first instant after it
    assert universe.members_on(date(2025, 12, 12)) == ("600519.SH", "600104.SH")
    assert universe.members_on(date(2025, 12, 15)) == ("600519.SH", "601127.SH")


def test_the_days_a_symbol_is_a_member_are_those_is_member_on_keeps() -> None:
    universe = parse_universe(dated_data())
    days = [date(2025, 12, 1) + timedelta(days=n) for n in range(30)]
    for symbol in ("600519.SH", "601127.SH", "600104.SH", "000001.SZ"):  # undated, joins, leaves
        expected = tuple(day for day in days if universe.is_member_on(symbol, day))
        assert universe.days_member(symbol, iter(days)) == expected
    assert universe.days_member("600519.SH", days) == tuple(days)
    assert universe.days_member("601127.SH", days)[0] == date(2025, 12, 15)
    assert universe.days_member("000001.SZ", days) == ()  # not a member


def test_the_universe_offered_on_a_day_needs_membership_and_bars() -> None:
    universe = parse_universe(dated_data(benchmark="000016.SH"))
    offered = universe.offered_on(date(2025, 12, 15), with_bars={"601127.SH", "600104.SH"})
    assert offered.symbols == ("601127.SH",)  # 600519 has no bars, 600104 has left
    assert offered.benchmark is None  # the benchmark had no bar either
    assert offered.name == universe.name
    assert offered.weights_pct == {}
    with_benchmark = universe.offered_on(date(2025, 10, 1), with_bars={"600519.SH", "000016.SH"})
    assert with_benchmark.symbols == ("600519.SH",)
    assert with_benchmark.benchmark == "000016.SH"
    assert universe.offered_on(date(2025, 10, 1), with_bars=set()).symbols == ()
    for day, with_bars in (
        (date(2025, 12, 15), {"601127.SH", "600104.SH"}),
        (date(2025, 10, 1), {"600519.SH", "000016.SH", "600104.SH"}),
    ):
        assert universe.offered_symbols(day, with_bars=with_bars) == (
            universe.offered_on(day, with_bars=with_bars).symbols
        )


@pytest.mark.parametrize(
    ("start", "end", "covered"),
    [
        (date(2025, 9, 30), date(2026, 6, 14), True),
        (date(2025, 9, 29), date(2025, 10, 10), False),  # starts before the file vouches
        (date(2025, 10, 1), date(2026, 6, 15), False),  # ends on the first day it no longer does
    ],
)
def test_coverage_says_which_windows_the_file_vouches_for(
    start: date, end: date, covered: bool
) -> None:
    assert parse_universe(dated_data()).covers(start, end) is covered


def test_a_universe_without_coverage_covers_any_window() -> None:
    listed = Universe(
        name="listed",
        market="us",
        as_of=date(2025, 1, 1),
        instruments=(Instrument(symbol="AAPL", market="us", currency="USD"),),
    )
    assert listed.coverage is None
    assert listed.covers(date(1990, 1, 1), date(2030, 1, 1))


@pytest.mark.parametrize(
    ("name", "coverage_from"),
    [
        ("nasdaq100", date(2025, 10, 1)),
        ("sse50", date(2025, 9, 30)),
        ("crypto10", date(2025, 11, 1)),
        ("djia20", date(2025, 3, 1)),
    ],
)
def test_each_bundled_universe_states_its_coverage(name: str, coverage_from: date) -> None:
    universe = load_universe(name)
    assert universe.coverage is not None
    assert universe.coverage.from_date == coverage_from
    assert universe.coverage.source
    assert universe.coverage.contains(universe.as_of)


def test_sse50_coverage_ends_at_the_december_2025_review() -> None:
    coverage = load_universe("sse50").coverage
    assert coverage is not None
    assert coverage.until_date == date(2025, 12, 15)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"coverage": None}, "missing keys \\['coverage'\\]"),
        ({"coverage": {"source": "x"}}, "coverage needs `from`"),
        ({"coverage": {"from": date(2025, 9, 30)}}, "coverage needs .*source"),
        (
            {"coverage": {"from": date(2025, 9, 30), "source": "x", "since": date(2025, 1, 1)}},
            "coverage: unknown keys \\['since'\\]",
        ),
        (
            {"coverage": {"from": date(2025, 9, 30), "until": date(2025, 9, 30), "source": "x"}},
            "until 2025-09-30 is not after from 2025-09-30",
        ),
        ({"as_of": date(2025, 9, 1)}, "as_of 2025-09-01 is outside its coverage"),
        (
            {"instruments": [{"symbol": "A", "from": date(2025, 10, 1)}]},
            "A: a membership date needs its `dates_source`",
        ),
        (
            {"instruments": [{"symbol": "A", "from": date(2025, 1, 1), "dates_source": "x"}]},
            "A: membership from 2025-01-01 is outside the coverage",
        ),
        (
            {"instruments": [{"symbol": "A", "from": "2025-10-01", "dates_source": "x"}]},
            "A: from must be a TOML date",
        ),
    ],
)
def test_parse_refuses_bad_dates(overrides: dict[str, Any], message: str) -> None:
    data = dated_data()
    for key, value in overrides.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    with pytest.raises((ValueError, TypeError), match=message):
        parse_universe(data)
