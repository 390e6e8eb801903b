"""Which corporate actions a configured replay or daemon applies: the bundled A-share dividends in a
replay of the bundled raw daily bars, a market's `corporate_actions` file, none on adjusted bars,
and the live vendors' own."""

from __future__ import annotations

from datetime import date
from importlib import resources
from pathlib import Path

import pytest
from sqlalchemy import func, select

from openbell.daemon.clock import SimulatedClock
from openbell.markets.corporate_actions import RecordedActions
from openbell.markets.domain import utc
from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import OpenbellConfig, load_config
from openbell.ops.wiring.planning import OFFLINE_ENV, make_source, replay_from_config
from openbell.store.core_tables import CORPORATE_ACTION_TABLE
from openbell.store.db import make_engine
from openbell.store.verify import verify_ledger

CN = """\
[store]
url = "{url}"

[markets.cn]
universe = "sse50"
cadence = "{cadence}"
source = "{source}"
initial_cash = "1000000"
# June 2025, the dividend season, is before the dates sse50.toml vouches for (2025-09-30 on).
allow_outside_coverage = true
{extra}

[[agents]]
name = "equal-weight"
kind = "equal_weight"
markets = ["cn"]
"""


def _config(
    tmp_path: Path, url: str, *, cadence: str = "daily", source: str = "akshare", extra: str = ""
) -> OpenbellConfig:
    path = tmp_path / "openbell.toml"
    path.write_text(
        CN.format(url=url, cadence=cadence, source=source, extra=extra), encoding="utf-8"
    )
    return load_config(path)


def _bundled(name: str) -> str:
    return str(resources.files("openbell.markets").joinpath("data", "bars", f"{name}.parquet"))


def test_a_replay_of_the_bundled_daily_bars_pays_the_bundled_dividends(
    tmp_path: Path, sqlite_url: str
) -> None:
    config = _config(tmp_path, sqlite_url)
    replay_from_config(
        config,
        start=date(2025, 6, 23),
        end=date(2025, 7, 4),
        market="cn",
        resume=False,
        show_progress=False,
    )
    engine = make_engine(sqlite_url)
    try:
        report = verify_ledger(engine)
        assert report.ok, report.lines()
        with engine.connect() as connection:
            entries = connection.execute(select(CORPORATE_ACTION_TABLE)).all()
    finally:
        engine.dispose()
    assert entries
    assert {entry.source for entry in entries} == {"tushare-pre_close"}
    assert all(entry.cash_delta > 0 for entry in entries)
    # 600150.SH went ex on 06-23, the first session: shares bought at its open get nothing.
    assert "600150.SH" not in {entry.symbol for entry in entries}
    assert report.summary().endswith(f", {len(entries)} corporate actions")


def test_a_configured_file_replaces_the_bundled_one(tmp_path: Path, sqlite_url: str) -> None:
    actions = tmp_path / "cn.csv"
    actions.write_text(
        "symbol,ex_date,kind,ratio,cash,source\n601318.SH,2025-06-30,cash_dividend,,1.62,ann\n",
        encoding="utf-8",
    )
    config = _config(tmp_path, sqlite_url, extra=f'corporate_actions = "{actions}"')
    replay_from_config(
        config,
        start=date(2025, 6, 23),
        end=date(2025, 7, 4),
        market="cn",
        resume=False,
        show_progress=False,
    )
    engine = make_engine(sqlite_url)
    try:
        with engine.connect() as connection:
            found = connection.execute(
                select(CORPORATE_ACTION_TABLE.c.symbol, CORPORATE_ACTION_TABLE.c.source)
            ).all()
    finally:
        engine.dispose()
    assert {(row.symbol, row.source) for row in found} == {("601318.SH", "ann")}


def test_a_file_is_refused_on_adjusted_bars_and_hourly_replays_have_none(
    tmp_path: Path, sqlite_url: str
) -> None:
    actions = tmp_path / "cn.csv"
    actions.write_text("symbol,ex_date,kind,ratio,cash,source\n", encoding="utf-8")
    hourly = f"replay:{_bundled('cn-1h')}"
    config = _config(
        tmp_path,
        sqlite_url,
        cadence="hourly",
        source=hourly,
        extra=f'corporate_actions = "{actions}"',
    )
    with pytest.raises(ConfigError, match=r"markets\.cn\.corporate_actions: .* forward-adjusted"):
        replay_from_config(
            config,
            start=date(2025, 10, 13),
            end=date(2025, 10, 14),
            market="cn",
            resume=False,
            show_progress=False,
        )
    clock = SimulatedClock(utc(2025, 10, 13))
    market = config.markets.configured()["cn"]
    with pytest.raises(ConfigError, match="not only raw ones"):
        make_source("cn", market, clock, ("600519.SH",), environ={})
    plain = _config(tmp_path, sqlite_url, cadence="hourly", source="akshare")
    replay_from_config(
        plain,
        start=date(2025, 10, 13),
        end=date(2025, 10, 14),
        market="cn",
        resume=False,
        show_progress=False,
    )
    engine = make_engine(sqlite_url)
    try:
        with engine.connect() as connection:
            count = connection.execute(
                select(func.count()).select_from(CORPORATE_ACTION_TABLE)
            ).scalar_one()
    finally:
        engine.dispose()
    assert count == 0  # hourly bundled bars are forward-adjusted: nothing to apply


def test_live_sources_bring_their_own_actions(tmp_path: Path, sqlite_url: str) -> None:
    clock = SimulatedClock(utc(2025, 10, 13))
    live = _config(tmp_path, sqlite_url).markets.configured()["cn"]
    akshare = make_source("cn", live, clock, ("600519.SH",), environ={})
    assert akshare.actions is akshare.source
    assert make_source("cn", live, clock, (), environ={OFFLINE_ENV: "1"}).actions is None
    actions = tmp_path / "cn.csv"
    actions.write_text(
        "symbol,ex_date,kind,ratio,cash,source\n601318.SH,2025-06-30,cash_dividend,,1.62,ann\n",
        encoding="utf-8",
    )
    daily = _config(
        tmp_path,
        sqlite_url,
        source=f"replay:{_bundled('cn-1d')}",
        extra=f'corporate_actions = "{actions}"',
    ).markets.configured()["cn"]
    found = make_source("cn", daily, clock, ("601318.SH",), environ={}).actions
    assert isinstance(found, RecordedActions)
    assert [action.symbol for action in found.all] == ["601318.SH"]
