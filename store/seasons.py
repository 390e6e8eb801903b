"""Seasons, written and read: the `season` table (migration 0024).

This module owns a season's record: its name, its manifest (canonical JSON, built by
`ops.seasons.manifest`) with the manifest's SHA-256, its window of UTC dates, the config text it
was opened from, and when it was opened and closed. A season is opened once, before its first
slot: `open_season` refuses a name already taken and a ledger that already holds cycles inside
the window (the manifest must come before the record it governs). Its manifest and config never
change afterwards; `close_season` only stamps `closed_at`. Times are passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import Engine, Row, func, insert, inspect, select, update

from openbell.markets.errors import SeasonError
from openbell.store.core_tables import CYCLE_TABLE, SEASON_TABLE


@dataclass(frozen=True, slots=True, kw_only=True)
class Season:
    """A season of the ledger: see the module docstring. `end_on` None: open-ended."""

    name: str
    manifest: str
    manifest_sha256: str
    start_on: date
    end_on: date | None
    opened_at: datetime
    closed_at: datetime | None
    config: str
    config_path: str

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("a season needs a name")
        if self.end_on is not None and self.end_on < self.start_on:
            raise ValueError(f"season {self.name}: end {self.end_on} is before start")
        for at in (self.opened_at, self.closed_at):
            if at is not None and at.utcoffset() is None:
                raise ValueError("season times must be timezone-aware")

    @property
    def is_open(self) -> bool:
        """Whether the season has not been closed."""
        return self.closed_at is None

    @property
    def start_at(self) -> datetime:
        """The first instant of the window: 00:00 UTC of `start_on`."""
        return datetime.combine(self.start_on, time(), UTC)

    @property
    def end_at(self) -> datetime | None:
        """The instant after the window: 00:00 UTC of the day after `end_on` (None: open)."""
        if self.end_on is None:
            return None
        return datetime.combine(self.end_on + timedelta(days=1), time(), UTC)


def _season(row: Row[Any]) -> Season:
    return Season(
        name=row.name,
        manifest=row.manifest,
        manifest_sha256=row.manifest_sha256,
        start_on=row.start_on,
        end_on=row.end_on,
        opened_at=row.opened_at,
        closed_at=row.closed_at,
        config=row.config,
        config_path=row.config_path,
    )


def has_seasons(engine: Engine) -> bool:
    """Whether the ledger's schema has the `season` table (revision 0024 on): a read-only reader
    of an older ledger cannot upgrade it, and reads it as one without seasons."""
    return inspect(engine).has_table(SEASON_TABLE.name)


def open_season(engine: Engine, season: Season) -> None:
    """Record `season`, open; `SeasonError` if its name is taken or the ledger already holds
    cycles inside its window."""
    if season.closed_at is not None:
        raise ValueError("a season is opened open")
    with engine.begin() as connection:
        taken = connection.execute(
            select(SEASON_TABLE.c.name).where(SEASON_TABLE.c.name == season.name)
        ).first()
        if taken is not None:
            raise SeasonError(f"season {season.name!r} exists already in this ledger")
        inside = select(func.count()).where(CYCLE_TABLE.c.slot_at >= season.start_at)
        if season.end_at is not None:
            inside = inside.where(CYCLE_TABLE.c.slot_at < season.end_at)
        cycles = connection.execute(inside).scalar_one()
        if cycles:
            raise SeasonError(
                f"season {season.name!r}: the ledger already holds {cycles} cycles inside its "
                "window; a season's manifest is written before its first slot (use a fresh "
                "ledger, --db, or a later --start)"
            )
        connection.execute(
            insert(SEASON_TABLE).values(
                name=season.name,
                manifest=season.manifest,
                manifest_sha256=season.manifest_sha256,
                start_on=season.start_on,
                end_on=season.end_on,
                opened_at=season.opened_at,
                closed_at=None,
                config=season.config,
                config_path=season.config_path,
            )
        )


def seasons(engine: Engine) -> list[Season]:
    """Every season of the ledger, the first opened first; none before revision 0024."""
    if not has_seasons(engine):
        return []
    with engine.connect() as connection:
        rows = connection.execute(
            select(SEASON_TABLE).order_by(SEASON_TABLE.c.opened_at, SEASON_TABLE.c.id)
        ).all()
    return [_season(row) for row in rows]


def season_named(engine: Engine, name: str) -> Season:
    """The season called `name`; `SeasonError` naming the ledger's seasons if there is none."""
    found = seasons(engine)
    for season in found:
        if season.name == name:
            return season
    known = ", ".join(season.name for season in found) or "none"
    raise SeasonError(f"no season {name!r} in this ledger (its seasons: {known})")


def current_season(engine: Engine) -> Season | None:
    """The season a board names by default: the last opened of the open ones, else the last
    opened; None when the ledger has none."""
    found = seasons(engine)
    open_ones = [season for season in found if season.is_open]
    if open_ones:
        return open_ones[-1]
    return found[-1] if found else None


def season_at(engine: Engine, at: datetime) -> Season | None:
    """The season whose window holds `at`, the last opened if several do; None when none does
    (or the ledger has no seasons)."""
    holding = [
        season
        for season in seasons(engine)
        if season.start_at <= at and (season.end_at is None or at < season.end_at)
    ]
    return holding[-1] if holding else None


def close_season(engine: Engine, name: str, at: datetime) -> Season:
    """Close the season `name` at `at` and return it; `SeasonError` if there is none of that
    name or it is closed already."""
    if at.utcoffset() is None:
        raise ValueError("closing time must be timezone-aware")
    season = season_named(engine, name)
    if not season.is_open:
        raise SeasonError(f"season {name!r} was closed at {season.closed_at:%Y-%m-%d %H:%M} UTC")
    with engine.begin() as connection:
        connection.execute(
            update(SEASON_TABLE)
            .where(SEASON_TABLE.c.name == name, SEASON_TABLE.c.closed_at.is_(None))
            .values(closed_at=at)
        )
    return season_named(engine, name)
