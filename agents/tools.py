"""The tool contract: each tool's name, description, argument model and result shape, declared once.

This module owns what an agent can ask for and what it gets back, independent of how a call is
served (Python baselines, OpenAI-style function tools for the LLM agent, MCP for outside agents):
the pydantic argument models (unknown keys refused), the structured results (each stamped `as_of`,
the decision time it was computed for), `ToolError` with a machine-readable code and a hint the
agent can act on, `ToolSpec` binding a name to its model and async handler, and `openai_tools`,
which turns specs into OpenAI function-tool JSON schemas. The handlers live in `toolbox.py`.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any, Generic, Literal, Self, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from openbell.agents.book import Book
from openbell.agents.calculator import MAX_EXPRESSION_CHARS
from openbell.markets.domain import Bar, Fill
from openbell.markets.gateway import MAX_LOOKBACK, MAX_NEWS
from openbell.store.records import RecordedOrder

#: A market symbol as an agent may write it: "AAPL", "600519.SH", "BTC/USDT".
Symbol = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9./_-]{0,31}$")]
#: A fraction in [0, 1], exact.
Fraction = Annotated[Decimal, Field(ge=0, le=1, allow_inf_nan=False)]

MAX_QUOTE_SYMBOLS = 200
#: The largest order quantity accepted: beyond it, execution's exact arithmetic overflows the
#: decimal context (a model asking for 1e30 shares gets `invalid_arguments`, not a crash).
MAX_ORDER_SHARES = Decimal("1e15")
MAX_NEWS_LOOKBACK_HOURS = 24 * 30
MAX_REPORTS = 4
_WEIGHT_PLACES = Decimal("0.0001")


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GetBarsArgs(_Args):
    """Arguments of `get_bars`."""

    # no real ticker as an example: the schemas are shown to masked agents too
    symbol: Symbol = Field(description="The symbol, exactly as your universe lists it.")
    interval: Literal["1d", "1h"] = Field("1d", description="Bar length: 1d (daily) or 1h.")
    lookback: int = Field(20, ge=1, le=MAX_LOOKBACK, description="How many of the latest bars.")


class GetQuoteArgs(_Args):
    """Arguments of `get_quote`."""

    symbols: list[Symbol] = Field(
        min_length=1, max_length=MAX_QUOTE_SYMBOLS, description="The symbols to price."
    )


class GetNewsArgs(_Args):
    """Arguments of `get_news`: a symbol, a query, both, or neither (the market's latest)."""

    symbol: Symbol | None = Field(None, description="Only news about this symbol.")
    query: str | None = Field(
        None, min_length=1, max_length=100, description="Only items whose title contains this."
    )
    lookback_hours: int = Field(
        48, ge=1, le=MAX_NEWS_LOOKBACK_HOURS, description="How far back to look, in hours."
    )
    limit: int = Field(10, ge=1, le=MAX_NEWS, description="At most this many items.")


class GetFundamentalsArgs(_Args):
    """Arguments of `get_fundamentals`."""

    symbol: Symbol = Field(description="The symbol whose reported figures to get.")


class CalculateArgs(_Args):
    """Arguments of `calculate`."""

    expression: str = Field(
        min_length=1,
        max_length=MAX_EXPRESSION_CHARS,
        description="Arithmetic on numbers: + - * / // % ** ( ) comparisons, pi, e and "
        "min, max, abs, round, sqrt, log, exp. Example: round(10000 * 0.25 / 187.3, 2)",
    )


class GetPortfolioArgs(_Args):
    """`get_portfolio` takes no arguments."""


class PlaceOrderArgs(_Args):
    """Arguments of `place_order`: exactly one of `shares` and `target_weight`."""

    symbol: Symbol = Field(description="The symbol to trade; it must be in the universe.")
    side: Literal["buy", "sell"] = Field(description="buy or sell (long-only: no shorting).")
    shares: Annotated[Decimal, Field(gt=0, le=MAX_ORDER_SHARES, allow_inf_nan=False)] | None = (
        Field(None, description="Quantity to trade; rounded down to the market's lots and steps.")
    )
    target_weight: Fraction | None = Field(
        None,
        description="Trade towards this fraction of the account's NAV held in the symbol "
        "(0 sells everything); the side must point towards it.",
    )
    reason: str = Field("", max_length=2000, description="Why, in a sentence or two.")
    confidence: Fraction | None = Field(None, description="Confidence in this trade, 0 to 1.")

    @model_validator(mode="after")
    def _one_size(self) -> Self:
        if (self.shares is None) == (self.target_weight is None):
            raise ValueError("give exactly one of shares and target_weight")
        return self


class FinishArgs(_Args):
    """Arguments of `finish`."""

    summary: str = Field(min_length=1, max_length=4000, description="What you did and why.")


class ToolResult(BaseModel):
    """Base of every successful tool result: `as_of` is the decision time it was computed for."""

    model_config = ConfigDict(frozen=True)

    as_of: datetime


class BarsOut(ToolResult):
    """The latest bars of `symbol` that had ended by `as_of`, oldest first.

    The bars are the domain's frozen `Bar` values themselves (validated when they were loaded), so a
    200-bar lookback builds no per-bar objects; they serialise to JSON field by field.
    """

    symbol: str
    interval: str
    bars: tuple[Bar, ...]

    @classmethod
    def of(cls, *, as_of: datetime, symbol: str, interval: str, bars: tuple[Bar, ...]) -> BarsOut:
        """A result over already-validated bars (not validated again)."""
        return cls.model_construct(as_of=as_of, symbol=symbol, interval=interval, bars=bars)


class QuoteOut(BaseModel):
    """The last price of `symbol` known at `as_of`, stamped when it was known."""

    model_config = ConfigDict(frozen=True)

    symbol: str
    price: Decimal
    at: datetime


class QuotesOut(ToolResult):
    """Quotes by symbol; `missing` had no price yet, `unknown` are outside this market."""

    quotes: list[QuoteOut]
    missing: list[str] = Field(default_factory=list)
    unknown: list[str] = Field(default_factory=list)


class NewsItemOut(BaseModel):
    """One news item, published at `published_at` (never after `as_of`)."""

    model_config = ConfigDict(frozen=True)

    symbol: str | None
    published_at: datetime
    title: str
    source: str = ""
    url: str = ""


class NewsOut(ToolResult):
    """News published at or before `as_of` within the lookback, newest first."""

    items: list[NewsItemOut]


class ReportOut(BaseModel):
    """One published report: the period it covers, when it was published, its figures."""

    model_config = ConfigDict(frozen=True)

    period_end: date
    published_at: datetime
    currency: str
    values: dict[str, Decimal]


class FundamentalsOut(ToolResult):
    """The reports of `symbol` published at or before `as_of`, newest first."""

    symbol: str
    reports: list[ReportOut]


class CalculationOut(ToolResult):
    """The exact value of `expression` (a boolean for a comparison)."""

    expression: str
    value: Decimal | bool


class PositionOut(BaseModel):
    """A holding marked at its quote: `value = quantity * mark`, `weight = value / nav`."""

    model_config = ConfigDict(frozen=True)

    symbol: str
    quantity: Decimal
    mark: Decimal
    value: Decimal
    weight: Decimal


class PortfolioOut(ToolResult):
    """The account: cash, positions and NAV (`cash + positions_value`) in `currency`."""

    currency: str
    cash: Decimal
    positions: list[PositionOut]
    positions_value: Decimal
    nav: Decimal

    @classmethod
    def of(cls, book: Book, as_of: datetime) -> PortfolioOut:
        """`book` as the tool shows it, weights rounded to four places."""
        nav = book.nav
        return cls(
            as_of=as_of,
            currency=book.currency,
            cash=book.cash,
            positions=[
                PositionOut(
                    symbol=holding.symbol,
                    quantity=holding.quantity,
                    mark=holding.mark,
                    value=holding.value,
                    weight=(holding.value / nav).quantize(_WEIGHT_PLACES) if nav > 0 else 0,
                )
                for holding in book.holdings.values()
            ],
            positions_value=book.positions_value,
            nav=nav,
        )


class OrderStatusOut(enum.StrEnum):
    """What became of a `place_order` call."""

    FILLED = "filled"
    REJECTED = "rejected"
    NOTHING_TO_DO = "nothing_to_do"


class OrderOut(ToolResult):
    """The outcome of `place_order`. A rejection is an outcome with a `reject_reason`; a
    `nothing_to_do` order (the target is already met, or it rounds to zero) was not recorded."""

    status: OrderStatusOut
    symbol: str
    side: str
    message: str
    seq: int | None = None
    shares: Decimal | None = None
    filled_shares: Decimal | None = None
    price: Decimal | None = None
    notional: Decimal | None = None
    fees: Decimal | None = None
    reject_reason: str | None = None
    cash_after: Decimal | None = None
    held_after: Decimal | None = None

    @classmethod
    def of(
        cls, recorded: RecordedOrder, *, as_of: datetime, cash_after: Decimal, held_after: Decimal
    ) -> OrderOut:
        """The outcome of a recorded order, with the account's cash and holding after it."""
        outcome = recorded.outcome
        common: dict[str, Any] = {
            "as_of": as_of,
            "symbol": recorded.symbol or "",
            "side": recorded.side.value if recorded.side is not None else "",
            "seq": recorded.seq,
            "shares": recorded.quantity,
            "cash_after": cash_after,
            "held_after": held_after,
        }
        if isinstance(outcome, Fill):
            return cls(
                status=OrderStatusOut.FILLED,
                message=f"Filled {outcome.quantity} {outcome.symbol} at {outcome.price}.",
                filled_shares=outcome.quantity,
                price=outcome.price,
                notional=outcome.notional,
                fees=outcome.fees,
                **common,
            )
        return cls(
            status=OrderStatusOut.REJECTED,
            message=outcome.message,
            reject_reason=outcome.reason.value,
            **common,
        )


class FinishOut(ToolResult):
    """The cycle is finished; no tool may be called after this."""

    summary: str
    orders_placed: int


class ErrorCode(enum.StrEnum):
    """Why a tool call could not be served (a rejected order is an `OrderOut`, not an error)."""

    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENTS = "invalid_arguments"
    UNKNOWN_SYMBOL = "unknown_symbol"
    DATA_UNAVAILABLE = "data_unavailable"
    ALREADY_FINISHED = "already_finished"
    CYCLE_REPLAY_DIVERGED = "cycle_replay_diverged"
    NOT_POINT_IN_TIME = "not_point_in_time"
    MASKED = "masked"
    INVALID_EXPRESSION = "invalid_expression"
    ARITHMETIC_ERROR = "arithmetic_error"


class ToolError(BaseModel):
    """A tool call that could not be served: a code, what went wrong and how to do better."""

    model_config = ConfigDict(frozen=True)

    code: ErrorCode
    message: str
    hint: str = ""
    as_of: datetime | None = None


ToolOutcome = ToolResult | ToolError
A = TypeVar("A", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ToolSpec(Generic[A]):
    """A tool: its name, its description for a model, its argument model and its async handler.

    The handler receives validated arguments; it returns a result or a `ToolError` and raises only
    for wiring mistakes, never for anything an agent can cause.
    """

    name: str
    description: str
    args: type[A]
    handler: Callable[[A], Awaitable[ToolOutcome]]


DESCRIPTIONS: dict[str, str] = {
    "get_bars": "Price bars (OHLCV) of one symbol, oldest first; only bars that have ended.",
    "get_quote": "The latest known price of one or more symbols.",
    "get_news": (
        "News published up to now, newest first: about one symbol, matching a query in the "
        "title, or the market's latest."
    ),
    "get_fundamentals": (
        "Reported company figures of one symbol (revenue, earnings, ...), as published up to "
        "now. Refused where the data is not point-in-time."
    ),
    "calculate": "Exact arithmetic on an expression (no variables, no code).",
    "get_portfolio": "Your cash, positions marked at their latest prices, weights and NAV.",
    "place_order": (
        "Buy or sell one symbol now, by shares or towards a target weight of NAV. The order "
        "fills at the next trade price under the market's rules (lots, fees, T+1, price "
        "limits); a rejection says why."
    ),
    "finish": "End this decision cycle with a short summary. Call it exactly once, last.",
}


def describe_validation_error(exc: ValidationError) -> str:
    """A pydantic error as one line for an agent: "field: problem; ..." (inputs not repeated)."""
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def _clean(schema: Any) -> Any:
    """`schema` without pydantic's `title` annotations, which function-tool schemas do not need
    (a property named "title" maps to a dict and is kept)."""
    if isinstance(schema, dict):
        return {
            key: _clean(value)
            for key, value in schema.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(schema, list):
        return [_clean(value) for value in schema]
    return schema


def _compact(parameters: dict[str, Any]) -> dict[str, Any]:
    """The parameters schema without what costs prompt tokens and tells the model nothing: the
    argument model's own docstring (the tool has its description) and `"default": null` on
    optional properties (not being required says it). Validation still uses the full model."""
    compact = {key: value for key, value in parameters.items() if key != "description"}
    properties = compact.get("properties")
    if isinstance(properties, dict):
        compact["properties"] = {
            name: {
                key: value
                for key, value in schema.items()
                if not (key == "default" and value is None)
            }
            if isinstance(schema, dict)
            else schema
            for name, schema in properties.items()
        }
    return compact


def openai_tools(specs: Sequence[ToolSpec[Any]]) -> list[dict[str, Any]]:
    """The OpenAI chat-completions `tools` list for `specs` (one function tool per spec)."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": _compact(_clean(spec.args.model_json_schema())),
            },
        }
        for spec in specs
    ]
