"""Herculean's behavioural metrics of a market's accounts over a window, from the ledger.

This module owns turning the ledger facts of `store.behaviour_facts` (and a rating agent's stored
reports, `store.rating_reports`) into `ops.evaluation.behaviour`'s panel, for every account of a
leaderboard at once. The rules:

- **Steps and trajectories.** Herculean (Appendix H.2) reads one agent's decisions about one
  asset, step by step. Here a step is a cycle of the account in the window, whatever its status
  (a cycle without a committed decision is a Hold, as the paper's "flat" step), and a trajectory
  is one symbol: every symbol the account traded in the window (a rating agent: every symbol it
  rated). A step's code is Herculean's action code, the direction of the cycle's net trade in the
  symbol (Buy +1, Hold 0, Sell -1; a cover counts as a buy, a short as a sell); a rating agent's
  is its rating's exposure (strong buy 1, buy 0.5, hold 0, sell -0.5, strong sell -1), 0 for a
  cycle without a report. Prices are point-in-time as the benchmark's (`ops.evaluation.benchmark`:
  the quote at the slot, carried forward over the union of the accounts' slots; each symbol priced
  once for all accounts) from the report's price sources.
- **Reactivity** (`reactivity`): per trajectory, Spearman's rank correlation of the code against
  the symbol's trailing return over the last `TRAILING_PERIODS` (5) steps, price at the step's slot
  over the price 5 slots earlier in the window, minus 1: at a daily cadence the paper's trailing
  5-day return, known at the decision; averaged over the trajectories where it is defined.
  `reactivity_next`: the same against the next step's return (the step's slot to the next one:
  open to open at a daily cadence, the return the decision earns, the paper's next-day return).
- **Persistence**: one minus the normalized turnover of the codes
  (`ops.evaluation.behaviour.persistence`).
- **Revision rate** (rating agents only): the share of consecutive pairs of committed reports
  whose rating of the symbol differs.
- **Hold share, switch rate, weight reactivity** count `done` cycles only (a failed, skipped or
  missed cycle made no decision), as the no-trade share does; the book is carried through every
  cycle's fills in slot order, whatever its status, starting from the net quantities of the fills
  before the window. Quantities changed by corporate actions are not fills and are not seen: a
  split resizes a position but never adds or removes a symbol. Hold share: the share of done
  cycles whose fills net to zero in every symbol. Switch rate: the share of done cycles after
  which the set of held symbols is not the set before. Weight reactivity (openbell's own, before
  Herculean's): the pooled Pearson correlation, over every done cycle but the window's first and
  every traded symbol, of the weight the cycle traded (net signed notional over the slot NAV)
  against the symbol's return from the previous cycle's slot to this one.
- **Protocol completion**: the share of the account's cycles in the window, whatever their
  status, with a valid submission by its kind's rule (`SUBMISSION_RULES`,
  `ops.evaluation.behaviour`): an LLM agent's own `finish` (or its mode's, on a valid answer) with a
  loop stopped by it; an outside agent's own `finish`; a rating agent's stored report; a
  strategy-code agent's run with valid weights; a Python plug-in's `done` cycle. The rule baselines
  have no protocol: `None`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

import numpy as np
from sqlalchemy import Engine

from openbell.agents.kinds import (
    BASELINE_KINDS,
    COMMAND_KIND,
    LLM_KIND,
    MCP_KIND,
    PAIR_NEUTRAL,
    RATING_KIND,
    RATINGS_TOOL,
    STRATEGY_CODE_KIND,
)
from openbell.agents.rating.report import Rating, stored_report
from openbell.markets.replay_source import ReplaySource
from openbell.ops.evaluation import behaviour
from openbell.ops.evaluation.benchmark import carried_prices_of
from openbell.ops.evaluation.return_metrics import NavPoint
from openbell.store.behaviour_facts import (
    AccountTrades,
    ProtocolFacts,
    cycle_trades_of,
    protocol_facts_of,
)
from openbell.store.rating_reports import rating_reports_of
from openbell.store.records import CycleStatus

#: The trailing window of reactivity, in steps: the paper's trailing 5-day return.
TRAILING_PERIODS = 5

#: Which steps of an agent kind are valid submissions (`ops.evaluation.behaviour`); a kind not
#: listed that is no rule baseline is a Python plug-in's (its own kind string).
SUBMISSION_RULES: Mapping[str, Callable[[behaviour.ProtocolStep], bool]] = {
    LLM_KIND: behaviour.llm_submitted,
    MCP_KIND: behaviour.outside_submitted,
    COMMAND_KIND: behaviour.outside_submitted,
    RATING_KIND: behaviour.rating_submitted,
    STRATEGY_CODE_KIND: behaviour.strategy_submitted,
}
#: The rule baselines: openbell's own code, deciding without a model, with no protocol to keep.
RULE_KINDS: frozenset[str] = frozenset({*BASELINE_KINDS, PAIR_NEUTRAL})

#: A symbol's price at each slot where it has one.
Prices = Mapping[str, Mapping[datetime, float]]
#: A rating agent's stored ratings: cycle id -> symbol -> rating.
CycleRatings = Mapping[int, Mapping[str, Rating]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Conduct:
    """An account's behavioural metrics over the window; `None` where undefined."""

    hold_share: float | None
    switch_rate: float | None
    reactivity: float | None
    reactivity_next: float | None
    persistence: float | None
    revision_rate: float | None
    weight_reactivity: float | None
    protocol_completion: float | None


def position_changes(trades: AccountTrades) -> list[behaviour.PositionChange]:
    """The position change of each done cycle, the book carried through every cycle."""
    book = dict(trades.opening)
    held = {symbol for symbol, quantity in book.items() if quantity != 0}
    after = frozenset(held)
    out: list[behaviour.PositionChange] = []
    for cycle in trades.cycles:
        before = after
        if cycle.quantities:  # a cycle without fills leaves the book, and the held set, as it was
            for symbol, quantity in cycle.quantities.items():
                book[symbol] = left = book.get(symbol, Decimal(0)) + quantity
                if left != 0:
                    held.add(symbol)
                else:
                    held.discard(symbol)
            after = frozenset(held)
        if cycle.status is CycleStatus.DONE:
            out.append(
                behaviour.PositionChange(
                    held_before=before, held_after=after, net_quantities=cycle.quantities
                )
            )
    return out


def reactions(
    trades: AccountTrades, navs: Sequence[NavPoint], prices: Prices
) -> tuple[list[float], list[float]]:
    """The weight changes and previous returns of the account's (cycle, symbol) pairs, the
    inputs of the weight reactivity (see the module docstring)."""
    cycles = trades.cycles
    symbols = sorted({symbol for cycle in cycles for symbol in cycle.notionals})
    if len(cycles) < 2 or not symbols:
        return [], []
    # Each symbol's price at each cycle's slot (NaN where it has none), looked up once.
    aligned = aligned_prices(trades, {symbol: prices.get(symbol, {}) for symbol in symbols})
    price = np.array([price_steps(aligned[symbol]) for symbol in symbols]).T  # cycle x symbol
    before, now = price[:-1], price[1:]
    # The NAV at each cycle's slot from the second on: NaN where the cycle is not done or has no
    # NAV (its pairs are left out, as a pair whose symbol is not priced at both slots).
    nav_at = {point.at: float(point.nav) for point in navs}
    nav = np.array(
        [
            nav_at.get(cycle.slot_at, np.nan) if cycle.status is CycleStatus.DONE else np.nan
            for cycle in cycles[1:]
        ]
    )
    column = {symbol: index for index, symbol in enumerate(symbols)}
    notional = np.zeros(before.shape)
    for row, cycle in enumerate(cycles[1:]):
        for symbol, value in cycle.notionals.items():
            notional[row, column[symbol]] = float(value)
    # The pairs in order of cycle, then symbol; each value the same float operations as one by
    # one (a weight is 0.0 where the cycle traded none of the symbol).
    kept = ~(np.isnan(before) | np.isnan(now) | np.isnan(nav)[:, None])
    weights = notional / nav[:, None]
    return weights[kept].tolist(), (now / before - 1.0)[kept].tolist()


def codes_of(trades: AccountTrades, ratings: CycleRatings | None) -> dict[str, list[float]]:
    """Each trajectory's codes, one per cycle of the window (see the module docstring): the
    ratings' exposures when `ratings` is given (a rating agent), else the action codes."""
    cycles = trades.cycles
    if ratings is not None:
        rated = sorted({symbol for found in ratings.values() for symbol in found})
        return {
            symbol: [
                float(found.exposure) if (found := ratings.get(c.cycle_id, {}).get(symbol)) else 0.0
                for c in cycles
            ]
            for symbol in rated
        }
    codes: dict[str, list[float]] = {}
    for index, cycle in enumerate(cycles):
        for symbol, quantity in cycle.quantities.items():
            series = codes.setdefault(symbol, [0.0] * len(cycles))
            series[index] = float(behaviour.action_code(quantity))
    return dict(sorted(codes.items()))


#: Rows of (code, return) pairs: an array of shape (n, 2).
Pairs = np.ndarray[tuple[int, int], np.dtype[np.float64]]
#: A symbol's price at each step, NaN where it has none.
PriceSteps = np.ndarray[tuple[int], np.dtype[np.float64]]


def price_steps(prices: Sequence[float | None] | PriceSteps) -> PriceSteps:
    """`prices` (a symbol's price at each step, None where it has none) as an array, NaN for
    None; an array is taken as it is."""
    if isinstance(prices, np.ndarray):
        return prices
    return np.array([np.nan if p is None else p for p in prices], dtype=float)


def paired_returns(
    codes: Sequence[float], prices: Sequence[float | None] | PriceSteps, lag: int
) -> Pairs:
    """Each step's code with the symbol's return over `lag` steps (`prices[i]`: its price at
    step i, None or NaN where it has none), one (code, return) row a step: back from the step
    when `lag` is negative (the price at the step over the price `-lag` steps earlier), ahead of
    it when positive; a step whose return falls outside the window or is not priced is left
    out."""
    count = len(prices)
    if abs(lag) >= count or lag == 0:
        return np.empty((0, 2))
    price = price_steps(prices)
    code = np.asarray(codes, dtype=float)
    if lag < 0:
        steps, returns = code[-lag:], price[-lag:] / price[:lag] - 1.0
    else:
        steps, returns = code[:-lag], price[lag:] / price[:-lag] - 1.0
    kept = np.isfinite(returns)
    return np.column_stack((steps[kept], returns[kept]))


def aligned_prices(trades: AccountTrades, prices: Prices) -> dict[str, list[float | None]]:
    """Each priced symbol's price at each of the account's steps (None where it has none)."""
    slots = [cycle.slot_at for cycle in trades.cycles]
    return {symbol: list(map(series.get, slots)) for symbol, series in prices.items()}


def trajectories(
    codes: Mapping[str, Sequence[float]],
    aligned: Mapping[str, Sequence[float | None] | PriceSteps],
    lag: int,
) -> list[Pairs]:
    """Each trajectory's (code, return over `lag` steps) pairs (`paired_returns`)."""
    return [
        paired_returns(series, aligned.get(symbol, ()), lag) for symbol, series in codes.items()
    ]


def revisions_of(trades: AccountTrades, ratings: CycleRatings) -> list[list[str | None]]:
    """Each rated symbol's rating at every cycle of the window (None without a report)."""
    rated = sorted({symbol for found in ratings.values() for symbol in found})
    return [
        [
            found.value if (found := ratings.get(cycle.cycle_id, {}).get(symbol)) else None
            for cycle in trades.cycles
        ]
        for symbol in rated
    ]


def price_table(
    symbols: Sequence[str], slots: Sequence[datetime], sources: Sequence[ReplaySource]
) -> dict[str, dict[datetime, float]]:
    """Each of `symbols` priced once at every one of `slots` (increasing; the quote at the slot,
    carried forward, as `ops.evaluation.benchmark` prices), as a float (a statistic's input from
    here on); slots without a positive price are left out."""
    if not symbols or not sources:
        return {}
    return {
        symbol: {
            at: float(price)
            for at, price in zip(slots, prices, strict=True)
            if price is not None and price > 0
        }
        for symbol, prices in carried_prices_of(sources, symbols, slots).items()
    }


def submission_rule(kind: str) -> Callable[[behaviour.ProtocolStep], bool] | None:
    """The rule of an agent `kind`'s valid submissions; None for a rule baseline."""
    if kind in RULE_KINDS:
        return None
    return SUBMISSION_RULES.get(kind, behaviour.plugin_submitted)


def completion(kind: str, facts: Sequence[ProtocolFacts]) -> float | None:
    """Protocol completion of an account of `kind` over its cycles' facts (module docstring)."""
    rule = submission_rule(kind)
    if rule is None:
        return None
    steps = [
        behaviour.ProtocolStep(
            done=fact.status is CycleStatus.DONE,
            agent_finished=fact.agent_finished,
            stop_reason=fact.stop_reason,
            reported=fact.reported,
            strategy_outcome=fact.strategy_outcome,
        )
        for fact in facts
    ]
    return behaviour.protocol_completion(steps, rule)


def ratings_of(
    engine: Engine, account_ids: Sequence[int], start: datetime | None, end: datetime | None
) -> dict[int, dict[int, dict[str, Rating]]]:
    """Each rating account's stored ratings in the window: cycle id -> symbol -> rating."""
    stored = rating_reports_of(engine, account_ids, RATINGS_TOOL, start, end)
    return {
        account_id: {
            report.cycle_id: {
                rating.symbol: rating.rating for rating, _ in stored_report(report.text)
            }
            for report in reports
        }
        for account_id, reports in stored.items()
    }


def conduct_of(
    engine: Engine,
    navs: Mapping[int, Sequence[NavPoint]],
    start: datetime | None,
    end: datetime | None,
    *,
    kinds: Mapping[int, str],
    sources: Callable[[Sequence[str]], Sequence[ReplaySource]],
    facts: tuple[Mapping[int, AccountTrades], Mapping[int, Sequence[ProtocolFacts]]] | None = None,
) -> dict[int, Conduct]:
    """The behavioural metrics of each account of `navs` (account id -> its slot NAVs in the
    window), of the agent kind `kinds[account id]`, with prices from `sources(symbols)` (the
    price sources of the symbols traded or rated). `facts` are the accounts' cycle trades and
    protocol facts in the window when the caller has read them (else they are read here)."""
    ids = list(navs)
    if not ids:
        return {}
    if facts is None:
        trades: Mapping[int, AccountTrades] = cycle_trades_of(engine, ids, start, end)
        protocol: Mapping[int, Sequence[ProtocolFacts]] = protocol_facts_of(
            engine, ids, start, end, report_tool=RATINGS_TOOL
        )
    else:
        trades, protocol = facts
    raters = [account_id for account_id in ids if kinds[account_id] == RATING_KIND]
    ratings = ratings_of(engine, raters, start, end) if raters else {}
    codes = {
        account_id: codes_of(trades[account_id], ratings.get(account_id)) for account_id in ids
    }
    traded = {s for found in trades.values() for cycle in found.cycles for s in cycle.notionals}
    symbols = sorted(traded | {symbol for found in codes.values() for symbol in found})
    slots = sorted({cycle.slot_at for found in trades.values() for cycle in found.cycles})
    prices = price_table(symbols, slots, tuple(sources(symbols)) if symbols else ())
    out: dict[int, Conduct] = {}
    for account_id in ids:
        found = trades[account_id]
        changes = position_changes(found)
        mine = codes[account_id]
        rated = ratings.get(account_id)
        # As arrays once, for both lags' trajectories.
        aligned = {
            symbol: price_steps(steps)
            for symbol, steps in aligned_prices(
                found, {symbol: prices.get(symbol, {}) for symbol in mine}
            ).items()
        }
        out[account_id] = Conduct(
            hold_share=behaviour.hold_share(changes),
            switch_rate=behaviour.switch_rate(changes),
            reactivity=behaviour.reactivity(trajectories(mine, aligned, -TRAILING_PERIODS)),
            reactivity_next=behaviour.reactivity(trajectories(mine, aligned, 1)),
            persistence=behaviour.persistence(list(mine.values())),
            revision_rate=(
                behaviour.revision_rate(revisions_of(found, rated)) if rated is not None else None
            ),
            weight_reactivity=behaviour.weight_reactivity(
                *reactions(found, navs[account_id], prices)
            ),
            protocol_completion=completion(kinds[account_id], protocol[account_id]),
        )
    return out
