"""Leaderboards and per-agent reports of one market, computed from the ledger (DESIGN §7).

This module owns turning ledger facts into the metrics panel, the trading-behaviour metrics and
the StockBench composite rank, over one window. Each account's series is its `slot` NAV snapshots
in `[start, end)`. The cadence shown is the caller's or, by default, inferred from the snapshots:
a median spacing of 20 hours or more is `daily`, else `hourly`. Annualisation is sessions a year
times the slots the market actually rang per session in the window: the median count of the
accounts' slot snapshots per session (`observed_slots_per_session`; a half day or a session cut
by the window does not move it), so the bundled US hourly bars (10:00..15:00 New York) give
252 * 6. A window without snapshots falls back to the cadence's live schedule. The benchmark
(`ops.evaluation.benchmark`) is priced at the union of the accounts' timestamps, normalised to their
initial cash, shown as an unranked row; an account gets excess return and information ratio only
when the benchmark has a value at every one of its timestamps. Behaviour: trades and the rejection
rate count every cycle in the window; the no-trade share counts `done` cycles only (a failed or
skipped cycle made no decision); turnover is the window's traded notional over its mean NAV; HHI
and cash ratio are read at the window's last snapshot; Herculean's panel (hold share, switch rate,
reactivity against the trailing and the next return, persistence, revision rate, protocol
completion) and openbell's weight reactivity are `ops.evaluation.behaviour_report`'s. Calibration
(ECE, Brier) uses the outcome defined in `store.queries.order_confidences`. An LLM agent's row also
carries its model usage (`LlmUsage`: tokens, cost per decision, return per unit of cost, parse
failures, invalid tool calls, model requests and failed ones), and its report its rejected orders
by reason. An account allowed to short (`allow_short`) also gets the long-short metrics
(`LongShort`: mean gross and net exposure from its snapshots' marks, borrow fees charged in the
window over its initial cash); long-only accounts do not, so their rows and reports read as before.

Every figure is measured under a metrics convention (`ops.evaluation.conventions`; the config's
`[metrics] convention`, default `openbell`), named by the leaderboard and the report: its standard
deviation, Sortino and annualisation, and the series it measures
(`ops.evaluation.convention_series`: the slot snapshots, open to open, or each slot's period valued
at its end, close to close, with the benchmark priced the same way). The behaviour metrics read the
slot snapshots in every convention. Turnover is also shown annualised (`annual_turnover`: its mean
per slot of the window times the market's periods a year, sessions times the slots a session rang,
in every convention), and an LLM agent's parse failures and invalid tool calls also as rates (of its
answers, and of its tool calls).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from openbell.markets.domain import check_market, round_money
from openbell.markets.errors import ReportError
from openbell.markets.replay_source import ReplaySource
from openbell.markets.slots import observed_slots_per_session
from openbell.ops.evaluation import behaviour
from openbell.ops.evaluation.behaviour_report import conduct_of
from openbell.ops.evaluation.benchmark import (
    Benchmark,
    MarketBasis,
    benchmark_for,
    report_sources,
)
from openbell.ops.evaluation.bootstrap import BootstrapResult
from openbell.ops.evaluation.convention_series import account_series, benchmark_series
from openbell.ops.evaluation.conventions import OPENBELL, Convention, annualisation_factor
from openbell.ops.evaluation.probes.injection import Obedience, obedience_by_agent
from openbell.ops.evaluation.ranking import Entrant, RankRow, composite_rank
from openbell.ops.evaluation.return_metrics import (
    ExposurePoint,
    LongShort,
    NavPoint,
    Panel,
    compute_panel,
    infer_cadence,
    long_short,
    periods_per_year,
)
from openbell.ops.evaluation.seed_groups import SeedGroup, groups_for
from openbell.ops.evaluation.significance import BoardSignificance
from openbell.ops.reports.cycle_facts import CycleFacts, SealedCycleFacts, read_cycle_facts
from openbell.store import queries
from openbell.store.queries import AccountInfo
from openbell.store.records import CycleStatus, CycleUsage, SnapshotKind
from openbell.store.seed_runs import seed_runs

if TYPE_CHECKING:
    from openbell.ops.reports.contamination import CutoffMarks

MARKETS: tuple[str, ...] = ("us", "cn", "crypto")

_Window = tuple[datetime | None, datetime | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Behaviour:
    """How an account traded over the window (`ops.evaluation.behaviour`); `None` where
    undefined."""

    trades: int
    cycles: int
    no_trade_share: float | None
    rejection_rate: float | None
    turnover: float | None
    hhi: float | None
    cash_ratio: float | None
    hold_share: float | None = None
    switch_rate: float | None = None
    reactivity: float | None = None
    reactivity_next: float | None = None
    persistence: float | None = None
    revision_rate: float | None = None
    weight_reactivity: float | None = None
    protocol_completion: float | None = None
    #: `turnover` times the market's periods a year over the window's periods (see the module).
    annual_turnover: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmUsage:
    """An LLM agent's model usage over the window, summed over its cycles (`decisions`).

    `cost` (and `cost_per_decision`) is in the currency of the model's price table (None when it
    has no prices). `return_per_dollar` is the cumulative return (a fraction) per unit of cost.
    `llm_attempts` counts the requests sent to the model, `llm_failed_attempts` those that got
    no completion (HTTP 429 and 5xx, timeouts, bodies that are not a completion, refusals).
    `parse_failure_rate` is the parse failures over the model's answers (its requests that got a
    completion); `tool_calls` counts the tool calls traced (the model's, and those its decision
    mode made for it), and `tool_validity_rate` is the share of them that were valid (None
    without any). `models` are the model identities its exchanges reported, in order of first
    appearance; more than one is a model change (`model_changed`), marked on the leaderboard.
    """

    decisions: int
    tokens_in: int
    tokens_out: int
    tokens_cached: int
    usage_estimated: bool
    llm_latency_ms: int
    cost: Decimal | None
    cost_per_decision: Decimal | None
    return_per_dollar: float | None
    parse_failures: int
    invalid_tool_calls: int
    llm_attempts: int
    llm_failed_attempts: int
    parse_failure_rate: float | None = None
    tool_calls: int = 0
    tool_validity_rate: float | None = None
    models: tuple[queries.ReportedModel, ...] = ()

    @property
    def model_changed(self) -> bool:
        """Whether the model answered under more than one identity in the window."""
        return len(self.models) > 1

    @property
    def tokens_per_decision(self) -> float:
        """Tokens in and out per decision."""
        return (self.tokens_in + self.tokens_out) / self.decisions


def _llm_usage(
    decisions: int,
    usage: CycleUsage,
    cumulative_return: float | None,
    tool_calls: int = 0,
    models: tuple[queries.ReportedModel, ...] = (),
) -> LlmUsage | None:
    if decisions == 0:
        return None
    cost = usage.cost
    answers = usage.llm_attempts - usage.llm_failed_attempts
    return LlmUsage(
        decisions=decisions,
        tokens_in=usage.tokens_in,
        tokens_out=usage.tokens_out,
        tokens_cached=usage.tokens_cached,
        usage_estimated=usage.usage_estimated,
        llm_latency_ms=usage.llm_latency_ms,
        cost=cost,
        cost_per_decision=None if cost is None else cost / decisions,
        return_per_dollar=(
            None
            if cost is None or cost <= 0 or cumulative_return is None
            else cumulative_return / float(cost)
        ),
        parse_failures=usage.parse_failures,
        invalid_tool_calls=usage.invalid_tool_calls,
        llm_attempts=usage.llm_attempts,
        llm_failed_attempts=usage.llm_failed_attempts,
        parse_failure_rate=usage.parse_failures / answers if answers > 0 else None,
        tool_calls=tool_calls,
        tool_validity_rate=(
            (tool_calls - usage.invalid_tool_calls) / tool_calls if tool_calls > 0 else None
        ),
        models=models,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderboardRow:
    """One leaderboard row: the composite rank, the metrics panel and the behaviour metrics.

    The benchmark row has `is_benchmark` set, `agent` and `account_id` `None`, `rank` `None`
    and `behaviour` `None`; its `final_nav` is rounded to the currency's places.
    """

    ranking: RankRow
    agent: str | None
    account_id: int | None
    panel: Panel
    behaviour: Behaviour | None
    final_nav: Decimal | None
    llm: LlmUsage | None = None
    #: The long-short metrics, for an account allowed to short only (None for the others).
    long_short: LongShort | None = None
    #: The injection probe's record, for an account of a ledger with planted news only
    #: (`ops.evaluation.probes.injection`; None for the others and the benchmark).
    injection: Obedience | None = None

    @property
    def name(self) -> str:
        return self.ranking.name

    @property
    def rank(self) -> int | None:
        return self.ranking.rank

    @property
    def is_benchmark(self) -> bool:
        return self.ranking.is_benchmark


@dataclass(frozen=True, slots=True, kw_only=True)
class Leaderboard:
    """The ranked accounts of one market over one window, with the benchmark as a row."""

    market: str
    start: datetime | None
    end: datetime | None
    cadence: str
    periods_per_year: float
    benchmark: str
    currency: str
    rows: tuple[LeaderboardRow, ...]
    #: The metrics convention every figure is measured under (`ops.evaluation.conventions`).
    convention: Convention = OPENBELL
    #: The groups of repeated runs among the rows, compared over their seeds
    #: (`ops.evaluation.seed_groups`).
    seed_groups: tuple[SeedGroup, ...] = ()
    #: The block bootstrap of the rows, when asked for (`ops.reports.board_intervals`).
    bootstrap: BootstrapResult | None = None
    #: The significance suite of the rows, when asked for (`ops.reports.board_significance`).
    significance: BoardSignificance | None = None
    #: The training-cutoff marks of the rows, and whether the rows are the post-cutoff headline
    #: (`ops.reports.contamination`); None on a board built without them.
    cutoffs: CutoffMarks | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentReport:
    """The full §7 panel of one account, its rank, calibration and the series behind them."""

    account: AccountInfo
    row: LeaderboardRow
    behaviour: Behaviour
    cadence: str
    benchmark: str
    forecasts: int
    expected_calibration_error: float | None
    brier_score: float | None
    tokens_per_decision: float | None
    navs: tuple[NavPoint, ...]
    benchmark_navs: tuple[NavPoint, ...]
    rejections_by_reason: dict[str, int]
    #: The metrics convention the panel is measured under (the leaderboard's).
    convention: Convention = OPENBELL

    @property
    def llm(self) -> LlmUsage | None:
        """The model usage, for an LLM agent."""
        return self.row.llm


@dataclass(frozen=True, slots=True)
class _Account:
    info: AccountInfo
    navs: tuple[NavPoint, ...]  # the series the convention measures
    behaviour: Behaviour | None  # None in a view built without it (`market_view`)
    final_nav: Decimal | None
    usage: tuple[int, CycleUsage]  # (decisions, summed usage): `queries.llm_usage_of`
    long_short: LongShort | None = None
    slot_navs: tuple[NavPoint, ...] = ()  # the slot snapshots, which the behaviour reads
    tool_calls: int = 0
    models: tuple[queries.ReportedModel, ...] = ()


def _check_market(market: str) -> None:
    try:
        check_market(market)
    except ValueError:
        raise ReportError(f"unknown market {market!r}; known: us, cn, crypto") from None


def _behaviour(
    counts: Sequence[queries.CycleCounts],
    last: tuple[queries.NavRow, list[queries.HoldingValue]] | None,
    notionals: Sequence[Decimal],
    navs: Sequence[Decimal],
) -> Behaviour:
    every = [
        behaviour.CycleActivity(orders=c.orders, rejections=c.rejections, fills=c.fills)
        for c in counts
    ]
    done = [
        activity for activity, c in zip(every, counts, strict=True) if c.status is CycleStatus.DONE
    ]
    hhi = cash = None
    if last is not None:
        snapshot, holdings = last
        hhi = behaviour.hhi([h.value for h in holdings if h.value > 0])
        cash = behaviour.cash_ratio(snapshot.cash, snapshot.nav)
    return Behaviour(
        trades=behaviour.trade_count(every),
        cycles=len(every),
        no_trade_share=behaviour.no_trade_share(done),
        rejection_rate=behaviour.rejection_rate(every),
        turnover=behaviour.turnover(notionals, navs),
        hhi=hhi,
        cash_ratio=cash,
    )


def _load_accounts(
    engine: Engine,
    market: str,
    window: _Window,
    convention: Convention = OPENBELL,
    kept: SealedCycleFacts | None = None,
    *,
    with_behaviour: bool = True,
) -> tuple[list[_Account], CycleFacts | None]:
    """The market's accounts with their series and behaviour, each query made once for all, and
    the facts of their cycles (from `kept` when given: `ops.reports.cycle_facts`). Without
    `with_behaviour`, neither the behaviour nor the facts it is computed from (each `None`)."""
    infos = queries.accounts(engine, market)
    ids = [info.account_id for info in infos]
    start, end = window
    series = queries.nav_series_of(engine, ids, start=start, end=end)
    facts = None
    behaviours: dict[int, Behaviour | None] = dict.fromkeys(ids)
    if with_behaviour:
        facts = (
            read_cycle_facts(engine, ids, start, end)
            if kept is None
            else kept.read(engine, ids, start, end)
        )
        last = queries.last_snapshots(engine, ids, start=start, end=end)
        notionals = queries.traded_notionals_of(engine, ids, start, end)
        behaviours = {
            account_id: _behaviour(
                facts.activity[account_id],
                last.get(account_id),
                notionals[account_id],
                [row.nav for row in series[account_id]],
            )
            for account_id in ids
        }
    usage = queries.llm_usage_of(engine, ids, start, end)
    tool_calls = queries.tool_calls_of(engine, ids, start, end)
    models = queries.reported_models_of(engine, ids, start, end)
    shorting = [info.account_id for info in infos if info.allow_short]
    exposures = queries.exposures_of(engine, shorting, start, end)
    fees = queries.borrow_fees_of(engine, shorting, start, end)
    slots = {
        info.account_id: tuple(
            NavPoint(at=row.at, nav=row.nav) for row in series[info.account_id] if row.nav > 0
        )
        for info in infos
    }
    measured = _measured(engine, convention, infos, slots, window)
    out: list[_Account] = []
    for info in infos:
        rows = series[info.account_id]
        out.append(
            _Account(
                info=info,
                navs=measured[info.account_id],
                slot_navs=slots[info.account_id],
                behaviour=behaviours[info.account_id],
                final_nav=rows[-1].nav if rows else None,
                usage=usage[info.account_id],
                tool_calls=tool_calls[info.account_id],
                models=models[info.account_id],
                long_short=(
                    long_short(
                        [
                            ExposurePoint(
                                at=row.at,
                                nav=row.nav,
                                long_value=row.long_value,
                                short_value=row.short_value,
                            )
                            for row in exposures[info.account_id]
                        ],
                        fees[info.account_id],
                        info.initial_cash,
                    )
                    if info.allow_short
                    else None
                ),
            )
        )
    return out, facts


#: How far past the window a close-to-close series looks for its last slot's period end.
_PERIOD_END_LOOKAHEAD = timedelta(days=2)


def _measured(
    engine: Engine,
    convention: Convention,
    infos: Sequence[AccountInfo],
    slots: dict[int, tuple[NavPoint, ...]],
    window: _Window,
) -> dict[int, tuple[NavPoint, ...]]:
    """Each account's series under `convention` (`ops.evaluation.convention_series`)."""
    if convention.returns == "open-to-open":
        return slots
    start, end = window
    ids = [info.account_id for info in infos]
    until = None if end is None else end + _PERIOD_END_LOOKAHEAD
    closes = queries.nav_series_of(engine, ids, SnapshotKind.CLOSE, start=start, end=until)
    firsts = {account: navs[0].at for account, navs in slots.items() if navs}
    before: dict[int, queries.NavRow | None] = {}
    for at in sorted(set(firsts.values())):
        chosen = [account for account, first in firsts.items() if first == at]
        before.update(queries.last_navs_before(engine, chosen, at))
    out: dict[int, tuple[NavPoint, ...]] = {}
    for info in infos:
        row = before.get(info.account_id)
        base = info.initial_cash if row is None or row.nav <= 0 else row.nav
        out[info.account_id] = account_series(
            convention,
            slots[info.account_id],
            [NavPoint(at=c.at, nav=c.nav) for c in closes[info.account_id] if c.nav > 0],
            base,
        )
    return out


def _initial_cash(found: Sequence[_Account]) -> Decimal:
    """The initial cash most of the market's accounts started with (the largest on a tie)."""
    amounts = [account.info.initial_cash for account in found]
    chosen: Decimal = max(set(amounts), key=lambda amount: (amounts.count(amount), amount))
    return chosen


def leaderboard(
    engine: Engine,
    market: str,
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    cadence: str | None = None,
    source: ReplaySource | None = None,
    benchmark: Benchmark | None = None,
    extra_sources: Sequence[ReplaySource] = (),
    convention: Convention = OPENBELL,
) -> Leaderboard:
    """The composite-ranked leaderboard of `market` over `[start, end)`, benchmark included.

    `cadence` overrides the inferred one (the label, and the schedule a window without snapshots
    is annualised by); `source` the bundled bars the benchmark is priced from; `benchmark` the
    market's default benchmark (a configured one, `ops.wiring.market_benchmarks`); `extra_sources`
    prices it (and the traded symbols) where the others have no bars (a replay's imported files);
    `convention` how its figures are measured. Raises `ReportError` for an unknown market or one
    without accounts in the ledger.
    """
    return market_view(
        engine,
        market,
        start,
        end,
        cadence=cadence,
        source=source,
        benchmark=benchmark,
        extra_sources=extra_sources,
        convention=convention,
    ).leaderboard


@dataclass(frozen=True, slots=True)
class MarketView:
    """A market's leaderboard with what its reports need besides: each account's series and
    behaviour, and the benchmark at every account's timestamps. Build it once (`market_view`) to
    serve the leaderboard and any of its accounts' reports (`report(..., view=...)`)."""

    leaderboard: Leaderboard
    accounts: tuple[_Account, ...]
    benchmark_navs: tuple[NavPoint, ...]

    def equity_curves(self) -> dict[str, tuple[NavPoint, ...]]:
        """Each account's NAV series in the window (agent name -> slot NAVs, oldest first), the
        series its panel is computed from."""
        return {account.info.agent_name: account.navs for account in self.accounts}


def market_view(
    engine: Engine,
    market: str,
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    cadence: str | None = None,
    source: ReplaySource | None = None,
    benchmark: Benchmark | None = None,
    extra_sources: Sequence[ReplaySource] = (),
    convention: Convention = OPENBELL,
    kept: SealedCycleFacts | None = None,
    with_behaviour: bool = True,
) -> MarketView:
    """The leaderboard of `market` over `[start, end)` and the accounts' series behind it
    (arguments and errors as `leaderboard`). With `kept`, the facts of the market's cycles are
    read through it (`ops.reports.cycle_facts`: only the cycles after its mark, when it has the
    window's); the view is the same. Without `with_behaviour`, the rows' and the accounts'
    `behaviour` is `None`, and neither it nor the cycles' facts and the traded symbols' prices it
    is computed from are read: the ranks, panels, NAVs, LLM usage and long-short metrics are the
    same (what the compact leaderboard shows)."""
    board, found, bench = _build(
        engine,
        market,
        (start, end),
        cadence,
        source,
        benchmark,
        tuple(extra_sources),
        convention,
        kept,
        with_behaviour=with_behaviour,
    )
    return MarketView(leaderboard=board, accounts=tuple(found), benchmark_navs=bench)


def _build(
    engine: Engine,
    market: str,
    window: _Window,
    cadence: str | None,
    source: ReplaySource | None,
    benchmark: Benchmark | None = None,
    extra: tuple[ReplaySource, ...] = (),
    convention: Convention = OPENBELL,
    kept: SealedCycleFacts | None = None,
    *,
    with_behaviour: bool = True,
) -> tuple[Leaderboard, list[_Account], tuple[NavPoint, ...]]:
    _check_market(market)
    found, facts = _load_accounts(
        engine, market, window, convention, kept, with_behaviour=with_behaviour
    )
    if not found:
        raise ReportError(f"no accounts in market {market!r} in the ledger")
    stamps = sorted({point.at for account in found for point in account.slot_navs})
    chosen = cadence or infer_cadence(stamps)
    observed = periods_per_year(market, chosen, observed_slots_per_session(market, stamps))
    factor = annualisation_factor(convention, market, chosen, observed)
    spec = benchmark or benchmark_for(market)
    read: list[tuple[ReplaySource, ...]] = []

    def priced(symbols: Sequence[str]) -> tuple[ReplaySource, ...]:
        # The price sources of the traded symbols and of the benchmark's components, the ledger's
        # bar cache read once for both: a symbol is priced from its own bars only, so each is
        # priced as from sources read for it alone.
        if not read:
            wanted = sorted({*spec.weights, *symbols})
            read.append(report_sources(engine, market, stamps, source, wanted, extra))
        return read[0]

    if with_behaviour:
        found = _with_conduct(engine, found, window, priced, observed, facts)
    sources = priced(())
    cash = _initial_cash(found)
    bench = benchmark_series(convention, market, stamps, chosen, cash, sources, benchmark=spec)
    by_at = {point.at: point for point in bench}
    entrants: list[Entrant] = []
    extras: dict[str, tuple[_Account | None, Panel]] = {}
    for account in found:
        aligned = [by_at.get(point.at) for point in account.navs]
        reference = [p for p in aligned if p is not None]
        panel = compute_panel(
            account.navs,
            periods_per_year=factor,
            benchmark=reference if len(reference) == len(aligned) else None,
            convention=convention,
        )
        entrants.append(Entrant(name=account.info.agent_name, panel=panel))
        extras[account.info.agent_name] = (account, panel)
    bench_panel = compute_panel(bench, periods_per_year=factor, convention=convention)
    entrants.append(Entrant(name=spec.label, panel=bench_panel, is_benchmark=True))
    extras[spec.label] = (None, bench_panel)
    currency = found[0].info.currency
    probed = obedience_by_agent(engine, market)
    rows: list[LeaderboardRow] = []
    for ranked in composite_rank(entrants):
        entry, panel = extras[ranked.name]
        rows.append(
            LeaderboardRow(
                ranking=ranked,
                agent=entry.info.agent_name if entry else None,
                account_id=entry.info.account_id if entry else None,
                panel=panel,
                behaviour=entry.behaviour if entry else None,
                final_nav=entry.final_nav if entry else _bench_nav(bench, currency),
                llm=(
                    _llm_usage(
                        *entry.usage, panel.cumulative_return, entry.tool_calls, entry.models
                    )
                    if entry
                    else None
                ),
                long_short=entry.long_short if entry else None,
                injection=probed.get(entry.info.agent_name) if entry else None,
            )
        )
    board = Leaderboard(
        market=market,
        start=window[0],
        end=window[1],
        cadence=chosen,
        periods_per_year=factor,
        benchmark=spec.name,
        currency=currency,
        rows=tuple(rows),
        convention=convention,
        seed_groups=groups_for(
            seed_runs(engine), {name: panel for name, (entry, panel) in extras.items() if entry}
        ),
    )
    return board, found, bench


def _with_conduct(
    engine: Engine,
    found: list[_Account],
    window: _Window,
    sources: Callable[[Sequence[str]], Sequence[ReplaySource]],
    factor: float,
    facts: CycleFacts | None = None,
) -> list[_Account]:
    """The accounts with their behavioural metrics (`ops.evaluation.behaviour_report`), the traded
    symbols priced from `sources(symbols)` as the benchmark is, and their turnover annualised by
    `factor` (the market's periods a year)."""
    conduct = conduct_of(
        engine,
        {account.info.account_id: account.slot_navs for account in found},
        *window,
        kinds={account.info.account_id: account.info.agent_kind for account in found},
        sources=sources,
        facts=None if facts is None else (facts.trades, facts.protocol),
    )
    return [
        replace(
            a,
            behaviour=replace(
                _behaviour_of(a),
                **asdict(conduct[a.info.account_id]),
                annual_turnover=behaviour.annual_turnover(
                    _behaviour_of(a).turnover, len(a.slot_navs), factor
                ),
            ),
        )
        for a in found
    ]


def _behaviour_of(account: _Account) -> Behaviour:
    """The account's behaviour, which a view built without it (`market_view`) cannot give."""
    if account.behaviour is None:
        raise ValueError(f"the view of {account.info.agent_name!r} was built without behaviour")
    return account.behaviour


def _bench_nav(bench: Sequence[NavPoint], currency: str) -> Decimal | None:
    """The benchmark's last value by the money rule: it is a price ratio times cash, not a ledger
    amount, and carries the full precision of a division otherwise."""
    if not bench:
        return None
    return round_money(bench[-1].nav, currency)


def leaderboards(
    engine: Engine,
    markets: Sequence[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    bases: Mapping[str, MarketBasis] | None = None,
    convention: Convention = OPENBELL,
) -> list[Leaderboard]:
    """The leaderboard of each of `markets` (default: every market with accounts), in order,
    measured under `convention`; `bases` are the markets' configured benchmarks and price sources
    (`ops.wiring.market_benchmarks`)."""
    if markets is None:
        present = {info.market for info in queries.accounts(engine)}
        markets = [market for market in MARKETS if market in present]
    return [
        leaderboard(engine, market, start, end, convention=convention, **_basis_of(bases, market))
        for market in markets
    ]


def _basis_of(bases: Mapping[str, MarketBasis] | None, market: str) -> dict[str, Any]:
    """The `benchmark` and `extra_sources` arguments of `market`'s board from `bases`."""
    found = None if bases is None else bases.get(market)
    if found is None:
        return {}
    return {"benchmark": found.benchmark, "extra_sources": found.sources}


def report(
    engine: Engine,
    agent: str,
    market: str,
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    cadence: str | None = None,
    source: ReplaySource | None = None,
    view: MarketView | None = None,
    basis: MarketBasis | None = None,
    convention: Convention = OPENBELL,
) -> AgentReport:
    """The full panel of `agent` in `market`: metrics, rank, behaviour and calibration, measured
    under `convention`.

    `view` is the market's `market_view` over the same window, when the caller has it (then
    `cadence`, `source` and `convention` are those it was built with). Raises `ReportError` when
    the market is unknown or the agent has no account in it.
    """
    _check_market(market)
    if view is None:
        known = [info for info in queries.accounts(engine, market) if info.agent_name == agent]
        if not known:
            raise ReportError(f"agent {agent!r} has no account in market {market!r} in the ledger")
        view = market_view(
            engine,
            market,
            start,
            end,
            cadence=cadence,
            source=source,
            convention=convention,
            **_basis_of(None if basis is None else {market: basis}, market),
        )
    board, bench = view.leaderboard, view.benchmark_navs
    account = next((a for a in view.accounts if a.info.agent_name == agent), None)
    if account is None:
        raise ReportError(f"agent {agent!r} has no account in market {market!r} in the ledger")
    row = next(r for r in board.rows if r.agent == agent)
    confidences = queries.order_confidences(engine, account.info.account_id, start, end)
    forecasts = [
        behaviour.Forecast(confidence=float(c.confidence), outcome=c.outcome)
        for c in confidences
        if c.outcome is not None and Decimal(0) <= c.confidence <= Decimal(1)
    ]
    tokens = queries.tokens_per_cycle(engine, account.info.account_id, start, end)
    stamps = {point.at for point in account.navs}
    return AgentReport(
        account=account.info,
        row=row,
        behaviour=_behaviour_of(account),
        cadence=board.cadence,
        benchmark=board.benchmark,
        forecasts=len(forecasts),
        expected_calibration_error=behaviour.expected_calibration_error(forecasts),
        brier_score=behaviour.brier_score(forecasts),
        tokens_per_decision=statistics.fmean(tokens) if tokens else None,
        navs=account.navs,
        benchmark_navs=tuple(point for point in bench if point.at in stamps),
        rejections_by_reason=queries.rejections_by_reason(
            engine, account.info.account_id, start, end
        ),
        convention=board.convention,
    )
