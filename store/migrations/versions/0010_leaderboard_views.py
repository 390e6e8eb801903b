"""leaderboard views

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30

Three views that give plain SQL clients (`sqlite3`, `psql`) the leaderboard figures, under the
same names on SQLite and Postgres, over the slot NAV snapshots (those `openbell leaderboard`
ranks by; close snapshots are left out):

- `v_latest_nav`: each account's newest slot snapshot: agent, market, account_id, at, nav, cash,
  positions_value (the stored exact values: text on SQLite, NUMERIC on Postgres).
- `v_account_returns`: each account's slot snapshots with a positive NAV, in time order, with the
  period return, the cumulative return since the first snapshot and the drawdown from the running
  peak (fractions; `-0.2` is 20 % down).
- `v_leaderboard`: one row per account (accounts without a snapshot too, with NULL figures):
  agent, kind, market, currency, initial_cash, first_at, as_of (the newest snapshot), periods,
  last_nav (exact), cumulative_return and max_drawdown (NULL with fewer than two snapshots, as in
  the CLI), ordered by market and cumulative return, best first.

Money stays exact in the tables; the ratios here are computed in IEEE double precision (`REAL` on
SQLite, whose decimals are text, `DOUBLE PRECISION` on Postgres), each NAV converted to a double
once, as `openbell.ops.return_metrics` does. The CLI compounds one float return per period, the
views divide two doubles once: the figures agree to about 1e-12 relative over a year of hourly
slots (see README, "Query the ledger"). The CLI's composite rank (z-scores across the market, the
benchmark row) is not a SQL figure: it stays with `openbell leaderboard` and the API.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VIEWS = ("v_leaderboard", "v_account_returns", "v_latest_nav")

LATEST_NAV = """
CREATE VIEW v_latest_nav AS
SELECT agent.name AS agent, account.market, ranked.account_id, ranked.at, ranked.nav,
       ranked.cash, ranked.positions_value
FROM (
    SELECT account_id, at, nav, cash, positions_value,
           ROW_NUMBER() OVER (PARTITION BY account_id ORDER BY at DESC) AS newest
    FROM nav_snapshot
    WHERE kind = 'slot'
) AS ranked
JOIN account ON account.id = ranked.account_id
JOIN agent ON agent.id = account.agent_id
WHERE ranked.newest = 1
"""

ACCOUNT_RETURNS = """
CREATE VIEW v_account_returns AS
SELECT agent, market, account_id, at, nav,
       value / LAG(value) OVER (PARTITION BY account_id ORDER BY at) - 1 AS period_return,
       value / FIRST_VALUE(value) OVER (PARTITION BY account_id ORDER BY at) - 1
           AS cumulative_return,
       value / MAX(value) OVER (
           PARTITION BY account_id ORDER BY at ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
       ) - 1 AS drawdown
FROM (
    SELECT agent.name AS agent, account.market, nav_snapshot.account_id, nav_snapshot.at,
           nav_snapshot.nav, CAST(nav_snapshot.nav AS {double}) AS value
    FROM nav_snapshot
    JOIN account ON account.id = nav_snapshot.account_id
    JOIN agent ON agent.id = account.agent_id
    WHERE nav_snapshot.kind = 'slot'
) AS navs
WHERE value > 0
"""

LEADERBOARD = """
CREATE VIEW v_leaderboard AS
SELECT * FROM (
    SELECT agent.name AS agent, agent.kind, account.market, account.currency,
           account.id AS account_id, account.initial_cash,
           series.first_at, latest.at AS as_of, COALESCE(series.periods, 0) AS periods,
           latest.nav AS last_nav,
           CASE WHEN series.periods > 0 THEN last_return.cumulative_return END
               AS cumulative_return,
           CASE WHEN series.periods > 0 THEN series.max_drawdown END AS max_drawdown
    FROM account
    JOIN agent ON agent.id = account.agent_id
    LEFT JOIN v_latest_nav AS latest ON latest.account_id = account.id
    LEFT JOIN (
        SELECT account_id, MIN(at) AS first_at, MAX(at) AS last_at, COUNT(*) - 1 AS periods,
               MIN(drawdown) AS max_drawdown
        FROM v_account_returns
        GROUP BY account_id
    ) AS series ON series.account_id = account.id
    LEFT JOIN v_account_returns AS last_return
        ON last_return.account_id = account.id AND last_return.at = series.last_at
) AS board
ORDER BY market, cumulative_return IS NULL, cumulative_return DESC, agent
"""


def upgrade() -> None:
    double = "DOUBLE PRECISION" if op.get_bind().dialect.name == "postgresql" else "REAL"
    op.execute(LATEST_NAV)
    op.execute(ACCOUNT_RETURNS.format(double=double))
    op.execute(LEADERBOARD)


def downgrade() -> None:
    for view in VIEWS:
        op.execute(f"DROP VIEW {view}")
