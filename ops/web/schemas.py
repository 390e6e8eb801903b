"""The web API's contract as pydantic models: its query parameters and its response documents.

This module owns what `/api/v1` accepts and promises. Query models validate the parameters of a
request (a bad value is a 400, never a 500); response models describe each document
`ops.web.payloads` and `ops.reports.exporting` build, field for field (`extra="forbid"`: the tests
validate every response against them, so the OpenAPI document cannot drift from the server).
`Decimal` is exact decimal text, an instant ISO 8601 UTC text; statistics are JSON numbers.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

#: The largest page of orders, fills or cycles, and the default.
MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
#: The largest id a ledger row can have (a signed 64-bit integer).
MAX_ID = 2**63 - 1
_TRAILING = re.compile(r"^(?:all|[1-9][0-9]{0,3}d)$")

DecimalText = str
Instant = str


class WindowQuery(BaseModel):
    """The window of a leaderboard, a NAV or benchmark series or a metric panel.

    `window` is `all` (the default) or `Nd`, the N UTC days ending with the day of the market's
    last slot; or give `start` and/or `end` (UTC dates, inclusive, as the CLI's `--start` and
    `--end`), not both kinds.
    """

    model_config = ConfigDict(frozen=True)

    window: str = Field(default="all", description="`all` or `Nd` (1..9999 trailing days).")
    start: date | None = Field(default=None, description="First UTC day, inclusive.")
    end: date | None = Field(default=None, description="Last UTC day, inclusive.")

    @field_validator("window")
    @classmethod
    def _known_window(cls, value: str) -> str:
        if not _TRAILING.match(value):
            raise ValueError("window must be `all` or a number of days such as `30d`")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> WindowQuery:
        if self.window != "all" and (self.start is not None or self.end is not None):
            raise ValueError("give either window or start/end, not both")
        if self.start is not None and self.end is not None and self.end < self.start:
            raise ValueError("end is before start")
        return self

    @property
    def days(self) -> int | None:
        """The trailing days of `Nd`; None for `all`."""
        return None if self.window == "all" else int(self.window[:-1])


class IdPageQuery(BaseModel):
    """A page of orders or fills: at most `limit`, with ids below `before` (the previous page's
    cursor)."""

    model_config = ConfigDict(frozen=True)

    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    before: int | None = Field(default=None, ge=1, le=MAX_ID)


class SlotPageQuery(BaseModel):
    """A page of cycles: at most `limit`, with slots before `before` (an ISO 8601 instant with
    an offset: the previous page's cursor)."""

    model_config = ConfigDict(frozen=True)

    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    before: AwareDatetime | None = None


class LeaderboardQuery(WindowQuery):
    """A leaderboard's window, and its view: `post-cutoff` (the default headline, which measures
    an agent only over its slots after its model's training cutoff) or `all` slots."""

    slots: Literal["post-cutoff", "all"] = Field(
        default="post-cutoff", description="`post-cutoff` (the headline) or `all`."
    )


class CycleQuery(BaseModel):
    """The path of one cycle: its id."""

    model_config = ConfigDict(frozen=True)

    cycle_id: int = Field(ge=1, le=MAX_ID)


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ApiRoute(_Document):
    path: str = Field(description="The path template, `{name}` for a path parameter.")
    method: Literal["GET"]
    summary: str


class ApiIndex(_Document):
    """`GET /api/v1/`: the API's routes."""

    api: str
    version: str
    openapi: str = Field(description="The path of the OpenAPI 3.1 document.")
    routes: list[ApiRoute]


class ErrorDetail(_Document):
    code: str = Field(description="`not_found`, `bad_request` or `method_not_allowed`.")
    message: str


class ErrorDocument(_Document):
    """Every error response."""

    error: ErrorDetail


class Market(_Document):
    market: str
    currency: str
    benchmark: str
    benchmark_label: str
    accounts: int
    agents: list[str]
    last_slot_at: Instant | None


class Markets(_Document):
    """`GET /api/v1/markets`."""

    markets: list[Market]


class Convention(_Document):
    """The metrics convention a board or panel is measured under (`ops.evaluation.conventions`)."""

    name: str = Field(description="openbell, ai-trader, stockbench or ktd-fin.")
    source: str
    std: str = Field(description="sample or population standard deviation.")
    annualisation: str = Field(description="observed (sessions x slots), ai-trader or none.")
    sortino: str = Field(description="downside-all, std-of-negatives or rms-of-negatives.")
    returns: str = Field(description="open-to-open or close-to-close.")
    basket_weights: str = Field(
        description="A basket benchmark's weights: normalised or as-published."
    )


class LeaderboardRow(_Document):
    """One row: `exporting.LEADERBOARD_KEYS`, the columns of `openbell leaderboard`, for an
    account allowed to short `exporting.LONG_SHORT_KEYS`, and in a ledger with planted news
    `injection_probe.INJECTION_KEYS`."""

    rank: int | None
    name: str
    agent: str | None
    is_benchmark: bool
    periods: int
    start_at: Instant | None
    end_at: Instant | None
    final_nav: DecimalText | None
    cumulative_return: float | None
    annual_return: float | None
    annual_volatility: float | None
    sharpe_ratio: float | None
    sortino_ratio: float | None
    max_drawdown: float | None
    calmar_ratio: float | None
    excess_return: float | None
    information_ratio: float | None
    trades: int | None
    cycles: int | None
    no_trade_share: float | None
    rejection_rate: float | None
    turnover: float | None
    annual_turnover: float | None = Field(
        description="Turnover per slot of the window times the market's periods a year."
    )
    hhi: float | None
    cash_ratio: float | None
    hold_share: float | None = Field(
        description="Share of done cycles that left every position as it was."
    )
    switch_rate: float | None = Field(
        description="Share of done cycles that changed the set of held symbols."
    )
    reactivity: float | None = Field(
        description=(
            "Herculean's reactivity: Spearman correlation of the action code (buy +1, hold 0, "
            "sell -1; a rating's exposure) against the trailing 5-period return, mean over "
            "symbols."
        )
    )
    reactivity_next: float | None = Field(
        description="The same correlation against the next period's return."
    )
    persistence: float | None = Field(
        description="One minus the normalized turnover of the action codes, mean over symbols."
    )
    revision_rate: float | None = Field(
        description="Rating agents: share of consecutive reports whose rating of a symbol differs."
    )
    weight_reactivity: float | None = Field(
        description="Pearson correlation of traded weight against the previous period's return."
    )
    protocol_completion: float | None = Field(
        description="Share of cycles with a valid submission, by the agent kind's rule."
    )
    composite: float | None
    z_cumulative_return: float | None
    z_max_drawdown: float | None
    z_sortino_ratio: float | None
    cost_per_decision: DecimalText | None
    return_per_dollar: float | None
    model_changed: bool | None = Field(
        description="LLM agents: whether the model answered under more than one identity "
        "(reported model, system_fingerprint or revision header) in the window."
    )
    mean_gross_exposure: float | None = Field(
        None,
        description="Shorting accounts only: mean of (longs + shorts) / NAV over the snapshots.",
    )
    mean_net_exposure: float | None = Field(
        None,
        description="Shorting accounts only: mean of (longs - shorts) / NAV over the snapshots.",
    )
    borrow_cost: float | None = Field(
        None, description="Shorting accounts only: borrow fees charged over initial cash."
    )
    injection_obedience: float | None = Field(
        None,
        description="Ledgers with planted news only ([probe.injection]): the share of planted "
        "instructions that reached the agent which it obeyed (null when none reached it).",
    )
    injection_reached: int | None = Field(
        None, description="Ledgers with planted news only: planted items that reached the agent."
    )
    injection_obeyed: int | None = Field(
        None, description="Ledgers with planted news only: planted items the agent obeyed."
    )
    cutoff_status: Literal["clean", "inside", "unknown", "no_model"] | None = Field(
        None,
        description="Accounts only: `inside` when slots of the window were decided inside the "
        "model's training cutoff, `unknown` when a model has no registry entry.",
    )
    inside_cutoff_slots: int | None = Field(
        None, description="Accounts only: the window's slots decided inside the cutoff."
    )


class ReportedModel(_Document):
    """One model identity an LLM agent's exchanges reported (`store.queries.ReportedModel`)."""

    model: str | None = Field(description="The `model` the responses named.")
    fingerprint: str | None = Field(description="Their `system_fingerprint`.")
    revision: str | None = Field(description="The provider's revision headers, `name=value; ...`.")
    first_slot_at: Instant
    exchanges: int


class SeedStat(_Document):
    """One metric of one agent over the seeds of its group (`ops.evaluation.seed_groups`)."""

    mean: float | None
    std: float | None
    low: float | None = Field(description="The (1 - confidence) / 2 quantile of the seed values.")
    high: float | None = Field(description="The (1 + confidence) / 2 quantile of the seed values.")
    runs: int = Field(description="The seeds that define the metric.")


class SeedAgent(_Document):
    agent: str = Field(description="The configured agent the runs repeat.")
    runs: list[str] = Field(description="The runs' agent names, by seed.")
    metrics: dict[str, SeedStat] = Field(
        description="The panel's return metrics, `composite` and `rank`, each over the seeds."
    )


class SeedGroup(_Document):
    """A group of repeated runs (`openbell replay --seeds N`) compared over its seeds."""

    group_label: str
    seeds: list[int]
    confidence: float
    agents: list[SeedAgent] = Field(description="By mean composite, best first.")
    p_beat: dict[str, dict[str, float]] = Field(
        description="`p_beat[a][b]`: the share of seeds where a's composite is above b's."
    )


class BootstrapInterval(_Document):
    low: float | None
    high: float | None
    defined: int = Field(description="The draws that define the metric.")


class BootstrapRow(_Document):
    name: str
    intervals: dict[str, BootstrapInterval]


class Bootstrap(_Document):
    """The stationary block bootstrap of the rows (`ops.evaluation.bootstrap`); the CLI's
    `--bootstrap`."""

    draws: int
    seed: int
    confidence: float
    periods: int
    block_length: int
    rows: list[BootstrapRow]
    p_beat: dict[str, dict[str, float]]


class SignificanceComparison(_Document):
    baseline: str
    periods: int = Field(description="The periods the account and the baseline share.")
    p_value: float | None = Field(description="One-sided sign-flip permutation p-value.")
    adjusted_p_value: float | None = Field(description="Holm-adjusted across the board.")


class SignificanceRow(_Document):
    name: str
    periods: int
    sharpe_per_period: float | None
    skewness: float | None
    kurtosis: float | None = Field(description="Not in excess: 3 for a normal.")
    psr: float | None = Field(description="Probabilistic Sharpe ratio against 0.")
    dsr: float | None = Field(description="Deflated Sharpe ratio over `trials` accounts.")
    min_track_record: float | None = Field(
        description="The periods needed to reject Sharpe <= 0 at `alpha`; null: never."
    )
    immature: bool = Field(description="Fewer periods than the minimum track record.")
    entry_returns: dict[str, float | None] = Field(
        description="`7d`, `30d`, `90d`: the return from the account's first snapshot."
    )
    best_baseline: str | None
    adjusted_p_value_best: float | None
    significant: bool
    comparisons: list[SignificanceComparison]


class Significance(_Document):
    """The significance suite of the rows (`ops.evaluation.significance`): the CLI's `leaderboard
    --wide`."""

    alpha: float
    trials: int
    sharpe_variance: float | None
    expected_max_sharpe: float
    permutations: int
    seed: int
    correction: Literal["holm"]
    test: str
    rows: list[SignificanceRow]


class AgentCutoff(_Document):
    name: str
    kind: str
    models: list[str] = Field(description="The models it reported, and its configured one.")
    status: Literal["clean", "inside", "unknown", "no_model"]
    cutoff: str | None = Field(description="As the provider states it: YYYY-MM-DD or YYYY-MM.")
    source: str | None = Field(description="Where the cutoff is stated (a URL or a document).")
    clean_from: Instant | None = Field(description="The first instant after the cutoff.")
    slots: int
    inside_slots: int = Field(description="Slots of the window before `clean_from`.")
    unknown_models: list[str]


class Cutoffs(_Document):
    """The training-cutoff marks of a board (`ops.reports.contamination`)."""

    view: Literal["post-cutoff", "all"] = Field(
        description="`post-cutoff`: inside slots are left out of the rows' metrics; `all`: not."
    )
    note: str
    excluded: list[str] = Field(description="The agents with slots inside their cutoff.")
    dropped: list[str] = Field(description="Those the headline leaves out: no slot after it.")
    agents: list[AgentCutoff]


class SeasonMark(_Document):
    """A season of the ledger (`openbell season open`), as boards name it."""

    name: str
    start: date = Field(description="Its first UTC date.")
    end: date | None = Field(description="Its last UTC date, included; null: open-ended.")
    opened_at: Instant
    closed_at: Instant | None = Field(description="Null while the season is open.")
    manifest_sha256: str = Field(description="SHA-256 of the manifest's canonical JSON.")


class Seasons(_Document):
    """`GET /api/v1/seasons`."""

    seasons: list[SeasonMark]
    current: str | None = Field(
        description="The season the boards name: the last opened open one, else the last opened."
    )


class CardTable(_Document):
    headers: list[str]
    rows: list[list[str]]


class CardSection(_Document):
    title: str
    lines: list[str]
    tables: list[CardTable]


class SeasonDocument(_Document):
    """`GET /api/v1/seasons/{name}`: the season, its manifest and its methods card."""

    season: SeasonMark
    manifest: dict[str, object] = Field(description="The manifest, as its canonical JSON holds it.")
    card: list[CardSection] = Field(description="The methods card's sections.")
    card_markdown: str = Field(description="The card as `openbell season card` writes it.")


class Leaderboard(_Document):
    """`GET /api/v1/leaderboard/{market}`: one board of `openbell leaderboard --format json`."""

    season: SeasonMark | None = Field(
        description="The ledger's current season with its manifest hash; null: none."
    )
    market: str
    convention: Convention
    start: Instant | None
    end: Instant | None
    cadence: str
    periods_per_year: float
    benchmark: str
    currency: str
    final_nav_valuation: Literal["last_slot"] = Field(
        description="Which valuation the rows' `final_nav` is: each account's last slot snapshot."
    )
    rows: list[LeaderboardRow]
    seed_groups: list[SeedGroup]
    bootstrap: Bootstrap | None = Field(description="Null: the API does not bootstrap.")
    significance: Significance | None = Field(
        description="Null here: `GET /api/v1/leaderboard/{market}/significance` serves it."
    )
    cutoffs: Cutoffs | None = Field(
        description="The training-cutoff marks, and which view the rows are (`slots`)."
    )


class Account(_Document):
    account_id: int
    agent: str
    agent_kind: str
    market: str
    currency: str
    initial_cash: DecimalText


class NavPoint(_Document):
    at: Instant
    nav: DecimalText
    cash: DecimalText
    positions_value: DecimalText


class NavSeries(_Document):
    """`GET /api/v1/agents/{agent}/{market}/nav`: slot and session-close snapshots."""

    account: Account
    slot: list[NavPoint]
    close: list[NavPoint]


class BenchmarkPoint(_Document):
    at: Instant
    nav: DecimalText


class BenchmarkSeries(_Document):
    """`GET /api/v1/agents/{agent}/{market}/benchmark`."""

    account: Account
    benchmark: str
    points: list[BenchmarkPoint]


class Metrics(_Document):
    """`GET /api/v1/agents/{agent}/{market}/metrics`: the record of `openbell report --json`."""

    agent: str
    kind: str
    market: str
    currency: str
    initial_cash: DecimalText
    cadence: str
    convention: Convention
    periods_per_year: float
    benchmark: str
    rank: int | None
    composite: float | None
    final_nav: DecimalText | None
    final_nav_valuation: Literal["last_slot"] = Field(
        description="Which valuation `final_nav` is: the account's last slot snapshot."
    )
    periods: int
    start_at: Instant | None
    end_at: Instant | None
    cumulative_return: float | None
    annual_return: float | None
    annual_volatility: float | None
    sharpe_ratio: float | None
    sortino_ratio: float | None
    max_drawdown: float | None
    calmar_ratio: float | None
    excess_return: float | None
    information_ratio: float | None
    trades: int | None
    cycles: int | None
    no_trade_share: float | None
    rejection_rate: float | None
    turnover: float | None
    annual_turnover: float | None = Field(
        description="Turnover per slot of the window times the market's periods a year."
    )
    hhi: float | None
    cash_ratio: float | None
    hold_share: float | None = Field(
        description="Share of done cycles that left every position as it was."
    )
    switch_rate: float | None = Field(
        description="Share of done cycles that changed the set of held symbols."
    )
    reactivity: float | None = Field(
        description=(
            "Herculean's reactivity: Spearman correlation of the action code (buy +1, hold 0, "
            "sell -1; a rating's exposure) against the trailing 5-period return, mean over "
            "symbols."
        )
    )
    reactivity_next: float | None = Field(
        description="The same correlation against the next period's return."
    )
    persistence: float | None = Field(
        description="One minus the normalized turnover of the action codes, mean over symbols."
    )
    revision_rate: float | None = Field(
        description="Rating agents: share of consecutive reports whose rating of a symbol differs."
    )
    weight_reactivity: float | None = Field(
        description="Pearson correlation of traded weight against the previous period's return."
    )
    protocol_completion: float | None = Field(
        description="Share of cycles with a valid submission, by the agent kind's rule."
    )
    forecasts: int
    expected_calibration_error: float | None
    brier_score: float | None
    tokens_per_decision: float | None
    llm_decisions: int | None
    tokens_in: int | None
    tokens_out: int | None
    tokens_cached: int | None
    tokens_estimated: bool | None
    llm_latency_ms: int | None
    cost: DecimalText | None
    cost_per_decision: DecimalText | None
    return_per_dollar: float | None
    parse_failures: int | None
    parse_failure_rate: float | None = Field(description="Parse failures over the model's answers.")
    invalid_tool_calls: int | None
    tool_calls: int | None = Field(description="Tool calls traced, the mode's own included.")
    tool_validity_rate: float | None = Field(description="Share of the tool calls that were valid.")
    llm_attempts: int | None
    llm_failed_attempts: int | None
    model_changed: bool | None = Field(
        description="Whether the model answered under more than one identity in the window."
    )
    models: list[ReportedModel] | None = Field(
        description="The model identities the exchanges reported, in order of first appearance."
    )
    rejections_by_reason: dict[str, int]
    # The significance suite of the market's board (`ops.reports.board_significance.report_fields`).
    sharpe_per_period: float | None
    skewness: float | None
    kurtosis: float | None = Field(description="Not in excess: 3 for a normal.")
    psr: float | None = Field(description="Probabilistic Sharpe ratio against 0.")
    dsr: float | None = Field(description="Deflated Sharpe ratio over `dsr_trials` accounts.")
    dsr_trials: int
    min_track_record: float | None = Field(
        description="The periods needed to reject Sharpe <= 0 at the level; null: never."
    )
    record_periods: int
    immature: bool
    entry_return_7d: float | None
    entry_return_30d: float | None
    entry_return_90d: float | None
    best_baseline: str | None
    adjusted_p_value_best: float | None
    significant: bool
    adjusted_p_values: dict[str, float | None] = Field(
        description="Holm-adjusted permutation p-value against each baseline."
    )
    significance_settings: dict[str, float | int | str]


class Position(_Document):
    symbol: str
    quantity: DecimalText
    cost: DecimalText
    avg_cost: DecimalText
    last_mark: DecimalText | None
    marked_at: Instant | None
    value: DecimalText | None
    weight: float | None


class Positions(_Document):
    """`GET /api/v1/agents/{agent}/{market}/positions`: the record of `openbell positions`."""

    account_id: int
    market: str
    agent: str
    currency: str
    cash: DecimalText
    cash_weight: float | None
    nav: DecimalText | None = Field(
        description="Cash plus every holding at its newest mark (a slot's or a session close's)."
    )
    nav_valuation: Literal["last_marks"] = Field(description="Which valuation `nav` is.")
    nav_at: Instant | None = Field(description="The newest mark's instant: when `nav` is valued.")
    slot_nav: DecimalText | None = Field(
        description="The NAV of the account's last slot snapshot: the leaderboard's `final_nav`."
    )
    slot_nav_at: Instant | None = Field(description="The instant of that slot snapshot.")
    positions: list[Position]


class OrderFill(_Document):
    fill_id: int
    quantity: DecimalText
    price: DecimalText
    notional: DecimalText
    fees: DecimalText
    currency: str
    filled_at: Instant
    price_source: str


class Order(_Document):
    order_id: int
    seq: int
    symbol: str
    side: str
    quantity: DecimalText
    target_weight: DecimalText | None
    confidence: DecimalText | None
    reason: str
    placed_at: Instant
    status: str = Field(description="`filled` or `rejected`.")
    reject_reason: str | None
    reject_message: str | None
    fills: list[OrderFill]


class AccountOrder(Order):
    cycle_id: int


class OrdersPage(_Document):
    """`GET /api/v1/agents/{agent}/{market}/orders`: newest first; `next` is the next page's
    URL (None on the last page)."""

    account: Account
    items: list[AccountOrder]
    next: str | None


class Fill(_Document):
    fill_id: int
    order_id: int
    cycle_id: int
    symbol: str
    side: str
    quantity: DecimalText
    price: DecimalText
    notional: DecimalText
    fees: DecimalText
    currency: str
    filled_at: Instant
    price_source: str
    reason: str
    confidence: DecimalText | None


class FillsPage(_Document):
    """`GET /api/v1/agents/{agent}/{market}/fills`: newest first."""

    account: Account
    items: list[Fill]
    next: str | None


class Usage(_Document):
    tokens_in: int
    tokens_out: int
    tokens_cached: int
    usage_estimated: bool
    llm_latency_ms: int
    cost: DecimalText | None
    parse_failures: int
    invalid_tool_calls: int
    llm_attempts: int
    llm_failed_attempts: int


class Cycle(_Document):
    cycle_id: int
    slot_at: Instant
    status: str = Field(description="claimed, done, failed, skipped, interrupted or missed.")
    started_at: Instant
    finished_at: Instant | None
    error_class: str | None
    error_message: str | None
    reason: str | None
    orders: int
    rejections: int
    fills: int
    usage: Usage | None


class CyclesPage(_Document):
    """`GET /api/v1/agents/{agent}/{market}/cycles`: latest slot first."""

    account: Account
    items: list[Cycle]
    next: str | None


class TraceEntry(_Document):
    seq: int
    role: str
    at: Instant
    content: str | None
    tool: str | None
    arguments: str | None
    result: str | None
    tokens_in: int | None
    tokens_out: int | None
    latency_ms: int | None
    model: str | None = Field(description="An exchange's reported model (`assistant` rows).")
    fingerprint: str | None = Field(description="Its reported `system_fingerprint`.")
    revision: str | None = Field(description="Its provider revision headers, `name=value; ...`.")
    request_digest: str | None = Field(
        default=None,
        description="An exchange's request digest, `sha256:...` of the body sent (its recorded "
        "answer is what `openbell replay --answers` replays).",
    )


class CycleTrace(_Document):
    """`GET /api/v1/cycles/{cycle_id}`: the document of `openbell trace --json`."""

    cycle_id: int
    agent: str
    market: str
    slot_at: Instant
    status: str
    error_class: str | None
    error_message: str | None
    usage: Usage | None
    entries: list[TraceEntry]
    orders: list[Order]


class AccountSummary(_Document):
    """`GET /api/v1/agents/{agent}/{market}`: the account and the URLs of its documents."""

    account: Account
    links: dict[str, str]


class AttributionMethod(_Document):
    """How the attribution was computed (`ops.evaluation.attribution`)."""

    market: str
    styles: str
    standardisation: str
    linking: str
    lookback_bars: int
    reversal_bars: int
    vif_threshold: float
    spare_names: int


class AttributionParts(_Document):
    """Parts of a return, fractions of NAV: they sum to the total."""

    market: float
    styles: dict[str, float] = Field(description="Style name -> contribution.")
    selection: float
    trading: float


class AttributionPeriod(AttributionParts):
    """One period (slot snapshot to the next): its parts, total and the book's exposures."""

    start_at: Instant
    end_at: Instant
    total: float
    invested: float
    exposures: dict[str, float]
    dropped: dict[str, str] = Field(description="Style -> why it was not estimated.")


class Attribution(_Document):
    """`GET /api/v1/agents/{agent}/{market}/attribution`: the record of `openbell report
    --attribution` (under `attribution` in its JSON): Carino-linked parts of the window's
    compounded return, and every period's parts."""

    agent: str
    market: str
    currency: str
    cadence: str
    interval: str
    start: Instant | None
    end: Instant | None
    periods_count: int
    universe_size: int
    sources: list[str]
    cross_section: str = Field(
        description="What each period is estimated from: the symbols with bars, or a universe's "
        "members on the period's day."
    )
    styles: list[str] = Field(
        description="The style set estimated, in order (`openbell`: every style; `ktd-fin`: "
        "KTD-Fin's nine)."
    )
    method: AttributionMethod
    total: float
    parts: AttributionParts
    parts_sum: float
    mean_exposures: dict[str, float]
    dropped_periods: dict[str, int]
    skipped: dict[str, str]
    periods: list[AttributionPeriod]
