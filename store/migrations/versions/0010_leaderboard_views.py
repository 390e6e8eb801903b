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

Money stays exact in the tables; the ratios here are computed in IEEE double precision (`CAST(nav
AS DOUBLE PRECISION)`: REAL on SQLite, whose decimals are text), each NAV converted to a double
once, as `openbell.ops.evaluation.return_metrics` does. The CLI compounds one float return per period, the
views divide two doubles once: the figures agree to about 1e-12 relative over a year of hourly
slots (see docs/how-to/query-the-ledger.md). The CLI's composite rank (z-scores across the market, the
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

#: The positive slot NAVs of every account, each as a double once (SQLite reads `DOUBLE
#: PRECISION` as REAL): the series `openbell leaderboard` computes its figures from.
_SERIES = """
    SELECT account_id, at, nav, value
    FROM (
        SELECT account_id, at, nav, CAST(nav AS DOUBLE PRECISION) AS value
        FROM nav_snapshot
        WHERE kind = 'slot'
    ) AS slot_navs
    WHERE value > 0
"""

LATEST_NAV = """
CREATE VIEW v_latest_nav AS
SELECT agent.name AS agent, account.market, snapshot.account_id, snapshot.at, snapshot.nav,
       snapshot.cash, snapshot.positions_value
FROM (
    SELECT account_id, MAX(at) AS at FROM nav_snapshot WHERE kind = 'slot' GROUP BY account_id
) AS newest
JOIN nav_snapshot AS snapshot
    ON snapshot.account_id = newest.account_id AND snapshot.at = newest.at
    AND snapshot.kind = 'slot'
JOIN account ON account.id = snapshot.account_id
JOIN agent ON agent.id = account.agent_id
"""

ACCOUNT_RETURNS = f"""
CREATE VIEW v_account_returns AS
SELECT agent.name AS agent, account.market, returns.account_id, returns.at, returns.nav,
       returns.period_return, returns.cumulative_return, returns.drawdown
FROM (
    SELECT account_id, at, nav,
           value / LAG(value) OVER (PARTITION BY account_id ORDER BY at) - 1 AS period_return,
           value / FIRST_VALUE(value) OVER (PARTITION BY account_id ORDER BY at) - 1
               AS cumulative_return,
           value / MAX(value) OVER (
               PARTITION BY account_id ORDER BY at
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
           ) - 1 AS drawdown
    FROM ({_SERIES}) AS series
) AS returns
JOIN account ON account.id = returns.account_id
JOIN agent ON agent.id = account.agent_id
"""  # noqa: S608 (constant SQL)

# One window pass (the drawdown), then the first and last NAV of each series by the
# (account_id, at, kind) index: 50 agents over a year of hourly slots (438,000 snapshots) take
# about 1.3 s of CPU on SQLite.
LEADERBOARD = f"""
CREATE VIEW v_leaderboard AS
SELECT * FROM (
    SELECT agent.name AS agent, agent.kind, account.market, account.currency,
           account.id AS account_id, account.initial_cash,
           series.first_at, latest.at AS as_of, COALESCE(series.periods, 0) AS periods,
           latest.nav AS last_nav,
           CASE WHEN series.periods > 0 THEN
               CAST(last_snapshot.nav AS DOUBLE PRECISION)
               / CAST(first_snapshot.nav AS DOUBLE PRECISION) - 1
           END AS cumulative_return,
           CASE WHEN series.periods > 0 THEN series.max_drawdown END AS max_drawdown
    FROM account
    JOIN agent ON agent.id = account.agent_id
    LEFT JOIN v_latest_nav AS latest ON latest.account_id = account.id
    LEFT JOIN (
        SELECT account_id, MIN(at) AS first_at, MAX(at) AS last_at, COUNT(*) - 1 AS periods,
               MIN(drawdown) AS max_drawdown
        FROM (
            SELECT account_id, at,
                   value / MAX(value) OVER (
                       PARTITION BY account_id ORDER BY at
                       ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
                   ) - 1 AS drawdown
            FROM ({_SERIES}) AS series
        ) AS drawdowns
        GROUP BY account_id
    ) AS series ON series.account_id = account.id
    LEFT JOIN nav_snapshot AS first_snapshot
        ON first_snapshot.account_id = account.id AND first_snapshot.at = series.first_at
        AND first_snapshot.kind = 'slot'
    LEFT JOIN nav_snapshot AS last_snapshot
        ON last_snapshot.account_id = account.id AND last_snapshot.at = series.last_at
        AND last_snapshot.kind = 'slot'
) AS board
ORDER BY market, cumulative_return IS NULL, cumulative_return DESC, agent
"""  # noqa: S608 (constant SQL)


def upgrade() -> None:
    op.execute(LATEST_NAV)
    op.execute(ACCOUNT_RETURNS)
    op.execute(LEADERBOARD)


def downgrade() -> None:
    for view in VIEWS:
        op.execute(f"DROP VIEW {view}")
