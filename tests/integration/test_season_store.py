"""The `season` table (issue 26, item 1) on SQLite and Postgres: a season is opened once, before
its window's first slot, read back exactly, closed once; the boards name the open one."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine

from openbell.markets.errors import SeasonError
from openbell.store.ledger import Ledger
from openbell.store.seasons import (
    Season,
    close_season,
    current_season,
    open_season,
    season_named,
    seasons,
)

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def make_season(name: str = "s1", **overrides: object) -> Season:
    values: dict[str, object] = {
        "name": name,
        "manifest": '{"format":"openbell.season/1"}',
        "manifest_sha256": "f" * 64,
        "start_on": date(2026, 1, 5),
        "end_on": date(2026, 1, 9),
        "opened_at": NOW,
        "closed_at": None,
        "config": '[markets.us]\nuniverse = "nasdaq100"\n',
        "config_path": "/etc/openbell/openbell.toml",
    }
    values.update(overrides)
    return Season(**values)  # type: ignore[arg-type]


def test_a_season_is_read_back_as_opened_and_closed_once(engine: Engine) -> None:
    opened = make_season()
    open_season(engine, opened)
    assert season_named(engine, "s1") == opened
    with pytest.raises(SeasonError, match="exists already"):
        open_season(engine, replace(opened, manifest_sha256="0" * 64))
    closed = close_season(engine, "s1", NOW + timedelta(days=5))
    assert closed == replace(opened, closed_at=NOW + timedelta(days=5))
    with pytest.raises(SeasonError, match="was closed at 2026-01-10 09:00 UTC"):
        close_season(engine, "s1", NOW + timedelta(days=6))
    with pytest.raises(SeasonError, match=r"no season 'other' in this ledger \(its seasons: s1\)"):
        season_named(engine, "other")


def test_the_boards_name_the_last_opened_open_season(engine: Engine) -> None:
    assert current_season(engine) is None
    open_season(engine, make_season("first"))
    open_season(
        engine,
        make_season("second", start_on=date(2026, 2, 2), end_on=None, opened_at=NOW + timedelta(1)),
    )
    assert [s.name for s in seasons(engine)] == ["first", "second"]
    assert current_season(engine) == season_named(engine, "second")
    close_season(engine, "second", NOW + timedelta(days=2))
    assert current_season(engine) == season_named(engine, "first")
    close_season(engine, "first", NOW + timedelta(days=3))
    assert current_season(engine) == season_named(engine, "second")  # the last opened


def test_a_season_is_refused_once_its_window_holds_a_cycle(engine: Engine) -> None:
    ledger = Ledger(engine)
    agent_id = ledger.ensure_agent("hold", "buy_and_hold", NOW)
    account_id = ledger.open_account(agent_id, "us", "USD", Decimal(100_000), NOW)
    slot = datetime(2026, 1, 7, 14, 30, tzinfo=UTC)
    assert ledger.claim_cycle(account_id, slot, "run", slot + timedelta(minutes=5), slot)
    with pytest.raises(SeasonError, match="already holds 1 cycles inside its window"):
        open_season(engine, make_season())
    with pytest.raises(SeasonError, match="already holds 1 cycles"):
        open_season(engine, make_season(end_on=None))
    open_season(engine, make_season("later", start_on=date(2026, 1, 8)))  # after the cycle
    open_season(engine, make_season("earlier", start_on=date(2026, 1, 1), end_on=date(2026, 1, 6)))
    assert [s.name for s in seasons(engine)] == ["later", "earlier"]
