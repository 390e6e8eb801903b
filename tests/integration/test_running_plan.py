"""`openbell run`'s plan from the default config: which markets get live fundamentals.

The live adapters are only constructed here (no read is made), with the network refused."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from openbell.daemon.clock import SimulatedClock
from openbell.markets.fundamentals import LiveFundamentals
from openbell.ops.config.schema import default_config_text, load_config
from openbell.ops.wiring.planning import OFFLINE_ENV, live_plan
from openbell_testkit.offline import refuse_network

NOW = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)


def plan_fundamentals(tmp_path: Path) -> dict[str, object]:
    path = tmp_path / "openbell.toml"
    path.write_text(default_config_text(), encoding="utf-8")
    plan = live_plan(load_config(path), SimulatedClock(NOW), http=False)
    return {market.market: market.fundamentals for market in plan.markets}


def test_yfinance_markets_serve_live_fundamentals_and_the_others_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refuse_network(monkeypatch, with_curl=True)
    monkeypatch.delenv(OFFLINE_ENV, raising=False)
    found = plan_fundamentals(tmp_path)
    assert set(found) == {"us", "cn", "crypto"}
    us = found["us"]
    assert isinstance(us, LiveFundamentals)
    assert (us.name, us.point_in_time) == ("yfinance", True)
    assert found["cn"] is None
    assert found["crypto"] is None


def test_offline_no_market_serves_fundamentals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refuse_network(monkeypatch, with_curl=True)
    monkeypatch.setenv(OFFLINE_ENV, "1")
    assert set(plan_fundamentals(tmp_path).values()) == {None}


INSIDE_EVERY_COVERAGE = datetime(2025, 11, 20, 15, 0, tzinfo=UTC)


@pytest.mark.parametrize(("now", "warned"), [(NOW, True), (INSIDE_EVERY_COVERAGE, False)])
def test_a_live_start_outside_a_universes_coverage_is_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, now: datetime, warned: bool
) -> None:
    """sse50.toml vouches for its members until 2025-12-15: a daemon after that says so."""
    refuse_network(monkeypatch, with_curl=True)
    path = tmp_path / "openbell.toml"
    path.write_text(default_config_text(), encoding="utf-8")
    with capture_logs() as logs:
        live_plan(load_config(path), SimulatedClock(now), http=False)
    found = [e for e in logs if e["event"] == "universe_outside_coverage"]
    if not warned:
        assert found == []
        return
    (entry,) = found
    assert (entry["log_level"], entry["market"], entry["universe"]) == ("warning", "cn", "sse50")
    assert (entry["coverage_until"], entry["today"]) == ("2025-12-15", "2026-11-30")
    assert "may have changed" in entry["message"]


def test_the_daemons_own_pages_say_live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28 (9): the pages the daemon serves over its ledger are "live" (it writes it)."""
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from openbell.store.db import make_engine
    from openbell.store.migrate import upgrade

    refuse_network(monkeypatch, with_curl=True)
    path = tmp_path / "openbell.toml"
    path.write_text(default_config_text(), encoding="utf-8")
    plan = live_plan(load_config(path), SimulatedClock(NOW), http=True)
    assert plan.web is not None
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(url)
    engine = make_engine(url)
    parts = plan.web(engine, None)
    with TestClient(Starlette(routes=list(parts.routes))) as client:
        page = client.get("/").text
    engine.dispose()
    assert 'class="live"' in page
    assert 'class="read-only"' not in page
