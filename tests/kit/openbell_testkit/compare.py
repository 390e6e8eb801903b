"""Two ledgers of one replay compared row by row: what a re-run (from recorded answers, or of a
season in a fresh ledger) must write again."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import MetaData, Table, select

from openbell.store.db import make_engine

#: Columns that differ between two runs of one replay: row ids (and the ids that point at them,
#: and the idempotency keys made of them) and wall-clock times (`trace.at` is the slot plus the
#: monotonic time the cycle took).
RUN_COLUMNS = frozenset(
    {
        "id",
        "cycle_id",
        "account_id",
        "order_id",
        "idempotency_key",
        "claimed_by",
        "lease_until",
        "started_at",
        "finished_at",
        "llm_latency_ms",
        "latency_ms",
        "last_fill_id",
        "last_action_id",
    }
)
TABLES = ("cycle", "order", "fill", "nav_snapshot", "trace")


Row = tuple[str, tuple[tuple[str, str], ...]]


def ledger_rows(db: Path) -> dict[str, list[Row]]:
    """Each compared table's rows as (agent, ((column, repr of value), ...)), without
    `RUN_COLUMNS` (nor a trace row's `at`), sorted."""
    engine = make_engine(f"sqlite:///{db}")
    try:
        meta = MetaData()
        account = Table("account", meta, autoload_with=engine)
        agent = Table("agent", meta, autoload_with=engine)
        cycle = Table("cycle", meta, autoload_with=engine)
        found: dict[str, list[Row]] = {}
        with engine.connect() as connection:
            names = dict(
                connection.execute(
                    select(account.c.id, agent.c.name).join(agent, agent.c.id == account.c.agent_id)
                ).all()
            )
            owner = dict(connection.execute(select(cycle.c.id, cycle.c.account_id)).all())
            for name in TABLES:
                table = Table(name, meta, autoload_with=engine)
                kept = [
                    c.name
                    for c in table.c
                    if c.name not in RUN_COLUMNS and (name, c.name) != ("trace", "at")
                ]
                rows: list[Row] = []
                for row in connection.execute(select(table)).mappings():
                    account_id = row.get("account_id") or owner[row["cycle_id"]]
                    values = tuple((column, repr(row[column])) for column in kept)
                    rows.append((names[account_id], values))
                found[name] = sorted(rows)
        return found
    finally:
        engine.dispose()
