"""The JSON documents of the web API, built from the read model's values.

This module owns the shape of each `/api/v1` response body that `ops.reports.exporting` does not
already give (leaderboards, metric panels, positions and traces are its records, so the API and the
CLI print the same keys and numbers): the markets, an account, its NAV and benchmark series, and the
pages of its orders, fills and cycles. Keys are stable snake_case; exact decimals are plain
decimal text, instants ISO 8601 UTC text, ids integers; `ops.web.schemas` describes each document.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openbell.ops.evaluation.return_metrics import NavPoint
from openbell.ops.reports import exporting
from openbell.ops.reports.exporting import JsonValue, decimal_text
from openbell.ops.web.read_model import (
    BenchmarkSeries,
    CycleDetail,
    CyclesPage,
    FillsPage,
    MarketSummary,
    NavSeries,
    OrdersPage,
)
from openbell.store.account_history import AccountCycle, AccountFill
from openbell.store.queries import AccountInfo, NavRow


def market_document(found: MarketSummary) -> dict[str, Any]:
    """A market of the arena."""
    return {
        "market": found.market,
        "currency": found.currency,
        "benchmark": found.benchmark,
        "benchmark_label": found.benchmark_label,
        "accounts": found.accounts,
        "agents": list(found.agents),
        "last_slot_at": None if found.last_slot_at is None else found.last_slot_at.isoformat(),
    }


def markets_document(found: Sequence[MarketSummary]) -> dict[str, Any]:
    """Every market with accounts."""
    return {"markets": [market_document(market) for market in found]}


def account_document(info: AccountInfo) -> dict[str, JsonValue]:
    """An account: its id, agent, market, currency and initial cash."""
    return {
        "account_id": info.account_id,
        "agent": info.agent_name,
        "agent_kind": info.agent_kind,
        "market": info.market,
        "currency": info.currency,
        "initial_cash": decimal_text(info.initial_cash),
    }


def _nav_point(row: NavRow) -> dict[str, JsonValue]:
    return {
        "at": row.at.isoformat(),
        "nav": decimal_text(row.nav),
        "cash": decimal_text(row.cash),
        "positions_value": decimal_text(row.positions_value),
    }


def nav_document(found: NavSeries) -> dict[str, Any]:
    """An account's slot and close NAV snapshots, oldest first."""
    return {
        "account": account_document(found.account),
        "slot": [_nav_point(row) for row in found.slot],
        "close": [_nav_point(row) for row in found.close],
    }


def _point(point: NavPoint) -> dict[str, JsonValue]:
    return {"at": point.at.isoformat(), "nav": decimal_text(point.nav)}


def benchmark_document(found: BenchmarkSeries) -> dict[str, Any]:
    """The benchmark's value at the account's slot timestamps, oldest first."""
    return {
        "account": account_document(found.account),
        "benchmark": found.benchmark,
        "points": [_point(point) for point in found.points],
    }


def _fill(fill: AccountFill) -> dict[str, JsonValue]:
    return {
        "fill_id": fill.fill_id,
        "order_id": fill.order_id,
        "cycle_id": fill.cycle_id,
        "symbol": fill.symbol,
        "side": fill.side,
        "quantity": decimal_text(fill.quantity),
        "price": decimal_text(fill.price),
        "notional": decimal_text(fill.notional),
        "fees": decimal_text(fill.fees),
        "currency": fill.currency,
        "filled_at": fill.filled_at.isoformat(),
        "price_source": fill.price_source,
        "reason": fill.reason,
        "confidence": None if fill.confidence is None else decimal_text(fill.confidence),
    }


def _cycle(cycle: AccountCycle) -> dict[str, Any]:
    return {
        "cycle_id": cycle.cycle_id,
        "slot_at": cycle.slot_at.isoformat(),
        "status": cycle.status.value,
        "started_at": cycle.started_at.isoformat(),
        "finished_at": None if cycle.finished_at is None else cycle.finished_at.isoformat(),
        "error_class": cycle.error_class,
        "error_message": cycle.error_message,
        "reason": cycle.reason,
        "orders": cycle.orders,
        "rejections": cycle.rejections,
        "fills": cycle.fills,
        "usage": exporting.usage_record(cycle.usage),
    }


def orders_document(page: OrdersPage, next_url: str | None) -> dict[str, Any]:
    """A page of an account's orders (each with its cycle id and fills), newest first."""
    items = [{"cycle_id": order.cycle_id, **exporting.order_record(order)} for order in page.items]
    return {"account": account_document(page.account), "items": items, "next": next_url}


def fills_document(page: FillsPage, next_url: str | None) -> dict[str, Any]:
    """A page of an account's fills, newest first."""
    items = [_fill(fill) for fill in page.items]
    return {"account": account_document(page.account), "items": items, "next": next_url}


def cycles_document(page: CyclesPage, next_url: str | None) -> dict[str, Any]:
    """A page of an account's cycles, latest slot first."""
    items = [_cycle(cycle) for cycle in page.items]
    return {"account": account_document(page.account), "items": items, "next": next_url}


def cycle_document(found: CycleDetail) -> dict[str, Any]:
    """One cycle's trace and orders: the document `openbell trace --json` prints."""
    record = exporting.trace_record(found.trace)
    record["orders"] = [exporting.order_record(order) for order in found.orders]
    return record
