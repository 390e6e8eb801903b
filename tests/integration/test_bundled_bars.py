"""The bundled dataset: every file present, small, well-formed, and covering its universe."""

from __future__ import annotations

from decimal import Decimal
from importlib import resources

import pytest

from openbell.markets.barfile import bundled_names, read_bundled
from openbell.markets.domain import utc
from openbell.markets.errors import ConfigError
from openbell.markets.universes import load_universe

NAMES = ("cn-1d", "cn-1h", "cn-index-1d", "crypto-1d", "crypto-1h", "us-1d", "us-1h")
MAX_BYTES = 5 * 1024 * 1024


def test_every_file_is_bundled_within_the_size_budget() -> None:
    assert bundled_names() == NAMES
    folder = resources.files("openbell.markets").joinpath("data", "bars")
    total = sum(len(folder.joinpath(f"{name}.parquet").read_bytes()) for name in NAMES)
    assert total <= MAX_BYTES
    assert "HKUDS/AI-Trader" in folder.joinpath("PROVENANCE.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", NAMES)
def test_bars_are_half_open_and_never_overlap(name: str) -> None:
    bars = read_bundled(name)
    assert bars.meta.provenance.startswith("HKUDS/AI-Trader@")
    assert bars.meta.source
    assert bars.meta.interval == name.rsplit("-", 1)[1]
    previous = None
    for bar in bars:
        if previous is not None and previous.symbol == bar.symbol:
            assert previous.end_at <= bar.start_at
        previous = bar


@pytest.mark.parametrize(
    ("name", "universe", "extra"),
    [
        ("us-1h", "nasdaq100", {"QQQ"}),
        ("us-1d", "nasdaq100", {"QQQ"}),
        ("cn-1d", "sse50", set()),
        ("cn-1h", "sse50", set()),
        ("crypto-1d", "crypto10", set()),
    ],
)
def test_files_cover_their_universe(name: str, universe: str, extra: set[str]) -> None:
    expected = set(load_universe(universe).symbols) | extra
    assert set(read_bundled(name).symbols) == expected


def test_index_and_hourly_crypto_symbols() -> None:
    assert read_bundled("cn-index-1d").symbols == ("000016.SH",)
    hourly = set(read_bundled("crypto-1h").symbols)
    assert hourly == set(load_universe("crypto10").symbols) - {"SUI/USDT", "LTC/USDT"}


def test_known_bars_survive_the_import() -> None:
    us = read_bundled("us-1h")
    assert us.meta.timezone == "America/New_York"
    assert us.count("AAPL") == 174
    bar = us.bars("AAPL", start_from=utc(2025, 11, 10, 19))[0]
    assert (bar.end_at, bar.open, bar.volume) == (
        utc(2025, 11, 10, 20),
        Decimal("269.9950"),
        Decimal(4686029),
    )
    crypto = read_bundled("crypto-1d")
    assert crypto.bars("BTC/USDT")[-1].start_at == utc(2025, 12, 26)  # the partial 27th dropped
    assert crypto.count("BTC/USDT") == 5642


def test_unknown_bundled_name_lists_the_known() -> None:
    with pytest.raises(ConfigError, match="bundled: cn-1d, cn-1h"):
        read_bundled("us-5m")
