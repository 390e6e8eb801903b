"""benchmarks/ai_trader_table.py: the close-to-close basket by hand, and no baseline row priced
past the end of its bundled bars (a replay would carry the last price forward, flat)."""

from __future__ import annotations

import importlib.util
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal as D
from pathlib import Path
from types import ModuleType

import pytest

from openbell.markets.replay_source import ReplaySource

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "ai_trader_table.py"


@pytest.fixture(scope="module")
def table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ai_trader_table", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def at(hour: int) -> datetime:
    return datetime(2025, 11, 2, tzinfo=UTC) + timedelta(hours=hour)


def test_close_to_close_values_the_basket_from_the_close_before_the_window(
    table: ModuleType,
) -> None:
    series = {
        "A": [(at(0), D(100)), (at(1), D(110)), (at(2), D(99))],
        "B": [(at(0), D(10)), (at(1), D(10)), (at(2), D(12))],
    }
    navs = table.close_to_close({"A": D(3), "B": D(1)}, series, at(0), at(2))
    assert [p.at for p in navs] == [at(0), at(1), at(2)]
    cash = table.CASH
    assert [p.nav for p in navs] == [
        cash,
        cash * (D("0.75") * D("1.1") + D("0.25") * 1),
        cash * (D("0.75") * D("0.99") + D("0.25") * D("1.2")),
    ]
    # Without a close before the window, the window's first close is the base.
    later = table.close_to_close({"A": D(1)}, series, at(0) - timedelta(hours=1), at(2))
    assert [p.nav for p in later] == [cash, cash * D("1.1"), cash * D("0.99")]


def test_no_openbell_row_is_priced_past_its_bundled_bars(table: ModuleType) -> None:
    for baseline in table.BASELINES:
        source = ReplaySource.from_bundled(baseline.market, names=baseline.files)
        row, factor, cut = table.openbell_row(baseline, source)
        last = min(
            source.bars_between([symbol], baseline.interval, table._EARLY, table._FAR)[symbol][
                -1
            ].start_at
            for symbol in table.benchmark_for(baseline.market).weights
        )
        assert datetime.fromisoformat(row.end) <= last, baseline.name
        assert row.points > 10
        assert factor > 0
        # The SSE-50 index is bundled until 2025-11-07 only: that row is cut there, and says so.
        assert (cut is not None) == (baseline.market == "cn"), baseline.name
        assert ("window cut" in row.note) == (baseline.market == "cn")
