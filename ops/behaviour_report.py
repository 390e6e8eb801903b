"""Herculean's behavioural metrics of a market's accounts over a window, from the ledger.

This module owns turning the ledger facts of `store.behaviour_facts` into `ops.behaviour`'s hold
share, switch rate, reactivity and protocol completion, for every account of a leaderboard at
once. The rules:

- **Which cycles.** Hold share, switch rate and reactivity count `done` cycles only (a failed,
  skipped or missed cycle made no decision), as the no-trade share does; the book is carried
  through every cycle's fills in slot order, whatever its status, starting from the net
  quantities of the fills before the window. Quantities changed by corporate actions are not
  fills and are not seen: a split resizes a position but never adds or removes a symbol.
- **Hold share**: the share of done cycles whose fills net to zero in every symbol.
- **Switch rate**: the share of done cycles after which the set of held symbols is not the set
  before.
- **Reactivity**: the pooled Pearson correlation, over every done cycle but the window's first
  and every symbol the account traded in the window, of the weight the cycle traded (net signed
  notional over the account's slot NAV at that slot) against the symbol's return from the
  previous cycle's slot to this one, priced point-in-time as the benchmark is (`ops.benchmark`:
  the quote at the slot, carried forward over the union of the accounts' slots; each symbol is
  priced once for all accounts) from the report's price sources. A pair whose price or NAV is
  missing is left out.
- **Protocol completion** (agents that speak the tool protocol: those whose cycles in the window
  have trace rows; `None` for the others, such as the baselines): the share of the account's
  cycles in the window, whatever their status, that are done with the agent's own `finish` (or
  its decision mode's, acting on the model's answer) and, for an LLM agent, a loop that stopped
  because of that (`finished` or `answered`), not because of a budget, a refusal or a decision
  mode that gave up on the model's answers (`no_valid_action`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy import Engine

from openbell.markets.replay_source import ReplaySource
from openbell.ops import behaviour
from openbell.ops.benchmark import carried_prices
from openbell.ops.return_metrics import NavPoint
from openbell.store.behaviour_facts import (
    AccountTrades,
    ProtocolFacts,
    cycle_trades_of,
    protocol_facts_of,
)
from openbell.store.records import CycleStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class Conduct:
    """An account's behavioural metrics over the window; `None` where undefined."""

    hold_share: float | None
    switch_rate: float | None
    reactivity: float | None
    protocol_completion: float | None


def position_changes(trades: AccountTrades) -> list[behaviour.PositionChange]:
    """The position change of each done cycle, the book carried through every cycle."""
    book = dict(trades.opening)
    out: list[behaviour.PositionChange] = []
    for cycle in trades.cycles:
        before = frozenset(symbol for symbol, quantity in book.items() if quantity != 0)
        for symbol, quantity in cycle.quantities.items():
            book[symbol] = book.get(symbol, Decimal(0)) + quantity
        after = frozenset(symbol for symbol, quantity in book.items() if quantity != 0)
        if cycle.status is CycleStatus.DONE:
            out.append(
                behaviour.PositionChange(
                    held_before=before, held_after=after, net_quantities=cycle.quantities
                )
            )
    return out


def reactions(
    trades: AccountTrades,
    navs: Sequence[NavPoint],
    prices: Mapping[str, Mapping[datetime, float]],
) -> tuple[list[float], list[float]]:
    """The weight changes and previous returns of the account's (cycle, symbol) pairs (see the
    module docstring); `prices` maps each traded symbol to its positive price at the slots
    where it has one."""
    symbols = sorted({symbol for cycle in trades.cycles for symbol in cycle.notionals})
    weights: list[float] = []
    returns: list[float] = []
    nav_at = {point.at: float(point.nav) for point in navs}
    for previous, cycle in itertools.pairwise(trades.cycles):
        nav = nav_at.get(cycle.slot_at)
        if cycle.status is not CycleStatus.DONE or nav is None:
            continue
        for symbol in symbols:
            series = prices.get(symbol, {})
            before, now = series.get(previous.slot_at), series.get(cycle.slot_at)
            if before is None or now is None:
                continue
            notional = cycle.notionals.get(symbol)
            weights.append(0.0 if notional is None else float(notional) / nav)
            returns.append(now / before - 1.0)
    return weights, returns


def price_table(
    trades: Mapping[int, AccountTrades], sources: Sequence[ReplaySource]
) -> dict[str, dict[datetime, float]]:
    """Each symbol traded by any account, priced once at every slot of every account (the quote
    at the slot, carried forward over the union of the slots, as `ops.benchmark` prices), as a
    float (a statistic's input from here on); slots without a positive price are left out."""
    symbols = sorted(
        {s for found in trades.values() for cycle in found.cycles for s in cycle.notionals}
    )
    slots = sorted({cycle.slot_at for found in trades.values() for cycle in found.cycles})
    if not symbols or not sources:
        return {}
    return {
        symbol: {
            at: float(price)
            for at, price in zip(slots, carried_prices(sources, symbol, slots), strict=True)
            if price is not None and price > 0
        }
        for symbol in symbols
    }


def completion(facts: Sequence[ProtocolFacts]) -> float | None:
    """Protocol completion of an account's cycles; `None` when none of them has a trace."""
    if not any(fact.trace_rows for fact in facts):
        return None
    return behaviour.protocol_completion(
        [
            behaviour.ProtocolOutcome(
                done=fact.status is CycleStatus.DONE,
                agent_finished=fact.agent_finished,
                stop_reason=fact.stop_reason,
            )
            for fact in facts
        ]
    )


def conduct_of(
    engine: Engine,
    navs: Mapping[int, Sequence[NavPoint]],
    start: datetime | None,
    end: datetime | None,
    *,
    sources: Callable[[Sequence[str]], Sequence[ReplaySource]],
) -> dict[int, Conduct]:
    """The behavioural metrics of each account of `navs` (account id -> its slot NAVs in the
    window), with prices from `sources(symbols)` (the price sources of the symbols traded)."""
    ids = list(navs)
    if not ids:
        return {}
    trades = cycle_trades_of(engine, ids, start, end)
    protocol = protocol_facts_of(engine, ids, start, end)
    traded = sorted(
        {s for found in trades.values() for cycle in found.cycles for s in cycle.notionals}
    )
    prices = price_table(trades, tuple(sources(traded)) if traded else ())
    out: dict[int, Conduct] = {}
    for account_id in ids:
        changes = position_changes(trades[account_id])
        out[account_id] = Conduct(
            hold_share=behaviour.hold_share(changes),
            switch_rate=behaviour.switch_rate(changes),
            reactivity=behaviour.reactivity(
                *reactions(trades[account_id], navs[account_id], prices)
            ),
            protocol_completion=completion(protocol[account_id]),
        )
    return out
