"""The NAV series a metrics convention measures, of an account and of the benchmark.

This module owns what a convention's `returns` (`ops.evaluation.conventions`) makes of the ledger.
Open to open, an account's series is its slot snapshots, each valued at the slot's opening prices,
and the benchmark is priced at the same instants (`benchmark.benchmark_navs`). Close to close, each
slot's period is valued at its end: the account's first snapshot after the slot (the next slot's, or
the session's close snapshot, whichever comes first, a close before a slot at the same instant; a
close more than a day later is not this slot's), stamped at that instant, after a base point
stamped at the window's first slot: the account's value before that slot's decision (its newest
snapshot taken before it, else its initial cash). A daily account's period ends are its session
closes, valued at the closes: the end-of-day NAV. An hourly account's period ends at the next
slot's snapshot, valued at that slot's opening prices after its orders (the ledger values an
account at slots and session closes only), so an hourly close-to-close series differs from the
closes by those orders' costs and the gap from a bar's close to the next bar's open. The
benchmark is priced at its bars' closes (`benchmark.close_navs`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from openbell.markets.replay_source import ReplaySource
from openbell.ops.evaluation.benchmark import Benchmark, benchmark_for, benchmark_navs, close_navs
from openbell.ops.evaluation.conventions import Convention
from openbell.ops.evaluation.return_metrics import NavPoint

#: A session close longer than this after a slot does not end that slot's period.
_SESSION = timedelta(days=1)
#: The bar interval of each cadence: the close-to-close benchmark's bars.
CADENCE_INTERVALS = {"daily": "1d", "hourly": "1h"}


def period_ends(
    slots: Sequence[NavPoint], closes: Sequence[NavPoint], base: NavPoint | None
) -> list[NavPoint]:
    """An account's close-to-close series (see the module docstring) from its slot snapshots in
    the window, its session-close snapshots from the window's start on, and its value before the
    first slot (`base`, stamped at that slot)."""
    if not slots:
        return []
    out = [] if base is None else [NavPoint(at=slots[0].at, nav=base.nav)]
    close_times = [point.at for point in closes]
    for index, slot in enumerate(slots):
        after = bisect.bisect_right(close_times, slot.at)
        close = closes[after] if after < len(closes) else None
        following = slots[index + 1] if index + 1 < len(slots) else None
        if close is not None and (following is None or close.at <= following.at):
            if close.at - slot.at <= _SESSION:
                out.append(close)
        elif following is not None:
            out.append(following)
    return out


def account_series(
    convention: Convention,
    slots: Sequence[NavPoint],
    closes: Sequence[NavPoint],
    before: Decimal,
) -> tuple[NavPoint, ...]:
    """The series `convention` measures of an account: its slot snapshots (open to open), or
    `period_ends` with `before` (its value before the window's first slot: its newest snapshot
    taken before it, or its initial cash) as the base."""
    if convention.returns == "open-to-open":
        return tuple(slots)
    if not slots:
        return ()
    return tuple(period_ends(slots, closes, NavPoint(at=slots[0].at, nav=before)))


def benchmark_series(
    convention: Convention,
    market: str,
    slots: Sequence[datetime],
    cadence: str,
    initial_cash: Decimal,
    sources: Sequence[ReplaySource],
    *,
    benchmark: Benchmark | None = None,
) -> tuple[NavPoint, ...]:
    """The benchmark's series under `convention` over the accounts' `slots` (increasing):
    `benchmark` (default the market's own, `benchmark_for`)."""
    published = convention.basket_weights == "as-published"
    spec = benchmark or benchmark_for(market)
    if convention.returns == "open-to-open":
        chosen = Benchmark(name=spec.name, weights=spec.weights_as(published=published))
        return tuple(benchmark_navs(market, slots, initial_cash, sources=sources, benchmark=chosen))
    return tuple(
        close_navs(
            market,
            slots,
            CADENCE_INTERVALS[cadence],
            initial_cash,
            sources=sources,
            published=published,
            benchmark=spec,
        )
    )
