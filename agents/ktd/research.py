"""The handlers of KTD-Fin's six research tools, on one toolbox's point-in-time view.

This module owns `KtdResearch`, which `Toolbox` builds beside its own handlers and serves under the
names of `contract.KTD_TOOLS` (offered to a model only by the `ktd-fin` decision mode). Market data
comes only from the toolbox's `GatewayView` (daily bars ended by `now`: at a session's open the
previous session is the last, the paper's "data cutoff T-1 close"), for the symbols the toolbox
serves (`serves`: today's universe, the benchmark, what the account holds); any other is answered
as `unknown_symbol`, as every tool answers it. Each stock's features are read once per toolbox.
The account is valued at the last closes, as the rest of the research is; the shares sellable
today come from the broker's T+1 rule. Every failure is a structured `ToolError`.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

from openbell.agents.book import Book
from openbell.agents.ktd.contract import (
    BarRow,
    BenchmarkRow,
    CompareCandidatesArgs,
    CompareOut,
    GetMarketContextArgs,
    GetPortfolioStateArgs,
    GetStockSnapshotArgs,
    HeldRow,
    MarketContextOut,
    PairRow,
    PortfolioStateOut,
    PositionRow,
    RiskCheckArgs,
    RiskCheckOut,
    ScreenCandidatesArgs,
    ScreenOut,
    SnapshotOut,
    StockRow,
)
from openbell.agents.ktd.features import (
    FEATURE_BARS,
    Features,
    LimitBand,
    correlation,
    features_of,
    limit_band,
    limit_hit,
    rounded,
)
from openbell.agents.ktd.risk import (
    LIMIT_DOWN_WARNING,
    LIMIT_UP_WARNING,
    check_orders,
    concentration,
)
from openbell.agents.relative_volume import relative_volumes
from openbell.agents.tools import ErrorCode, ToolError, ToolOutcome, unknown_symbol, weight_of
from openbell.markets.domain import AccountState, Bar, Instrument, Position
from openbell.markets.errors import DataUnavailable, NotServed
from openbell.markets.gateway import GatewayView
from openbell.markets.rules import MarketRules

STALE_WARNING = "no bar in the latest session (suspended?): its features are older"


class KtdResearch:
    """KTD-Fin's research handlers for one toolbox (one account, cycle and decision time).

    `offered` are today's universe's symbols (what may be bought and is screened), `instrument`
    the toolbox's lookup of a served symbol (None: not served), `state` the account now and
    `sellable` the shares of a position that may be sold now (T+1).
    """

    def __init__(
        self,
        *,
        gateway: GatewayView,
        rules: MarketRules,
        offered: Sequence[str],
        instrument: Callable[[str], Instrument | None],
        state: Callable[[], AccountState],
        sellable: Callable[[Position], Decimal],
        benchmark: str | None,
        now: datetime,
    ) -> None:
        self._gateway = gateway
        self._rules = rules
        self._offered = tuple(offered)
        self._instrument = instrument
        self._state = state
        self._sellable = sellable
        self._benchmark = benchmark
        self._now = now
        self._today = now.astimezone(ZoneInfo(rules.timezone)).date()
        self._features: dict[str, Features | None] = {}

    # -- the six tools ------------------------------------------------------------------------

    async def get_market_context(self, args: GetMarketContextArgs) -> ToolOutcome:
        """The benchmark's returns and the breadth of today's universe at the data cutoff."""
        found = await self._universe()
        benchmark = None
        if self._benchmark is not None:
            index = await self.features(self._benchmark)
            if index is not None:
                benchmark = BenchmarkRow(
                    stock_id=self._benchmark,
                    ret_1d=index.ret_1d,
                    ret_5d=index.ret_5d,
                    ret_20d=index.ret_20d,
                    vol_20d=index.vol_20d,
                )
        day = [f.ret_1d for f in found if f.ret_1d is not None]
        hits = [self._hit(f) for f in found]
        return MarketContextOut(
            as_of=self._now,
            as_of_date=self._today,
            data_cutoff=_cutoff(found),
            universe_size=len(self._offered),
            stocks_with_data=len(found),
            benchmark=benchmark,
            advancers=sum(r > 0 for r in day),
            decliners=sum(r < 0 for r in day),
            unchanged=sum(r == 0 for r in day),
            median_ret_1d=_median(day),
            median_ret_5d=_median(f.ret_5d for f in found),
            median_ret_20d=_median(f.ret_20d for f in found),
            median_vol_20d=_median(f.vol_20d for f in found),
            limit_up_closes=hits.count("up"),
            limit_down_closes=hits.count("down"),
        )

    async def screen_candidates(self, args: ScreenCandidatesArgs) -> ToolOutcome:
        """Today's universe ranked by `args.sort_by` (ties by stock id), the top `args.top_k`."""
        found = await self._universe()
        keyed = [(f, _key(f, args.sort_by)) for f in found]
        ranked = [(f, key) for f, key in keyed if key is not None]
        excluded = 0
        if args.exclude_limit_up:
            kept = [(f, key) for f, key in ranked if self._hit(f) != "up"]
            excluded, ranked = len(ranked) - len(kept), kept
        sign = 1 if args.ascending else -1
        ranked.sort(key=lambda pair: (sign * pair[1], pair[0].symbol))
        return ScreenOut(
            as_of=self._now,
            as_of_date=self._today,
            data_cutoff=_cutoff(found),
            sort_by=args.sort_by,
            ascending=args.ascending,
            screened=len(keyed),
            excluded_limit_up=excluded,
            candidates=[self._row(f, _cutoff(found)) for f, _ in ranked[: args.top_k]],
        )

    async def get_stock_snapshot(self, args: GetStockSnapshotArgs) -> ToolOutcome:
        """One stock's features, limit band, last `args.lookback` daily bars and holding."""
        if self._instrument(args.stock_id) is None:
            return unknown_symbol(args.stock_id, self._now)
        bars = await self._bars(args.stock_id, max(args.lookback, FEATURE_BARS))
        found = features_of(args.stock_id, bars, self._rules.timezone)
        if found is None:
            return self._no_bars(args.stock_id)
        self._features.setdefault(args.stock_id, found)
        shown = relative_volumes(bars[-args.lookback :])
        position = self._state().positions.get(args.stock_id)
        held = None
        if position is not None:
            book = await self._book()
            held = HeldRow(
                shares=position.quantity,
                shares_available=self._sellable(position),
                weight=weight_of(book.holdings[args.stock_id].value, book.nav),
            )
        return SnapshotOut(
            as_of=self._now,
            as_of_date=self._today,
            data_cutoff=found.cutoff,
            stock=self._row(found, await self._latest_cutoff()),
            bars=[self._bar(bar) for bar in shown],
            held=held,
        )

    async def compare_candidates(self, args: CompareCandidatesArgs) -> ToolOutcome:
        """The stocks side by side, and the correlation of each pair's daily returns."""
        wanted = list(dict.fromkeys(args.stock_ids))
        unknown = [s for s in wanted if self._instrument(s) is None]
        found: list[Features] = []
        no_data = []
        for symbol in (s for s in wanted if s not in unknown):
            features = await self.features(symbol)
            if features is None:
                no_data.append(symbol)
            else:
                found.append(features)
        latest = await self._latest_cutoff()
        return CompareOut(
            as_of=self._now,
            as_of_date=self._today,
            data_cutoff=_cutoff(found),
            stocks=[self._row(f, latest) for f in found],
            correlations=[
                PairRow(a=a.symbol, b=b.symbol, corr_20d=correlation(a.returns, b.returns))
                for a, b in itertools.combinations(found, 2)
            ],
            unknown=unknown,
            no_data=no_data,
        )

    async def get_portfolio_state(self, args: GetPortfolioStateArgs) -> ToolOutcome:
        """The account at the last closes, its holdings largest weight first."""
        book = await self._book()
        state = self._state()
        nav = book.nav
        rows = [
            PositionRow(
                stock_id=held.symbol,
                board=self._band(held.symbol).board,
                shares=held.quantity,
                shares_available=self._sellable(state.positions[held.symbol]),
                last_close=held.mark,
                value=held.value,
                weight=weight_of(held.value, nav),
            )
            for held in book.holdings.values()
        ]
        rows.sort(key=lambda row: (-row.weight, -row.value, row.stock_id))
        cash_weight, _, hhi = concentration(book)
        return PortfolioStateOut(
            as_of=self._now,
            as_of_date=self._today,
            currency=book.currency,
            total_value=nav,
            cash=book.cash,
            cash_weight=cash_weight,
            num_positions=len(rows),
            hhi=hhi,
            positions=rows,
        )

    async def risk_check(self, args: RiskCheckArgs) -> ToolOutcome:
        """The orders checked in sequence at the last closes (`risk.check_orders`)."""
        symbols = list(dict.fromkeys(order.stock_id for order in args.orders))
        served = {symbol: self._instrument(symbol) for symbol in symbols}
        features = {s: await self.features(s) for s in symbols if served[s] is not None}
        state = self._state()
        checks, after = check_orders(
            args.orders,
            book=await self._book(),
            served=served,
            buyable=frozenset(self._offered)
            | frozenset(s for s in (self._benchmark,) if s is not None),
            closes={s: f.last_close for s, f in features.items() if f is not None},
            available={s: self._sellable(p) for s, p in state.positions.items()},
            hits={s: self._hit(f) for s, f in features.items() if f is not None},
            rules=self._rules,
        )
        cash_weight, max_weight, hhi = concentration(after)
        return RiskCheckOut(
            as_of=self._now,
            as_of_date=self._today,
            passed=all(check.ok for check in checks),
            checks=checks,
            cash_after=after.cash,
            cash_weight_after=cash_weight,
            max_weight_after=max_weight,
            hhi_after=hhi,
        )

    # -- features ------------------------------------------------------------------------------

    async def features(self, symbol: str) -> Features | None:
        """The features of a served `symbol` from its daily bars ended by now (kept), or None
        without any."""
        if symbol not in self._features:
            bars = await self._bars(symbol, FEATURE_BARS)
            self._features[symbol] = features_of(symbol, bars, self._rules.timezone)
        return self._features[symbol]

    async def _universe(self) -> list[Features]:
        found = [await self.features(symbol) for symbol in self._offered]
        return [f for f in found if f is not None]

    async def _latest_cutoff(self) -> date | None:
        return _cutoff(await self._universe())

    async def _bars(self, symbol: str, lookback: int) -> tuple[Bar, ...]:
        try:
            return (await self._gateway.bars(symbol, "1d", lookback)).bars
        except (DataUnavailable, NotServed):
            return ()

    async def _book(self) -> Book:
        """The account valued at the last closes (a holding without one at its cost)."""
        state = self._state()
        closes = {}
        for symbol in state.positions:
            found = await self.features(symbol)
            if found is not None:
                closes[symbol] = found.last_close
        return Book.mark(state, closes, self._rules.currency)

    # -- rows ----------------------------------------------------------------------------------

    def _band_instrument(self, symbol: str) -> Instrument:
        found = self._instrument(symbol)
        if found is not None:
            return found
        return Instrument(symbol=symbol, market=self._rules.market, currency=self._rules.currency)

    def _band(self, symbol: str, previous_close: Decimal | None = None) -> LimitBand:
        return limit_band(self._band_instrument(symbol), self._rules, previous_close)

    def _hit(self, features: Features) -> str | None:
        return limit_hit(features, self._band_instrument(features.symbol), self._rules)

    def _row(self, features: Features, latest: date | None) -> StockRow:
        """`features` as a row, with the band of the session after its last close."""
        band = self._band(features.symbol, features.last_close)
        hit = self._hit(features)
        warnings = []
        if hit == "up":
            warnings.append(LIMIT_UP_WARNING)
        elif hit == "down":
            warnings.append(LIMIT_DOWN_WARNING)
        if latest is not None and features.cutoff < latest:
            warnings.append(STALE_WARNING)
        return StockRow(
            stock_id=features.symbol,
            board=band.board,
            limit_pct=band.limit_pct,
            limit_up=band.limit_up,
            limit_down=band.limit_down,
            last_close=features.last_close,
            ret_1d=features.ret_1d,
            ret_5d=features.ret_5d,
            ret_20d=features.ret_20d,
            vol_20d=features.vol_20d,
            momentum_vol=features.momentum_vol,
            volume_ratio=features.volume_ratio,
            high_20d_gap=features.high_20d_gap,
            warnings=warnings,
        )

    def _bar(self, bar: Bar) -> BarRow:
        return BarRow(
            date=bar.start_at.astimezone(ZoneInfo(self._rules.timezone)).date(),
            open=bar.open,
            high=bar.high,
            low=bar.low,
            close=bar.close,
            volume_ratio=bar.volume,
        )

    def _no_bars(self, symbol: str) -> ToolError:
        return ToolError(
            code=ErrorCode.DATA_UNAVAILABLE,
            message=f"No daily bars of {symbol} had ended by {self._now.isoformat()}.",
            hint="Try another stock.",
            as_of=self._now,
        )


def _key(features: Features, sort_by: str) -> Decimal | None:
    value: Decimal | None = getattr(features, sort_by)
    return value


def _cutoff(found: Sequence[Features]) -> date | None:
    return max((f.cutoff for f in found), default=None)


def _median(values: Iterable[Decimal | None]) -> Decimal | None:
    known = [v for v in values if v is not None]
    return rounded(Decimal(statistics.median(known))) if known else None
