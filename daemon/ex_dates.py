"""Applying corporate actions as the daemon runs: splits and dividends reach the ledger on time.

This module owns `ActionApplier`, one per market that has a `CorporateActionSource` (yfinance or
akshare live; a recorded file in a replay of raw daily bars). Before each slot's cycles and before
each session close's NAV snapshots it

1. fetches, once per market-local day (and again when the accounts have traded a new symbol), the
   actions of every symbol the accounts ever filled, with an ex-date from their first fill to
   today. A failed fetch is logged (`corporate_actions_unavailable`) and tried again at the next
   slot or close: an action is never lost, since each fetch covers every ex-date since the first
   fill, and the ledger's entry is per (account, action), so applying again is a no-op;
2. applies each action to each account once the daemon holds a price of its symbol stamped at or
   after the ex-date's open: the slot's quote (replay: the open of the ex-date's bar) or, at a
   close, the last bar's close. Quantities and the prices they are valued and traded at change
   together, so a 4-for-1 split is never a 75% loss, even when a live quote at the open is still
   the previous close. The ledger computes the entitlement from the holding before the ex-date,
   so an action applied late is still right; a split's fraction is paid at that price;
3. at a slot of an ex-date session, replaces each affected symbol's previous close in the slot's
   snapshot by the exchange's ex-date reference price, which A-share price limits are measured
   against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime
from zoneinfo import ZoneInfo

import structlog

from openbell.daemon.valuation import last_close_quotes
from openbell.markets.calendars import TradingCalendar
from openbell.markets.corporate_actions import (
    ActionKind,
    CorporateAction,
    CorporateActionSource,
    ex_reference_price,
    in_apply_order,
)
from openbell.markets.domain import Quote
from openbell.markets.errors import TransientError
from openbell.markets.gateway import MarketSnapshot, PointInTimeGateway
from openbell.markets.rules import MarketRules
from openbell.store.ledger import Ledger

log = structlog.stdlib.get_logger(__name__)

_Key = tuple[str, ActionKind, date]


def _key(action: CorporateAction) -> _Key:
    return (action.symbol, action.kind, action.ex_date)


class ActionApplier:
    """Fetches one market's corporate actions and applies them to its accounts (see module doc)."""

    def __init__(
        self,
        *,
        source: CorporateActionSource,
        ledger: Ledger,
        rules: MarketRules,
        calendar: TradingCalendar,
    ) -> None:
        if source.market != rules.market:
            raise ValueError(f"{rules.market} actions from a {source.market} source")
        self._source = source
        self._ledger = ledger
        self._rules = rules
        self._calendar = calendar
        self._zone = ZoneInfo(calendar.timezone)
        self._known: dict[_Key, CorporateAction] = {}
        self._fetched: tuple[date, frozenset[str]] | None = None
        self._done: set[tuple[int, _Key]] = set()

    @property
    def source(self) -> CorporateActionSource:
        """Where the actions come from."""
        return self._source

    @property
    def known(self) -> tuple[CorporateAction, ...]:
        """The actions fetched so far, in apply order."""
        return tuple(in_apply_order(self._known.values()))

    async def refresh(self, account_ids: Sequence[int], at: datetime) -> None:
        """Fetch the actions the accounts may be entitled to, unless done today for these symbols.

        A `TransientError` of the source is logged and left for the next call to retry.
        """
        symbols, first_fill_at = self._ledger.symbols_traded(account_ids)
        today = at.astimezone(self._zone).date()
        if first_fill_at is None or self._fetched == (today, symbols):
            return
        first = first_fill_at.astimezone(self._zone).date()
        try:
            found = await self._source.actions(sorted(symbols), first, today)
        except TransientError as exc:
            log.warning(
                "corporate_actions_unavailable",
                market=self._rules.market,
                source=self._source.name,
                error_class=type(exc).__name__,
                error_message=str(exc),
            )
            return
        for action in found:
            if action.ex_date <= today:
                self._known.setdefault(_key(action), action)
        self._fetched = (today, symbols)

    def apply(self, account_ids: Iterable[int], at: datetime, prices: Mapping[str, Quote]) -> int:
        """Apply every known action whose symbol has a price in `prices` stamped at or after its
        ex-date's open to each of `account_ids` not yet done; entries are stamped `at`. How many
        entries were written."""
        written = 0
        ids = tuple(account_ids)
        for action in self.known:
            price = prices.get(action.symbol)
            if action.ex_at > at or price is None or price.at < action.ex_at:
                continue  # not ex yet for us: the prices the accounts see are still cum
            for account_id in ids:
                done = (account_id, _key(action))
                if done in self._done:
                    continue
                try:
                    applied = self._ledger.apply_corporate_action(
                        account_id,
                        action,
                        at=at,
                        price=price.price,
                        step=self._rules.quantity_step,
                    )
                except ValueError as exc:
                    log.error(
                        "corporate_action_failed",
                        market=self._rules.market,
                        account_id=account_id,
                        action=action.describe(),
                        error_message=str(exc),
                    )
                    continue
                self._done.add(done)
                if applied is not None and applied.created:
                    written += 1
                    log.info(
                        "corporate_action_applied",
                        market=self._rules.market,
                        account_id=account_id,
                        action=action.describe(),
                        source=action.source,
                        quantity_before=applied.quantity_before,
                        quantity_delta=applied.quantity_delta,
                        cash_delta=applied.cash_delta,
                        at=at,
                    )
        return written

    async def at_slot(self, snapshot: MarketSnapshot, account_ids: Sequence[int]) -> MarketSnapshot:
        """Fetch and apply before a slot's cycles; the snapshot with ex-date reference prices."""
        await self.refresh(account_ids, snapshot.at)
        self.apply(account_ids, snapshot.at, snapshot.quotes)
        return self.with_reference_prices(snapshot)

    async def at_close(
        self, gateway: PointInTimeGateway, close_at: datetime, account_ids: Sequence[int]
    ) -> int:
        """Fetch and apply before a session close's snapshots, at the last closes ended by it."""
        await self.refresh(account_ids, close_at)
        waiting = {
            action.symbol
            for action in self._known.values()
            if action.ex_at <= close_at
            and any((account_id, _key(action)) not in self._done for account_id in account_ids)
        }
        if not waiting:
            return 0
        prices = await last_close_quotes(gateway, sorted(waiting), close_at)
        return self.apply(account_ids, close_at, prices)

    def with_reference_prices(self, snapshot: MarketSnapshot) -> MarketSnapshot:
        """`snapshot` with the previous close of each symbol going ex in the slot's session
        replaced by its ex-date reference price."""
        session = self._calendar.session_of(snapshot.at)
        if session is None:
            return snapshot
        by_symbol: dict[str, list[CorporateAction]] = {}
        for action in self._known.values():
            if action.ex_date == session and action.symbol in snapshot.previous_closes:
                by_symbol.setdefault(action.symbol, []).append(action)
        if not by_symbol:
            return snapshot
        closes = dict(snapshot.previous_closes)
        for symbol, actions in by_symbol.items():
            closes[symbol] = ex_reference_price(closes[symbol], actions, self._rules.price_tick)
        return replace(snapshot, previous_closes=closes)
