"""What each web page shows: the read model's values turned into the rows and figures of a page.

This module owns the step between `ops.web.read_model` and the templates: which columns a page
has, how each figure is written (`ops.reports.figures`, the CLI tables' rounding: one figure prints
the same in a terminal and in a browser), and which of our own routes each link goes to. Links are
built here from ids and names the ledger holds, never taken from text an agent wrote; every text
stays plain `str` (the templates escape it), and only the charts (`ops.web.charts`, our own SVG)
are markup. Nothing here reads the ledger: the pages module passes the read model's values in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from urllib.parse import quote

from markupsafe import Markup

from openbell.markets.rules import rules_for
from openbell.ops.evaluation.return_metrics import NavPoint
from openbell.ops.evaluation.significance import BoardSignificance
from openbell.ops.reports import figures
from openbell.ops.reports.exporting import decimal_text
from openbell.ops.reports.market_reports import (
    AgentReport,
    Leaderboard,
    LeaderboardRow,
    LlmUsage,
)
from openbell.ops.web.charts import equity_chart, nav_range, sparkline
from openbell.ops.web.rating_view import RatingLine, rating_lines
from openbell.ops.web.read_model import CycleDetail, MarketSummary
from openbell.ops.web.seed_views import SeedGroupView, seed_group_view
from openbell.ops.web.significance_view import (
    NOT_COMPARED,
    SignificanceCells,
    SignificanceNote,
    significance_cells,
    significance_note,
)
from openbell.store.account_history import AccountCycle, AccountFill, AccountOrder
from openbell.store.cycle_trades import CycleOrder, TradeFill
from openbell.store.holdings import AccountHoldings
from openbell.store.queries import ReportedModel
from openbell.store.records import CycleUsage, TraceEntry

UNPRICED = figures.UNPRICED
MARKET_TITLES = {"us": "US equities", "cn": "China A-shares", "crypto": "Crypto"}


def agent_href(market: str, agent: str) -> str:
    """The agent page's path: `/markets/us/agents/buy-and-hold` (the name percent-encoded)."""
    return f"/markets/{quote(market, safe='')}/agents/{quote(agent, safe='')}"


def market_href(market: str) -> str:
    """The market page's path: `/markets/us`."""
    return f"/markets/{quote(market, safe='')}"


def cycle_href(cycle_id: int) -> str:
    """The cycle page's path."""
    return f"/cycles/{int(cycle_id)}"


def instant(at: datetime | None) -> str:
    """An instant as a person reads it in a table: `2026-01-05 15:00 UTC`."""
    return figures.MISSING if at is None else at.strftime("%Y-%m-%d %H:%M UTC")


def market_title(market: str) -> str:
    """A market's name for a heading."""
    return MARKET_TITLES.get(market, market)


@dataclass(frozen=True, slots=True, kw_only=True)
class ArenaRow:
    """One leaderboard row of the arena page, its figures written as the CLI's table writes them."""

    rank: int | None
    name: str
    is_benchmark: bool
    href: str | None
    spark: Markup
    final_nav: str
    composite: str
    cumulative_return: str
    return_class: str
    max_drawdown: str
    sortino_ratio: str
    z_cumulative_return: str
    z_max_drawdown: str
    z_sortino_ratio: str
    trades: str
    cost_per_decision: str
    #: The model answered under more than one identity (`LlmUsage.model_changed`).
    model_changed: bool = False
    #: The row's deflated Sharpe, adjusted p-value and immature mark (`significance_view`).
    significance: SignificanceCells = NOT_COMPARED
    #: The row's training-cutoff mark (`ops.reports.contamination.AgentCutoff.mark`), if any.
    cutoff_mark: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ArenaBoard:
    """One market's leaderboard on the arena page."""

    market: str
    href: str
    title: str
    cadence: str
    benchmark: str
    currency: str
    last_at: str | None
    rows: tuple[ArenaRow, ...]
    seed_groups: tuple[SeedGroupView, ...] = ()
    #: The metrics convention the board is measured under, by name.
    convention: str = "openbell"
    #: The settings of the board's significance suite (None: the page shows no suite).
    significance: SignificanceNote | None = None
    #: The board's line about its training cutoffs (the post-cutoff headline), if marked.
    cutoff_note: str | None = None
    #: Which view of the board is shown: `post-cutoff` (the headline) or `all` slots.
    slots: str = "post-cutoff"


def _sign_class(shown: str) -> str:
    """`pos` or `neg` by the sign of the figure as shown: a return that rounds to 0.00 is
    neither (no red `-0.00`)."""
    try:
        value = Decimal(shown.replace(",", ""))
    except ArithmeticError:  # the MISSING mark
        return ""
    if value == 0:
        return ""
    return "pos" if value > 0 else "neg"


def arena_row(
    market: str,
    row: LeaderboardRow,
    navs: Sequence[NavPoint],
    ratio_places: int = 2,
    scale: tuple[float, float] | None = None,
    significance: BoardSignificance | None = None,
    cutoff_mark: str | None = None,
) -> ArenaRow:
    """A leaderboard row with its sparkline (`navs`: the account's slot NAVs; none for the
    benchmark row; on `scale` when the board's lines share one), its Sortino to `ratio_places`
    (the board's convention's) and its figures of the board's `significance` suite."""
    ranking, panel = row.ranking, row.panel
    cumulative_return = figures.percent(panel.cumulative_return)
    return ArenaRow(
        rank=ranking.rank,
        name=ranking.name,
        is_benchmark=ranking.is_benchmark,
        href=None if row.agent is None else agent_href(market, row.agent),
        spark=sparkline(navs, label=f"NAV of {ranking.name}", scale=scale),
        final_nav=figures.money(row.final_nav),
        composite=figures.places(ranking.composite, 3),
        cumulative_return=cumulative_return,
        return_class=_sign_class(cumulative_return),
        max_drawdown=figures.percent(panel.max_drawdown),
        sortino_ratio=figures.places(panel.sortino_ratio, ratio_places),
        z_cumulative_return=figures.places(ranking.z_cumulative_return, 3),
        z_max_drawdown=figures.places(ranking.z_max_drawdown, 3),
        z_sortino_ratio=figures.places(ranking.z_sortino_ratio, 3),
        trades=figures.MISSING if row.behaviour is None else str(row.behaviour.trades),
        cost_per_decision=_cost_text(row.llm),
        model_changed=row.llm is not None and row.llm.model_changed,
        significance=(
            NOT_COMPARED if row.is_benchmark else significance_cells(significance, ranking.name)
        ),
        cutoff_mark=cutoff_mark,
    )


def model_text(found: ReportedModel) -> str:
    """A reported model identity in one line: its name, fingerprint and revision as reported."""
    parts = [found.model or "(no model named)"]
    if found.fingerprint is not None:
        parts.append(f"fingerprint {found.fingerprint}")
    if found.revision is not None:
        parts.append(found.revision)
    return ", ".join(parts)


def _cost_text(usage: LlmUsage | None) -> str:
    """An LLM agent's cost per decision to 4 places, `unpriced` when its model has no price (never
    a zero it was not charged); `-` for an agent without a model."""
    if usage is None:
        return figures.MISSING
    if usage.cost_per_decision is None:
        return UNPRICED
    return figures.places(usage.cost_per_decision, 4)


def arena_board(
    summary: MarketSummary,
    board: Leaderboard,
    navs: Mapping[str, Sequence[NavPoint]],
    *,
    shared_scale: bool = False,
    significance: BoardSignificance | None = None,
) -> ArenaBoard:
    """A market's leaderboard for the arena page; `navs` maps agent names to their slot NAVs,
    drawn each on its own scale or, with `shared_scale`, all on the board's one; `significance`,
    the board's suite (`ops.reports.board_significance`), fills the DSR, adj. p and immature
    columns."""
    shown = [navs.get(row.agent, ()) for row in board.rows if row.agent]
    scale = nav_range(shown) if shared_scale else None
    return ArenaBoard(
        market=board.market,
        href=market_href(board.market),
        title=market_title(board.market),
        cadence=board.cadence,
        benchmark=board.benchmark,
        currency=board.currency,
        last_at=None if summary.last_slot_at is None else instant(summary.last_slot_at),
        rows=tuple(
            arena_row(
                board.market,
                row,
                navs.get(row.agent, ()) if row.agent else (),
                board.convention.ratio_places,
                scale,
                significance,
                _cutoff_mark(board, row),
            )
            for row in board.rows
        ),
        seed_groups=tuple(seed_group_view(group) for group in board.seed_groups),
        convention=board.convention.name,
        significance=None if significance is None else significance_note(significance),
        cutoff_note=None if board.cutoffs is None else board.cutoffs.note(),
        slots="post-cutoff" if board.cutoffs is None else board.cutoffs.view,
    )


def _cutoff_mark(board: Leaderboard, row: LeaderboardRow) -> str | None:
    """The row's training-cutoff mark on a marked board."""
    found = None if board.cutoffs is None or row.is_benchmark else board.cutoffs.of(row.name)
    return None if found is None else found.mark


@dataclass(frozen=True, slots=True, kw_only=True)
class PositionLine:
    """One open position on the agent page."""

    symbol: str
    quantity: str
    mark: str
    value: str
    weight: str
    marked_at: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderLine:
    """One order on a page: what was asked, its fill or rejection, and the agent's reason."""

    order_id: int
    cycle_id: int
    cycle_href: str
    seq: int
    placed_at: str
    symbol: str
    side: str
    quantity: str
    status: str
    reject_reason: str
    fill_price: str
    fees: str
    confidence: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FillLine:
    """One fill on the agent page, with its order's reason and a link to its cycle."""

    filled_at: str
    symbol: str
    side: str
    quantity: str
    price: str
    notional: str
    fees: str
    price_source: str
    reason: str
    cycle_id: int
    cycle_href: str


def fill_line(fill: AccountFill, step: Decimal) -> FillLine:
    """A fill as a row of the agent page."""
    return FillLine(
        filled_at=instant(fill.filled_at),
        symbol=fill.symbol,
        side=fill.side,
        quantity=figures.quantity(fill.quantity, step),
        price=figures.price(fill.price),
        notional=figures.money(fill.notional),
        fees=figures.money(fill.fees),
        price_source=fill.price_source,
        reason=fill.reason,
        cycle_id=fill.cycle_id,
        cycle_href=cycle_href(fill.cycle_id),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleLine:
    """One cycle on the agent page."""

    href: str
    slot_at: str
    status: str
    orders: int
    fills: int
    rejections: int
    tokens: str
    cost: str
    note: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentView:
    """Everything the agent page shows."""

    name: str
    kind: str
    market: str
    market_title: str
    currency: str
    rank: str
    #: The NAV of the last slot snapshot (the leaderboard's) and its instant.
    final_nav: str
    final_nav_at: str
    benchmark: str
    chart: Markup
    metrics: tuple[tuple[str, str], ...]
    cash: str
    positions: tuple[PositionLine, ...]
    #: The positions panel's totals: the NAV at the last marks (cash and every holding at its
    #: newest mark) and when, and the last slot snapshot's NAV and when (the header's figure).
    marks_nav: str = figures.MISSING
    marks_at: str = figures.MISSING
    slot_nav: str = figures.MISSING
    slot_nav_at: str = figures.MISSING
    orders: tuple[OrderLine, ...]
    fills: tuple[FillLine, ...]
    cycles: tuple[CycleLine, ...]


def _fill_figures(fills: Sequence[TradeFill]) -> tuple[str, str]:
    """The average fill price and the fees of an order's fills."""
    if not fills:
        return figures.MISSING, figures.MISSING
    quantity = sum((fill.quantity for fill in fills), Decimal(0))
    notional = sum((fill.notional for fill in fills), Decimal(0))
    fees = sum((fill.fees for fill in fills), Decimal(0))
    average = notional / quantity if quantity else None
    return figures.price(average), figures.money(fees)


def order_line(order: AccountOrder | CycleOrder, cycle_id: int, step: Decimal) -> OrderLine:
    """An order as a table row; its cycle link built from the ledger's cycle id."""
    fill_price, fees = _fill_figures(order.fills)
    rejected = order.reject_reason or ""
    if order.reject_message:
        rejected = f"{rejected}: {order.reject_message}" if rejected else order.reject_message
    return OrderLine(
        order_id=order.order_id,
        cycle_id=cycle_id,
        cycle_href=cycle_href(cycle_id),
        seq=order.seq,
        placed_at=instant(order.placed_at),
        symbol=order.symbol,
        side=order.side,
        quantity=figures.quantity(order.quantity, step),
        status=order.status,
        reject_reason=rejected,
        fill_price=fill_price,
        fees=fees,
        confidence=figures.MISSING if order.confidence is None else decimal_text(order.confidence),
        reason=order.reason,
    )


def _tokens(usage: CycleUsage | None) -> str:
    if usage is None:
        return figures.MISSING
    return f"{usage.tokens_in:,} in / {usage.tokens_out:,} out"


def _cost(usage: CycleUsage | None) -> str:
    return figures.MISSING if usage is None else figures.places(usage.cost, 4)


def cycle_line(cycle: AccountCycle) -> CycleLine:
    """A cycle as a row of the agent page."""
    note = cycle.reason or ""
    if cycle.error_class:
        note = f"{cycle.error_class}: {cycle.error_message or ''}".rstrip(": ")
    return CycleLine(
        href=cycle_href(cycle.cycle_id),
        slot_at=instant(cycle.slot_at),
        status=cycle.status.value,
        orders=cycle.orders,
        fills=cycle.fills,
        rejections=cycle.rejections,
        tokens=_tokens(cycle.usage),
        cost=_cost(cycle.usage),
        note=note,
    )


def _metrics(found: AgentReport) -> tuple[tuple[str, str], ...]:
    panel, done = found.row.panel, found.behaviour
    ranking = found.row.ranking
    out = [
        ("cumulative return %", figures.percent(panel.cumulative_return)),
        ("annual return %", figures.percent(panel.annual_return)),
        ("annual volatility %", figures.percent(panel.annual_volatility)),
        ("max drawdown %", figures.percent(panel.max_drawdown)),
        ("Sharpe", figures.places(panel.sharpe_ratio, 2)),
        ("Sortino", figures.places(panel.sortino_ratio, 2)),
        ("Calmar", figures.places(panel.calmar_ratio, 2)),
        ("excess return %", figures.percent(panel.excess_return)),
        ("information ratio", figures.places(panel.information_ratio, 2)),
        ("composite", figures.places(ranking.composite, 3)),
        ("trades", str(done.trades)),
        ("cycles", str(done.cycles)),
        ("no-trade share %", figures.percent(done.no_trade_share)),
        ("rejection rate %", figures.percent(done.rejection_rate)),
        ("turnover", figures.places(done.turnover, 2)),
        ("HHI", figures.places(done.hhi, 3)),
        ("cash ratio %", figures.percent(done.cash_ratio)),
        ("calibration ECE", figures.places(found.expected_calibration_error, 3)),
        ("Brier score", figures.places(found.brier_score, 3)),
    ]
    if found.llm is not None:
        out += [
            ("tokens / decision", figures.places(found.llm.tokens_per_decision, 0)),
            ("cost", UNPRICED if found.llm.cost is None else figures.places(found.llm.cost, 4)),
            ("cost / decision", _cost_text(found.llm)),
            ("parse failures", str(found.llm.parse_failures)),
            ("models answered", " -> ".join(map(model_text, found.llm.models)) or figures.MISSING),
        ]
    return tuple(out)


def _positions(holdings: AccountHoldings, step: Decimal) -> tuple[PositionLine, ...]:
    return tuple(
        PositionLine(
            symbol=h.symbol,
            quantity=figures.quantity(h.quantity, step),
            mark=figures.price(h.last_mark),
            value=figures.money(h.value),
            weight=figures.percent(_float(holdings.weight(h.value))),
            marked_at=instant(h.marked_at),
        )
        for h in holdings.holdings
    )


def _float(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def agent_view(
    found: AgentReport,
    holdings: AccountHoldings,
    orders: Sequence[AccountOrder],
    fills: Sequence[AccountFill],
    cycles: Sequence[AccountCycle],
) -> AgentView:
    """The agent page of `found`'s account, with its holdings and latest orders, fills and
    cycles."""
    info = found.account
    rules = rules_for(info.market)
    step = rules.quantity_step
    return AgentView(
        name=info.agent_name,
        kind=info.agent_kind,
        market=info.market,
        market_title=market_title(info.market),
        currency=info.currency,
        rank=figures.MISSING if found.row.rank is None else str(found.row.rank),
        final_nav=figures.money(found.row.final_nav),
        final_nav_at=instant(found.row.panel.end_at),
        benchmark=found.benchmark,
        chart=equity_chart(
            found.navs,
            found.benchmark_navs,
            timezone=rules.timezone,
            label=info.agent_name,
            benchmark_label=found.benchmark,
        ),
        metrics=_metrics(found),
        cash=figures.money(holdings.cash),
        positions=_positions(holdings, step),
        marks_nav=figures.money(holdings.nav),
        marks_at=instant(holdings.marked_at),
        slot_nav=figures.money(holdings.slot_nav),
        slot_nav_at=instant(holdings.slot_nav_at),
        orders=tuple(order_line(order, order.cycle_id, step) for order in orders),
        fills=tuple(fill_line(fill, step) for fill in fills),
        cycles=tuple(cycle_line(cycle) for cycle in cycles),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryView:
    """One trace entry: a model message, its reasoning, or a tool call with its result."""

    role: str
    seq: str
    at: str
    tool: str
    arguments: str
    #: The arguments as (name, value) pairs when they are a JSON object (`readable_arguments`);
    #: empty otherwise, and then `arguments` is shown as it was stored.
    argument_items: tuple[tuple[str, str], ...]
    content: str
    result: str
    tokens: str
    latency: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleView:
    """Everything the cycle page shows."""

    cycle_id: int
    agent: str
    agent_kind: str
    agent_href: str
    market_title: str
    slot_at: str
    status: str
    error: str
    usage: tuple[tuple[str, str], ...]
    orders: tuple[OrderLine, ...]
    entries: tuple[EntryView, ...]
    ratings: tuple[RatingLine, ...] = ()


def readable_arguments(arguments: str | None) -> tuple[tuple[str, str], ...]:
    """A tool call's stored arguments as (name, value) pairs a person reads: each of a JSON
    object's keys in order, with a string value as the text itself (no quotes or escapes) and any
    other value as compact JSON (`2`, `true`, `["AAPL", "MSFT"]`). Text that is not a JSON object
    gives no pairs (the page shows it as stored). The pairs are plain text: the template escapes
    them, since a model wrote every byte."""
    if not arguments:
        return ()
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):
        return ()
    if not isinstance(parsed, dict):
        return ()
    return tuple(
        (str(name), value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        for name, value in parsed.items()
    )


def _entry(entry: TraceEntry) -> EntryView:
    tokens = ""
    if entry.tokens_in is not None or entry.tokens_out is not None:
        tokens = f"{entry.tokens_in or 0:,} in / {entry.tokens_out or 0:,} out"
    return EntryView(
        role=entry.role,
        seq="" if entry.seq is None else str(entry.seq),
        at=instant(entry.at),
        tool=entry.tool or "",
        arguments=entry.arguments or "",
        argument_items=readable_arguments(entry.arguments),
        content=entry.content or "",
        result=entry.result or "",
        tokens=tokens,
        latency="" if entry.latency_ms is None else f"{entry.latency_ms:,} ms",
    )


def _usage(usage: CycleUsage | None) -> tuple[tuple[str, str], ...]:
    if usage is None:
        return ()
    return (
        ("tokens in", f"{usage.tokens_in:,}"),
        ("tokens out", f"{usage.tokens_out:,}"),
        ("tokens cached", f"{usage.tokens_cached:,}"),
        ("cost", _cost(usage)),
        ("model latency", f"{usage.llm_latency_ms:,} ms"),
        ("model requests", f"{usage.llm_attempts:,}"),
        ("failed requests", f"{usage.llm_failed_attempts:,}"),
        ("parse failures", f"{usage.parse_failures:,}"),
    )


def cycle_view(found: CycleDetail) -> CycleView:
    """The cycle page of one cycle: its header, usage, orders and trace."""
    trace = found.trace
    step = rules_for(trace.market).quantity_step
    error = ""
    if trace.error_class:
        error = f"{trace.error_class}: {trace.error_message or ''}".rstrip(": ")
    return CycleView(
        cycle_id=trace.cycle_id,
        agent=trace.agent,
        agent_kind=trace.agent_kind,
        agent_href=agent_href(trace.market, trace.agent),
        market_title=market_title(trace.market),
        slot_at=instant(trace.slot_at),
        status=trace.status.value,
        error=error,
        usage=_usage(trace.usage),
        orders=tuple(order_line(order, trace.cycle_id, step) for order in found.orders),
        entries=tuple(_entry(entry) for entry in trace.entries),
        ratings=rating_lines(trace.entries),
    )
