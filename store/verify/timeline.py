"""An account's holdings in time: corporate actions' entitlements, borrow fees and missing fees.

A corporate action is owed on the holding just before its ex instant, a borrow fee on the short
held at its day's end, and every calendar day (UTC) the account ended short is owed a fee once
its latest snapshot is past the day. All three read the holdings "strictly before an instant":
the fills and actions in time order (`Event`), summed in one sweep from a start (nothing for a
full verification, a checkpoint's holdings for an incremental one) instead of one pass over every
fill per action or fee. The amounts are recomputed by the rules of `markets.corporate_actions`
and `markets.margin`, by the money rule.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from openbell.markets.corporate_actions import ActionKind, split_quantity
from openbell.markets.domain import round_money
from openbell.markets.margin import borrow_fee_at
from openbell.store.margin_ledger import day_end
from openbell.store.verify.breaches import (
    ACTION_AMOUNT,
    ACTION_CURRENCY,
    ACTION_ENTITLEMENT,
    BORROW_FEE,
    MISSING_BORROW_FEE,
    Collector,
)
from openbell.store.verify.entries import quantity_delta
from openbell.store.verify.facts import Account, Action, Fee, Fill


class Event(NamedTuple):
    """A holding moved: at `at`, `symbol` by `delta`."""

    at: datetime
    symbol: str
    delta: Decimal


def events_of(fills: Sequence[Fill], actions: Sequence[Action]) -> list[Event]:
    """The fills and actions as events, in time order."""
    events = [Event(fill.filled_at, fill.symbol, quantity_delta(fill)) for fill in fills]
    events.extend(Event(entry.ex_at, entry.symbol, entry.quantity_delta) for entry in actions)
    events.sort(key=lambda event: event.at)
    return events


def held_before(
    start: Mapping[str, Decimal], events: Sequence[Event], asked: Sequence[tuple[datetime, str]]
) -> list[Decimal]:
    """For each (instant, symbol) of `asked`, what was held of it strictly before the instant:
    `start` plus the `events` before it."""
    held: dict[str, Decimal] = defaultdict(Decimal, start)
    answers: list[Decimal] = [Decimal(0)] * len(asked)
    index = 0
    for position in sorted(range(len(asked)), key=lambda n: asked[n][0]):
        at, symbol = asked[position]
        while index < len(events) and events[index].at < at:
            held[events[index].symbol] += events[index].delta
            index += 1
        answers[position] = held[symbol]
    return answers


def check_actions(
    account: Account,
    actions: Sequence[Action],
    start: Mapping[str, Decimal],
    events: Sequence[Event],
    out: Collector,
) -> None:
    """Each entry's entitlement (the holding before its ex-date, from the fills and the earlier
    entries) and its amounts (the dividend; the split's new shares, fraction and cash)."""
    held = held_before(start, events, [(entry.ex_at, entry.symbol) for entry in actions])
    for entry, before in zip(actions, held, strict=True):
        where = f"corporate action {entry.id} ({entry.kind} of {entry.symbol}, ex {entry.ex_date})"
        if entry.currency != account.currency:
            out.add(
                account.id,
                ACTION_CURRENCY,
                None,
                None,
                f"{where} is in {entry.currency} on a {account.currency} account",
            )
            continue
        if entry.quantity_before != before:
            out.add(
                account.id,
                ACTION_ENTITLEMENT,
                before,
                entry.quantity_before,
                f"{where}: {entry.symbol} held before the ex-date, from the fills and earlier "
                "actions",
            )
        for expected, actual, what in _action_amounts(entry, account.currency):
            if expected != actual:
                out.add(account.id, ACTION_AMOUNT, expected, actual, f"{where}: {what}")


def _action_amounts(
    entry: Action, currency: str
) -> list[tuple[Decimal | None, Decimal | None, str]]:
    """(expected, actual, what) of each amount of `entry` the rules of `markets.actions` fix."""
    held = entry.quantity_before
    if entry.kind == ActionKind.CASH_DIVIDEND.value:
        paid = round_money(held * entry.cash_per_share, currency)
        return [
            (paid, entry.cash_delta, f"{held} x {entry.cash_per_share} per share"),
            (Decimal(0), entry.quantity_delta, "a dividend adds no shares"),
        ]
    after = split_quantity(held, entry.ratio)
    cash: Decimal | None = Decimal(0)
    if entry.fraction:
        cash = None if entry.price is None else round_money(entry.fraction * entry.price, currency)
    return [
        (after, held + entry.quantity_delta + entry.fraction, f"{held} x ratio {entry.ratio}"),
        (cash, entry.cash_delta, f"cash in lieu of {entry.fraction} at {entry.price}"),
    ]


def check_fees(
    account: Account,
    fees: Sequence[Fee],
    start: Mapping[str, Decimal],
    events: Sequence[Event],
    out: Collector,
) -> None:
    """Each borrow fee is on a short held at its day's end (the quantity it names, from the
    fills), charged after the day ended, in the account's currency, and its amount is
    `|quantity| x price x rate / 10000 / day_count` by the money rule."""
    held = held_before(start, events, [(day_end(fee.day), fee.symbol) for fee in fees])
    for fee, short in zip(fees, held, strict=True):
        where = f"borrow fee {fee.id} ({fee.symbol} on {fee.day})"
        end = day_end(fee.day)
        if short >= 0 or fee.quantity != short:
            out.add(
                account.id,
                BORROW_FEE,
                short,
                fee.quantity,
                f"{where}: a fee is charged only on a short held at the day's end; the fills "
                f"leave {short}",
            )
            continue
        if fee.charged_at < end:
            out.add(account.id, BORROW_FEE, None, None, f"{where}: charged before the day ended")
        if fee.currency != account.currency:
            out.add(
                account.id,
                BORROW_FEE,
                None,
                None,
                f"{where} is in {fee.currency} on a {account.currency} account",
            )
            continue
        try:
            expected = borrow_fee_at(
                fee.quantity, fee.price, fee.rate_bps, fee.day_count, account.currency
            )
        except ValueError as exc:
            out.add(account.id, BORROW_FEE, None, fee.amount, f"{where}: {exc}")
            continue
        if fee.amount != expected:
            out.add(
                account.id,
                BORROW_FEE,
                expected,
                fee.amount,
                f"{where}: {-fee.quantity} x {fee.price} x {fee.rate_bps} bps / "
                f"{fee.day_count} days",
            )


def check_missing_fees(
    account: Account,
    start: Mapping[str, Decimal],
    first_day: date | None,
    events: Sequence[Event],
    charged: set[tuple[str, date]],
    latest: datetime,
    last_day: date,
    out: Collector,
) -> None:
    """Each calendar day (UTC) from `first_day` (None: the first day a holding moved) through
    `last_day` that the account ended short a symbol (`start` plus the `events` before the day's
    end leave it negative) has its fee in `charged`: fees are charged before the first snapshot
    after the day ended (`daemon/valuation.py`), so by the latest one (at `latest`) every such day
    is charged."""
    held: dict[str, Decimal] = defaultdict(Decimal, start)
    index = 0
    day = first_day
    while True:
        if day is None:
            if index >= len(events):
                return
            day = events[index].at.astimezone(UTC).date()  # the next day a holding moved
        while day <= last_day:
            end = day_end(day)
            while index < len(events) and events[index].at < end:
                held[events[index].symbol] += events[index].delta
                index += 1
            shorts = sorted(symbol for symbol, quantity in held.items() if quantity < 0)
            if not shorts:
                break  # nothing is due until the next fill or action
            for symbol in shorts:
                if (symbol, day) not in charged:
                    out.add(
                        account.id,
                        MISSING_BORROW_FEE,
                        held[symbol],
                        None,
                        f"no borrow fee charged for {symbol} on {day}: the account ended that "
                        f"day (UTC) short {-held[symbol]} {symbol}, before its latest NAV "
                        f"snapshot at {latest.isoformat()}",
                    )
            day += timedelta(days=1)
        else:
            return
        day = None
