"""Universes as data: the named lists of instruments a market config can trade.

This module owns the `Universe` value and its loading from the TOML files bundled under
`openbell/markets/data/universes/` (read through `importlib.resources`, so it works from a wheel).
Each file names its market, the date its membership is true for (`as_of`), where the list came from
(`source`), an optional benchmark symbol, and its instruments with their names, ST flags and index
weights. Unknown keys and malformed files are refused rather than guessed at.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, Final

from openbell.markets.domain import Instrument, check_market
from openbell.markets.errors import ConfigError

#: The currency each market's instruments are quoted in.
MARKET_CURRENCY: Final = {"us": "USD", "cn": "CNY", "crypto": "USDT"}

_TOP_KEYS: Final = frozenset({"name", "market", "as_of", "source", "benchmark", "instruments"})
_INSTRUMENT_KEYS: Final = frozenset({"symbol", "name", "is_st", "weight_pct"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Universe:
    """A named, dated list of instruments of one market.

    `weights_pct` holds index weights in percent where the source gives them (symbol -> weight).
    """

    name: str
    market: str
    as_of: date
    instruments: tuple[Instrument, ...]
    source: str = ""
    benchmark: str | None = None
    weights_pct: Mapping[str, Decimal] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_market(self.market)
        if not self.instruments:
            raise ValueError(f"universe {self.name} has no instruments")
        symbols = [instrument.symbol for instrument in self.instruments]
        if len(set(symbols)) != len(symbols):
            repeated = sorted({s for s in symbols if symbols.count(s) > 1})
            raise ValueError(f"universe {self.name} lists {repeated} more than once")
        foreign = [i.symbol for i in self.instruments if i.market != self.market]
        if foreign:
            raise ValueError(f"universe {self.name} ({self.market}) holds foreign {foreign}")
        unknown = sorted(set(self.weights_pct) - set(symbols))
        if unknown:
            raise ValueError(f"universe {self.name} has weights for non-members {unknown}")

    @property
    def symbols(self) -> tuple[str, ...]:
        """The members' symbols, in the file's order."""
        return tuple(instrument.symbol for instrument in self.instruments)

    def instrument(self, symbol: str) -> Instrument:
        """The member with this symbol; `KeyError` when it is not in the universe."""
        for instrument in self.instruments:
            if instrument.symbol == symbol:
                return instrument
        raise KeyError(f"{symbol} is not in universe {self.name}")

    def __contains__(self, symbol: object) -> bool:
        return any(instrument.symbol == symbol for instrument in self.instruments)


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


def load_universe(name: str) -> Universe:
    """Load a bundled universe by name; an unknown name raises `ConfigError` listing the known."""
    known = known_universes()
    if name not in known:
        raise ConfigError(f"unknown universe {name!r}; known universes: {', '.join(known)}")
    text = _directory().joinpath(f"{name}.toml").read_text(encoding="utf-8")
    try:
        return parse_universe(tomllib.loads(text), origin=f"{name}.toml")
    except (tomllib.TOMLDecodeError, ValueError, TypeError) as exc:
        raise ConfigError(f"universe file {name}.toml is invalid: {exc}") from exc


def parse_universe(data: Mapping[str, Any], *, origin: str = "universe") -> Universe:
    """Build a `Universe` from a universe file's parsed TOML (`ValueError`/`TypeError` if bad)."""
    extra = sorted(set(data) - _TOP_KEYS)
    missing = sorted({"name", "market", "as_of", "instruments"} - set(data))
    if extra or missing:
        raise ValueError(f"{origin}: unknown keys {extra}, missing keys {missing}")
    market = data["market"]
    check_market(market)
    if isinstance(data["as_of"], datetime) or not isinstance(data["as_of"], date):
        raise TypeError(f"{origin}: as_of must be a TOML date, got {data['as_of']!r}")
    instruments: list[Instrument] = []
    weights: dict[str, Decimal] = {}
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
    return Universe(
        name=data["name"],
        market=market,
        as_of=data["as_of"],
        instruments=tuple(instruments),
        source=data.get("source", ""),
        benchmark=data.get("benchmark"),
        weights_pct=weights,
    )


def _weight(value: object, origin: str) -> Decimal:
    # Weights are written as strings so they stay exact (a TOML float would not).
    if not isinstance(value, str):
        raise TypeError(f"{origin}: weight_pct must be a decimal string, got {value!r}")
    try:
        return Decimal(value)
    except InvalidOperation as exc:
        raise ValueError(f"{origin}: weight_pct {value!r} is not a decimal") from exc
