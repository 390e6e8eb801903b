"""A-share daily price bands: a stock's board, its limit, and the prices orders are refused at.

This module owns `LimitBand`, one stock's daily price limit at one session: its board (from its
code, `rules.board_of`), whether it is under special treatment (`Instrument.is_st`: the universe
file's flag, or the vendor's name label; not dated, so a stock that entered or left special
treatment within a run keeps one status), the official limit and its prices on the previous
close (the last close before the session however long ago, or on an ex-date the ex-date
reference price: the caller's), and the band execution enforces: the official limit less the
rules' buffer (`PriceLimits.buffer_pct`, KTD-Fin's 0.5-point engine buffer when configured), a
buy refused at or above `up` and a sell at or below `down`. `limit_band` builds one, execution
(`execution.py`) refuses orders by it and `get_quote` shows it (`board`, `limit_pct`,
`limit_up`, `limit_down`), so what an agent is shown is what is enforced. `band_rows` lists
every board's band for the rules text, and `with_limit_buffer` sets a market's buffer (config
`limit_buffer_pct`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Final

from openbell.markets.domain import Instrument, check_decimal
from openbell.markets.rules import (
    Board,
    MarketRules,
    PriceLimits,
    board_of,
    limit_prices,
    price_tick_for,
)

#: How each board is named to an agent, with the code prefixes that put a stock on it.
BOARD_LABELS: Final = {
    Board.MAIN: "main board (60xxxx, 00xxxx)",
    Board.CHINEXT: "ChiNext (30xxxx)",
    Board.STAR: "STAR (688xxx, 689xxx)",
    Board.BEIJING: "Beijing (8xxxxx, 4xxxxx, 92xxxx)",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitBand:
    """One stock's daily price band at one session, against `prev_close`.

    `official_pct` is the exchange's limit (0.10 for +-10 %) and `official_down`/`official_up`
    its prices, which no fill goes beyond; `pct = official_pct - buffer_pct` is the band
    execution enforces, `down`/`up` its prices (rounded half-up to the tick, as the exchanges
    publish theirs): a buy at or above `up` is refused as limit-up, a sell at or below `down` as
    limit-down. Without a buffer the two bands are the same.
    """

    symbol: str
    board: Board
    is_st: bool
    prev_close: Decimal
    official_pct: Decimal
    buffer_pct: Decimal
    official_down: Decimal
    official_up: Decimal
    down: Decimal
    up: Decimal

    @property
    def pct(self) -> Decimal:
        """The enforced band: the official limit less the buffer."""
        return self.official_pct - self.buffer_pct


def limit_band(instrument: Instrument, rules: MarketRules, prev_close: Decimal) -> LimitBand | None:
    """The band of `instrument` on `prev_close` under `rules`; None where the market has no
    price limits. `prev_close` must be positive."""
    limits = rules.price_limits
    if limits is None:
        return None
    check_decimal("prev_close", prev_close, positive=True)
    board = board_of(instrument.symbol)
    official = limits.pct_for(board, is_st=instrument.is_st)
    tick = price_tick_for(instrument, rules)
    official_down, official_up = limit_prices(prev_close, official, tick)
    if limits.buffer_pct:
        down, up = limit_prices(prev_close, official - limits.buffer_pct, tick)
    else:
        down, up = official_down, official_up
    return LimitBand(
        symbol=instrument.symbol,
        board=board,
        is_st=instrument.is_st,
        prev_close=prev_close,
        official_pct=official,
        buffer_pct=limits.buffer_pct,
        official_down=official_down,
        official_up=official_up,
        down=down,
        up=up,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BandRow:
    """One line of the band table: who it applies to, the official and the enforced limit."""

    label: str
    official_pct: Decimal
    pct: Decimal


def band_rows(limits: PriceLimits) -> tuple[BandRow, ...]:
    """Each board's band, then the special-treatment one, as the rules text lists them."""
    rows = [
        BandRow(label=BOARD_LABELS[board], official_pct=pct, pct=pct - limits.buffer_pct)
        for board, pct in limits.board_pct
    ]
    boards = " and ".join(board.value for board in sorted(limits.st_boards))
    rows.append(
        BandRow(
            label=f"ST/*ST stocks on the {boards} board",
            official_pct=limits.st_pct,
            pct=limits.st_pct - limits.buffer_pct,
        )
    )
    return tuple(rows)


def with_limit_buffer(rules: MarketRules, buffer_pct: Decimal | None) -> MarketRules:
    """`rules` with `buffer_pct` as its price-limit buffer (None keeps the rule's); refuses
    (ValueError) a buffer on a market without price limits, and one not below every limit."""
    if buffer_pct is None:
        return rules
    if rules.price_limits is None:
        raise ValueError(f"the {rules.market} market has no daily price limits to buffer")
    return replace(rules, price_limits=replace(rules.price_limits, buffer_pct=buffer_pct))


def percent(fraction: Decimal) -> str:
    """`fraction` as a percentage without trailing zeros: 0.095 -> "9.5%"."""
    shown = (fraction * 100).normalize()
    return f"{shown:f}%"
