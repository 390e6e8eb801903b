"""Machine-readable output: ledger exports as CSV or Parquet, leaderboards and reports as records.

This module owns the text and file shapes that outside tools read, so their keys and column orders
are stable: export columns come from `store.exports.EXPORTS`; leaderboard rows are flat records with
the keys of `LEADERBOARD_KEYS`, in that order (a shorting account's then `LONG_SHORT_KEYS`, and an
account of a ledger the injection probe planted news in then `INJECTION_KEYS`); a report is a record
of its panel, behaviour and calibration; a cycle's trace and its orders (with their fills) are
records as `openbell trace --json` prints them; an account's positions are a record of its cash and
holdings, or CSV rows with the columns of `POSITION_COLUMNS`. Exact decimals are written as plain
decimal text in CSV and JSON (never scientific notation, never through a float) and as Arrow
`decimal128(38, 18)` in Parquet (20 integer digits and 18 places: a value that does not fit exactly
is refused with `ExportError`, never rounded); instants are ISO 8601 UTC text in CSV and
`timestamp[us, UTC]` in Parquet; ids are integers; statistics (ratios, z-scores) are JSON numbers or
empty CSV cells when undefined.
"""

from __future__ import annotations

import csv
from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

from openbell.markets.errors import ExportError
from openbell.ops.evaluation.conventions import Convention
from openbell.ops.evaluation.probes.injection import INJECTION_KEYS, injection_record
from openbell.ops.evaluation.return_metrics import LongShort, Panel
from openbell.ops.reports.board_significance import significance_record
from openbell.ops.reports.contamination import cutoffs_record, with_marks
from openbell.ops.reports.interval_records import bootstrap_record, seed_group_record
from openbell.ops.reports.market_reports import (
    AgentReport,
    Behaviour,
    Leaderboard,
    LeaderboardRow,
    LlmUsage,
)
from openbell.store.account_history import AccountOrder
from openbell.store.cycle_trades import CycleOrder, TradeFill
from openbell.store.exports import Cell
from openbell.store.holdings import (
    NAV_AT_LAST_MARKS,
    NAV_AT_LAST_SLOT,
    AccountHoldings,
    Holding,
)
from openbell.store.queries import ReportedModel
from openbell.store.records import CycleUsage, TraceEntry
from openbell.store.traces import CycleTrace

JsonValue = str | int | float | bool | None

_PANEL_KEYS = (
    "cumulative_return",
    "annual_return",
    "annual_volatility",
    "sharpe_ratio",
    "sortino_ratio",
    "max_drawdown",
    "calmar_ratio",
    "excess_return",
    "information_ratio",
)
_BEHAVIOUR_KEYS = (
    "trades",
    "cycles",
    "no_trade_share",
    "rejection_rate",
    "turnover",
    "annual_turnover",
    "hhi",
    "cash_ratio",
    "hold_share",
    "switch_rate",
    "reactivity",
    "reactivity_next",
    "persistence",
    "revision_rate",
    "weight_reactivity",
    "protocol_completion",
)
#: The keys of a leaderboard record, in order (CSV columns: `market` first, then these).
LEADERBOARD_KEYS: tuple[str, ...] = (
    "rank",
    "name",
    "agent",
    "is_benchmark",
    "periods",
    "start_at",
    "end_at",
    "final_nav",
    *_PANEL_KEYS,
    *_BEHAVIOUR_KEYS,
    "composite",
    "z_cumulative_return",
    "z_max_drawdown",
    "z_sortino_ratio",
    "cost_per_decision",
    "return_per_dollar",
    "model_changed",
)


#: The keys a shorting account's leaderboard record has after `LEADERBOARD_KEYS` (a long-only
#: account's record has none of them; CSV has the columns, empty for it, only when a board has a
#: shorting account).
LONG_SHORT_KEYS: tuple[str, ...] = ("mean_gross_exposure", "mean_net_exposure", "borrow_cost")


def decimal_text(value: Decimal) -> str:
    """A decimal as plain text: `1E+1` is written `10`, `0E-8` is `0.00000000`."""
    return format(value, "f")


def _instant(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _panel(panel: Panel) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {
        "periods": panel.periods,
        "start_at": _instant(panel.start_at),
        "end_at": _instant(panel.end_at),
    }
    out.update({key: getattr(panel, key) for key in _PANEL_KEYS})
    return out


def _behaviour(found: Behaviour | None) -> dict[str, JsonValue]:
    return {key: getattr(found, key) if found else None for key in _BEHAVIOUR_KEYS}


def row_record(row: LeaderboardRow) -> dict[str, JsonValue]:
    """One leaderboard row as a flat record with the keys of `LEADERBOARD_KEYS`, in order."""
    ranking = row.ranking
    values: dict[str, JsonValue] = {
        "rank": ranking.rank,
        "name": ranking.name,
        "agent": row.agent,
        "is_benchmark": ranking.is_benchmark,
        "final_nav": decimal_text(row.final_nav) if row.final_nav is not None else None,
        "composite": ranking.composite,
        "z_cumulative_return": ranking.z_cumulative_return,
        "z_max_drawdown": ranking.z_max_drawdown,
        "z_sortino_ratio": ranking.z_sortino_ratio,
        **_panel(row.panel),
        **_behaviour(row.behaviour),
        "cost_per_decision": _decimal(row.llm.cost_per_decision) if row.llm else None,
        "return_per_dollar": row.llm.return_per_dollar if row.llm else None,
        "model_changed": row.llm.model_changed if row.llm else None,
    }
    record = {key: values[key] for key in LEADERBOARD_KEYS}
    if row.long_short is not None:
        record.update({key: getattr(row.long_short, key) for key in LONG_SHORT_KEYS})
    record.update(injection_record(row.injection))
    return record


def long_short_record(found: LongShort | None) -> dict[str, JsonValue]:
    """A shorting account's long-short metrics as a report's keys (none for a long-only one)."""
    if found is None:
        return {}
    return {
        "mean_gross_exposure": found.mean_gross_exposure,
        "mean_net_exposure": found.mean_net_exposure,
        "max_gross_exposure": found.max_gross_exposure,
        "borrow_fees": decimal_text(found.borrow_fees),
        "borrow_cost": found.borrow_cost,
    }


def has_injection(boards: Iterable[Leaderboard]) -> bool:
    """Whether any row of `boards` has the injection probe's record (then the wide table and the
    CSV show its columns)."""
    return any(row.injection is not None for board in boards for row in board.rows)


def has_long_short(boards: Iterable[Leaderboard]) -> bool:
    """Whether any row of `boards` is a shorting account's (then tables and CSV show the
    long-short columns)."""
    return any(row.long_short is not None for board in boards for row in board.rows)


def _decimal(value: Decimal | None) -> str | None:
    return None if value is None else decimal_text(value)


def llm_record(usage: LlmUsage | None) -> dict[str, JsonValue]:
    """An LLM agent's usage as flat `llm_*` keys (all None for an agent that uses no model)."""
    return {
        "llm_decisions": usage.decisions if usage else None,
        "tokens_in": usage.tokens_in if usage else None,
        "tokens_out": usage.tokens_out if usage else None,
        "tokens_cached": usage.tokens_cached if usage else None,
        "tokens_estimated": usage.usage_estimated if usage else None,
        "llm_latency_ms": usage.llm_latency_ms if usage else None,
        "cost": _decimal(usage.cost) if usage else None,
        "cost_per_decision": _decimal(usage.cost_per_decision) if usage else None,
        "return_per_dollar": usage.return_per_dollar if usage else None,
        "parse_failures": usage.parse_failures if usage else None,
        "parse_failure_rate": usage.parse_failure_rate if usage else None,
        "invalid_tool_calls": usage.invalid_tool_calls if usage else None,
        "tool_calls": usage.tool_calls if usage else None,
        "tool_validity_rate": usage.tool_validity_rate if usage else None,
        "llm_attempts": usage.llm_attempts if usage else None,
        "llm_failed_attempts": usage.llm_failed_attempts if usage else None,
        "model_changed": usage.model_changed if usage else None,
    }


def reported_model_record(found: ReportedModel) -> dict[str, JsonValue]:
    """One model identity an account's exchanges reported, as a record."""
    return {
        "model": found.model,
        "fingerprint": found.fingerprint,
        "revision": found.revision,
        "first_slot_at": found.first_slot_at.isoformat(),
        "exchanges": found.exchanges,
    }


def convention_record(convention: Convention) -> dict[str, JsonValue]:
    """A metrics convention as a record: its name, source and choices
    (`ops.evaluation.conventions`)."""
    return {
        "name": convention.name,
        "source": convention.source,
        "std": convention.std,
        "annualisation": convention.annualisation,
        "sortino": convention.sortino,
        "returns": convention.returns,
        "basket_weights": convention.basket_weights,
    }


def leaderboard_record(board: Leaderboard) -> dict[str, Any]:
    """A leaderboard as a record: its market, metrics convention, window, annualisation,
    benchmark, the valuation its rows' `final_nav` is (`final_nav_valuation`: the last slot
    snapshot's) and rows, its groups of repeated runs and its bootstrap
    (`ops.reports.interval_records`)."""
    return {
        "market": board.market,
        "convention": convention_record(board.convention),
        "start": _instant(board.start),
        "end": _instant(board.end),
        "cadence": board.cadence,
        "periods_per_year": board.periods_per_year,
        "benchmark": board.benchmark,
        "currency": board.currency,
        "final_nav_valuation": NAV_AT_LAST_SLOT,
        "rows": [{**row_record(row), **with_marks(row, board.cutoffs)} for row in board.rows],
        "seed_groups": [seed_group_record(group) for group in board.seed_groups],
        "bootstrap": bootstrap_record(board.bootstrap),
        "significance": (
            None if board.significance is None else significance_record(board.significance)
        ),
        "cutoffs": None if board.cutoffs is None else cutoffs_record(board.cutoffs),
    }


#: The columns a CSV board gains when an agent has slots inside its model's training cutoff: the
#: board's view (`post-cutoff` or `all`), and each row's status and inside slots.
CUTOFF_KEYS: tuple[str, ...] = ("slots", "cutoff_status", "inside_cutoff_slots")


def leaderboard_csv(boards: Sequence[Leaderboard], stream: TextIO) -> None:
    """Every row of `boards` as CSV: a header of `market`, `convention` and `LEADERBOARD_KEYS`
    (and `LONG_SHORT_KEYS` when a board has a shorting account, `CUTOFF_KEYS` when one has an
    agent with slots inside its model's training cutoff), then rows."""
    writer = csv.writer(stream, lineterminator="\n")
    keys = (
        *LEADERBOARD_KEYS,
        *(LONG_SHORT_KEYS if has_long_short(boards) else ()),
        *(INJECTION_KEYS if has_injection(boards) else ()),
    )
    marked = any(board.cutoffs is not None and board.cutoffs.excluded for board in boards)
    writer.writerow(("market", "convention", *keys, *(CUTOFF_KEYS if marked else ())))
    for board in boards:
        for row in board.rows:
            record = row_record(row)
            cells = [_csv_cell(record.get(key)) for key in keys]
            if marked:
                found = with_marks(row, board.cutoffs)
                view = None if board.cutoffs is None else board.cutoffs.view
                cells += [_csv_cell(view), *(_csv_cell(found.get(k)) for k in CUTOFF_KEYS[1:])]
            writer.writerow((board.market, board.convention.name, *cells))


def report_record(found: AgentReport) -> dict[str, Any]:
    """An agent's report as a record: account, rank, panel, behaviour and calibration."""
    return {
        "agent": found.account.agent_name,
        "kind": found.account.agent_kind,
        "market": found.account.market,
        "currency": found.account.currency,
        "initial_cash": decimal_text(found.account.initial_cash),
        "cadence": found.cadence,
        "convention": convention_record(found.convention),
        "periods_per_year": found.row.panel.periods_per_year,
        "benchmark": found.benchmark,
        "rank": found.row.rank,
        "composite": found.row.ranking.composite,
        "final_nav": decimal_text(found.row.final_nav) if found.row.final_nav is not None else None,
        "final_nav_valuation": NAV_AT_LAST_SLOT,
        **_panel(found.row.panel),
        **_behaviour(found.behaviour),
        "forecasts": found.forecasts,
        "expected_calibration_error": found.expected_calibration_error,
        "brier_score": found.brier_score,
        "tokens_per_decision": found.tokens_per_decision,
        **llm_record(found.llm),
        "models": (
            [reported_model_record(reported) for reported in found.llm.models]
            if found.llm
            else None
        ),
        **long_short_record(found.row.long_short),
        "rejections_by_reason": dict(found.rejections_by_reason),
    }


def usage_record(usage: CycleUsage | None) -> dict[str, JsonValue] | None:
    """A cycle's LLM usage as a record (None for a cycle of an agent without a model)."""
    if usage is None:
        return None
    return {
        "tokens_in": usage.tokens_in,
        "tokens_out": usage.tokens_out,
        "tokens_cached": usage.tokens_cached,
        "usage_estimated": usage.usage_estimated,
        "llm_latency_ms": usage.llm_latency_ms,
        "cost": _decimal(usage.cost),
        "parse_failures": usage.parse_failures,
        "invalid_tool_calls": usage.invalid_tool_calls,
        "llm_attempts": usage.llm_attempts,
        "llm_failed_attempts": usage.llm_failed_attempts,
    }


def _entry_record(entry: TraceEntry) -> dict[str, JsonValue]:
    return {
        "seq": entry.seq,
        "role": entry.role,
        "at": entry.at.isoformat(),
        "content": entry.content,
        "tool": entry.tool,
        "arguments": entry.arguments,
        "result": entry.result,
        "tokens_in": entry.tokens_in,
        "tokens_out": entry.tokens_out,
        "latency_ms": entry.latency_ms,
        "model": entry.model,
        "fingerprint": entry.fingerprint,
        "revision": entry.revision,
        "request_digest": entry.request_digest,
    }


def trace_record(found: CycleTrace) -> dict[str, Any]:
    """A cycle's header, usage and trace entries as a record (`openbell trace --json`)."""
    return {
        "cycle_id": found.cycle_id,
        "agent": found.agent,
        "market": found.market,
        "slot_at": found.slot_at.isoformat(),
        "status": found.status.value,
        "error_class": found.error_class,
        "error_message": found.error_message,
        "usage": usage_record(found.usage),
        "entries": [_entry_record(entry) for entry in found.entries],
    }


def fill_record(fill: TradeFill) -> dict[str, JsonValue]:
    """One fill of an order as a record."""
    return {
        "fill_id": fill.fill_id,
        "quantity": decimal_text(fill.quantity),
        "price": decimal_text(fill.price),
        "notional": decimal_text(fill.notional),
        "fees": decimal_text(fill.fees),
        "currency": fill.currency,
        "filled_at": fill.filled_at.isoformat(),
        "price_source": fill.price_source,
    }


def order_record(order: CycleOrder | AccountOrder) -> dict[str, Any]:
    """One order with its reason, confidence, status or rejection, and fills, as a record."""
    return {
        "order_id": order.order_id,
        "seq": order.seq,
        "symbol": order.symbol,
        "side": order.side,
        "quantity": decimal_text(order.quantity),
        "target_weight": _decimal(order.target_weight),
        "confidence": _decimal(order.confidence),
        "reason": order.reason,
        "placed_at": order.placed_at.isoformat(),
        "status": order.status,
        "reject_reason": order.reject_reason,
        "reject_message": order.reject_message,
        "fills": [fill_record(fill) for fill in order.fills],
    }


#: The columns of `openbell positions --format csv`: one `cash` row per account, then one
#: `position` row per holding.
POSITION_COLUMNS: tuple[str, ...] = (
    "market",
    "agent",
    "currency",
    "kind",
    "symbol",
    "quantity",
    "cost",
    "avg_cost",
    "last_mark",
    "marked_at",
    "value",
    "weight",
)
#: The places of a holding's average cost (cost / quantity, rounded half-even, trailing zeros
#: dropped): the one figure of `positions` that is a division rather than a ledger amount.
AVG_COST_PLACES = 8


def _float(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def avg_cost(holding: Holding) -> Decimal:
    """`holding`'s cost per unit, to `AVG_COST_PLACES` places."""
    rounded = (holding.cost / holding.quantity).quantize(Decimal(1).scaleb(-AVG_COST_PLACES))
    return rounded.normalize()


def holding_record(account: AccountHoldings, holding: Holding) -> dict[str, JsonValue]:
    """One holding as a record: exact quantities and amounts as text, its weight as a number."""
    return {
        "symbol": holding.symbol,
        "quantity": decimal_text(holding.quantity),
        "cost": decimal_text(holding.cost),
        "avg_cost": decimal_text(avg_cost(holding)),
        "last_mark": _decimal(holding.last_mark),
        "marked_at": _instant(holding.marked_at),
        "value": _decimal(holding.value),
        "weight": _float(account.weight(holding.value)),
    }


def positions_record(account: AccountHoldings) -> dict[str, Any]:
    """An account's cash, NAV at the last marks (`nav`, valued at `nav_at`, named by
    `nav_valuation`), the NAV of its last slot snapshot (`slot_nav` at `slot_nav_at`: the
    leaderboard's final NAV) and holdings as a record."""
    return {
        "account_id": account.account_id,
        "market": account.market,
        "agent": account.agent,
        "currency": account.currency,
        "cash": decimal_text(account.cash),
        "cash_weight": _float(account.weight(account.cash)),
        "nav": _decimal(account.nav),
        "nav_valuation": NAV_AT_LAST_MARKS,
        "nav_at": _instant(account.marked_at),
        "slot_nav": _decimal(account.slot_nav),
        "slot_nav_at": _instant(account.slot_nav_at),
        "positions": [holding_record(account, holding) for holding in account.holdings],
    }


def positions_csv(accounts: Sequence[AccountHoldings], stream: TextIO) -> None:
    """Every account's cash and holdings as CSV with the columns of `POSITION_COLUMNS`."""
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(POSITION_COLUMNS)
    for account in accounts:
        head = (account.market, account.agent, account.currency)
        cash = {"kind": "cash", "value": decimal_text(account.cash)}
        cash["weight"] = _csv_cell(_float(account.weight(account.cash)))
        writer.writerow((*head, *(cash.get(key, "") for key in POSITION_COLUMNS[3:])))
        for holding in account.holdings:
            record = {"kind": "position", **holding_record(account, holding)}
            writer.writerow((*head, *(_csv_cell(record[key]) for key in POSITION_COLUMNS[3:])))


def _csv_cell(value: Cell | float) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return decimal_text(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def write_csv(columns: Sequence[str], rows: Iterable[Sequence[Cell]], stream: TextIO) -> int:
    """Write a header and `rows` as CSV to `stream`; return the number of rows written."""
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(columns)
    count = 0
    for row in rows:
        writer.writerow([_csv_cell(cell) for cell in row])
        count += 1
    return count


#: The Arrow type of exact decimals in Parquet: 20 integer digits and 18 places (USDT amounts have
#: 8 places, crypto quantities 5, NAV marks their product's 13).
DECIMAL_PRECISION = 38
DECIMAL_SCALE = 18


def _arrow_type(column: str, decimals: Collection[str]) -> Any:
    import pyarrow as pa

    if column in decimals:
        return pa.decimal128(DECIMAL_PRECISION, DECIMAL_SCALE)
    if column == "at" or column.endswith("_at"):
        return pa.timestamp("us", tz="UTC")
    if column in {"account_id", "seq"} or column.endswith("_id"):
        return pa.int64()
    return pa.string()


def _arrow_cell(value: Cell, decimal: bool) -> Any:
    if isinstance(value, Decimal) and not decimal:
        return decimal_text(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _batches(rows: Iterable[Sequence[Cell]], size: int) -> Iterator[list[Sequence[Cell]]]:
    batch: list[Sequence[Cell]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def write_parquet(
    columns: Sequence[str],
    rows: Iterable[Sequence[Cell]],
    path: Path,
    *,
    decimals: Collection[str] = (),
    batch: int = 5000,
) -> int:
    """Write `rows` to a Parquet file at `path`, the columns named in `decimals` as exact Arrow
    decimals (types as in the module docstring); return the row count. `ExportError` (and no file)
    when a decimal does not fit `decimal128(38, 18)` exactly."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(name, _arrow_type(name, decimals)) for name in columns])
    count = 0
    try:
        with pq.ParquetWriter(str(path), schema, compression="zstd") as writer:
            for chunk in _batches(rows, batch):
                arrays = [
                    _arrow_column(schema.field(i), chunk, i, path) for i in range(len(columns))
                ]
                writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
                count += len(chunk)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return count


def _arrow_column(field: Any, chunk: Sequence[Sequence[Cell]], index: int, path: Path) -> Any:
    import pyarrow as pa

    decimal = pa.types.is_decimal(field.type)
    try:
        return pa.array([_arrow_cell(row[index], decimal) for row in chunk], type=field.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        if not decimal:
            raise
        raise ExportError(
            f"{path}: column {field.name}: a value has more than {DECIMAL_SCALE} decimal places "
            f"or {DECIMAL_PRECISION - DECIMAL_SCALE} integer digits and cannot be written exactly "
            "as a Parquet decimal; export it as csv, which keeps every digit"
        ) from exc
