"""The ledger's tables as SQLAlchemy Core `Table`s: what commands query and write with Core
statements, without the ORM.

`tables.py` declares the same tables as SQLModel classes, for the store's ORM reads and writes.
Importing those classes costs a command about a quarter of a second (SQLModel, pydantic's models of
31 tables, SQLAlchemy's ORM and declarative mapping), and a replay and the leaderboard read and
write through Core only: they import these tables, and the store imports the ORM (a session, a row
class) inside the functions that need a row object. Both modules declare one schema:
`tests/unit/test_core_tables.py` compiles every table, index and constraint of the two in SQLite's
and Postgres' dialects and fails on any difference, and `tests/migration/test_migrations.py`
compares a migrated ledger with each. Table and constraint names are a contract
(`NAMING_CONVENTION`); money and quantities are `ExactDecimal`, instants `UtcDateTime`.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Column,
    Date,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)

from openbell.store.types import ExactDecimal, UtcDateTime

NAMING_CONVENTION: Final[dict[str, str]] = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
METADATA: Final = MetaData(naming_convention=NAMING_CONVENTION)

AGENT_TABLE: Final[Table] = Table(
    "agent",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("name", String, nullable=False, unique=True),
    Column("kind", String, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)

ACCOUNT_TABLE: Final[Table] = Table(
    "account",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("agent_id", Integer, ForeignKey("agent.id"), nullable=False),
    Column("market", String, nullable=False),
    Column("currency", String, nullable=False),
    Column("initial_cash", ExactDecimal, nullable=False),
    Column("cash", ExactDecimal, nullable=False),
    Column("paused", Boolean, nullable=False, default=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("allow_short", Boolean, nullable=False, default=False, server_default=false()),
    UniqueConstraint("agent_id", "market"),
    CheckConstraint("market IN ('us', 'cn', 'crypto')", name="market"),
)

CYCLE_TABLE: Final[Table] = Table(
    "cycle",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("account_id", Integer, ForeignKey("account.id"), nullable=False),
    Column("slot_at", UtcDateTime, nullable=False),
    Column("status", String, nullable=False),
    Column("claimed_by", String, nullable=False),
    Column("lease_until", UtcDateTime, nullable=False),
    Column("started_at", UtcDateTime, nullable=False),
    Column("finished_at", UtcDateTime, nullable=True),
    Column("error_class", String, nullable=True),
    Column("error_message", Text, nullable=True),
    Column("reason", Text, nullable=True),
    Column("tokens_in", Integer, nullable=True),
    Column("tokens_out", Integer, nullable=True),
    Column("tokens_cached", Integer, nullable=True),
    Column("usage_estimated", Boolean, nullable=True),
    Column("llm_latency_ms", Integer, nullable=True),
    Column("cost", ExactDecimal, nullable=True),
    Column("parse_failures", Integer, nullable=True),
    Column("invalid_tool_calls", Integer, nullable=True),
    Column("llm_attempts", Integer, nullable=True),
    Column("llm_failed_attempts", Integer, nullable=True),
    UniqueConstraint("account_id", "slot_at"),
    CheckConstraint(
        "status IN ('claimed', 'done', 'failed', 'skipped', 'interrupted', 'missed')", name="status"
    ),
)

ORDER_TABLE: Final[Table] = Table(
    "order",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("cycle_id", Integer, ForeignKey("cycle.id"), nullable=False),
    Column("account_id", Integer, ForeignKey("account.id"), nullable=False, index=True),
    Column("seq", Integer, nullable=False),
    Column("idempotency_key", String, nullable=False, unique=True),
    Column("symbol", String, nullable=False),
    Column("side", String, nullable=False),
    Column("quantity", ExactDecimal, nullable=False),
    Column("target_weight", ExactDecimal, nullable=True),
    Column("reason", Text, nullable=False, default=""),
    Column("confidence", ExactDecimal, nullable=True),
    Column("placed_at", UtcDateTime, nullable=False),
    Column("status", String, nullable=False),
    Column("reject_reason", String, nullable=True),
    Column("reject_message", Text, nullable=True),
    Column("rejected_at", UtcDateTime, nullable=True),
    UniqueConstraint("cycle_id", "seq"),
    CheckConstraint("side IN ('buy', 'sell', 'short', 'cover')", name="side"),
    CheckConstraint("status IN ('filled', 'rejected')", name="status"),
    CheckConstraint("(status = 'rejected') = (reject_reason IS NOT NULL)", name="reject_reason"),
)

FILL_TABLE: Final[Table] = Table(
    "fill",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("order_id", Integer, ForeignKey("order.id"), nullable=False, index=True),
    Column("account_id", Integer, ForeignKey("account.id"), nullable=False),
    Column("idempotency_key", String, nullable=False, unique=True),
    Column("symbol", String, nullable=False),
    Column("side", String, nullable=False),
    Column("quantity", ExactDecimal, nullable=False),
    Column("price", ExactDecimal, nullable=False),
    Column("notional", ExactDecimal, nullable=False),
    Column("fees", ExactDecimal, nullable=False),
    Column("currency", String, nullable=False),
    Column("filled_at", UtcDateTime, nullable=False),
    Column("price_source", String, nullable=False),
    CheckConstraint("side IN ('buy', 'sell', 'short', 'cover')", name="side"),
    Index("ix_fill_account_id_filled_at", "account_id", "filled_at"),
)

CORPORATE_ACTION_TABLE: Final[Table] = Table(
    "corporate_action",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("account_id", Integer, ForeignKey("account.id"), nullable=False),
    Column("symbol", String, nullable=False),
    Column("kind", String, nullable=False),
    Column("ex_date", Date, nullable=False),
    Column("ex_at", UtcDateTime, nullable=False),
    Column("ratio", ExactDecimal, nullable=False),
    Column("cash_per_share", ExactDecimal, nullable=False),
    Column("currency", String, nullable=False),
    Column("source", String, nullable=False),
    Column("quantity_before", ExactDecimal, nullable=False),
    Column("quantity_delta", ExactDecimal, nullable=False),
    Column("fraction", ExactDecimal, nullable=False),
    Column("price", ExactDecimal, nullable=True),
    Column("cash_delta", ExactDecimal, nullable=False),
    Column("cost_delta", ExactDecimal, nullable=False),
    Column("after_fill_id", Integer, nullable=True),
    Column("applied_at", UtcDateTime, nullable=False),
    UniqueConstraint("account_id", "symbol", "kind", "ex_date"),
    CheckConstraint("kind IN ('cash_dividend', 'split')", name="kind"),
)

BORROW_FEE_TABLE: Final[Table] = Table(
    "borrow_fee",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("account_id", Integer, ForeignKey("account.id"), nullable=False),
    Column("symbol", String, nullable=False),
    Column("day", Date, nullable=False),
    Column("quantity", ExactDecimal, nullable=False),
    Column("price", ExactDecimal, nullable=False),
    Column("rate_bps", ExactDecimal, nullable=False),
    Column("day_count", Integer, nullable=False),
    Column("amount", ExactDecimal, nullable=False),
    Column("currency", String, nullable=False),
    Column("after_fill_id", Integer, nullable=True),
    Column("charged_at", UtcDateTime, nullable=False),
    UniqueConstraint("account_id", "symbol", "day"),
)

MARGIN_CALL_TABLE: Final[Table] = Table(
    "margin_call",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("account_id", Integer, ForeignKey("account.id"), nullable=False, index=True),
    Column("cycle_id", Integer, ForeignKey("cycle.id"), nullable=False),
    Column("order_id", Integer, ForeignKey("order.id"), nullable=False, unique=True),
    Column("at", UtcDateTime, nullable=False),
    Column("equity", ExactDecimal, nullable=False),
    Column("requirement", ExactDecimal, nullable=False),
    Column("reason", Text, nullable=False),
)

POSITION_TABLE: Final[Table] = Table(
    "position",
    METADATA,
    Column("account_id", Integer, ForeignKey("account.id"), primary_key=True, nullable=False),
    Column("symbol", String, primary_key=True, nullable=False),
    Column("quantity", ExactDecimal, nullable=False),
    Column("cost", ExactDecimal, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)

NAV_SNAPSHOT_TABLE: Final[Table] = Table(
    "nav_snapshot",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("account_id", Integer, ForeignKey("account.id"), nullable=False),
    Column("at", UtcDateTime, nullable=False),
    Column("kind", String, nullable=False),
    Column("cash", ExactDecimal, nullable=False),
    Column("positions_value", ExactDecimal, nullable=False),
    Column("nav", ExactDecimal, nullable=False),
    Column("last_fill_id", Integer, nullable=True),
    Column("last_action_id", Integer, nullable=True),
    UniqueConstraint("account_id", "at", "kind"),
    CheckConstraint("kind IN ('slot', 'close')", name="kind"),
)

NAV_MARK_TABLE: Final[Table] = Table(
    "nav_mark",
    METADATA,
    Column("snapshot_id", Integer, ForeignKey("nav_snapshot.id"), primary_key=True, nullable=False),
    Column("symbol", String, primary_key=True, nullable=False),
    Column("quantity", ExactDecimal, nullable=False),
    Column("price", ExactDecimal, nullable=False),
    Column("value", ExactDecimal, nullable=False),
)

TRACE_TABLE: Final[Table] = Table(
    "trace",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("cycle_id", Integer, ForeignKey("cycle.id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("role", String, nullable=False),
    Column("content", Text, nullable=True),
    Column("tool", String, nullable=True),
    Column("arguments", Text, nullable=True),
    Column("result", Text, nullable=True),
    Column("tokens_in", Integer, nullable=True),
    Column("tokens_out", Integer, nullable=True),
    Column("latency_ms", Integer, nullable=True),
    Column("at", UtcDateTime, nullable=False),
    Column("model", String, nullable=True),
    Column("fingerprint", String, nullable=True),
    Column("revision", String, nullable=True),
    Column("request_digest", String, nullable=True),
    Column("response", Text, nullable=True),
    UniqueConstraint("cycle_id", "seq"),
)

MASKING_KEY_TABLE: Final[Table] = Table(
    "masking_key",
    METADATA,
    Column("account_id", Integer, ForeignKey("account.id"), primary_key=True, nullable=False),
    Column("epoch", Date, nullable=False),
    Column("money_unit", ExactDecimal, nullable=False),
)

MASKING_ALIAS_TABLE: Final[Table] = Table(
    "masking_alias",
    METADATA,
    Column(
        "account_id",
        Integer,
        ForeignKey("masking_key.account_id"),
        primary_key=True,
        nullable=False,
    ),
    Column("symbol", String, primary_key=True, nullable=False),
    Column("alias", String, nullable=False),
    UniqueConstraint("account_id", "alias"),
)

BAR_TABLE: Final[Table] = Table(
    "bar",
    METADATA,
    Column("symbol", String, primary_key=True, nullable=False),
    Column("interval", String, primary_key=True, nullable=False),
    Column("start_at", UtcDateTime, primary_key=True, nullable=False),
    Column("end_at", UtcDateTime, nullable=False),
    Column("open", ExactDecimal, nullable=False),
    Column("high", ExactDecimal, nullable=False),
    Column("low", ExactDecimal, nullable=False),
    Column("close", ExactDecimal, nullable=False),
    Column("volume", ExactDecimal, nullable=False),
    Column("source", String, nullable=False),
    Column("fetched_at", UtcDateTime, nullable=False),
    Column("is_final", Boolean, nullable=False),
    Column("known_at", UtcDateTime, nullable=True),
)

BAR_COVERAGE_TABLE: Final[Table] = Table(
    "bar_coverage",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("source", String, nullable=False),
    Column("symbol", String, nullable=False),
    Column("interval", String, nullable=False),
    Column("start_at", UtcDateTime, nullable=False),
    Column("end_at", UtcDateTime, nullable=False),
    Column("fetched_at", UtcDateTime, nullable=False),
    CheckConstraint("start_at < end_at", name="span"),
    Index("ix_bar_coverage_source_symbol_interval", "source", "symbol", "interval", "start_at"),
)

NEWS_TABLE: Final[Table] = Table(
    "news",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("symbol", String, nullable=True),
    Column("published_at", UtcDateTime, nullable=False),
    Column("title", Text, nullable=False),
    Column("url", Text, nullable=True),
    Column("source", String, nullable=False),
    Column("fetched_at", UtcDateTime, nullable=False),
    Column("item_key", String, nullable=False, unique=True),
    Column("item_source", String, nullable=False, default=""),
    Column("known_at", UtcDateTime, nullable=True),
    Index("ix_news_symbol_published_at", "symbol", "published_at"),
)

DAEMON_RUN_TABLE: Final[Table] = Table(
    "daemon_run",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("run_id", String, nullable=False),
    Column("market", String, nullable=False),
    Column("started_at", UtcDateTime, nullable=False),
    UniqueConstraint("run_id", "market"),
    CheckConstraint("market IN ('us', 'cn', 'crypto')", name="market"),
)

FUNDAMENTALS_REPORT_TABLE: Final[Table] = Table(
    "fundamentals_report",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("symbol", String, nullable=False),
    Column("period_end", Date, nullable=False),
    Column("published_at", UtcDateTime, nullable=False),
    Column("known_at", UtcDateTime, nullable=False),
    Column("currency", String, nullable=False),
    Column("figures", Text, nullable=False),
    Column("source", String, nullable=False),
    Column("fetched_at", UtcDateTime, nullable=False),
    Column("item_key", String, nullable=False, unique=True),
    Index("ix_fundamentals_report_symbol_published_at", "symbol", "published_at"),
)

QUOTE_RECORD_TABLE: Final[Table] = Table(
    "quote_record",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("source", String, nullable=False),
    Column("symbol", String, nullable=False),
    Column("asked_at", UtcDateTime, nullable=False),
    Column("quoted_at", UtcDateTime, nullable=False),
    Column("price", ExactDecimal, nullable=False),
    Column("fetched_at", UtcDateTime, nullable=False),
    UniqueConstraint("source", "symbol", "asked_at"),
    Index("ix_quote_record_symbol_asked_at", "symbol", "asked_at"),
)

REPLAY_WARNING_TABLE: Final[Table] = Table(
    "replay_warning",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("market", String, nullable=False),
    Column("start_at", UtcDateTime, nullable=False),
    Column("end_at", UtcDateTime, nullable=False),
    Column("message", Text, nullable=False),
    CheckConstraint("market IN ('us', 'cn', 'crypto')", name="market"),
)

PLANTED_NEWS_TABLE: Final[Table] = Table(
    "planted_news",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("market", String, nullable=False),
    Column("symbol", String, nullable=False),
    Column("published_at", UtcDateTime, nullable=False),
    Column("title", Text, nullable=False),
    Column("kind", String, nullable=False),
    Column("target", String, nullable=True),
    CheckConstraint("market IN ('us', 'cn', 'crypto')", name="market"),
    UniqueConstraint("market", "symbol", "published_at", "title"),
)

AGENT_TOKEN_TABLE: Final[Table] = Table(
    "agent_token",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("agent_id", Integer, ForeignKey("agent.id"), nullable=False, index=True),
    Column("token_hash", String, nullable=False, unique=True),
    Column("issued_at", UtcDateTime, nullable=False),
    Column("revoked_at", UtcDateTime, nullable=True),
)

SEED_RUN_TABLE: Final[Table] = Table(
    "seed_run",
    METADATA,
    Column("agent_id", Integer, ForeignKey("agent.id"), primary_key=True, nullable=False),
    Column("group_label", String, nullable=False),
    Column("base_agent", String, nullable=False),
    Column("seed", Integer, nullable=False),
)

VERIFY_CHECKPOINT_TABLE: Final[Table] = Table(
    "verify_checkpoint",
    METADATA,
    Column("account_id", Integer, ForeignKey("account.id"), primary_key=True, nullable=False),
    Column("verified_at", UtcDateTime, nullable=False),
    Column("watermarks", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("checksum", String, nullable=False),
)

SEASON_TABLE: Final[Table] = Table(
    "season",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("name", String, nullable=False, unique=True),
    Column("manifest", Text, nullable=False),
    Column("manifest_sha256", String, nullable=False),
    Column("start_on", Date, nullable=False),
    Column("end_on", Date, nullable=True),
    Column("opened_at", UtcDateTime, nullable=False),
    Column("closed_at", UtcDateTime, nullable=True),
    Column("config", Text, nullable=False),
    Column("config_path", Text, nullable=False),
)

CYCLE_DIGEST_TABLE: Final[Table] = Table(
    "cycle_digest",
    METADATA,
    Column("cycle_id", Integer, primary_key=True, nullable=False),
    Column("account_id", Integer, ForeignKey("account.id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("prev", String, nullable=False),
    Column("digest", String, nullable=False),
    UniqueConstraint("account_id", "seq"),
)

STRATEGY_CODE_TABLE: Final[Table] = Table(
    "strategy_code",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("account_id", Integer, ForeignKey("account.id"), nullable=False, index=True),
    Column("cycle_id", Integer, ForeignKey("cycle.id"), nullable=False),
    Column("written_at", UtcDateTime, nullable=False),
    Column("code", Text, nullable=False),
    Column("claimed_return", ExactDecimal, nullable=True),
    Column("claimed_hit_rate", ExactDecimal, nullable=True),
    Column("rationale", Text, nullable=False),
    Column("answers", Integer, nullable=False),
)

STRATEGY_RUN_TABLE: Final[Table] = Table(
    "strategy_run",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("strategy_id", Integer, ForeignKey("strategy_code.id"), nullable=False, index=True),
    Column("cycle_id", Integer, ForeignKey("cycle.id"), nullable=False),
    Column("ran_at", UtcDateTime, nullable=False),
    Column("duration_ms", Integer, nullable=False),
    Column("outcome", String, nullable=False),
    Column("weights", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("offered", Text, nullable=True),
    UniqueConstraint("cycle_id"),
    CheckConstraint("outcome IN ('ok', 'error', 'invalid', 'timeout', 'killed')", name="outcome"),
)

HEDGE_PAIR_TABLE: Final[Table] = Table(
    "hedge_pair",
    METADATA,
    Column("account_id", Integer, ForeignKey("account.id"), primary_key=True, nullable=False),
    Column("first_symbol", String, nullable=False),
    Column("second_symbol", String, nullable=False),
    Column("cycle_id", Integer, ForeignKey("cycle.id"), nullable=False),
    Column("picked_at", UtcDateTime, nullable=False),
)

STRATEGY_JUDGEMENT_TABLE: Final[Table] = Table(
    "strategy_judgement",
    METADATA,
    Column("id", Integer, primary_key=True, nullable=False),
    Column("strategy_id", Integer, ForeignKey("strategy_code.id"), nullable=False, index=True),
    Column("judge_model", String, nullable=False),
    Column("judged_at", UtcDateTime, nullable=False),
    Column("direction", Integer, nullable=False),
    Column("indicators", Integer, nullable=False),
    Column("exits", Integer, nullable=False),
    Column("no_extra_rule", Integer, nullable=False),
    Column("rationale", Text, nullable=False),
    UniqueConstraint("strategy_id", "judge_model"),
    CheckConstraint("direction IN (0, 1)", name="direction"),
    CheckConstraint("indicators IN (0, 1)", name="indicators"),
    CheckConstraint("exits IN (0, 1)", name="exits"),
    CheckConstraint("no_extra_rule IN (0, 1)", name="no_extra_rule"),
)
