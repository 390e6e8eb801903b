"""The benchmark's carried prices: each source's point-in-time quote, the latest winning, carried
forward, whichever way the sources are read."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from openbell.markets.domain import Bar, utc
from openbell.markets.replay_source import ReplaySource
from openbell.ops.evaluation.benchmark import (
    CD5_WEIGHTS,
    bundled_source,
    bundled_source_of,
    carried_prices,
    carried_prices_of,
)

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def make_bar(start_at: datetime, length: timedelta, price: str) -> Bar:
    value = Decimal(price)
    return Bar(
        symbol="BTC/USDT",
        start_at=start_at,
        end_at=start_at + length,
        open=value,
        high=value + 5,
        low=value - 5,
        close=value + 1,
        volume=Decimal(1),
    )


#: Daily bars of one source; hourly bars of another on the 11th, and one starting with a daily bar
#: (a tie of two sources' opens at 00:00 on the 12th, which the first source wins).
DAILY = ReplaySource(
    market="crypto",
    bars={"1d": [make_bar(utc(2025, 11, day), DAY, str(90 + day)) for day in (10, 11, 12, 14)]},
)
HOURLY = ReplaySource(
    market="crypto",
    bars={
        "1h": [
            *(make_bar(utc(2025, 11, 11, hour), HOUR, str(200 + hour)) for hour in (3, 4, 9)),
            make_bar(utc(2025, 11, 12), HOUR, "300"),
        ]
    },
)
STAMPS = sorted(
    {utc(2025, 11, 9) + n * HOUR / 2 for n in range(6 * 48)}
    | {utc(2025, 11, 11, 4) - timedelta(microseconds=1), utc(2025, 11, 20)}
)


def carried_one_by_one(
    sources: list[ReplaySource], timestamps: list[datetime]
) -> list[Decimal | None]:
    """The rule, one `quote_at` per source and timestamp."""
    out: list[Decimal | None] = []
    used = None
    for at in timestamps:
        found = None
        for source in sources:
            quote = source.quote_at("BTC/USDT", at)
            if quote is not None and quote.at <= at and (found is None or quote.at > found.at):
                found = quote
        if found is not None and (used is None or found.at >= used.at):
            used = found
        out.append(None if used is None else used.price)
    return out


@settings(max_examples=150, deadline=None)
@given(
    stamps=st.lists(st.sampled_from(STAMPS), unique=True, max_size=40).map(sorted),
    order=st.sampled_from(["daily first", "hourly first"]),
)
def test_carried_prices_are_the_quotes_one_by_one(stamps: list[datetime], order: str) -> None:
    sources = [DAILY, HOURLY] if order == "daily first" else [HOURLY, DAILY]
    expected = carried_one_by_one(sources, stamps)
    assert carried_prices(sources, "BTC/USDT", stamps) == expected
    assert carried_prices_of(sources, ["ETH/USDT", "BTC/USDT"], stamps) == {
        "ETH/USDT": [None] * len(stamps),
        "BTC/USDT": expected,
    }


def test_a_tie_goes_to_the_first_source_and_an_older_quote_is_not_used() -> None:
    stamps = [
        utc(2025, 11, 11, 3),
        utc(2025, 11, 11, 3, 30),
        utc(2025, 11, 11, 5),
        utc(2025, 11, 12),
        utc(2025, 11, 12, 2),
    ]
    assert carried_prices([DAILY, HOURLY], "BTC/USDT", stamps) == [
        Decimal(203),  # the hourly bar opening then
        Decimal(203),  # carried: the latest quote, the daily close at 00:00, is older
        Decimal(205),  # the hourly 04:00 bar's close, later than the daily one's
        Decimal(102),  # both open at 00:00: the first source's
        Decimal(301),  # the hourly bar's close, later than the daily 11th's
    ]
    assert carried_prices([HOURLY, DAILY], "BTC/USDT", stamps)[3] == Decimal(300)


def test_a_report_reads_the_bundled_files_of_the_symbols_it_prices_and_shares_the_rest() -> None:
    index = bundled_source_of("cn", ["000016.SH"])
    assert index.intervals == ("1d",)  # not the stocks' files: their footers leave 000016.SH out
    assert bundled_source_of("cn", {"000016.SH"}) is index  # read once
    stamps = [utc(2025, 3, 3) + n * DAY for n in range(60)]
    prices = carried_prices((index,), "000016.SH", stamps)
    assert prices == carried_prices((bundled_source("cn"),), "000016.SH", stamps)
    assert all(price is not None for price in prices)
    # Where every file may hold a priced symbol, the market's own source is shared.
    assert bundled_source_of("crypto", CD5_WEIGHTS) is bundled_source("crypto")
    assert bundled_source_of("cn", ["000016.SH", "600519.SH"]) is bundled_source("cn")
