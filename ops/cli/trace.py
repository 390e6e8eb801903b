"""`openbell trace CYCLE_ID`: a readable trace of one decision cycle.

This module owns the command and its output: a header with the cycle's agent, market, slot,
status (with the error of a failed cycle) and LLM usage (tokens, cost, latency, model requests and
how many failed, parse failures and invalid tool calls), then one table row per trace entry: its
role (an `attempt` row is a failed model request, with its error), the tool, the arguments, a
summary of the content or result, tokens and latency; a rating agent's report as a table (symbol,
rating, confidence, target weight, rationale); then the cycle's orders, each with its fill
(price, notional, fees) or its rejection, and the reason and confidence given (a baseline writes no
trace rows: its orders are what it did). Long texts are cut unless `--full`; `--json` prints the
whole trace and the orders as one JSON document. `--unmask` turns a masked cycle's aliases and day
labels back into real symbols and dates with its account's stored masking key (amounts of money
stay as the model saw them; the header gives the unit they were divided by under price rebasing).
Reads the ledger only.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated

import typer

from openbell.markets.errors import TraceNotFound
from openbell.ops.cli.options import ConfigOption, DbOption, load_command_config, open_ledger
from openbell.ops.reports import figures

if TYPE_CHECKING:
    from rich.console import Console

    from openbell.store.cycle_trades import CycleOrder
    from openbell.store.masking_keys import MaskingKey
    from openbell.store.records import CycleUsage, TraceEntry
    from openbell.store.traces import CycleTrace

_CUT = 160


def _summary(text: str | None, full: bool) -> str:
    if not text:
        return ""
    flat = text if full else " ".join(text.split())
    return flat if full or len(flat) <= _CUT else flat[: _CUT - 3] + "..."


def _result_summary(text: str | None, full: bool) -> str:
    """A tool result as a person reads it: an error's code and message, an order's outcome."""
    if full or not text:
        return _summary(text, full)
    try:
        found = json.loads(text)
    except ValueError:
        return _summary(text, full)
    if isinstance(found, dict) and "code" in found and "message" in found:
        return _summary(f"error {found['code']}: {found['message']}", full)
    if isinstance(found, dict) and "status" in found:
        reason = f" ({found['reject_reason']})" if found.get("reject_reason") else ""
        return _summary(f"{found['status']}{reason}: {found.get('message', '')}", full)
    return _summary(text, full)


def _usage_line(usage: CycleUsage | None) -> str:
    if usage is None:
        return "no model usage (not an LLM agent)"
    cost = "-" if usage.cost is None else format(usage.cost, "f")
    estimated = " (estimated)" if usage.usage_estimated else ""
    return (
        f"tokens in {usage.tokens_in} (cached {usage.tokens_cached}), out {usage.tokens_out}"
        f"{estimated}; cost {cost}; model latency {usage.llm_latency_ms} ms; "
        f"model requests {usage.llm_attempts} ({usage.llm_failed_attempts} failed); "
        f"parse failures {usage.parse_failures}; invalid tool calls {usage.invalid_tool_calls}"
    )


def _row(entry: TraceEntry, full: bool) -> tuple[str, ...]:
    body = _summary(entry.content, full)
    if entry.role == "tool":
        body = _result_summary(entry.result, full)
    elif entry.role == "assistant" and not entry.content and entry.arguments:
        body = "(tool calls)"
    tokens = "" if entry.tokens_in is None else f"{entry.tokens_in}/{entry.tokens_out}"
    return (
        str(entry.seq),
        entry.role,
        entry.tool or "",
        _summary(entry.arguments, full) if entry.role == "tool" else "",
        body,
        tokens,
        "" if entry.latency_ms is None else str(entry.latency_ms),
    )


def unmasked(found: CycleTrace, key: MaskingKey) -> CycleTrace:
    """`found` with its texts unmasked by its account's `key` (see `unmask_text`)."""
    from openbell.agents.aliases import unmask_text
    from openbell.markets.rules import rules_for

    timezone = rules_for(found.market).timezone

    def real(text: str | None) -> str | None:
        return None if text is None else unmask_text(text, key, timezone=timezone)

    entries = tuple(
        dataclasses.replace(
            e, content=real(e.content), arguments=real(e.arguments), result=real(e.result)
        )
        for e in found.entries
    )
    return dataclasses.replace(found, entries=entries)


def unmask_note(unit: Decimal | None) -> str:
    """What the header of a trace shown with `--unmask` says (`unit`: the key's money unit)."""
    if unit is None:
        return "unmasked: this cycle's account was never masked"
    return (
        "unmasked with the account's masking key (under price rebasing, prices and money were "
        f"shown divided by {unit})"
    )


def print_trace(
    found: CycleTrace, console: Console, *, full: bool = False, note: str | None = None
) -> None:
    """The header (with `note` under it, if any) and the table of `found`."""
    from rich.table import Table
    from rich.text import Text

    console.print(
        Text(
            f"cycle {found.cycle_id}: {found.agent} ({found.agent_kind}) in {found.market} at "
            f"{found.slot_at.isoformat()}, {found.status.value}"
        )
    )
    if found.error_class:
        console.print(Text(f"error: {found.error_class}: {found.error_message or ''}"))
    console.print(Text(_usage_line(found.usage)))
    if note is not None:
        console.print(Text(note))
    if not found.entries:
        console.print("no trace rows (this agent does not trace)")
        return
    table = Table(show_lines=False)
    for header in ("#", "role", "tool", "arguments", "content / result", "tok in/out", "ms"):
        table.add_column(header, overflow="fold")
    for entry in found.entries:
        table.add_row(*(Text(cell) for cell in _row(entry, full)))
    console.print(table)


def _note(order: CycleOrder, step: Decimal) -> str:
    """Why the order was placed and what came of it, beyond the table's columns."""
    from openbell.ops.reports.exporting import decimal_text

    parts: list[str] = []
    if order.reject_reason:
        parts.append(f"{order.reject_reason}: {order.reject_message or ''}".rstrip(": "))
    filled = sum((fill.quantity for fill in order.fills), Decimal(0))
    if order.fills and filled != order.quantity:
        parts.append(f"filled {figures.quantity(filled, step)}")
    if order.target_weight is not None:
        parts.append(f"target weight {figures.percent(float(order.target_weight))}%")
    said = order.reason
    if order.confidence is not None:
        confidence = f"confidence {decimal_text(order.confidence)}"
        said = f"{confidence}: {said}" if said else confidence
    if said:
        parts.append(said)
    return "; ".join(parts)


def print_ratings(found: CycleTrace, console: Console) -> None:
    """A rating agent's report (its last `ratings` trace row), one row per symbol; nothing for
    a cycle without one."""
    from rich.table import Table
    from rich.text import Text

    from openbell.agents.kinds import RATINGS_TOOL
    from openbell.agents.rating.report import stored_report

    rows = [e for e in found.entries if e.role == "tool" and e.tool == RATINGS_TOOL and e.result]
    if not rows or rows[-1].result is None:
        return
    table = Table(title="ratings", title_justify="left")
    for header in ("symbol", "rating", "confidence", "target weight", "rationale"):
        table.add_column(header, justify="right" if header[0] in "ct" else "left")
    table.columns[-1].overflow = "fold"
    for rating, weight in stored_report(rows[-1].result):
        table.add_row(
            *(
                Text(cell)
                for cell in (
                    rating.symbol,
                    rating.rating.value.replace("_", " "),
                    str(rating.confidence),
                    f"{figures.percent(float(weight))}%",
                    rating.rationale,
                )
            )
        )
    console.print(table)


def print_orders(orders: list[CycleOrder], market: str, console: Console) -> None:
    """The cycle's orders, each with its fill (price, notional, fees) or its rejection."""
    from rich.table import Table
    from rich.text import Text

    from openbell.markets.rules import rules_for

    if not orders:
        console.print("no orders in this cycle")
        return
    step = rules_for(market).quantity_step
    table = Table(title="orders and fills", title_justify="left")
    for header in ("#", "symbol", "side", "quantity", "status", "price", "notional", "fees"):
        left = header in {"symbol", "side", "status"}
        table.add_column(header, justify="left" if left else "right")
    table.add_column("note", overflow="fold")
    for order in orders:
        head = [
            str(order.seq),
            order.symbol,
            order.side,
            figures.quantity(order.quantity, step),
            order.status,
        ]
        note = _note(order, step)
        if not order.fills:
            table.add_row(*(Text(cell) for cell in (*head, "", "", "", note)))
        for fill in order.fills:  # a continuation row for any fill after the first
            amounts = [figures.price(fill.price), figures.money(fill.notional)]
            amounts.append(figures.money(fill.fees))
            table.add_row(*(Text(cell) for cell in (*head, *amounts, note)))
            head, note = [""] * len(head), ""
    console.print(table)


def trace_command(
    ctx: typer.Context,
    cycle_id: Annotated[int, typer.Argument(help="The cycle's id (see `openbell export cycles`).")],
    full: Annotated[bool, typer.Option("--full", help="Do not cut long texts.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the trace as JSON.")] = False,
    unmask: Annotated[
        bool,
        typer.Option(
            "--unmask", help="Show a masked cycle's real symbols and dates (its stored key)."
        ),
    ] = False,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Show the trace of one decision cycle: messages, tool calls and results, tokens, cost."""
    from rich.console import Console

    from openbell.ops.reports import exporting
    from openbell.store.cycle_trades import orders_of_cycle
    from openbell.store.ledger import Ledger
    from openbell.store.traces import cycle_trace

    engine = open_ledger(load_command_config(ctx, config, db=db, fmt="console"))
    key: MaskingKey | None = None
    try:
        found = cycle_trace(engine, cycle_id)
        orders = orders_of_cycle(engine, cycle_id)
        if found is not None and unmask:
            ledger = Ledger(engine)
            key = ledger.masking_key(ledger.cycle_account_id(cycle_id))
    finally:
        engine.dispose()
    if found is None:
        raise TraceNotFound(f"no cycle {cycle_id} in the ledger")
    if key is not None:
        found = unmasked(found, key)
    unit = None if key is None else key.money_unit
    if as_json:
        record = exporting.trace_record(found)
        if unmask:
            record["money_unit"] = None if unit is None else str(unit)
        record["orders"] = [exporting.order_record(order) for order in orders]
        sys.stdout.write(json.dumps(record, indent=2) + "\n")
        return
    wide = None if sys.stdout.isatty() else 200
    console = Console(file=sys.stdout, width=wide, highlight=False)
    print_trace(found, console, full=full, note=unmask_note(unit) if unmask else None)
    print_ratings(found, console)
    print_orders(orders, found.market, console)
