"""`OPENBELL_OFFLINE` keeps the live daemon's sources off the network."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from openbell.daemon.clock import SimulatedClock
from openbell.markets.domain import utc
from openbell.markets.errors import DataUnavailable
from openbell.ops.config.schema import default_config_text, load_config
from openbell.ops.wiring.planning import OFFLINE_ENV, UnavailableSource, make_source


@pytest.mark.parametrize("market", ["us", "cn", "crypto"])
def test_offline_replaces_every_live_source(tmp_path: Path, market: str) -> None:
    path = tmp_path / "openbell.toml"
    path.write_text(default_config_text(), encoding="utf-8")
    configured = load_config(path).markets.configured()[market]
    clock = SimulatedClock(utc(2026, 12, 1, 15))

    source, _, actions = make_source(market, configured, clock, ("X",), environ={OFFLINE_ENV: "1"})

    assert isinstance(source, UnavailableSource)
    assert actions is None  # no vendor is asked for corporate actions either
    with pytest.raises(DataUnavailable, match=OFFLINE_ENV):
        asyncio.run(source.bars(["X"], "1d", utc(2026, 11, 1), utc(2026, 12, 1)))


def test_without_offline_the_configured_adapter_is_built(tmp_path: Path) -> None:
    path = tmp_path / "openbell.toml"
    path.write_text(default_config_text(), encoding="utf-8")
    configured = load_config(path).markets.configured()["cn"]

    source, _, actions = make_source(
        "cn", configured, SimulatedClock(utc(2026, 12, 1, 2)), ("600519.SH",), environ={}
    )
    assert actions is source

    assert type(source).__name__ == "AkshareSource"
