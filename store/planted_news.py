"""The injection probe's planted news in the ledger, and the cycles they may have reached.

This module owns the `planted_news` table (`PlantedNews.record`, `PlantedNews.all`): the items a
probed replay planted, marked with the kind of instruction each carries, written once per replay
and never by a run without the probe. `PlantedNews.cycles` reads what scoring needs of the cycles
of the accounts in the planted markets: per cycle, the text shown to its model (user messages and
tool results, as traced), the text its model wrote (answers and tool arguments), its system
prompt and its orders' sides and symbols.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Engine, inspect, select

from openbell.markets.domain import check_utc
from openbell.store.core_tables import (
    ACCOUNT_TABLE,
    AGENT_TABLE,
    CYCLE_TABLE,
    ORDER_TABLE,
    PLANTED_NEWS_TABLE,
    TRACE_TABLE,
)
from openbell.store.db import SQLITE_IMMEDIATE
from openbell.store.rows import dialect_insert

_ROWS = PLANTED_NEWS_TABLE.c


@dataclass(frozen=True, slots=True, kw_only=True)
class PlantedItem:
    """One planted news item: `kind` of instruction, `target` the symbol a `buy` names."""

    market: str
    symbol: str
    published_at: datetime
    title: str
    kind: str
    target: str | None = None

    def __post_init__(self) -> None:
        check_utc("published_at", self.published_at)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbedCycle:
    """What the probe reads of one cycle: its agent and market, the text its model was shown,
    the text its model wrote, its system prompt, and its orders as (side, symbol)."""

    agent: str
    market: str
    cycle_id: int
    shown: str
    written: str
    system: str
    orders: tuple[tuple[str, str], ...]


class PlantedNews:
    """The `planted_news` rows of the ledger on `engine` (SQLite or Postgres)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{SQLITE_IMMEDIATE: True})

    def record(self, items: Sequence[PlantedItem]) -> None:
        """Record `items`; an item recorded already (a resumed replay) is kept once."""
        if not items:
            return
        rows = [
            {
                "market": i.market,
                "symbol": i.symbol,
                "published_at": i.published_at,
                "title": i.title,
                "kind": i.kind,
                "target": i.target,
            }
            for i in items
        ]
        with self._writer.begin() as connection:
            insert = dialect_insert(connection, PLANTED_NEWS_TABLE).on_conflict_do_nothing()
            connection.execute(insert, rows)

    def all(self) -> tuple[PlantedItem, ...]:
        """Every planted item, in the order recorded (none in a ledger older than the table)."""
        with self._engine.connect() as connection:
            if not inspect(connection).has_table(PLANTED_NEWS_TABLE.name):
                return ()
            return tuple(
                PlantedItem(
                    market=row.market,
                    symbol=row.symbol,
                    published_at=row.published_at,
                    title=row.title,
                    kind=row.kind,
                    target=row.target,
                )
                for row in connection.execute(select(PLANTED_NEWS_TABLE).order_by(_ROWS.id))
            )

    def cycles(self, markets: Sequence[str]) -> list[ProbedCycle]:
        """The cycles of every account in `markets` that have trace rows, in cycle order."""
        trace, cycle, account, agent = (
            TRACE_TABLE.c,
            CYCLE_TABLE.c,
            ACCOUNT_TABLE.c,
            AGENT_TABLE.c,
        )
        traces = (
            select(
                cycle.id,
                agent.name,
                account.market,
                trace.role,
                trace.content,
                trace.arguments,
                trace.result,
            )
            .join_from(TRACE_TABLE, CYCLE_TABLE, trace.cycle_id == cycle.id)
            .join(ACCOUNT_TABLE, cycle.account_id == account.id)
            .join(AGENT_TABLE, account.agent_id == agent.id)
            .where(account.market.in_(list(markets)))
            .order_by(cycle.id, trace.seq)
        )
        orders = select(ORDER_TABLE.c.cycle_id, ORDER_TABLE.c.side, ORDER_TABLE.c.symbol).order_by(
            ORDER_TABLE.c.cycle_id, ORDER_TABLE.c.seq
        )
        found: dict[int, _Texts] = {}
        with self._engine.connect() as connection:
            for row in connection.execute(traces):
                texts = found.setdefault(row[0], _Texts(agent=row[1], market=row[2]))
                role, content, arguments, result = row[3], row[4] or "", row[5] or "", row[6] or ""
                if role == "system":
                    texts.system.append(content)
                elif role == "user":
                    texts.shown.append(content)
                elif role == "tool":
                    texts.shown.append(result)
                    texts.written.append(arguments)
                elif role == "assistant":
                    texts.written.append(content)
            for cycle_id, side, symbol in connection.execute(orders):
                if cycle_id in found:
                    found[cycle_id].orders.append((side, symbol))
        return [
            ProbedCycle(
                agent=texts.agent,
                market=texts.market,
                cycle_id=cycle_id,
                shown="\n".join(texts.shown),
                written="\n".join(texts.written),
                system="\n".join(texts.system),
                orders=tuple(texts.orders),
            )
            for cycle_id, texts in found.items()
        ]


@dataclass(slots=True)
class _Texts:
    agent: str
    market: str
    shown: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    system: list[str] = field(default_factory=list)
    orders: list[tuple[str, str]] = field(default_factory=list)
