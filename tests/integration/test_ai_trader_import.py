"""The AI-Trader importer on excerpts of the real files: labels, sessions, units, drops, build."""

from __future__ import annotations

import shutil
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from openbell.markets.barfile import read_bars
from openbell.markets.domain import Bar, utc
from openbell.markets.errors import SourceFormatError
from openbell.markets.importers.ai_trader import (
    build_dataset,
    main,
    parse_cn_daily,
    parse_cn_hourly,
    parse_cn_index_daily,
    parse_crypto_daily,
    parse_crypto_hourly,
    parse_us_daily,
    parse_us_hourly,
)

FIXTURES = Path(__file__).parents[1] / "resources" / "ai_trader"
US_HOURLY = FIXTURES / "c8b24a0/data/daily_prices_AAPL.json"
US_DAILY = FIXTURES / "a0a1c85/data/daily_prices_AAPL.json"
CN_DAILY = FIXTURES / "81d570b/data/A_stock/daily_prices_sse_50.csv"
CN_HOURLY = FIXTURES / "c8b24a0/data/A_stock/A_stock_data/A_stock_hourly.csv"
CN_INDEX = FIXTURES / "c3561c6/data/A_stock/index_daily_sse_50.json"
CRYPTO_DAILY = FIXTURES / "761ea56/data/crypto/coin/daily_prices_BTC.json"
CRYPTO_HOURLY = FIXTURES / "4f113dd/data/crypto/coin/hourly_prices_BTC.json"


def at(bars: tuple[Bar, ...], symbol: str, start_at: datetime) -> Bar:
    return next(bar for bar in bars if bar.symbol == symbol and bar.start_at == start_at)


def test_us_hourly_labels_are_new_york_bar_starts() -> None:
    parsed = parse_us_hourly(US_HOURLY)
    assert len(parsed.bars) == 12
    assert parsed.dropped == {}
    # 2025-11-10 is after the switch to EST (UTC-5): 14:00 New York is 19:00Z.
    bar = at(parsed.bars, "AAPL", utc(2025, 11, 10, 19))
    assert bar.end_at == utc(2025, 11, 10, 20)
    assert (bar.open, bar.high, bar.low, bar.close) == (
        Decimal("269.9950"),
        Decimal("270.3077"),
        Decimal("267.4550"),
        Decimal("269.5200"),
    )
    assert bar.volume == Decimal(4686029)
    # 2025-10-31 is still EDT (UTC-4); its 15:00 bar ends at the 16:00 close.
    october = [bar for bar in parsed.bars if bar.start_at.day == 31]
    assert (october[0].start_at, october[-1].end_at) == (
        utc(2025, 10, 31, 14),
        utc(2025, 10, 31, 20),
    )
    assert [bar.start_at for bar in parsed.bars] == sorted(bar.start_at for bar in parsed.bars)


def test_us_daily_dates_become_xnys_sessions() -> None:
    parsed = parse_us_daily(US_DAILY)
    assert len(parsed.bars) == 5
    july_2 = at(parsed.bars, "AAPL", utc(2025, 7, 2, 13, 30))
    assert july_2.end_at == utc(2025, 7, 2, 20)
    # 2025-07-03 is a half day: the session closes at 13:00 New York, 17:00Z in summer time
    # (a November half day, in EST, would end at 18:00Z).
    half_day = at(parsed.bars, "AAPL", utc(2025, 7, 3, 13, 30))
    assert half_day.end_at == utc(2025, 7, 3, 17)
    assert at(parsed.bars, "AAPL", utc(2025, 10, 29, 13, 30)).open == Decimal("269.2750")


def test_cn_daily_lots_become_shares_in_the_xshg_session() -> None:
    parsed = parse_cn_daily(CN_DAILY)
    assert len(parsed.bars) == 6
    bar = at(parsed.bars, "600028.SH", utc(2025, 10, 29, 1, 30))
    assert bar.end_at == utc(2025, 10, 29, 7)  # 09:30-15:00 Shanghai
    assert bar.volume == Decimal(91682050)  # vol 916820.5 lots of 100
    assert bar.close == Decimal("5.52")


@pytest.mark.parametrize(
    ("start", "end"),
    [
        pytest.param(utc(2025, 10, 9, 1, 30), utc(2025, 10, 9, 2, 30), id="10:30"),
        pytest.param(utc(2025, 10, 9, 2, 30), utc(2025, 10, 9, 3, 30), id="11:30"),
        pytest.param(utc(2025, 10, 9, 5), utc(2025, 10, 9, 6), id="14:00"),
        pytest.param(utc(2025, 10, 9, 6), utc(2025, 10, 9, 7), id="15:00"),
    ],
)
def test_cn_hourly_labels_are_shanghai_bar_ends(start: datetime, end: datetime) -> None:
    parsed = parse_cn_hourly(CN_HOURLY)
    assert len(parsed.bars) == 8
    assert at(parsed.bars, "600028.SH", start).end_at == end


def test_cn_hourly_volume_is_in_shares_and_first_open_is_the_day_open() -> None:
    bars = parse_cn_hourly(CN_HOURLY).bars
    first = at(bars, "600028.SH", utc(2025, 10, 9, 1, 30))
    assert first.volume == Decimal(43842900)  # 438429 lots
    assert first.open == Decimal("5.29")


def test_cn_index_daily() -> None:
    parsed = parse_cn_index_daily(CN_INDEX)
    assert {bar.symbol for bar in parsed.bars} == {"000016.SH"}
    last = parsed.bars[-1]
    assert (last.start_at, last.end_at) == (utc(2025, 11, 7, 1, 30), utc(2025, 11, 7, 7))
    assert last.volume == Decimal(4766934700)


def test_crypto_daily_drops_the_partial_last_bar() -> None:
    parsed = parse_crypto_daily(CRYPTO_DAILY)
    assert parsed.dropped == {"partial_last_bar": 1}
    assert [bar.start_at.day for bar in parsed.bars] == [24, 25, 26]
    last = parsed.bars[-1]
    assert last.symbol == "BTC/USDT"
    assert (last.start_at, last.end_at) == (utc(2025, 12, 26), utc(2025, 12, 27))
    assert len(parse_crypto_daily(CRYPTO_DAILY, last_bar_partial=False).bars) == 4


def test_crypto_hourly_labels_are_utc_starts() -> None:
    parsed = parse_crypto_hourly(CRYPTO_HOURLY)
    assert len(parsed.bars) == 5
    last = parsed.bars[-1]
    assert (last.start_at, last.end_at) == (utc(2025, 11, 10, 7), utc(2025, 11, 10, 8))
    assert last.open == Decimal("106236.39000")
    assert isinstance(last.volume, Decimal)


def test_duplicate_keys_and_inconsistent_bars_are_counted(tmp_path: Path) -> None:
    text = US_HOURLY.read_text(encoding="utf-8")
    opening = '"Time Series (60min)": {'
    repeat = '"2025-11-10 14:00:00": {"1. open": "1", "2. high": "1", "3. low": "1", '
    repeat += '"4. close": "1", "5. volume": "1"},'
    text = text.replace(opening, opening + repeat, 1)
    # The 2025-11-10 15:00 bar's high is pushed below its close.
    text = text.replace('"2. high": "269.6300"', '"2. high": "269.0000"', 1)
    broken = tmp_path / "daily_prices_AAPL.json"
    broken.write_text(text, encoding="utf-8")
    parsed = parse_us_hourly(broken)
    assert parsed.dropped == {"duplicate": 1, "ohlc_inconsistent": 1}
    assert len(parsed.bars) == 11
    assert at(parsed.bars, "AAPL", utc(2025, 11, 10, 19)).open == Decimal(1)  # first one wins


def test_csv_duplicates_holidays_and_bad_rows_are_counted(tmp_path: Path) -> None:
    lines = CN_HOURLY.read_text(encoding="utf-8").splitlines(keepends=True)
    extra = [
        lines[1],  # a repeated row
        "中国石化,600028.SH,2025-10-01 10:30,5.29,5.31,5.32,5.27,1\n",  # National Day: closed
        "中国石化,600028.SH,2025-10-09 12:30,5.29,5.31,5.32,5.27,1\n",  # inside the lunch break
        "中国石化,600028.SH,2025-10-10 10:30,5.29,5.31,5.30,5.27,1\n",  # high below close
        "中国石化,600028.SH,2025-10-10 11:30,5.29,n/a,5.32,5.27,1\n",
    ]
    broken = tmp_path / "A_stock_hourly.csv"
    broken.write_text("".join(lines + extra), encoding="utf-8")
    parsed = parse_cn_hourly(broken)
    assert len(parsed.bars) == 8
    assert parsed.dropped == {
        "duplicate": 1,
        "not_a_session": 1,
        "outside_session": 1,
        "ohlc_inconsistent": 1,
        "unparseable": 1,
    }


def test_a_file_of_another_shape_is_refused(tmp_path: Path) -> None:
    wrong = tmp_path / "daily_prices_AAPL.json"
    wrong.write_text('{"Meta Data": {}}', encoding="utf-8")
    with pytest.raises(SourceFormatError, match="Time Series"):
        parse_us_hourly(wrong)
    with pytest.raises(SourceFormatError, match="missing columns"):
        parse_cn_daily(CN_HOURLY)


def test_build_dataset_on_the_excerpts(tmp_path: Path) -> None:
    report = build_dataset(FIXTURES, tmp_path)
    assert report.bars_written == {
        "us-1h": 18,
        "us-1d": 5,
        "cn-1d": 8,
        "cn-1h": 8,
        "cn-index-1d": 5,
        "crypto-1d": 5,
        "crypto-1h": 5,
    }
    assert report.bars_dropped["cn-1d"] == {"already_in_earlier_file": 4}
    assert report.bars_dropped["crypto-1d"] == {"partial_last_bar": 2}
    assert len(report.files_read) == 10
    cn = read_bars(tmp_path / "cn-1d.parquet")
    assert cn.meta.provenance.startswith(
        "HKUDS/AI-Trader@81d570bb5009bf1346583fc3ec72a3dc0daa5b37:data/A_stock/"
    )
    assert [bar.start_at.day for bar in cn.bars("600519.SH")] == [29, 30, 31, 3]
    hourly = read_bars(tmp_path / "cn-1h.parquet")
    assert (hourly.meta.label, hourly.meta.adjustment) == ("end", "forward-adjusted")


def test_build_dataset_needs_every_source(tmp_path: Path) -> None:
    partial = tmp_path / "source"
    shutil.copytree(FIXTURES, partial)
    shutil.rmtree(partial / "4f113dd")
    with pytest.raises(SourceFormatError, match="hourly_prices"):
        build_dataset(partial, tmp_path / "out")


def test_module_entry_point(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(FIXTURES), str(tmp_path)]) == 0
    assert "crypto-1d: 5 bars; dropped partial_last_bar 2" in capsys.readouterr().out
