"""Bars prepared once for point-in-time reads: one symbol's bars of one interval, and runs of them.

This module owns `BarSeries`, one symbol's bars of one interval, oldest first and never overlapping,
kept as what a read needs: their starts and ends in µs since the epoch (sorted, for bisection), when
each is first shown (`shown`: its end, or later for a cache replay's bars, which are shown from when
the live daemon had them; never decreasing, so "shown by `t`" is a bisection too), their opens and
closes, the `Bar`s themselves (built on first use, a block of `BLOCK_BARS` at a time, so a replay
builds only the bars it shows, and only the `BLOCKS_KEPT` blocks used last are kept) and the exact
running sums of their closes (built once, on first use). A `BarWindow` is a contiguous run of a
series' bars found by two bisections: the bars that started at or after some instant and were shown
by the decision time (had ended by then, and for a cache replay had been fetched), a `Sequence[Bar]`
whose slices are windows again, so the gateway serves a lookback from it without filtering or
decoding a bar, and the mean of its last closes comes from two running sums instead of adding them
up again (`BarWindow.mean_close`). It equals the windowed computation, `mean_of_last`, to the last
digit. `PreparedBars` is the optional member of a source that serves such windows (the replay
source); the gateway reads through it when it can.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, Inexact, getcontext
from typing import Any, Final, Protocol, overload, runtime_checkable

from openbell.markets.barfile import BarPrices
from openbell.markets.domain import Bar, Quote

#: How many `Bar`s a series builds at once, when one of them is first asked for.
BLOCK_BARS: Final = 256
#: How many blocks of `Bar`s a series keeps, those used last (a request spanning more builds
#: them all and keeps the last ones).
BLOCKS_KEPT: Final = 3
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)
#: Adding and subtracting finite decimals in this context is exact: no sum is ever rounded.
_EXACT: Final = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[Inexact])


def bar_quote(symbol: str, price: Decimal, at: datetime) -> Quote:
    """`Quote(symbol=symbol, price=price, at=at)` of a price read from a series (a bar's open or
    close, which its bar file or its `Bar` refused unless positive) at one of its bar's instants
    (UTC): built without checking them again, as a replay builds one per symbol and slot."""
    quote = _new(Quote)
    _SET_SYMBOL(quote, symbol)
    _SET_PRICE(quote, price)
    _SET_AT(quote, at)
    return quote


def slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The setter of slot `name` of the slotted class `cls`, to fill a frozen result built with
    `object.__new__`: `object.__setattr__` would look the name up on the class at every call."""
    setter: Callable[[Any, Any], None] = vars(cls)[name].__set__
    return setter


_new: Final = object.__new__
_SET_SYMBOL: Final = slot_setter(Quote, "symbol")
_SET_PRICE: Final = slot_setter(Quote, "price")
_SET_AT: Final = slot_setter(Quote, "at")


def mean_of_last(closes: Sequence[Decimal], n: int) -> Decimal:
    """The mean of the last `n` of `closes`, added up in order in the current decimal context:
    the windowed computation a prepared mean must equal."""
    return sum(closes[-n:], Decimal(0)) / n


class BarSeries:
    """One symbol's bars of one interval, oldest first; see the module docstring.

    `make_bars(lo, hi)` builds bars `lo .. hi - 1` when they are first asked for (a quote or a
    fill price needs none); `bars` gives them all at once (in-memory bars). `shown_us` says when
    each bar is first shown, in µs (never decreasing, never before its end; None: at its end).
    """

    __slots__ = (
        "_bars",
        "_blocks",
        "_make_bars",
        "_sums",
        "closes",
        "ends",
        "opens",
        "own_instants",
        "shown",
        "starts",
    )

    def __init__(
        self,
        prices: BarPrices,
        make_bars: Callable[[int, int], tuple[Bar, ...]],
        bars: tuple[Bar, ...] | None = None,
        shown_us: Sequence[int] | None = None,
    ) -> None:
        self.starts = prices.starts_us
        self.ends = prices.ends_us
        self.shown = prices.ends_us if shown_us is None else shown_us
        self.opens = prices.opens
        self.closes = prices.closes
        self._make_bars = make_bars
        self._bars = bars
        #: Whether `start_at` and `end_at` give the instants of `Bar`s given at construction
        #: (in-memory bars, whose UTC tzinfo may be another object than `datetime.UTC`); else
        #: they are the instants the µs stand for.
        self.own_instants = bars is not None
        self._blocks: dict[int, tuple[Bar, ...]] = {}
        self._sums: tuple[list[Decimal], int, int] | None = None

    @classmethod
    def of_bars(cls, bars: tuple[Bar, ...], shown_us: Sequence[int] | None = None) -> BarSeries:
        """The series of `bars`, already sorted and checked not to overlap, each shown from
        `shown_us` (None: its end)."""
        prices = BarPrices(
            starts_us=[(bar.start_at - _EPOCH) // _MICROSECOND for bar in bars],
            ends_us=[(bar.end_at - _EPOCH) // _MICROSECOND for bar in bars],
            opens=[bar.open for bar in bars],
            closes=[bar.close for bar in bars],
        )
        return cls(prices, lambda lo, hi: bars[lo:hi], bars, shown_us)

    @property
    def bars(self) -> tuple[Bar, ...]:
        """Every bar of the series, oldest first (built on first use, then kept)."""
        if self._bars is None:
            self._bars = self.slice(0, len(self.starts))
            self._blocks.clear()
        return self._bars

    def slice(self, lo: int, hi: int) -> tuple[Bar, ...]:
        """Bars `lo .. hi - 1` (`0 <= lo <= hi <= len`), building the blocks they are in."""
        if self._bars is not None:
            return self._bars[lo:hi]
        if hi <= lo:
            return ()
        first, last = lo // BLOCK_BARS, (hi - 1) // BLOCK_BARS
        if first == last:
            offset = first * BLOCK_BARS
            return self._block(first)[lo - offset : hi - offset]
        joined = tuple(itertools.chain.from_iterable(map(self._block, range(first, last + 1))))
        offset = first * BLOCK_BARS
        return joined[lo - offset : hi - offset]

    def _block(self, number: int) -> tuple[Bar, ...]:
        # The blocks are kept least recently used first; past `BLOCKS_KEPT` the oldest is dropped
        # (a replay's windows slide forward, so memory follows the lookbacks, not the files).
        found = self._blocks.pop(number, None)
        if found is None:
            lo = number * BLOCK_BARS
            found = self._make_bars(lo, min(lo + BLOCK_BARS, len(self.starts)))
        self._blocks[number] = found
        if len(self._blocks) > BLOCKS_KEPT:
            del self._blocks[next(iter(self._blocks))]
        return found

    def start_at(self, index: int) -> datetime:
        """The start of bar `index`: the `Bar`'s own instant once built (in-memory bars keep the
        UTC tzinfo they were given), else the instant its µs stand for, as a bar file's bars carry.
        """
        if self._bars is not None:
            return self._bars[index].start_at
        return _EPOCH + self.starts[index] * _MICROSECOND

    def end_at(self, index: int) -> datetime:
        """The end of bar `index`, as `start_at` gives its start."""
        if self._bars is not None:
            return self._bars[index].end_at
        return _EPOCH + self.ends[index] * _MICROSECOND

    def window(self, start_us: int, end_by_us: int) -> BarWindow:
        """The bars that started at or after `start_us` and were shown by `end_by_us` (had ended,
        for a cache replay also been fetched). Bars never overlap and `shown` never decreases, so
        both starts and shown times are increasing and the run is two bisections."""
        return BarWindow(self, *self.span(start_us, end_by_us))

    def span(self, start_us: int, end_by_us: int) -> tuple[int, int]:
        """The indices `lo, hi` (`lo <= hi`) of `window(start_us, end_by_us)`: its bars are
        `lo .. hi - 1`."""
        lo = bisect.bisect_left(self.starts, start_us)
        hi = bisect.bisect_right(self.shown, end_by_us)
        return lo, max(lo, hi)

    def last_ended(self, start_us: int, end_by_us: int) -> int | None:
        """The index of the last bar of `window(start_us, end_by_us)` (None: it is empty), found
        with one bisection: the last bar shown by `end_by_us`, if it started at or after
        `start_us`."""
        hi = bisect.bisect_right(self.shown, end_by_us)
        return hi - 1 if hi > 0 and self.starts[hi - 1] >= start_us else None

    def mean_close(self, lo: int, hi: int) -> Decimal:
        """The mean of the closes of bars `lo .. hi - 1` (at least one), equal to
        `mean_of_last(closes[lo:hi], hi - lo)`.

        The sum is the difference of two exact running sums. Closes are positive, so the running
        sums of the windowed computation are never larger than the window's sum nor finer than the
        finest close: when the sum fits the context's precision at that finest exponent, none of
        them was rounded and both sums are the same number (then divided alike); otherwise the
        closes are added up in order, as the windowed computation does.
        """
        sums, finest, _ = self._sums or self._running_sums()
        total = _EXACT.subtract(sums[hi], sums[lo])
        if total.adjusted() - finest + 1 > getcontext().prec:
            return mean_of_last(self.closes[lo:hi], hi - lo)
        return total / (hi - lo)

    def mean_closes(self, hi: int, windows: Iterable[int], found: int) -> dict[int, Decimal]:
        """`{n: mean_close(hi - n, hi)}` for each `n` of `windows` with `n <= found`
        (`found <= hi`): a moving average's means at one instant, the context's precision asked
        once. When even the sum of every close fits it at the finest exponent, so does each
        window's (closes are positive, so a window's sum is never larger), and no window is
        checked again."""
        sums, _, digits = self._sums or self._running_sums()
        means: dict[int, Decimal] = {}
        if digits > getcontext().prec:
            for n in windows:
                if n <= found:
                    means[n] = self.mean_close(hi - n, hi)
            return means
        top = sums[hi]
        for n in windows:  # a loop, not a comprehension: two windows, read at every slot
            if n <= found:
                means[n] = _EXACT.subtract(top, sums[hi - n]) / n
        return means

    def _running_sums(self) -> tuple[list[Decimal], int, int]:
        """The sums of the first 0, 1, ..., n closes, exact; the finest exponent of a close
        (0 at the coarsest); and the digits the sum of every close takes at that exponent."""
        if self._sums is None:
            closes = list(self.closes[0 : len(self.closes)])
            sums = list(itertools.accumulate(closes, _EXACT.add, initial=Decimal(0)))
            # The windowed sum starts from Decimal(0), whose exponent is 0.
            finest = min([0, *(_exponent(close) for close in closes)])
            self._sums = (sums, finest, sums[-1].adjusted() - finest + 1)
        return self._sums


def _exponent(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int):
        raise TypeError(f"a close must be a finite Decimal, got {value}")
    return exponent


class BarWindow(Sequence[Bar]):
    """Bars `lo .. hi - 1` of a `BarSeries`: a read-only sequence whose slices (step 1) are
    windows again, so taking the last bars of a window copies nothing until `bars` is read."""

    __slots__ = ("_hi", "_lo", "_series")

    def __init__(self, series: BarSeries, lo: int, hi: int) -> None:
        self._series = series
        self._lo = lo
        self._hi = hi

    def __len__(self) -> int:
        return self._hi - self._lo

    @overload
    def __getitem__(self, index: int) -> Bar: ...
    @overload
    def __getitem__(self, index: slice) -> BarWindow: ...
    def __getitem__(self, index: int | slice) -> Bar | BarWindow:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("a bar window is sliced with step 1 only")
            return BarWindow(self._series, self._lo + start, self._lo + max(start, stop))
        position = self._lo + index if index >= 0 else self._hi + index
        if not self._lo <= position < self._hi:
            raise IndexError("bar window index out of range")
        return self._series.slice(position, position + 1)[0]

    def __iter__(self) -> Iterator[Bar]:
        return iter(self.bars)

    def last(self, n: int) -> BarWindow:
        """The window of the last `n` bars of this one (all of them when it has fewer)."""
        return BarWindow(self._series, max(self._lo, self._hi - n), self._hi)

    @property
    def end_at(self) -> datetime | None:
        """The end of the window's last bar (None when it is empty)."""
        return self._series.end_at(self._hi - 1) if self._hi > self._lo else None

    @property
    def last_close(self) -> Decimal | None:
        """The close of the window's last bar, read without building a `Bar` (None: empty)."""
        return self._series.closes[self._hi - 1] if self._hi > self._lo else None

    @property
    def bars(self) -> tuple[Bar, ...]:
        """The window's bars, oldest first."""
        return self._series.slice(self._lo, self._hi)

    def mean_close(self, n: int) -> Decimal:
        """The mean of the closes of the window's last `n` bars (`1 <= n <= len(self)`)."""
        if not 1 <= n <= len(self):
            raise ValueError(f"a mean of {n} closes from a window of {len(self)} bars")
        return self._series.mean_close(self._hi - n, self._hi)


@runtime_checkable
class PreparedBars(Protocol):
    """A source whose bars are prepared as `BarSeries` (the replay source does this).

    The gateway reads its windows instead of asking for a time range and filtering what comes back:
    the same bars, found by bisection.
    """

    def ended_windows(
        self, symbols: Sequence[str], interval: str, start_at: datetime, end_by: datetime
    ) -> Mapping[str, BarWindow]:
        """For each of `symbols` with bars of `interval`, the window of those that started at or
        after `start_at` and had ended by `end_by`; an interval not served raises
        `IntervalUnavailable`."""
        ...

    def prepared_series(self, symbol: str, interval: str) -> BarSeries | None:
        """The series of `symbol`'s `interval` bars (None: it has none), for a read of one symbol
        to take its window from directly; an interval not served raises `IntervalUnavailable`."""
        ...
