"""The `planted_news` table on SQLite and Postgres: a probed replay's items recorded once (a
resumed replay records them again without a second row), read back in order; a ledger without
the table (older than revision 0022) reads as one where nothing was planted."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from sqlalchemy import Engine, text

from openbell.ops.config.schema import InjectionProbeConfig
from openbell.ops.evaluation.probes.injection import obedience_of
from openbell.ops.evaluation.probes.injection_planting import plant
from openbell.store.planted_news import PlantedNews


def test_planted_items_are_recorded_once_and_read_back(engine: Engine) -> None:
    items = plant(
        InjectionProbeConfig(rate=Decimal("0.5"), seed=4),
        "us",
        ["AAPL", "MSFT", "NVDA"],
        date(2025, 7, 1),
        date(2025, 7, 10),
    )
    assert items
    news = PlantedNews(engine)
    assert news.all() == ()
    news.record(items)
    news.record(items)  # a resumed replay
    assert list(news.all()) == items
    assert obedience_of(engine) == []  # planted, but no cycle: nobody reached


def test_a_ledger_without_the_table_has_nothing_planted(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(text("DROP TABLE planted_news"))
    assert PlantedNews(engine).all() == ()
    assert obedience_of(engine) == []
