"""The toolbox: the tools of `tools.py` bound to one account, one cycle and one decision time.

This module owns the tool handlers and the rules they enforce for every kind of agent: market data
comes only through the point-in-time `GatewayView` and the slot's `MarketSnapshot` (nothing stamped
after `now`); only the universe offered at `now` is served (`universe`: the members on the
market-local day of `now` that had a bar ended by `now`, and the market's benchmark once it had
one), plus what the account holds, which it may look up and sell but not buy more of (a member that
left the universe); any other symbol is answered exactly as one that was never a member, so an
answer says nothing of the future. Orders are placed at `now` (target weights sized against the NAV
at the slot's quotes) and go through `CycleOrders`, which numbers them and replays an interrupted
cycle identically, and every failure is a structured `ToolError` or a rejected `OrderOut`, never an
exception. `serve` is a call as a model gets it (the LLM loop, MCP): a result with rows (bars,
news, reports) is kept within `MAX_RESULT_CHARS` of JSON, the newest rows kept and the others
counted in its `omitted`; `call` and the typed methods, for Python agents, return every row asked
for. Python agents also get `moving_averages` (not a model tool): the mean closes the rule baselines
trade on, read from the gateway under the same universe and point-in-time rules as `get_bars`. The
research tools (news, fundamentals, arithmetic) are served from `research_tools.py`'s handlers, and
KTD-Fin's from `ktd/`: both are imported when a caller first asks for one of them (a rule
baseline never does), not with this module.
"""

from __future__ import annotations

import functools
import re
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol, TypeVar
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ValidationError

from openbell.agents.book import Book, benchmark_instrument, shares_for_target
from openbell.agents.broker import CycleOrders, PaperBroker
from openbell.agents.tools import (
    ARGUMENTS,
    DESCRIPTIONS,
    MAX_ORDER_SHARES,
    MAX_REASON_CHARS,
    MAX_RESULT_CHARS,
    MAX_SUMMARY_CHARS,
    SHORTING_ARGUMENTS,
    SHORTING_DESCRIPTIONS,
    SYMBOL_PATTERN,
    BarsOut,
    CalculationOut,
    ErrorCode,
    FinishArgs,
    FinishOut,
    FundamentalsOut,
    GetBarsArgs,
    GetPortfolioArgs,
    GetQuoteArgs,
    NewsOut,
    OrderOut,
    OrderStatusOut,
    PlaceOrderArgs,
    PortfolioOut,
    QuoteOut,
    QuotesOut,
    RowsResult,
    ShortingView,
    ToolError,
    ToolOutcome,
    ToolResult,
    ToolSpec,
    describe_validation_error,
    unknown_symbol,
    weight_of,
)
from openbell.markets.domain import (
    Bar,
    Instrument,
    Order,
    Quote,
    RejectReason,
    Side,
    check_utc,
)
from openbell.markets.errors import DataUnavailable, NotServed
from openbell.markets.gateway import MAX_LOOKBACK, AveragesResult, GatewayView, MarketSnapshot
from openbell.markets.price_limits import limit_band
from openbell.markets.rules import MarketRules, board_of
from openbell.markets.universes import Universe
from openbell.store.ledger import Ledger
from openbell.store.records import RecordedOrder

if TYPE_CHECKING:
    from openbell.markets.fundamentals import FundamentalsSource

R = TypeVar("R", bound=ToolResult)
#: The arguments of `get_portfolio`, which has none.
_NO_ARGUMENTS = GetPortfolioArgs()
#: The tools the toolbox handles itself: name -> (argument model, handler method), as `specs`
#: declares them (a unit test holds the two together).
_OWN_HANDLERS: Final[dict[str, tuple[type[BaseModel], str]]] = {
    "get_bars": (GetBarsArgs, "_get_bars"),
    "get_quote": (GetQuoteArgs, "_get_quote"),
    "get_portfolio": (GetPortfolioArgs, "_portfolio"),
    "place_order": (PlaceOrderArgs, "_place_order"),
    "finish": (FinishArgs, "_finish"),
}
#: The bar intervals a tool may ask for (`GetBarsArgs.interval`).
_INTERVALS: tuple[str, ...] = typing.get_args(GetBarsArgs.model_fields["interval"].annotation)
#: A symbol as `Symbol` accepts it (`fullmatch`: a trailing newline is refused, as pydantic does).
_SYMBOL: Final = re.compile(SYMBOL_PATTERN)
#: The sides `place_order` takes from every account, and those only from one allowed to short.
_LONG_SIDES: Final = ("buy", "sell")
_SHORT_SIDES: Final = ("short", "cover")


class _OrderArgs(Protocol):
    """What `place_order`'s handler reads of its arguments: a `PlaceOrderArgs`, or a trusted
    caller's `_OrderRequest`."""

    @property
    def symbol(self) -> str: ...
    @property
    def side(self) -> str: ...
    @property
    def shares(self) -> Decimal | None: ...
    @property
    def target_weight(self) -> Decimal | None: ...
    @property
    def reason(self) -> str: ...
    @property
    def confidence(self) -> Decimal | None: ...


class _OrderRequest(NamedTuple):
    """A trusted caller's `place_order` arguments, checked as `PlaceOrderArgs` would accept them
    (`Toolbox._trusted_order`)."""

    symbol: str
    side: str
    shares: Decimal | None
    target_weight: Decimal | None
    reason: str
    confidence: Decimal | None


class Toolbox:
    """The tools of one (account, cycle) at decision time `now`; see the module docstring.

    `universe` is the market's whole universe (every member of every date); `self.universe` is
    the part of it offered at `now`, which is what an agent is told about.

    `trusted` is for openbell's own rule baselines only (`baselines.RULE_BASELINES`, set by the
    cycle runner; never an LLM, outside, plug-in or strategy agent): their typed `finish` and
    `place_order` calls whose arguments are of the exact types and within the bounds the tools'
    models accept go to the handlers without building the pydantic model; any other call of
    theirs (a value of another type, out of bounds, not ASCII) is validated by the model as every
    agent's is, and gets the same answer. The checks of every other caller are unchanged.
    """

    def __init__(
        self,
        *,
        ledger: Ledger,
        broker: PaperBroker,
        gateway: GatewayView,
        snapshot: MarketSnapshot,
        universe: Universe,
        rules: MarketRules,
        account_id: int,
        cycle_id: int,
        now: datetime,
        fundamentals: FundamentalsSource | None = None,
        pause: Callable[[], Awaitable[None]] | None = None,
        trusted: bool = False,
    ) -> None:
        check_utc("now", now)
        if gateway.now != now or snapshot.at > now:
            raise ValueError(
                f"toolbox at {now} given a gateway view at {gateway.now} and a snapshot at "
                f"{snapshot.at}"
            )
        if not universe.market == rules.market == snapshot.market == broker.rules.market:
            raise ValueError(f"toolbox for {rules.market} given another market's parts")
        self._ledger = ledger
        self._account_id = account_id
        self._gateway = gateway
        self._snapshot = snapshot
        self._roster = universe
        offer = _offered_at(universe, now, snapshot.with_bars, rules)
        self.universe = offer.universe
        self._rules = rules
        self._now = now
        self._benchmark = offer.benchmark
        self._instruments = offer.instruments
        # The snapshot's quotes, copied when the gateway's are first added (`_marks`).
        self._quotes: Mapping[str, Quote | None] = snapshot.quotes
        self._broker = broker
        self._orders = CycleOrders(
            ledger=ledger, broker=broker, account_id=account_id, cycle_id=cycle_id, now=now
        )
        self.finished = False
        self.summary: str | None = None
        self._fundamentals = fundamentals
        self._pause = pause
        self._trusted = trusted

    @functools.cached_property
    def shorting(self) -> bool:
        """Whether this account may short here: the market allows it and the account opted in
        (`allow_short`); only then is `place_order` offered `short` and `cover`."""
        return self._rules.shorting is not None and self._orders.state().allow_short

    @functools.cached_property
    def specs(self) -> tuple[ToolSpec[Any], ...]:
        """The tools, in the order a model is shown them (built when first asked for: a Python
        agent's calls go to the toolbox's own handlers without them)."""
        from openbell.agents.research_tools import ResearchTools

        described = SHORTING_DESCRIPTIONS if self.shorting else DESCRIPTIONS
        arguments = SHORTING_ARGUMENTS if self.shorting else ARGUMENTS
        research = ResearchTools(
            gateway=self._gateway,
            fundamentals=self._fundamentals,
            serves=lambda symbol: self._instrument(symbol) is not None,
            now=self._now,
        )
        handlers: dict[str, Any] = {
            "get_bars": self._get_bars,
            "get_quote": self._get_quote,
            "get_news": research.get_news,
            "get_fundamentals": research.get_fundamentals,
            "calculate": research.calculate,
            "get_portfolio": self._portfolio,
            "place_order": self._place_order,
            "finish": self._finish,
        }
        return tuple(
            ToolSpec(name, described[name], model, handlers[name])
            for name, model in arguments.items()
        )

    @functools.cached_property
    def _by_name(self) -> dict[str, ToolSpec[Any]]:
        return {spec.name: spec for spec in self.specs}

    @functools.cached_property
    def ktd_specs(self) -> tuple[ToolSpec[Any], ...]:
        """KTD-Fin's six research tools (`agents/ktd/`), in the paper's order: served by `call`
        under their names to any caller, offered to a model only by the `ktd-fin` decision mode
        (they are not among `specs`, so what the other modes and MCP clients are shown is
        unchanged)."""
        from openbell.agents.ktd.contract import KTD_TOOLS
        from openbell.agents.ktd.research import KtdResearch

        research = KtdResearch(
            gateway=self._gateway,
            rules=self._rules,
            offered=self.universe.symbols,
            instrument=self._instrument,
            state=self._orders.state,
            sellable=lambda position: self._broker.sellable(position, self._now),
            benchmark=self.benchmark_symbol,
            now=self._now,
        )
        return tuple(
            ToolSpec(name, description, args, getattr(research, name))
            for name, (args, _, description) in KTD_TOOLS.items()
        )

    @functools.cached_property
    def _ktd_by_name(self) -> dict[str, ToolSpec[Any]]:
        return {spec.name: spec for spec in self.ktd_specs}

    def spec_of(self, name: str) -> ToolSpec[Any] | None:
        """The tool named `name`, among `specs` and `ktd_specs`, or None."""
        from openbell.agents.ktd.contract import KTD_TOOLS

        return self._by_name.get(name) or (
            self._ktd_by_name.get(name) if name in KTD_TOOLS else None
        )

    @property
    def now(self) -> datetime:
        """The decision time every result is computed for."""
        return self._now

    @property
    def trusted(self) -> bool:
        """Whether this toolbox serves a rule baseline (see the class docstring)."""
        return self._trusted

    @property
    def placed(self) -> list[RecordedOrder]:
        """The orders placed (or re-placed) in this run, in order."""
        return self._orders.placed

    @property
    def benchmark_symbol(self) -> str | None:
        """The tradable benchmark of the market (QQQ, the 000016.SH index fund), if it has one."""
        return self._benchmark.symbol if self._benchmark is not None else None

    # -- serving ------------------------------------------------------------------------------

    async def call(self, name: str, arguments: Mapping[str, object]) -> ToolOutcome:
        """Validate `arguments` with the tool's model and run its handler; never raises for
        anything the caller can get wrong (unknown tool, bad arguments, a call after finish)."""
        model: type[BaseModel]
        handler: Callable[[Any], Awaitable[ToolOutcome]]
        own = _OWN_HANDLERS.get(name)
        if own is not None:  # the same spec `specs` holds, found without building them all
            model, handler = own[0], getattr(self, own[1])
            if name == "place_order" and self.shorting:
                model = SHORTING_ARGUMENTS[name]
        else:
            spec = self.spec_of(name)
            if spec is None:
                return self._error(
                    ErrorCode.UNKNOWN_TOOL,
                    f"There is no tool named {name!r}.",
                    f"Use one of: {', '.join(self._by_name)}.",
                )
            model, handler = spec.args, spec.handler
        if self.finished:
            return self._finished_error()
        raw = dict(arguments) if isinstance(arguments, Mapping) else arguments
        try:
            args = model.model_validate(raw)
        except ValidationError as exc:
            return self._error(
                ErrorCode.INVALID_ARGUMENTS,
                f"Invalid arguments for {name}: {describe_validation_error(exc)}.",
                f"Call {name} with arguments matching its schema.",
            )
        if self._pause is not None:  # the daemon's loop may serve others before this tool runs
            await self._pause()
        return await handler(args)

    async def serve(self, name: str, arguments: Mapping[str, object]) -> ToolOutcome:
        """`call`, as a model gets it (the LLM loop, MCP): a result with rows is kept within
        `MAX_RESULT_CHARS` of JSON, newest rows first (`RowsResult.within`)."""
        found = await self.call(name, arguments)
        return found.within(MAX_RESULT_CHARS) if isinstance(found, RowsResult) else found

    # -- typed convenience methods for Python agents --------------------------------------------

    async def get_bars(
        self, symbol: str, interval: str = "1d", lookback: int = 20
    ) -> BarsOut | ToolError:
        """See the `get_bars` tool."""
        found = await self.call(
            "get_bars", {"symbol": symbol, "interval": interval, "lookback": lookback}
        )
        return _typed(found, BarsOut)

    async def get_quote(self, symbols: Sequence[str]) -> QuotesOut | ToolError:
        """See the `get_quote` tool."""
        return _typed(await self.call("get_quote", {"symbols": list(symbols)}), QuotesOut)

    async def get_news(
        self,
        symbol: str | None = None,
        *,
        query: str | None = None,
        lookback_hours: int = 48,
        limit: int = 10,
    ) -> NewsOut | ToolError:
        """See the `get_news` tool."""
        arguments: dict[str, object] = {"lookback_hours": lookback_hours, "limit": limit}
        if symbol is not None:
            arguments["symbol"] = symbol
        if query is not None:
            arguments["query"] = query
        return _typed(await self.call("get_news", arguments), NewsOut)

    async def get_fundamentals(self, symbol: str) -> FundamentalsOut | ToolError:
        """See the `get_fundamentals` tool."""
        return _typed(await self.call("get_fundamentals", {"symbol": symbol}), FundamentalsOut)

    async def calculate(self, expression: str) -> CalculationOut | ToolError:
        """See the `calculate` tool."""
        return _typed(await self.call("calculate", {"expression": expression}), CalculationOut)

    async def get_portfolio(self) -> PortfolioOut | ToolError:
        """See the `get_portfolio` tool (it takes no arguments, so none are validated)."""
        if self.finished:
            return self._finished_error()
        return _typed(await self._portfolio(_NO_ARGUMENTS), PortfolioOut)

    async def holdings(self) -> dict[str, Decimal] | ToolError:
        """Symbol -> weight of each holding, as `get_portfolio` shows them (for Python agents; not
        a model tool): the same book and weights, without the tool's result built."""
        if self.finished:
            return self._finished_error()
        book = await self._book()
        nav = book.nav
        return {symbol: weight_of(held.value, nav) for symbol, held in book.holdings.items()}

    async def place_order(
        self,
        symbol: str,
        side: str,
        *,
        shares: Decimal | None = None,
        target_weight: Decimal | None = None,
        reason: str = "",
        confidence: Decimal | None = None,
    ) -> OrderOut | ToolError:
        """See the `place_order` tool."""
        if self._trusted and not self.finished:
            request = self._trusted_order(symbol, side, shares, target_weight, reason, confidence)
            if request is not None:  # as `call` would run it, without the model built
                if self._pause is not None:
                    await self._pause()
                return _typed(await self._place_order(request), OrderOut)
        arguments: dict[str, object] = {"symbol": symbol, "side": side, "reason": reason}
        for key, value in (
            ("shares", shares),
            ("target_weight", target_weight),
            ("confidence", confidence),
        ):
            if value is not None:
                arguments[key] = value
        return _typed(await self.call("place_order", arguments), OrderOut)

    async def moving_averages(
        self, symbol: str, interval: str = "1d", windows: Sequence[int] = (50, 200)
    ) -> AveragesResult | ToolError:
        """The mean close of the last `n` `interval` bars of `symbol` ended by now, for each `n`
        of `windows` with that many bars (for Python agents; not a model tool). It reads the bars
        `get_bars(symbol, interval, max(windows))` would show, and refuses what it refuses."""
        found = await self.moving_averages_of((symbol,), interval, windows)
        return found if isinstance(found, ToolError) else found[symbol]

    async def moving_averages_of(
        self, symbols: Sequence[str], interval: str = "1d", windows: Sequence[int] = (50, 200)
    ) -> dict[str, AveragesResult] | ToolError:
        """`moving_averages` of each of `symbols`, by symbol in the order asked, in one call (for
        Python agents; not a model tool): a symbol not served refuses them all, as it refuses
        `moving_averages` of it alone."""
        if self.finished:
            return self._finished_error()
        lengths = tuple(windows)
        if (
            interval not in _INTERVALS
            or not lengths
            or not all(isinstance(n, int) and 1 <= n <= MAX_LOOKBACK for n in lengths)
        ):
            return self._error(
                ErrorCode.INVALID_ARGUMENTS,
                f"Invalid arguments for moving_averages: interval {interval!r} must be one of "
                f"{', '.join(_INTERVALS)}, and windows {list(lengths)} lengths of 1 to "
                f"{MAX_LOOKBACK} bars.",
                "Call moving_averages with a served interval and window lengths in range.",
            )
        offered = self._instruments
        for symbol in symbols:
            if symbol not in offered and self._instrument(symbol) is None:
                return unknown_symbol(symbol, self._now)
        try:
            return await self._gateway.moving_averages_of(symbols, interval, lengths)
        except (DataUnavailable, NotServed) as exc:
            return self._error(ErrorCode.DATA_UNAVAILABLE, f"{exc}.", "Try another interval.")

    async def bars_of(
        self, symbols: Sequence[str], interval: str = "1d", lookback: int = 20
    ) -> dict[str, tuple[Bar, ...]] | ToolError:
        """The last `lookback` `interval` bars of each of `symbols` ended by now, oldest first,
        by symbol in the order asked (for Python agents; not a model tool): the bars `get_bars`
        shows, read in one call without a payload per symbol. A symbol not served refuses them
        all, as `get_bars` of it alone refuses."""
        if self.finished:
            return self._finished_error()
        if interval not in _INTERVALS or not 1 <= lookback <= MAX_LOOKBACK:
            return self._error(
                ErrorCode.INVALID_ARGUMENTS,
                f"Invalid arguments for bars_of: interval {interval!r} must be one of "
                f"{', '.join(_INTERVALS)}, and lookback {lookback} 1 to {MAX_LOOKBACK} bars.",
                "Call bars_of with a served interval and a lookback in range.",
            )
        for symbol in symbols:
            if self._instrument(symbol) is None:
                return unknown_symbol(symbol, self._now)
        out: dict[str, tuple[Bar, ...]] = {}
        try:
            for symbol in dict.fromkeys(symbols):
                found = await self._gateway.bars(symbol, interval, lookback)
                out[symbol] = found.bars
        except (DataUnavailable, NotServed) as exc:
            return self._error(ErrorCode.DATA_UNAVAILABLE, f"{exc}.", "Try another interval.")
        return out

    async def recent_orders(self, limit: int) -> list[RecordedOrder]:
        """The account's latest `limit` orders placed before now, newest first, with their
        outcomes (for a decision mode's prompt; not a model tool)."""
        return self._ledger.recent_orders(self._account_id, self._now, limit)

    async def previous_cycle_orders(self) -> tuple[datetime | None, list[RecordedOrder]]:
        """The slot of the account's cycle before this one (None at its first) and the orders
        placed in it, in order, with their outcomes (for a decision mode's prompt; not a model
        tool)."""
        slot = self._ledger.last_slot(self._account_id, before=self._now)
        if slot is None:
            return None, []
        cycle = self._ledger.find_cycle(self._account_id, slot)
        return slot, [] if cycle is None else self._ledger.cycle_orders(cycle.cycle_id)

    def account_start(self) -> tuple[datetime, Decimal]:
        """When the account was opened and the cash it was opened with (for a decision mode's
        performance line; not a model tool)."""
        return (
            self._ledger.account_opened_at(self._account_id),
            self._ledger.initial_cash(self._account_id),
        )

    def positions(self) -> dict[str, Decimal]:
        """The account's signed quantities now (a short is negative), with this cycle's fills;
        served after `finish` too (for the rules enforced at a cycle's end)."""
        return {
            symbol: position.quantity
            for symbol, position in self._orders.state().positions.items()
            if position.quantity != 0
        }

    async def close_position(self, symbol: str, reason: str) -> OrderOut | ToolError:
        """Close the whole position in `symbol` (sell a long, cover a short), also once the cycle
        is finished: for what openbell enforces at a cycle's end (the pair rule). Nothing to do
        when nothing is held."""
        held = self.positions().get(symbol, Decimal(0))
        if held == 0:
            return self._outcome_of(symbol, "sell", "Nothing held to close.")
        side = "sell" if held > 0 else "cover"
        model = SHORTING_ARGUMENTS["place_order"]
        args = model.model_validate(
            {"symbol": symbol, "side": side, "target_weight": Decimal(0), "reason": reason}
        )
        if not isinstance(args, PlaceOrderArgs):
            raise TypeError(f"place_order's model gave {type(args).__name__}")
        return _typed(await self._place_order(args), OrderOut)

    async def finish(self, summary: str) -> FinishOut | ToolError:
        """See the `finish` tool."""
        if self._trusted and not self.finished and _text_within(summary, 1, MAX_SUMMARY_CHARS):
            if self._pause is not None:  # as `call` would run it, without the model built
                await self._pause()
            return self._finish_with(summary)
        return _typed(await self.call("finish", {"summary": summary}), FinishOut)

    def _trusted_order(
        self,
        symbol: str,
        side: str,
        shares: Decimal | None,
        target_weight: Decimal | None,
        reason: str,
        confidence: Decimal | None,
    ) -> _OrderRequest | None:
        """The arguments of a trusted caller's `place_order` when `PlaceOrderArgs` (or, for an
        account allowed to short, its shorting model) would accept them as they are; else None,
        for the model to validate them."""
        if not (
            type(symbol) is str
            and type(side) is str
            and _SYMBOL.fullmatch(symbol) is not None
            and (side in _LONG_SIDES or (side in _SHORT_SIDES and self.shorting))
            and _text_within(reason, 0, MAX_REASON_CHARS)
        ):
            return None
        if target_weight is None:
            if not _decimal_within(shares, Decimal(0), MAX_ORDER_SHARES, above_low=True):
                return None
        elif shares is not None or not _decimal_within(target_weight, Decimal(0), Decimal(1)):
            return None
        if confidence is not None and not _decimal_within(confidence, Decimal(0), Decimal(1)):
            return None
        return _OrderRequest(symbol, side, shares, target_weight, reason, confidence)

    # -- handlers -----------------------------------------------------------------------------

    async def _get_bars(self, args: GetBarsArgs) -> ToolOutcome:
        if self._instrument(args.symbol) is None:
            return unknown_symbol(args.symbol, self._now)
        try:
            found = await self._gateway.bars(args.symbol, args.interval, args.lookback)
        except (DataUnavailable, NotServed) as exc:
            return self._error(ErrorCode.DATA_UNAVAILABLE, f"{exc}.", "Try another interval.")
        if not found.bars:  # the result holds only bars ended by now (`BarsResult` checks it)
            return self._error(
                ErrorCode.DATA_UNAVAILABLE,
                f"No {args.interval} bars of {args.symbol} had ended by {self._now.isoformat()}.",
                "Try another interval or symbol, or a later slot.",
            )
        return BarsOut.of(
            as_of=self._now, symbol=args.symbol, interval=args.interval, bars=found.bars
        )

    async def _get_quote(self, args: GetQuoteArgs) -> ToolOutcome:
        wanted = list(dict.fromkeys(args.symbols))
        known = [symbol for symbol in wanted if self._instrument(symbol) is not None]
        found = await self._marks(known)
        return QuotesOut(
            as_of=self._now,
            quotes=[await self._quote_out(quote) for quote in found.values()],
            missing=[symbol for symbol in known if symbol not in found],
            unknown=[symbol for symbol in wanted if symbol not in known],
        )

    async def _quote_out(self, quote: Quote) -> QuoteOut:
        """`quote` as `get_quote` shows it: with the stock's board and limit band (the one its
        orders meet this session) where the market has price limits."""
        instrument = self._instrument(quote.symbol)
        if self._rules.price_limits is None or instrument is None:
            return QuoteOut.of(quote)
        previous = (await self._snapshot_with(quote.symbol)).previous_closes.get(quote.symbol)
        if previous is None or not previous.is_finite() or previous <= 0:
            return QuoteOut.of(quote, board=board_of(quote.symbol))
        return QuoteOut.of(quote, limit_band(instrument, self._rules, previous))

    async def _portfolio(self, args: GetPortfolioArgs) -> ToolOutcome:
        shorting = self._rules.shorting
        if not self.shorting or shorting is None:
            return PortfolioOut.of(await self._book(), self._now)
        view = ShortingView(rules=shorting, borrow_fees_paid=self._borrow_fees_paid())
        return PortfolioOut.of(await self._book(), self._now, view)

    def _borrow_fees_paid(self) -> Decimal:
        """The borrow fees the account was charged by now."""
        return sum(
            (
                fee.amount
                for fee in self._ledger.borrow_fees(self._account_id)
                if fee.charged_at <= self._now
            ),
            Decimal(0),
        )

    async def _place_order(self, args: _OrderArgs) -> ToolOutcome:
        if self._orders.diverged:
            return self._diverged_error()
        side = Side(args.side)
        if side in (Side.BUY, Side.SHORT):  # opening: only what is offered now
            instrument = self._instruments.get(args.symbol)
        else:
            instrument = self._instrument(args.symbol)
        if instrument is None:
            # Recorded as a rejection; a target-weight order carries a nominal quantity of the
            # market's quantity step, since no shares can be worked out for it.
            outsider = Instrument(
                symbol=args.symbol, market=self._rules.market, currency=self._rules.currency
            )
            quantity = args.shares if args.shares is not None else self._rules.quantity_step
            recorded = self._orders.reject(
                self._order(outsider, side, quantity, args),
                reason=RejectReason.NOT_IN_UNIVERSE,
                message=(
                    f"{args.symbol} is not in the universe of this {self._rules.market} account; "
                    "order only its members."
                ),
                target_weight=args.target_weight,
            )
            return self._placed(recorded, args)
        sized = await self._size(args, instrument, side)
        if not isinstance(sized, Decimal):
            return sized
        recorded = self._orders.place(
            self._order(instrument, side, sized, args),
            snapshot=await self._snapshot_with(args.symbol),
            target_weight=args.target_weight,
        )
        return self._placed(recorded, args)

    async def _size(
        self, args: _OrderArgs, instrument: Instrument, side: Side
    ) -> Decimal | ToolOutcome:
        """The order's quantity: its shares, or the shares that reach its target weight."""
        if args.target_weight is None:
            return args.shares if args.shares is not None else Decimal(0)
        price = (await self._marks([args.symbol])).get(args.symbol)
        if price is None:
            return self._error(
                ErrorCode.DATA_UNAVAILABLE,
                f"There is no price for {args.symbol} at {self._now.isoformat()}, so a target "
                f"weight cannot be turned into shares.",
                "Try again at a later slot, or order by shares.",
            )
        quantity, why = shares_for_target(
            book=await self._book(),
            instrument=instrument,
            side=side,
            target_weight=args.target_weight,
            price=price.price,
            rules=self._rules,
        )
        if quantity <= 0:
            return self._outcome(OrderStatusOut.NOTHING_TO_DO, args, why)
        return quantity

    async def _finish(self, args: FinishArgs) -> ToolOutcome:
        return self._finish_with(args.summary)

    def _finish_with(self, summary: str) -> FinishOut:
        self.finished = True
        self.summary = summary
        self._orders.check_complete()
        return FinishOut(as_of=self._now, summary=summary, orders_placed=len(self.placed))

    # -- orders -------------------------------------------------------------------------------

    def _order(
        self, instrument: Instrument, side: Side, quantity: Decimal, args: _OrderArgs
    ) -> Order:
        return Order(
            instrument=instrument,
            side=side,
            quantity=quantity,
            placed_at=self._now,
            reason=args.reason,
            confidence=args.confidence,
        )

    def _placed(self, recorded: RecordedOrder | None, args: _OrderArgs) -> ToolOutcome:
        """Describe a recorded order's outcome, with the account after it."""
        if recorded is None:
            return self._diverged_error()
        state = self._orders.state()
        return OrderOut.of(
            recorded,
            as_of=self._now,
            cash_after=state.cash.amount,
            held_after=state.quantity(args.symbol),
        )

    def _outcome_of(self, symbol: str, side: str, message: str) -> OrderOut:
        return OrderOut(
            as_of=self._now,
            status=OrderStatusOut.NOTHING_TO_DO,
            symbol=symbol,
            side=side,
            message=message,
        )

    def _outcome(
        self, status: OrderStatusOut, args: _OrderArgs, message: str, **fields: Any
    ) -> OrderOut:
        return OrderOut(
            as_of=self._now,
            status=status,
            symbol=args.symbol,
            side=args.side,
            message=message,
            **fields,
        )

    # -- the account and prices ---------------------------------------------------------------

    async def _book(self) -> Book:
        state = self._orders.state()
        quotes = await self._marks(list(state.positions))
        marks = {symbol: quote.price for symbol, quote in quotes.items()}
        return Book.mark(state, marks, self._rules.currency)

    async def _marks(self, symbols: Sequence[str]) -> dict[str, Quote]:
        """The quotes of `symbols`: the snapshot's, else the gateway's at `now` (kept)."""
        asked = [symbol for symbol in symbols if symbol not in self._quotes]
        if asked:
            found = await self._gateway.quote(asked)
            quotes = dict(self._quotes)  # the snapshot's own are never written to
            for symbol in asked:
                quotes[symbol] = found.quotes.get(symbol)
            self._quotes = quotes
        out: dict[str, Quote] = {}
        for symbol in symbols:
            quote = self._quotes[symbol]
            if quote is not None and quote.at <= self._now:
                out[symbol] = quote
        return out

    async def _snapshot_with(self, symbol: str) -> MarketSnapshot:
        """The slot's snapshot, with `symbol`'s previous close added when it lacks one (the
        benchmark may not be among the symbols the daemon fetched)."""
        snapshot = self._snapshot
        if symbol in snapshot.previous_closes:
            return snapshot
        try:
            closes = await self._gateway.daily_closes(symbol, 1)
        except (
            DataUnavailable,
            NotServed,
        ):  # no daily bars: execution rejects where limits need a close
            return snapshot
        if not closes.closes:
            return snapshot
        return MarketSnapshot(
            market=snapshot.market,
            at=snapshot.at,
            quotes=snapshot.quotes,
            missing=snapshot.missing,
            previous_closes={**snapshot.previous_closes, symbol: closes.closes[-1]},
        )

    def _instrument(self, symbol: str) -> Instrument | None:
        """The instrument of a symbol served at `now`: offered, the benchmark, or held."""
        found = self._instruments.get(symbol)
        if found is not None or symbol not in self._orders.state().positions:
            return found
        if symbol in self._roster:
            return self._roster.instrument(symbol)
        return Instrument(symbol=symbol, market=self._rules.market, currency=self._rules.currency)

    # -- errors -------------------------------------------------------------------------------

    def _error(self, code: ErrorCode, message: str, hint: str = "") -> ToolError:
        return ToolError(code=code, message=message, hint=hint, as_of=self._now)

    def _finished_error(self) -> ToolError:
        return self._error(
            ErrorCode.ALREADY_FINISHED,
            "This cycle is finished; no more tool calls are served.",
            "Stop: the next cycle starts at the next slot.",
        )

    def _diverged_error(self) -> ToolError:
        return self._error(
            ErrorCode.CYCLE_REPLAY_DIVERGED,
            "This cycle is being run again after an interruption, and this order differs from "
            "the one recorded in its place the first time; no more orders are accepted.",
            "Call finish.",
        )


def _text_within(text: object, least: int, most: int) -> bool:
    """Whether `text` is a `str` of `least` to `most` ASCII characters (ASCII: a string pydantic
    could refuse, such as one with a lone surrogate, is left to it)."""
    return type(text) is str and least <= len(text) <= most and text.isascii()


def _decimal_within(value: object, low: Decimal, high: Decimal, *, above_low: bool = False) -> bool:
    """Whether `value` is a finite `Decimal` in [`low`, `high`] (`above_low`: (`low`, `high`]),
    which the tools' models take as it is."""
    if type(value) is not Decimal or not value.is_finite():
        return False
    return (value > low if above_low else value >= low) and value <= high


def _typed(found: ToolOutcome, kind: type[R]) -> R | ToolError:
    if isinstance(found, ToolError | kind):
        return found
    raise TypeError(f"expected {kind.__name__}, got {type(found).__name__}")


class _Offer(NamedTuple):
    """A universe offered at a slot, with what a toolbox reads of it: the instruments that may be
    bought (the offered members, and the benchmark when not one; never written to) and the
    benchmark's instrument (`book.benchmark_instrument`)."""

    universe: Universe
    instruments: Mapping[str, Instrument]
    benchmark: Instrument | None


@dataclass(slots=True)
class _Roster:
    """What was offered of one universe: by the members offered and whether the benchmark is,
    and the last slot's (its symbols with bars, and its market-local day where a member's
    dates make the day matter: an undated universe offers the same whatever the day)."""

    universe: Universe
    offers: dict[tuple[tuple[str, ...], bool], _Offer] = field(default_factory=dict)
    last: tuple[tuple[frozenset[str], date | None], _Offer] | None = None


#: The universes offered, by roster. They change rarely from slot to slot, and building one again
#: checks it again.
_offered: dict[int, _Roster] = {}


def _offered_at(
    universe: Universe, now: datetime, with_bars: frozenset[str], rules: MarketRules
) -> _Offer:
    """`universe.offered_on(day, with_bars=with_bars)` on the market-local day of `now`, and its
    instruments, kept for the slots that offer the same (the benchmark's instrument depends on
    the market alone, which `rules` shares with `universe`)."""
    roster = _offered.get(id(universe))
    if roster is None or roster.universe is not universe:
        if len(_offered) >= _ROSTERS_KEPT:
            _offered.clear()
        roster = _offered[id(universe)] = _Roster(universe)
    day = now.astimezone(ZoneInfo(rules.timezone)).date() if universe.memberships else None
    slot = (with_bars, day)
    last = roster.last
    if last is not None and last[0] == slot:
        return last[1]
    on = now.astimezone(ZoneInfo(rules.timezone)).date() if day is None else day
    key = (universe.offered_symbols(on, with_bars=with_bars), universe.benchmark in with_bars)
    found = roster.offers.get(key)
    if found is None:
        offered = universe.offered_on(on, with_bars=with_bars)
        benchmark = benchmark_instrument(offered, rules)
        instruments = {instrument.symbol: instrument for instrument in offered.instruments}
        if benchmark is not None:
            instruments.setdefault(benchmark.symbol, benchmark)
        found = roster.offers[key] = _Offer(offered, instruments, benchmark)
    roster.last = (slot, found)
    return found


_ROSTERS_KEPT: Final = 16
