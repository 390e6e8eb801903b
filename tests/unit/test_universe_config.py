"""A universe file named in the config by its path: validated at load, planned with its benchmark
(or the configured one), and what the attribution's cross-section is."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Instrument
from openbell.markets.errors import ConfigError
from openbell.markets.universe_files import merge_universe, write_universe
from openbell.markets.universes import Universe
from openbell.ops.config.schema import load_config
from openbell.ops.wiring.market_benchmarks import benchmark_symbol
from openbell.ops.wiring.planning import universe_for

CONFIG = """\
[markets.cn]
universe = "{universe}"
cadence = "daily"
source = "akshare"
initial_cash = "100000"
{extra}

[[agents]]
name = "cash"
kind = "cash"
markets = ["cn"]
"""


def csi300_file(tmp_path: Path) -> Path:
    listed = Universe(
        name="csi300",
        market="cn",
        as_of=date(2025, 11, 28),
        instruments=(Instrument(symbol="600519.SH", market="cn", currency="CNY"),),
        benchmark="000300.SH",
    )
    path = tmp_path / "csi300.toml"
    write_universe(path, merge_universe(None, listed, calendar_for("XSHG")))
    return path


def configured(tmp_path: Path, universe: Path, extra: str = "") -> Path:
    path = tmp_path / "openbell.toml"
    path.write_text(CONFIG.format(universe=universe.as_posix(), extra=extra), encoding="utf-8")
    return path


def test_a_universe_file_is_the_markets_universe_with_its_benchmark(tmp_path: Path) -> None:
    config = load_config(configured(tmp_path, csi300_file(tmp_path)))
    market = config.markets.configured()["cn"]
    universe = universe_for("cn", market, date(2025, 12, 1))
    assert (universe.name, universe.symbols) == ("csi300", ("600519.SH",))
    assert universe.benchmark == benchmark_symbol("cn", market) == "000300.SH"
    assert config.attribution.cross_section == "bars"  # every symbol with bars, by default


def test_a_configured_benchmark_replaces_the_files(tmp_path: Path) -> None:
    path = configured(tmp_path, csi300_file(tmp_path), 'benchmark = "000016.SH"')
    market = load_config(path).markets.configured()["cn"]
    assert universe_for("cn", market, date(2025, 12, 1)).benchmark == "000016.SH"
    assert benchmark_symbol("cn", market) == "000016.SH"


def test_the_attribution_may_be_estimated_on_the_universe(tmp_path: Path) -> None:
    extra = '\n[attribution]\ncross_section = "universe"'
    config = load_config(configured(tmp_path, csi300_file(tmp_path), extra))
    assert config.attribution.cross_section == "universe"
    universe = universe_for("cn", config.markets.configured()["cn"], date(2025, 12, 1))
    assert (universe.name, universe.symbols) == ("csi300", ("600519.SH",))


def test_a_missing_universe_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"markets\.cn\.universe.*cannot be read"):
        load_config(configured(tmp_path, tmp_path / "nowhere.toml"))
