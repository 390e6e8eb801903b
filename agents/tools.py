"""The tool contract: each tool's name, description, argument model and result shape, declared once.

This module owns what an agent can ask for and what it gets back, independent of how a call is
served (Python baselines, OpenAI-style function tools for the LLM agent, MCP for outside agents):
the pydantic argument models (unknown keys refused), the structured results (each stamped `as_of`,
the decision time it was computed for), `ToolError` with a machine-readable code and a hint the
agent can act on, `ToolSpec` binding a name to its model and async handler, and `openai_tools`,
which turns specs into OpenAI function-tool JSON schemas, compacted for the prompt (validation
always uses the full models). A result with rows (bars, news, reports) sent to a model is kept
within `MAX_RESULT_CHARS` of JSON (`RowsResult.within`, applied by `Toolbox.serve`): the newest
rows are kept and its `omitted` counts the oldest left out, so it stays whole, valid JSON. The
handlers live in `toolbox.py`.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Final, Generic, Literal, Self, TypeVar

import pydantic_core
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationError,
    model_serializer,
    model_validator,
)

from openbell.agents.book import Book
from openbell.agents.calculator import MAX_EXPRESSION_CHARS
from openbell.markets.domain import Bar, Fill, Quote, round_money
from openbell.markets.gateway import MAX_LOOKBACK, MAX_NEWS
from openbell.markets.price_limits import LimitBand
from openbell.markets.rules import Board, ShortRules
from openbell.store.records import RecordedOrder

#: The pattern of a market symbol as an agent may write it: "AAPL", "600519.SH", "BTC/USDT".
SYMBOL_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9./_-]{0,31}$"
#: A market symbol as an agent may write it.
Symbol = Annotated[str, StringConstraints(pattern=SYMBOL_PATTERN)]
#: A fraction in [0, 1], exact.
Fraction = Annotated[Decimal, Field(ge=0, le=1, allow_inf_nan=False)]

MAX_QUOTE_SYMBOLS = 200
#: The longest `reason` of an order and `summary` of a finish, in characters.
MAX_REASON_CHARS: Final = 2000
MAX_SUMMARY_CHARS: Final = 4000
#: The largest order quantity accepted: beyond it, execution's exact arithmetic overflows the
#: decimal context (a model asking for 1e30 shares gets `invalid_arguments`, not a crash).
MAX_ORDER_SHARES = Decimal("1e15")
MAX_NEWS_LOOKBACK_HOURS = 24 * 30
MAX_REPORTS = 4
#: The most characters of JSON a result with rows may take when sent to a model; past it the oldest
#: rows are left out (and counted). Room for 200 daily bars of up to 300 characters each (a 200-day
#: average's worth), and well under the LLM loop's 100,000-character message limit even after
#: masking's aliases, which are a few characters longer than some tickers.
MAX_RESULT_CHARS: Final = 64_000
_WEIGHT_PLACES = Decimal("0.0001")


# The argument models' field descriptions are shown to the model in every prompt: only where the
# name, type and bounds do not say it all, and with no real ticker (masked agents see them too).
# Every model of this module builds its validator when first used (`defer_build`), not at import:
# a replay of rule baselines uses a few of them (1.8 % of a 7-day replay's instructions saved).
class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class GetBarsArgs(_Args):
    """Arguments of `get_bars`."""

    symbol: Symbol
    interval: Literal["1d", "1h"] = "1d"
    lookback: int = Field(20, ge=1, le=MAX_LOOKBACK, description="How many latest bars.")


class GetQuoteArgs(_Args):
    """Arguments of `get_quote`."""

    symbols: list[Symbol] = Field(min_length=1, max_length=MAX_QUOTE_SYMBOLS)


class GetNewsArgs(_Args):
    """Arguments of `get_news`: a symbol, a query, both, or neither (the market's latest)."""

    symbol: Symbol | None = None
    query: str | None = Field(None, min_length=1, max_length=100)
    lookback_hours: int = Field(48, ge=1, le=MAX_NEWS_LOOKBACK_HOURS)
    limit: int = Field(10, ge=1, le=MAX_NEWS)


class GetFundamentalsArgs(_Args):
    """Arguments of `get_fundamentals`."""

    symbol: Symbol


class CalculateArgs(_Args):
    """Arguments of `calculate`."""

    expression: str = Field(
        min_length=1,
        max_length=MAX_EXPRESSION_CHARS,
        description="E.g. round(10000*0.25/187.3, 2); also // % ** comparisons pi e min max abs "
        "sqrt log exp.",
    )


class GetPortfolioArgs(_Args):
    """`get_portfolio` takes no arguments."""


class PlaceOrderArgs(_Args):
    """Arguments of `place_order`: exactly one of `shares` and `target_weight`."""

    symbol: Symbol
    side: Literal["buy", "sell"]
    shares: Annotated[Decimal, Field(gt=0, le=MAX_ORDER_SHARES, allow_inf_nan=False)] | None = (
        Field(None, description="Rounded down to lots and steps.")
    )
    target_weight: Fraction | None = Field(
        None,
        description="Fraction of NAV to hold in the symbol (0 sells all); side must move to it.",
    )
    reason: str = Field("", max_length=MAX_REASON_CHARS, description="Why, briefly.")
    confidence: Fraction | None = None

    @model_validator(mode="after")
    def _one_size(self) -> Self:
        if (self.shares is None) == (self.target_weight is None):
            raise ValueError("give exactly one of shares and target_weight")
        return self


class ShortablePlaceOrderArgs(PlaceOrderArgs):
    """Arguments of `place_order` for an account allowed to short: `short` opens or adds to a
    short, `cover` reduces one; with them `target_weight` is the fraction of NAV to hold short."""

    side: Literal["buy", "sell", "short", "cover"]  # type: ignore[assignment]
    target_weight: Fraction | None = Field(
        None,
        description="Fraction of NAV to hold in the symbol, long for buy/sell, short for "
        "short/cover (0 closes it); side must move to it.",
    )


class FinishArgs(_Args):
    """Arguments of `finish`."""

    summary: str = Field(
        min_length=1, max_length=MAX_SUMMARY_CHARS, description="What you did and why."
    )


class ToolResult(BaseModel):
    """Base of every successful tool result: `as_of` is the decision time it was computed for."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    as_of: datetime


class RowsResult(ToolResult):
    """A result with rows: `omitted` counts the oldest rows found but left out to keep its JSON
    within a size budget (`within`). Subclasses name their rows field and its order."""

    rows_field: ClassVar[str]
    newest_first: ClassVar[bool]

    omitted: int = 0

    def within(self, budget_chars: int) -> Self:
        """This result with as many of its newest rows as fit in `budget_chars` of JSON (none when
        not even the newest fits), in the same order; `omitted` counts the others."""
        if len(self.model_dump_json()) <= budget_chars:
            return self
        rows: Sequence[Any] = getattr(self, self.rows_field)
        newest = list(rows) if self.newest_first else list(reversed(rows))
        room = budget_chars - len(self._keeping(newest, 0, len(rows)).model_dump_json())
        kept = 0
        for row in newest:
            room -= len(pydantic_core.to_json(row).decode()) + 1  # the row and its comma
            if room < 0:
                break
            kept += 1
        while True:  # the estimate is exact for plain rows; the result is checked all the same
            result = self._keeping(newest, kept, len(rows))
            if kept == 0 or len(result.model_dump_json()) <= budget_chars:
                return result
            kept -= 1

    def _keeping(self, newest: list[Any], kept: int, found: int) -> Self:
        """A copy with the first `kept` of `newest`, in this result's order."""
        chosen = newest[:kept] if self.newest_first else newest[:kept][::-1]
        rows = getattr(self, self.rows_field)
        return self.model_copy(
            update={
                self.rows_field: type(rows)(chosen),
                "omitted": self.omitted + found - kept,
            }
        )


class BarsOut(RowsResult):
    """The latest bars of `symbol` that had ended by `as_of`, oldest first.

    The bars are the domain's frozen `Bar` values themselves (validated when they were loaded), so a
    200-bar lookback builds no per-bar objects; they serialise to JSON field by field.
    """

    rows_field = "bars"
    newest_first = False

    symbol: str
    interval: str
    bars: tuple[Bar, ...]

    @classmethod
    def of(cls, *, as_of: datetime, symbol: str, interval: str, bars: tuple[Bar, ...]) -> BarsOut:
        """A result over already-validated bars (not validated again)."""
        return cls.model_construct(as_of=as_of, symbol=symbol, interval=interval, bars=bars)


#: The fields of `QuoteOut` only a market with daily price limits shows (A-shares): None, and left
#: out of the JSON, elsewhere.
LIMIT_FIELDS: Final = ("board", "limit_pct", "limit_up", "limit_down")


class QuoteOut(BaseModel):
    """The last price of `symbol` known at `as_of`, stamped when it was known.

    Where the market has daily price limits (A-shares), also the stock's `board` (main, chinext,
    star, beijing: from its code) and the band execution enforces this session (KTD-Fin's tool
    fields, `markets.price_limits.LimitBand`): `limit_pct`, the band as a fraction of the previous
    close (the official limit less any configured buffer), and `limit_up` / `limit_down`, the
    prices at or above which a buy, at or below which a sell, is refused. The band is absent
    while the stock has no previous close.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    symbol: str
    price: Decimal
    at: datetime
    board: str | None = None
    limit_pct: Decimal | None = None
    limit_up: Decimal | None = None
    limit_down: Decimal | None = None

    @model_serializer(mode="wrap")
    def _without_unset_limits(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        found: dict[str, Any] = handler(self)
        for name in LIMIT_FIELDS:
            if found.get(name, 0) is None:
                del found[name]
        return found

    @classmethod
    def of(
        cls, quote: Quote, band: LimitBand | None = None, board: Board | None = None
    ) -> QuoteOut:
        """`quote` as the tool shows it, with its `band` (and `board`) where the market has
        limits."""
        if band is not None:
            return cls(
                symbol=quote.symbol,
                price=quote.price,
                at=quote.at,
                board=band.board.value,
                limit_pct=band.pct,
                limit_up=band.up,
                limit_down=band.down,
            )
        return cls(
            symbol=quote.symbol,
            price=quote.price,
            at=quote.at,
            board=None if board is None else board.value,
        )


class QuotesOut(ToolResult):
    """Quotes by symbol; `missing` had no price yet, `unknown` are outside this market."""

    quotes: list[QuoteOut]
    missing: list[str] = Field(default_factory=list)
    unknown: list[str] = Field(default_factory=list)


class NewsItemOut(BaseModel):
    """One news item, published at `published_at` (never after `as_of`)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    symbol: str | None
    published_at: datetime
    title: str
    source: str = ""
    url: str = ""


class NewsOut(RowsResult):
    """News published at or before `as_of` within the lookback, newest first."""

    rows_field = "items"
    newest_first = True

    items: list[NewsItemOut]


class ReportOut(BaseModel):
    """One published report: the period it covers, when it was published, its figures."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    period_end: date
    published_at: datetime
    currency: str
    values: dict[str, Decimal]


class FundamentalsOut(RowsResult):
    """The reports of `symbol` published at or before `as_of`, newest first."""

    rows_field = "reports"
    newest_first = True

    symbol: str
    reports: list[ReportOut]


class CalculationOut(ToolResult):
    """The exact value of `expression` (a boolean for a comparison)."""

    expression: str
    value: Decimal | bool


class PositionOut(BaseModel):
    """A holding marked at its quote: `value = quantity * mark`, `weight = value / nav`; a short
    has a negative quantity, value and weight."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    symbol: str
    quantity: Decimal
    mark: Decimal
    value: Decimal
    weight: Decimal


#: The fields of `PortfolioOut` only an account allowed to short is shown (None, and left out of
#: the JSON, for the others: a long-only account's portfolio reads as it always did).
SHORTING_FIELDS: Final = (
    "long_value",
    "short_value",
    "gross_exposure",
    "net_exposure",
    "margin_requirement",
    "maintenance_requirement",
    "borrow_fees_paid",
)


def weight_of(value: Decimal, nav: Decimal) -> Decimal:
    """A holding's weight as `get_portfolio` shows it: `value / nav` to four places (0 when NAV is
    not positive)."""
    return (value / nav).quantize(_WEIGHT_PLACES) if nav > 0 else Decimal(0)


class PortfolioOut(ToolResult):
    """The account: cash, positions and NAV (`cash + positions_value`) in `currency`.

    For an account allowed to short, also: `long_value` and `short_value` (both >= 0),
    `gross_exposure = (long + short) / nav` and `net_exposure = (long - short) / nav`, the margin
    the positions require now (`margin_requirement`: longs in full plus the initial margin of the
    shorts; `maintenance_requirement`: the level below which the account is in a margin call),
    and the borrow fees paid so far. A short's proceeds sit in `cash`, and its value counts
    negatively in `positions_value`.
    """

    currency: str
    cash: Decimal
    positions: list[PositionOut]
    positions_value: Decimal
    nav: Decimal
    long_value: Decimal | None = None
    short_value: Decimal | None = None
    gross_exposure: Decimal | None = None
    net_exposure: Decimal | None = None
    margin_requirement: Decimal | None = None
    maintenance_requirement: Decimal | None = None
    borrow_fees_paid: Decimal | None = None

    @model_serializer(mode="wrap")
    def _without_unset_shorting(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        found: dict[str, Any] = handler(self)
        for name in SHORTING_FIELDS:
            if found.get(name, 0) is None:
                del found[name]
        return found

    @classmethod
    def of(cls, book: Book, as_of: datetime, shorting: ShortingView | None = None) -> PortfolioOut:
        """`book` as the tool shows it, weights rounded to four places; with `shorting` (an
        account allowed to short) its exposures, margin and borrow fees too. Built without
        validating again: a `Book` holds exact Decimals already (one portfolio is read every
        cycle)."""
        nav = book.nav
        extra: dict[str, Any] = {}
        if shorting is not None:
            exposure = book.exposure()
            extra = {
                "long_value": _money(exposure.long_value, book.currency),
                "short_value": _money(exposure.short_value, book.currency),
                "gross_exposure": weight_of(exposure.gross, nav),
                "net_exposure": weight_of(exposure.net, nav),
                "margin_requirement": _money(
                    exposure.initial_requirement(shorting.rules), book.currency
                ),
                "maintenance_requirement": _money(
                    exposure.maintenance_requirement(shorting.rules), book.currency
                ),
                "borrow_fees_paid": shorting.borrow_fees_paid,
            }
        return cls.model_construct(
            as_of=as_of,
            currency=book.currency,
            cash=book.cash,
            positions=[
                PositionOut.model_construct(
                    symbol=holding.symbol,
                    quantity=holding.quantity,
                    mark=holding.mark,
                    value=holding.value,
                    weight=weight_of(holding.value, nav),
                )
                for holding in book.holdings.values()
            ],
            positions_value=book.positions_value,
            nav=nav,
            **extra,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ShortingView:
    """What a shorting account's portfolio shows beside its book: the market's shorting rules
    (its margins) and the borrow fees the account has paid."""

    rules: ShortRules
    borrow_fees_paid: Decimal


def _money(amount: Decimal, currency: str) -> Decimal:
    """`amount` by the money rule, a zero as plain 0 (not `0E-8`, which a model reads badly)."""
    rounded = round_money(amount, currency)
    return rounded if rounded else Decimal(0)


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
        cls,
        recorded: RecordedOrder,
        *,
        as_of: datetime,
        cash_after: Decimal | None = None,
        held_after: Decimal | None = None,
    ) -> OrderOut:
        """The outcome of a recorded order, with the account's cash and holding after it when
        they are given."""
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
    # Served over MCP to outside agents (agents/outside/): the cycle's state, not the call's.
    BUDGET_EXHAUSTED = "budget_exhausted"
    CYCLE_CLOSED = "cycle_closed"
    NO_CYCLE = "no_cycle"
    AMBIGUOUS_CYCLE = "ambiguous_cycle"


class ToolError(BaseModel):
    """A tool call that could not be served: a code, what went wrong and how to do better."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    code: ErrorCode
    message: str
    hint: str = ""
    as_of: datetime | None = None


def unknown_symbol(symbol: str, as_of: datetime) -> ToolError:
    """The error for a `symbol` not served: outside the account's universe (and not the market's
    benchmark). The universe is not named: a masked model must not learn it."""
    return ToolError(
        code=ErrorCode.UNKNOWN_SYMBOL,
        message=f"{symbol} is not served: it is not in this account's universe.",
        hint="Use the universe's symbols, written as the market writes them.",
        as_of=as_of,
    )


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
    "get_bars": "Ended OHLCV bars of a symbol, oldest first.",
    "get_quote": "Latest prices; where the market has daily price limits, each stock's board and "
    "band (limit_pct, limit_up, limit_down).",
    "get_news": "News, newest first; optionally on a symbol, or with query in the title.",
    "get_fundamentals": "A company's reported figures and ratios (P/E, market cap...) known now.",
    "calculate": "Exact arithmetic (no variables, no code).",
    "get_portfolio": "Your cash, positions (marked, with weights) and NAV.",
    "place_order": "Buy or sell a symbol now, by shares or target_weight (give exactly one).",
    "finish": "End the cycle. Call once, last.",
}

#: The descriptions an account allowed to short is shown in their place.
SHORTING_DESCRIPTIONS: dict[str, str] = {
    **DESCRIPTIONS,
    "get_portfolio": "Your cash, positions (marked, signed, with weights), NAV, exposures, margin "
    "and borrow fees.",
    "place_order": "Buy, sell, short or cover a symbol now, by shares or target_weight (give "
    "exactly one). Sell a long before shorting it, cover a short before buying it.",
}


#: Each tool's argument model, by name, in the order the toolbox declares them (`Toolbox.specs`).
ARGUMENTS: dict[str, type[BaseModel]] = {
    "get_bars": GetBarsArgs,
    "get_quote": GetQuoteArgs,
    "get_news": GetNewsArgs,
    "get_fundamentals": GetFundamentalsArgs,
    "calculate": CalculateArgs,
    "get_portfolio": GetPortfolioArgs,
    "place_order": PlaceOrderArgs,
    "finish": FinishArgs,
}

#: The argument models an account allowed to short is offered (`place_order` with short/cover).
SHORTING_ARGUMENTS: dict[str, type[BaseModel]] = {
    **ARGUMENTS,
    "place_order": ShortablePlaceOrderArgs,
}


def describe_validation_error(exc: ValidationError) -> str:
    """A pydantic error as one line for an agent: "field: problem; ..." (inputs not repeated)."""
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


#: The JSON-schema keywords a model is shown. The rest (patterns, length and item limits,
#: `additionalProperties`, titles, the argument model's docstring) cost prompt tokens and only
#: matter to validation, which always runs on the full argument model.
_SHOWN_KEYWORDS = frozenset(
    {"type", "properties", "required", "items", "enum", "default", "description", "$ref", "$defs"}
)
_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
#: Bounds this large guard the exact arithmetic against overflow; they tell a model nothing.
_SILENT_BOUND = 10**9


def _fold_optional(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with `null` taken out of its `anyOf` (not being required says a property is
    optional) and a decimal's text form dropped beside its number (strings still validate); a
    single branch left is merged into `schema`."""
    branches = schema.get("anyOf")
    if not isinstance(branches, list):
        return schema
    kept = [branch for branch in branches if branch != {"type": "null"}]
    if any(branch.get("type") in ("number", "integer") for branch in kept):
        kept = [branch for branch in kept if branch.get("type") != "string"]
    rest = {key: value for key, value in schema.items() if key != "anyOf"}
    if len(kept) == 1:
        return {**kept[0], **rest}
    return {**rest, "anyOf": kept}


def _shown(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as a model is shown it: only `_SHOWN_KEYWORDS` and informative bounds, optional
    properties folded (see `_fold_optional`), `"default": null` dropped, recursively."""
    shown: dict[str, Any] = {}
    for key, value in _fold_optional(schema).items():
        if key in ("properties", "$defs"):  # maps of names to schemas (a property may be "title")
            shown[key] = {name: _shown(sub) for name, sub in value.items()}
        elif key == "items":
            shown[key] = _shown(value)
        elif key == "anyOf":
            shown[key] = [_shown(branch) for branch in value]
        elif key in _BOUNDS:
            if abs(value) < _SILENT_BOUND:
                shown[key] = int(value) if float(value).is_integer() else value
        elif key == "default":
            if value is not None:
                shown[key] = value
        elif key in _SHOWN_KEYWORDS:
            shown[key] = value
    return shown


@functools.cache
def _parameters_text(args: type[BaseModel]) -> str:
    """The parameters schema of `args` as shown to a model, as JSON text: computed once per
    argument model (pydantic's schema generation is slow) and immutable, so no caller can change
    what the next one gets. The tool has its own description, so the model's docstring goes."""
    shown = _shown(args.model_json_schema())
    shown.pop("description", None)
    return json.dumps(shown, separators=(",", ":"))


def _shown_parameters(args: type[BaseModel]) -> dict[str, Any]:
    """A fresh copy of the cached parameters schema of `args`."""
    parameters: dict[str, Any] = json.loads(_parameters_text(args))
    return parameters


def openai_tools(specs: Sequence[ToolSpec[Any]]) -> list[dict[str, Any]]:
    """The OpenAI chat-completions `tools` list for `specs` (one function tool per spec), fresh on
    each call. The schemas are compacted for the prompt (see `_shown`); a call's arguments are
    still validated against the full argument model."""
    return [function_tool(spec.name, spec.description, spec.args) for spec in specs]


def function_tool(name: str, description: str, args: type[BaseModel]) -> dict[str, Any]:
    """One OpenAI function tool: `name`, `description` and the compacted schema of `args` (also
    for a tool a decision mode serves itself, such as KTD-Fin's `submit_action`)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": _shown_parameters(args),
        },
    }
