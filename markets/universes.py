"""Universes as data: the named lists of instruments a market config can trade, and when.

This module owns the `Universe` value and its loading from the TOML files bundled under
`openbell/markets/data/universes/` (read through `importlib.resources`, so it works from a wheel).
Each file names its market, the date its list was taken (`as_of`), where the list came from
(`source`), an optional benchmark symbol, its instruments with their names, ST flags and index
weights, and the time it can vouch for. `[coverage]` is the window of dates (`from`, optional
`until`, and the `source` that says why) in which the file knows who the members were; a replay
outside it trades today's members in the past (survivorship bias), which `openbell replay` refuses
unless told otherwise. A member that joins or leaves inside the window has `from` / `until` dates
and a `dates_source`; an undated member is a member at every date the universe is used for. Every
`until` is the first day no longer included (a day range is `[from, until)`, like a bar).
`Universe.offered_on` is the point-in-time view an agent gets: the members of that day that have a
bar ended by then (the caller says which do). Unknown keys and malformed files are refused rather
than guessed at. A universe may also be a file of the user's (`load_universe("var/csi300.toml")`:
a name ending in `.toml` is a path), in the same format: what `openbell data import-universe` and
`download-universe` write (`markets.universe_files`), since vendors' member lists are not bundled.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Final

from openbell.markets.domain import Instrument, check_market
from openbell.markets.errors import ConfigError

#: The currency each market's instruments are quoted in.
MARKET_CURRENCY: Final = {"us": "USD", "cn": "CNY", "crypto": "USDT"}

_TOP_KEYS: Final = frozenset(
    {"name", "market", "as_of", "source", "benchmark", "instruments", "coverage"}
)
_REQUIRED_KEYS: Final = frozenset({"name", "market", "as_of", "instruments", "coverage"})
_INSTRUMENT_KEYS: Final = frozenset(
    {"symbol", "name", "is_st", "weight_pct", "from", "until", "dates_source"}
)
_COVERAGE_KEYS: Final = frozenset({"from", "until", "source"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Period:
    """The days `[from_date, until_date)` (None: unbounded on that side), and `source`, where
    those dates come from. A universe's coverage and a member's membership are periods."""

    from_date: date | None = None
    until_date: date | None = None
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("from_date", "until_date"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, datetime) or not isinstance(value, date)):
                raise TypeError(f"{name} must be a date, got {value!r}")
        if (
            self.from_date is not None
            and self.until_date is not None
            and self.until_date <= self.from_date
        ):
            raise ValueError(f"until {self.until_date} is not after from {self.from_date}")

    def describe(self) -> str:
        """The period in words, as errors and warnings quote it: `from D until E (excluded)`."""
        words = f"from {self.from_date}"
        return words if self.until_date is None else f"{words} until {self.until_date} (excluded)"

    def contains(self, day: date) -> bool:
        """Whether `day` is inside the period."""
        return (self.from_date is None or self.from_date <= day) and (
            self.until_date is None or day < self.until_date
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Universe:
    """A named, dated list of instruments of one market.

    `weights_pct` holds index weights in percent where the source gives them (symbol -> weight).
    `coverage` is the period the list is vouched for (None: a list given in the config, taken as
    it is at every date). `memberships` holds the dated members (symbol -> period); a member
    without an entry is a member at every date. A universe may be empty: the view offered on a day
    before any member had a bar is.
    """

    name: str
    market: str
    as_of: date
    instruments: tuple[Instrument, ...]
    source: str = ""
    benchmark: str | None = None
    weights_pct: Mapping[str, Decimal] = field(default_factory=dict)
    coverage: Period | None = None
    memberships: Mapping[str, Period] = field(default_factory=dict)
    # The members' symbols, worked out once (a cycle asks for them many times).
    _symbols: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_market(self.market)
        symbols = [instrument.symbol for instrument in self.instruments]
        object.__setattr__(self, "_symbols", tuple(symbols))
        if len(set(symbols)) != len(symbols):
            repeated = sorted({s for s in symbols if symbols.count(s) > 1})
            raise ValueError(f"universe {self.name} lists {repeated} more than once")
        foreign = [i.symbol for i in self.instruments if i.market != self.market]
        if foreign:
            raise ValueError(f"universe {self.name} ({self.market}) holds foreign {foreign}")
        unknown = sorted(set(self.weights_pct) - set(symbols))
        if unknown:
            raise ValueError(f"universe {self.name} has weights for non-members {unknown}")
        undated = sorted(set(self.memberships) - set(symbols))
        if undated:
            raise ValueError(f"universe {self.name} has membership dates for non-members {undated}")
        if self.coverage is not None:
            if self.coverage.from_date is None:
                raise ValueError(f"universe {self.name}: its coverage needs a from date")
            if not self.coverage.contains(self.as_of):
                raise ValueError(
                    f"universe {self.name}: as_of {self.as_of} is outside its coverage "
                    f"{_period_text(self.coverage)}"
                )
            for symbol, membership in self.memberships.items():
                if not _stated_inside(membership, self.coverage):
                    raise ValueError(
                        f"universe {self.name}: {symbol}: membership "
                        f"{_period_text(membership)} is outside the coverage "
                        f"{_period_text(self.coverage)}"
                    )

    @property
    def symbols(self) -> tuple[str, ...]:
        """The members' symbols, in the file's order."""
        return self._symbols

    def instrument(self, symbol: str) -> Instrument:
        """The member with this symbol; `KeyError` when it is not in the universe."""
        for instrument in self.instruments:
            if instrument.symbol == symbol:
                return instrument
        raise KeyError(f"{symbol} is not in universe {self.name}")

    def __contains__(self, symbol: object) -> bool:
        return symbol in self._symbols

    def is_member_on(self, symbol: str, day: date) -> bool:
        """Whether `symbol` is a member on `day` (an undated member always is)."""
        return symbol in self and self._dated_member(symbol, day)

    def days_member(self, symbol: str, days: Iterable[date]) -> tuple[date, ...]:
        """Those of `days` on which `symbol` is a member, in order (all of them for an undated
        member: its days are not looked at one by one)."""
        if symbol not in self:
            return ()
        membership = self.memberships.get(symbol)
        if membership is None:
            return tuple(days)
        return tuple(day for day in days if membership.contains(day))

    def _dated_member(self, symbol: str, day: date) -> bool:
        """Whether a member `symbol` is one on `day`: true unless its dates leave it out."""
        membership = self.memberships.get(symbol)
        return membership is None or membership.contains(day)

    def members_on(self, day: date) -> tuple[str, ...]:
        """The symbols of the members on `day`, in the file's order."""
        return tuple(symbol for symbol in self.symbols if self._dated_member(symbol, day))

    def offered_symbols(self, day: date, *, with_bars: Collection[str]) -> tuple[str, ...]:
        """The symbols of the members `offered_on(day, with_bars=with_bars)` keeps, in order."""
        return tuple(
            symbol
            for symbol in self.symbols
            if symbol in with_bars and self._dated_member(symbol, day)
        )

    def offered_on(self, day: date, *, with_bars: Collection[str]) -> Universe:
        """The universe an agent is offered on `day` (market-local): its members on `day` that
        are in `with_bars` (the symbols with a bar ended by the decision time), and its benchmark
        only if that is in `with_bars` too. Name, dates, source and coverage stay the same."""
        symbols = set(self.offered_symbols(day, with_bars=with_bars))
        kept = tuple(instrument for instrument in self.instruments if instrument.symbol in symbols)
        return replace(
            self,
            instruments=kept,
            benchmark=self.benchmark if self.benchmark in with_bars else None,
            weights_pct={s: w for s, w in self.weights_pct.items() if s in symbols},
            memberships={s: p for s, p in self.memberships.items() if s in symbols},
        )

    def covers(self, first_day: date, last_day: date) -> bool:
        """Whether the file vouches for its members from `first_day` through `last_day`
        (inclusive); a universe without coverage (a configured list) covers any window."""
        if self.coverage is None:
            return True
        return self.coverage.contains(first_day) and self.coverage.contains(last_day)


def _directory() -> Traversable:
    return resources.files("openbell.markets").joinpath("data", "universes")


def known_universes() -> tuple[str, ...]:
    """The names of the bundled universes, sorted."""
    return tuple(
        sorted(
            entry.name.removesuffix(".toml")
            for entry in _directory().iterdir()
            if entry.name.endswith(".toml")
        )
    )


def is_universe_file(name: str) -> bool:
    """Whether a configured universe names a file (it ends in `.toml`) rather than a bundled one."""
    return name.endswith(".toml")


def load_universe(name: str) -> Universe:
    """Load a bundled universe by name, or a universe file by its path (a name ending in `.toml`);
    an unknown name raises `ConfigError` listing the known, as does a missing or invalid file."""
    if is_universe_file(name):
        return load_universe_file(Path(name))
    known = known_universes()
    if name not in known:
        raise ConfigError(f"unknown universe {name!r}; known universes: {', '.join(known)}")
    text = _directory().joinpath(f"{name}.toml").read_text(encoding="utf-8")
    try:
        return parse_universe(tomllib.loads(text), origin=f"{name}.toml")
    except (tomllib.TOMLDecodeError, ValueError, TypeError) as exc:
        raise ConfigError(f"universe file {name}.toml is invalid: {exc}") from exc


def load_universe_file(path: Path) -> Universe:
    """The universe in the file at `path` (`ConfigError` when it is missing or invalid)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"universe file {path} cannot be read: {exc.strerror or exc}") from exc
    try:
        return parse_universe(tomllib.loads(text), origin=str(path))
    except (tomllib.TOMLDecodeError, ValueError, TypeError) as exc:
        raise ConfigError(f"universe file {path} is invalid: {exc}") from exc


def parse_universe(data: Mapping[str, Any], *, origin: str = "universe") -> Universe:
    """Build a `Universe` from a universe file's parsed TOML (`ValueError`/`TypeError` if bad)."""
    extra = sorted(set(data) - _TOP_KEYS)
    missing = sorted(_REQUIRED_KEYS - set(data))
    if extra or missing:
        raise ValueError(f"{origin}: unknown keys {extra}, missing keys {missing}")
    market = data["market"]
    check_market(market)
    if isinstance(data["as_of"], datetime) or not isinstance(data["as_of"], date):
        raise TypeError(f"{origin}: as_of must be a TOML date, got {data['as_of']!r}")
    if not data["instruments"]:
        raise ValueError(f"{origin}: universe {data['name']} has no instruments")
    instruments: list[Instrument] = []
    weights: dict[str, Decimal] = {}
    memberships: dict[str, Period] = {}
    for entry in data["instruments"]:
        unknown = sorted(set(entry) - _INSTRUMENT_KEYS)
        if unknown or "symbol" not in entry:
            raise ValueError(f"{origin}: instrument {entry!r}: unknown keys {unknown} or no symbol")
        instrument = Instrument(
            symbol=entry["symbol"],
            market=market,
            currency=MARKET_CURRENCY[market],
            name=entry.get("name", ""),
            is_st=bool(entry.get("is_st", False)),
        )
        instruments.append(instrument)
        if "weight_pct" in entry:
            weights[instrument.symbol] = _weight(entry["weight_pct"], origin)
        membership = _membership(entry, f"{origin}: {instrument.symbol}")
        if membership is not None:
            memberships[instrument.symbol] = membership
    return Universe(
        name=data["name"],
        market=market,
        as_of=data["as_of"],
        instruments=tuple(instruments),
        source=data.get("source", ""),
        benchmark=data.get("benchmark"),
        weights_pct=weights,
        coverage=_coverage(data["coverage"], origin),
        memberships=memberships,
    )


def _date_key(entry: Mapping[str, Any], key: str, origin: str) -> date | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, datetime) or not isinstance(value, date):
        raise TypeError(f"{origin}: {key} must be a TOML date (2025-09-30), got {value!r}")
    return value


def _coverage(value: object, origin: str) -> Period:
    if not isinstance(value, Mapping):
        raise TypeError(f"{origin}: coverage must be a table with from, until and source")
    unknown = sorted(set(value) - _COVERAGE_KEYS)
    if unknown:
        raise ValueError(f"{origin}: coverage: unknown keys {unknown}")
    if "from" not in value:
        raise ValueError(f"{origin}: coverage needs `from`, the first day the file vouches for")
    source = value.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"{origin}: coverage needs a `source` saying where its dates come from")
    try:
        return Period(
            from_date=_date_key(value, "from", f"{origin}: coverage"),
            until_date=_date_key(value, "until", f"{origin}: coverage"),
            source=source,
        )
    except ValueError as exc:
        raise ValueError(f"{origin}: coverage: {exc}") from exc


def _membership(entry: Mapping[str, Any], origin: str) -> Period | None:
    from_date = _date_key(entry, "from", origin)
    until_date = _date_key(entry, "until", origin)
    source = entry.get("dates_source")
    if from_date is None and until_date is None:
        if source is not None:
            raise ValueError(f"{origin}: dates_source without a from or until date")
        return None
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"{origin}: a membership date needs its `dates_source`")
    try:
        return Period(from_date=from_date, until_date=until_date, source=source)
    except ValueError as exc:
        raise ValueError(f"{origin}: membership: {exc}") from exc


def _stated_inside(membership: Period, coverage: Period) -> bool:
    """Whether each date `membership` states lies in `coverage` (its `until` may be the
    coverage's: a member leaving as the coverage ends)."""
    for day in (membership.from_date, membership.until_date):
        if day is None:
            continue
        if coverage.from_date is not None and day < coverage.from_date:
            return False
        if coverage.until_date is not None and day > coverage.until_date:
            return False
    return True


def _period_text(period: Period) -> str:
    start = "" if period.from_date is None else f"from {period.from_date}"
    end = "" if period.until_date is None else f"until {period.until_date}"
    return " ".join(part for part in (start, end) if part) or "at every date"


def _weight(value: object, origin: str) -> Decimal:
    # Weights are written as strings so they stay exact (a TOML float would not).
    if not isinstance(value, str):
        raise TypeError(f"{origin}: weight_pct must be a decimal string, got {value!r}")
    try:
        return Decimal(value)
    except InvalidOperation as exc:
        raise ValueError(f"{origin}: weight_pct {value!r} is not a decimal") from exc
