"""The SQLModel tables of the ledger and its caches; their table names are a contract.

Rows stay inside `openbell.store`: the ledger converts them to domain values at its edge. Every
money and quantity column is `ExactDecimal` and every datetime `UtcDateTime` (a test walks the
metadata and fails on anything else). Orders, fills and applied corporate actions are append-only;
`account.cash` and `position` are running balances that `openbell ledger verify` recomputes from
the fills and the corporate actions. Enumerated
strings are guarded by CHECK constraints. Constraint names follow `NAMING_CONVENTION`, so future
migrations (and SQLite batch migrations) can address them. `core_tables.py` declares the same tables
as Core `Table`s (`*_TABLE`), for the store's Core statements; a test keeps the two identical, and
a command that needs no row object never imports this module (`core_tables.py` says why).

Every table class derives from `Row`, whose pydantic validator and serializer are built when first
used (`defer_build`), not when the class is: SQLModel constructs a table row without pydantic's
validation, so a command that never validates or dumps a row (a replay, the leaderboard) never
builds them, about a quarter of what building the tables costs every command's start-up.

This module alone has no `from __future__ import annotations`: its annotations are the columns'
types as objects, not strings that pydantic and SQLAlchemy's declarative mapping would each
compile and evaluate again for every column of every table (about 1% of a short replay's CPU).
"""

from datetime import date, datetime
from decimal import Decimal

from pydantic import ConfigDict
from sqlalchemy import CheckConstraint, Date, Index, Text, UniqueConstraint, false
from sqlmodel import Field, SQLModel

from openbell.store.core_tables import NAMING_CONVENTION
from openbell.store.strategy_judgements import CHECKS
from openbell.store.strategy_runs import RUN_OUTCOMES
from openbell.store.types import ExactDecimal, UtcDateTime

SQLModel.metadata.naming_convention = NAMING_CONVENTION

_CYCLE_STATUSES = "'claimed', 'done', 'failed', 'skipped', 'interrupted', 'missed'"


#: The sides of an order or fill (`openbell.markets.domain.Side`).
_SIDES = "'buy', 'sell', 'short', 'cover'"


def _in(column: str, values: str, name: str) -> CheckConstraint:
    return CheckConstraint(f"{column} IN ({values})", name=name)


class Row(SQLModel):
    """The base of every table class (declare one as `class NameRow(Row, table=True)`): a plain
    SQLModel whose pydantic validator and serializer are built when `model_validate` or
    `model_dump` first needs them (module docstring); its columns and mapping are SQLModel's."""

    # pydantic merges it into SQLModel's own config (whose stubs type it as their `SQLModelConfig`).
    model_config = ConfigDict(defer_build=True)  # type: ignore[assignment]


class AgentRow(Row, table=True):
    """A competitor: an LLM agent or a baseline, known by its unique name."""

    __tablename__ = "agent"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True)
    kind: str
    created_at: datetime = Field(sa_type=UtcDateTime)


class AccountRow(Row, table=True):
    """One agent enrolled in one market, with its own cash in the market's currency."""

    __tablename__ = "account"
    __table_args__ = (
        UniqueConstraint("agent_id", "market"),
        _in("market", "'us', 'cn', 'crypto'", "market"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key="agent.id")
    market: str
    currency: str
    initial_cash: Decimal = Field(sa_type=ExactDecimal)
    cash: Decimal = Field(sa_type=ExactDecimal)
    paused: bool = False
    created_at: datetime = Field(sa_type=UtcDateTime)
    #: The account may short (`short`/`cover` orders) where its market allows it.
    allow_short: bool = Field(default=False, sa_column_kwargs={"server_default": false()})


class CycleRow(Row, table=True):
    """One decision cycle of an account at a slot; the unique (account, slot) insert claims it."""

    __tablename__ = "cycle"
    __table_args__ = (
        UniqueConstraint("account_id", "slot_at"),
        _in("status", _CYCLE_STATUSES, "status"),
    )

    id: int | None = Field(default=None, primary_key=True)
    account_id: int = Field(foreign_key="account.id")
    slot_at: datetime = Field(sa_type=UtcDateTime)
    status: str
    claimed_by: str
    lease_until: datetime = Field(sa_type=UtcDateTime)
    started_at: datetime = Field(sa_type=UtcDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    error_class: str | None = None
    error_message: str | None = Field(default=None, sa_type=Text)
    reason: str | None = Field(default=None, sa_type=Text)
    # LLM usage, summed over the cycle's runs (NULL for agents that use no model).
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_cached: int | None = None
    usage_estimated: bool | None = None
    llm_latency_ms: int | None = None
    cost: Decimal | None = Field(default=None, sa_type=ExactDecimal)
    parse_failures: int | None = None
    invalid_tool_calls: int | None = None
    llm_attempts: int | None = None
    llm_failed_attempts: int | None = None


class OrderRow(Row, table=True):
    """An order an agent placed in a cycle, with its outcome (append-only)."""

    __tablename__ = "order"
    __table_args__ = (
        UniqueConstraint("cycle_id", "seq"),
        _in("side", _SIDES, "side"),
        _in("status", "'filled', 'rejected'", "status"),
        CheckConstraint(
            "(status = 'rejected') = (reject_reason IS NOT NULL)", name="reject_reason"
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    cycle_id: int = Field(foreign_key="cycle.id")
    account_id: int = Field(foreign_key="account.id", index=True)
    seq: int
    idempotency_key: str = Field(unique=True)
    symbol: str
    side: str
    quantity: Decimal = Field(sa_type=ExactDecimal)
    target_weight: Decimal | None = Field(default=None, sa_type=ExactDecimal)
    reason: str = Field(default="", sa_type=Text)
    confidence: Decimal | None = Field(default=None, sa_type=ExactDecimal)
    placed_at: datetime = Field(sa_type=UtcDateTime)
    status: str
    reject_reason: str | None = None
    reject_message: str | None = Field(default=None, sa_type=Text)
    rejected_at: datetime | None = Field(default=None, sa_type=UtcDateTime)


class FillRow(Row, table=True):
    """An executed order (append-only). Cash and positions are sums over these rows."""

    __tablename__ = "fill"
    __table_args__ = (
        Index("ix_fill_account_id_filled_at", "account_id", "filled_at"),
        _in("side", _SIDES, "side"),
    )

    id: int | None = Field(default=None, primary_key=True)
    order_id: int = Field(foreign_key="order.id", index=True)
    account_id: int = Field(foreign_key="account.id")
    idempotency_key: str = Field(unique=True)
    symbol: str
    side: str
    quantity: Decimal = Field(sa_type=ExactDecimal)
    price: Decimal = Field(sa_type=ExactDecimal)
    notional: Decimal = Field(sa_type=ExactDecimal)
    fees: Decimal = Field(sa_type=ExactDecimal)
    currency: str
    filled_at: datetime = Field(sa_type=UtcDateTime)
    price_source: str


class CorporateActionRow(Row, table=True):
    """A split or cash dividend applied to one account's holding (append-only), once per action.

    `quantity_before` is the holding before `ex_at` (the ex-date's open); the entry moved the
    position by `quantity_delta` and the cash by `cash_delta` (the dividend, or `fraction` of a
    share paid at `price`), and its cost by `cost_delta`. `after_fill_id` is the account's newest
    fill when it was applied, which places it among the fills when the verifier replays them.
    """

    __tablename__ = "corporate_action"
    __table_args__ = (
        UniqueConstraint("account_id", "symbol", "kind", "ex_date"),
        _in("kind", "'cash_dividend', 'split'", "kind"),
    )

    id: int | None = Field(default=None, primary_key=True)
    account_id: int = Field(foreign_key="account.id")
    symbol: str
    kind: str
    ex_date: date = Field(sa_type=Date)
    ex_at: datetime = Field(sa_type=UtcDateTime)
    ratio: Decimal = Field(sa_type=ExactDecimal)
    cash_per_share: Decimal = Field(sa_type=ExactDecimal)
    currency: str
    source: str
    quantity_before: Decimal = Field(sa_type=ExactDecimal)
    quantity_delta: Decimal = Field(sa_type=ExactDecimal)
    fraction: Decimal = Field(sa_type=ExactDecimal)
    price: Decimal | None = Field(default=None, sa_type=ExactDecimal)
    cash_delta: Decimal = Field(sa_type=ExactDecimal)
    cost_delta: Decimal = Field(sa_type=ExactDecimal)
    after_fill_id: int | None = None
    applied_at: datetime = Field(sa_type=UtcDateTime)


class BorrowFeeRow(Row, table=True):
    """The borrow fee of one short position for one calendar day (UTC), charged from cash
    (append-only; migration 0016).

    `quantity` is the (negative) holding at the day's end, `price` the mark used (the close of the
    last bar ended by the day's end), `amount = |quantity| x price x rate_bps / 10000 / day_count`
    by the money rule. `after_fill_id` is the account's newest fill when it was charged, which
    places it among the fills when the verifier replays them.
    """

    __tablename__ = "borrow_fee"
    __table_args__ = (UniqueConstraint("account_id", "symbol", "day"),)

    id: int | None = Field(default=None, primary_key=True)
    account_id: int = Field(foreign_key="account.id")
    symbol: str
    day: date = Field(sa_type=Date)
    quantity: Decimal = Field(sa_type=ExactDecimal)
    price: Decimal = Field(sa_type=ExactDecimal)
    rate_bps: Decimal = Field(sa_type=ExactDecimal)
    day_count: int
    amount: Decimal = Field(sa_type=ExactDecimal)
    currency: str
    after_fill_id: int | None = None
    charged_at: datetime = Field(sa_type=UtcDateTime)


class MarginCallRow(Row, table=True):
    """A short covered by a margin call: the cover's order, in the cycle it was made at, with the
    account's equity and maintenance requirement that called it (append-only; migration 0016)."""

    __tablename__ = "margin_call"

    id: int | None = Field(default=None, primary_key=True)
    account_id: int = Field(foreign_key="account.id", index=True)
    cycle_id: int = Field(foreign_key="cycle.id")
    order_id: int = Field(foreign_key="order.id", unique=True)
    at: datetime = Field(sa_type=UtcDateTime)
    equity: Decimal = Field(sa_type=ExactDecimal)
    requirement: Decimal = Field(sa_type=ExactDecimal)
    reason: str = Field(sa_type=Text)


class PositionRow(Row, table=True):
    """The running holding of one symbol in one account; deleted when it reaches zero."""

    __tablename__ = "position"

    account_id: int = Field(foreign_key="account.id", primary_key=True)
    symbol: str = Field(primary_key=True)
    quantity: Decimal = Field(sa_type=ExactDecimal)
    cost: Decimal = Field(sa_type=ExactDecimal)
    updated_at: datetime = Field(sa_type=UtcDateTime)


class NavSnapshotRow(Row, table=True):
    """An account's NAV at an instant, computed from the ledger at its marks."""

    __tablename__ = "nav_snapshot"
    __table_args__ = (
        UniqueConstraint("account_id", "at", "kind"),
        _in("kind", "'slot', 'close'", "kind"),
    )

    id: int | None = Field(default=None, primary_key=True)
    account_id: int = Field(foreign_key="account.id")
    at: datetime = Field(sa_type=UtcDateTime)
    kind: str
    cash: Decimal = Field(sa_type=ExactDecimal)
    positions_value: Decimal = Field(sa_type=ExactDecimal)
    nav: Decimal = Field(sa_type=ExactDecimal)
    last_fill_id: int | None = None
    last_action_id: int | None = None


class NavMarkRow(Row, table=True):
    """One holding valued in a NAV snapshot."""

    __tablename__ = "nav_mark"

    snapshot_id: int = Field(foreign_key="nav_snapshot.id", primary_key=True)
    symbol: str = Field(primary_key=True)
    quantity: Decimal = Field(sa_type=ExactDecimal)
    price: Decimal = Field(sa_type=ExactDecimal)
    value: Decimal = Field(sa_type=ExactDecimal)


class TraceRow(Row, table=True):
    """One model message or tool call of a cycle, in order."""

    __tablename__ = "trace"
    __table_args__ = (UniqueConstraint("cycle_id", "seq"),)

    id: int | None = Field(default=None, primary_key=True)
    cycle_id: int = Field(foreign_key="cycle.id")
    seq: int
    role: str
    content: str | None = Field(default=None, sa_type=Text)
    tool: str | None = None
    arguments: str | None = Field(default=None, sa_type=Text)
    result: str | None = Field(default=None, sa_type=Text)
    tokens_in: int | None = None
    tokens_out: int | None = None
    latency_ms: int | None = None
    at: datetime = Field(sa_type=UtcDateTime)
    #: The model identity an `assistant` row's response reported (`model`, `system_fingerprint`,
    #: the provider's revision headers); None elsewhere and before revision 0021.
    model: str | None = None
    fingerprint: str | None = None
    revision: str | None = None
    #: An `assistant` row's recorded exchange (revision 0023): the sha256 of the request body as
    #: sent (`agents/llm/answers.py`) and the response body as received, whole (secrets masked),
    #: which `openbell replay --answers` answers that request with.
    request_digest: str | None = None
    response: str | None = Field(default=None, sa_type=Text)


class MaskingKeyRow(Row, table=True):
    """A masked account's key: the day its `day_+N` labels count from and its money unit.

    Made at the account's first masked cycle and never changed (`store/masking_keys.py`).
    """

    __tablename__ = "masking_key"

    account_id: int = Field(foreign_key="account.id", primary_key=True)
    epoch: date
    money_unit: Decimal = Field(sa_type=ExactDecimal)


class MaskingAliasRow(Row, table=True):
    """The alias (`asset_NNNN`) a masked account's model knows a symbol by; added, never changed."""

    __tablename__ = "masking_alias"
    __table_args__ = (UniqueConstraint("account_id", "alias"),)

    account_id: int = Field(foreign_key="masking_key.account_id", primary_key=True)
    symbol: str = Field(primary_key=True)
    alias: str


class BarRow(Row, table=True):
    """A cached OHLCV bar over `[start_at, end_at)`; `is_final` once the bar has closed.

    `fetched_at` is the bar's last fetch; `known_at` (final bars only) is when its values were
    first known, which a cache replay shows it from (`store/cache.py`).
    """

    __tablename__ = "bar"

    symbol: str = Field(primary_key=True)
    interval: str = Field(primary_key=True)
    start_at: datetime = Field(sa_type=UtcDateTime, primary_key=True)
    end_at: datetime = Field(sa_type=UtcDateTime)
    open: Decimal = Field(sa_type=ExactDecimal)
    high: Decimal = Field(sa_type=ExactDecimal)
    low: Decimal = Field(sa_type=ExactDecimal)
    close: Decimal = Field(sa_type=ExactDecimal)
    volume: Decimal = Field(sa_type=ExactDecimal)
    source: str
    fetched_at: datetime = Field(sa_type=UtcDateTime)
    is_final: bool
    known_at: datetime | None = Field(default=None, sa_type=UtcDateTime)


class BarCoverageRow(Row, table=True):
    """A span of bar starts `[start_at, end_at)` over which every bar of `source` is cached, final.

    The cache reads back only what such a span covers (`markets/coverage.py` says which part of a
    vendor read counts). Spans of one (source, symbol, interval) that overlap or touch are merged
    when written; `fetched_at` is the latest fetch merged into the span.
    """

    __tablename__ = "bar_coverage"
    __table_args__ = (
        Index("ix_bar_coverage_source_symbol_interval", "source", "symbol", "interval", "start_at"),
        CheckConstraint("start_at < end_at", name="span"),
    )

    id: int | None = Field(default=None, primary_key=True)
    source: str
    symbol: str
    interval: str
    start_at: datetime = Field(sa_type=UtcDateTime)
    end_at: datetime = Field(sa_type=UtcDateTime)
    fetched_at: datetime = Field(sa_type=UtcDateTime)


class NewsRow(Row, table=True):
    """A cached news item, observable from `published_at`, kept once per `item_key`.

    `source` is the data source that fetched it (as for bars); `item_source` is the item's own
    `NewsItem.source`, the vendor or feed it names. `item_key` is a digest of (symbol,
    published_at, title), unique so that putting an item again changes nothing.
    """

    __tablename__ = "news"
    __table_args__ = (Index("ix_news_symbol_published_at", "symbol", "published_at"),)

    id: int | None = Field(default=None, primary_key=True)
    symbol: str | None = None
    published_at: datetime = Field(sa_type=UtcDateTime)
    title: str = Field(sa_type=Text)
    url: str | None = Field(default=None, sa_type=Text)
    source: str
    fetched_at: datetime = Field(sa_type=UtcDateTime)
    item_key: str = Field(unique=True)
    item_source: str = ""
    #: The first decision time it was served for (a live read) or its publication time (an
    #: import): a cache replay shows it at `t` only when this is at or before `t`. None: a row
    #: cached before migration 0012, shown from `published_at`.
    known_at: datetime | None = Field(default=None, sa_type=UtcDateTime)


class DaemonRunRow(Row, table=True):
    """One live daemon run's start on one market. A market's earliest row is when a daemon first
    rang it on this ledger; the health check counts overdue slots from there."""

    __tablename__ = "daemon_run"
    __table_args__ = (
        UniqueConstraint("run_id", "market"),
        _in("market", "'us', 'cn', 'crypto'", "market"),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: str
    market: str
    started_at: datetime = Field(sa_type=UtcDateTime)


class FundamentalsReportRow(Row, table=True):
    """A recorded fundamentals report (`markets.fundamentals.FundamentalsReport`), kept once per
    `item_key` (a digest of symbol, period end and published_at). `figures` is a JSON object of
    exact decimal strings; `known_at` is when it was first served (a live read) or published (an
    import); `source` is who recorded it ("yfinance", "import:FILE")."""

    __tablename__ = "fundamentals_report"
    __table_args__ = (
        Index("ix_fundamentals_report_symbol_published_at", "symbol", "published_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    symbol: str
    period_end: date = Field(sa_type=Date)
    published_at: datetime = Field(sa_type=UtcDateTime)
    known_at: datetime = Field(sa_type=UtcDateTime)
    currency: str
    figures: str = Field(sa_type=Text)
    source: str
    fetched_at: datetime = Field(sa_type=UtcDateTime)
    item_key: str = Field(unique=True)


class QuoteRecordRow(Row, table=True):
    """A quote a live source answered for decision time `asked_at` (`Quote` price and stamp):
    the quotes a cache replay shows and fills at, as the live daemon did."""

    __tablename__ = "quote_record"
    __table_args__ = (
        UniqueConstraint("source", "symbol", "asked_at"),
        Index("ix_quote_record_symbol_asked_at", "symbol", "asked_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    source: str
    symbol: str
    asked_at: datetime = Field(sa_type=UtcDateTime)
    quoted_at: datetime = Field(sa_type=UtcDateTime)
    price: Decimal = Field(sa_type=ExactDecimal)
    fetched_at: datetime = Field(sa_type=UtcDateTime)


class ReplayWarningRow(Row, table=True):
    """A warning a replay ran under (a universe partly without data, or used outside the dates
    its file vouches for), for `openbell report` to repeat."""

    __tablename__ = "replay_warning"
    __table_args__ = (_in("market", "'us', 'cn', 'crypto'", "market"),)

    id: int | None = Field(default=None, primary_key=True)
    market: str
    start_at: datetime = Field(sa_type=UtcDateTime)
    end_at: datetime = Field(sa_type=UtcDateTime)
    message: str = Field(sa_type=Text)


class PlantedNewsRow(Row, table=True):
    """A news item the injection probe planted in a replay (`[probe.injection]`): its market,
    symbol, publication time and title, the kind of instruction it carries and that
    instruction's target symbol (a `buy`'s). Only a probed replay writes these rows."""

    __tablename__ = "planted_news"
    __table_args__ = (
        _in("market", "'us', 'cn', 'crypto'", "market"),
        UniqueConstraint("market", "symbol", "published_at", "title"),
    )

    id: int | None = Field(default=None, primary_key=True)
    market: str
    symbol: str
    published_at: datetime = Field(sa_type=UtcDateTime)
    title: str = Field(sa_type=Text)
    kind: str
    target: str | None = None


class AgentTokenRow(Row, table=True):
    """A bearer token issued to an agent that connects, stored only as its SHA-256 hex digest.

    An agent's current token is its one row with no `revoked_at`; issuing a new token revokes the
    current one (`store/agent_tokens.py`). Rows are kept, so when each token lived stays known.
    """

    __tablename__ = "agent_token"

    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key="agent.id", index=True)
    token_hash: str = Field(unique=True)
    issued_at: datetime = Field(sa_type=UtcDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UtcDateTime)


class SeedRunRow(Row, table=True):
    """An agent that is one seed's run of a group of repeated runs (`openbell replay --seeds N`).

    The agent `base_agent` of the config was run once per seed under its own name (and accounts);
    rows with the same `group_label` are one group, compared in the leaderboard over their seeds.
    """

    __tablename__ = "seed_run"

    agent_id: int = Field(foreign_key="agent.id", primary_key=True)
    group_label: str
    base_agent: str
    seed: int


class VerifyCheckpointRow(Row, table=True):
    """Where the daemon's last verification of an account stopped (migration 0018): the newest
    id of each ledger table it read (`watermarks`, JSON), the account's running totals there
    (`state`, JSON: `store/verify/checkpoints.py`), when, and a SHA-256 checksum of the row, so
    that a damaged or edited checkpoint is noticed and the ledger verified in full instead."""

    __tablename__ = "verify_checkpoint"

    account_id: int = Field(foreign_key="account.id", primary_key=True)
    verified_at: datetime = Field(sa_type=UtcDateTime)
    watermarks: str = Field(sa_type=Text)
    state: str = Field(sa_type=Text)
    checksum: str


class SeasonRow(Row, table=True):
    """A season (migration 0024): a named window of the ledger whose rules were fixed before its
    first slot. `manifest` is its canonical JSON (`ops.seasons.manifest`) and `manifest_sha256`
    that text's SHA-256 hex digest; `config` is the text of the config file it was opened from
    (`config_path`, whose directory a command agent's relative paths resolve against), which
    `run --season` and `replay --season` load. `closed_at` is None while the season is open."""

    __tablename__ = "season"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True)
    manifest: str = Field(sa_type=Text)
    manifest_sha256: str
    start_on: date = Field(sa_type=Date)
    end_on: date | None = Field(default=None, sa_type=Date)
    opened_at: datetime = Field(sa_type=UtcDateTime)
    closed_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    config: str = Field(sa_type=Text)
    config_path: str = Field(sa_type=Text)


class CycleDigestRow(Row, table=True):
    """One link of an account's hash chain (migration 0025): the digest of a finished (or missed)
    cycle's record, chained to the account's previous link, written in the transaction that
    finished the cycle (`store/chain.py`; the record and the digest: `store/digests.py`).

    `seq` counts the account's links from 1; `prev` is the previous link's digest (64 zeros for
    the first), `digest` is `sha256(bytes(prev) || canonical record)`, both in lowercase hex.
    Cycles finished before revision 0025 have no link.
    """

    __tablename__ = "cycle_digest"
    __table_args__ = (UniqueConstraint("account_id", "seq"),)

    #: No foreign key: a link is evidence that outlives its cycle's row (a row lost or deleted is
    #: named by `season verify`, and the daemon's hole sweep can record its slot again).
    cycle_id: int = Field(primary_key=True)
    account_id: int = Field(foreign_key="account.id")
    seq: int
    prev: str
    digest: str


class HedgePairRow(Row, table=True):
    """The pair one account's hedging agent picked."""

    __tablename__ = "hedge_pair"

    account_id: int = Field(foreign_key="account.id", primary_key=True)
    first_symbol: str
    second_symbol: str
    cycle_id: int = Field(foreign_key="cycle.id")
    picked_at: datetime = Field(sa_type=UtcDateTime)


class StrategyJudgementRow(Row, table=True):
    """One judge model's verdict on one strategy."""

    __tablename__ = "strategy_judgement"
    __table_args__ = (
        UniqueConstraint("strategy_id", "judge_model"),
        *(CheckConstraint(f"{check} IN (0, 1)", name=check) for check in CHECKS),
    )

    id: int | None = Field(default=None, primary_key=True)
    strategy_id: int = Field(foreign_key="strategy_code.id", index=True)
    judge_model: str
    judged_at: datetime = Field(sa_type=UtcDateTime)
    direction: int
    indicators: int
    exits: int
    no_extra_rule: int
    rationale: str = Field(sa_type=Text)


class StrategyCodeRow(Row, table=True):
    """A strategy a model wrote for an account, as it passed the look-ahead check."""

    __tablename__ = "strategy_code"

    id: int | None = Field(default=None, primary_key=True)
    account_id: int = Field(foreign_key="account.id", index=True)
    cycle_id: int = Field(foreign_key="cycle.id")
    written_at: datetime = Field(sa_type=UtcDateTime)
    code: str = Field(sa_type=Text)
    claimed_return: Decimal | None = Field(default=None, sa_type=ExactDecimal)
    claimed_hit_rate: Decimal | None = Field(default=None, sa_type=ExactDecimal)
    rationale: str = Field(sa_type=Text)
    answers: int


class StrategyRunRow(Row, table=True):
    """One run of a strategy, at one cycle."""

    __tablename__ = "strategy_run"
    __table_args__ = (
        UniqueConstraint("cycle_id"),
        CheckConstraint(
            "outcome IN (" + ", ".join(f"'{o}'" for o in RUN_OUTCOMES) + ")", name="outcome"
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    strategy_id: int = Field(foreign_key="strategy_code.id", index=True)
    cycle_id: int = Field(foreign_key="cycle.id")
    ran_at: datetime = Field(sa_type=UtcDateTime)
    duration_ms: int
    outcome: str
    weights: str | None = Field(default=None, sa_type=Text)
    error: str | None = Field(default=None, sa_type=Text)
    offered: str | None = Field(default=None, sa_type=Text)
