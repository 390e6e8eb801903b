"""The de-anonymisation probe (KTD-Fin): can attackers name the stock, date, sector and board of
a masked payload?

This module owns `run_probes`. A probe draws `trials` (symbol, window) pairs from recorded bars,
seeded: a symbol uniformly among the universe's members that have bars of the interval, then the
last bar of its window uniformly among that symbol's bars that have `lookback` bars before them.
Each trial is shown at each masking level exactly as a tool would show it to an agent at the
decision time the window's last bar ends, masked by the level's masker
(`agents.masking.build_masker`: aliases, day labels and, when the level rebases, money in the
trial's secret unit). The payload is the setup's choice
(`ops.evaluation.probes.deanon_payloads.PAYLOADS`): the `get_bars`, `get_quote` or `get_news`
result, or KTD-Fin's own, its three research tools' results. Each trial stands for its own account
(its own aliases, day epoch and money unit), as if each were a different masked agent. Every
attacker is shown the same trials.

Each attacker (any configured model, by name) is asked, without tools, for up to five tickers,
the calendar date of the last bar, the sector and the A-share board (`QUESTION`), and answers
with a JSON object; `ops.evaluation.probes.deanon_scoring` reads and scores it: top-1 and top-5
ticker hits, the date within `tolerance` trading days (the market's calendar), sector and board
hits, KTD-Fin's joint success (top-5 ticker and date), each rate over the answered trials with a
Wilson 95 % interval, against chance. A level that shows the real symbol (bright, date-blind) or the
real dates (bright, stock-blind), or a payload with a board field, says so (`shown`): recovering
what is on the screen only shows that the model can read.

The probe reads recorded bars and calls the attackers; it writes nothing (no ledger, no cache). A
call that fails after the client's retries (`LlmUnavailable`, `LlmRefused`) is counted under
`errors`, a reply with nothing readable under `unanswered`; neither is in a rate's denominator. A
bad key or endpoint (`LlmAuthError`) stops the probe.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo

from openbell.agents.masking import MaskingLevel, build_masker, rebases
from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Bar
from openbell.markets.errors import LlmRefused, LlmUnavailable
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import Board, MarketRules, board_of
from openbell.markets.universes import Universe
from openbell.ops.evaluation.probes.deanon_payloads import PAYLOADS, shown_payload
from openbell.ops.evaluation.probes.deanon_scoring import (
    ALPHA,
    TARGETS,
    TOP,
    Answer,
    Recovery,
    board_named,
    names_symbol,
    read_answer,
    recovery,
    recovery_record,
    same_sector,
    sector_chance,
    session_distance,
)

#: How each market is named to the model (never the universe's name: masking hides it).
MARKET_WORDS: Final[Mapping[str, str]] = {
    "us": "US equities (tickers such as MSFT)",
    "cn": "China A-shares (tickers such as 600000.SH)",
    "crypto": "crypto pairs against USDT (tickers such as XYZ/USDT)",
}
SYSTEM: Final = (
    "You are an expert in financial markets and their history. You are shown what a trading "
    "tool returned, and asked which instrument it is about and when."
)
QUESTION: Final = (
    "The {tool} tool of a trading arena for {market} returned this ({interval} data):\n\n"
    "{shown}\n\n"
    "Which instrument is this, on which calendar date was the last of it observed, in which "
    "sector is the company, and on which listing board does it trade (for A-shares: main, "
    "ChiNext, STAR or Beijing)? Give up to five real exchange tickers (not aliases), most likely "
    "first, and the date as YYYY-MM-DD, even if you must guess. Answer with one JSON object and "
    'nothing else: {{"tickers": ["TICKER", ...], "date": "YYYY-MM-DD", "sector": "SECTOR", '
    '"board": "BOARD"}}'
)
#: Why a target is not scored.
NO_SECTORS: Final = "no sector map given (--sectors)"
NO_BOARDS: Final = "only A-shares have listing boards"
_EARLIEST: Final = datetime(1900, 1, 1, tzinfo=UTC)
_LATEST: Final = datetime(2200, 1, 1, tzinfo=UTC)

#: Asks the model `messages` (chat-completions messages) and returns the text of its reply.
Ask = Callable[[list[dict[str, Any]]], Awaitable[str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeSetup:
    """What a probe shows: a market's recorded bars of one interval, its universe and rules, and
    how the trials are drawn, shown (`payload`), masked and scored (`tolerance` trading days for
    the date; `sectors`, the gold sector of each symbol, where known). See the module
    docstring."""

    market: str
    universe: Universe
    rules: MarketRules
    source: ReplaySource
    interval: str
    lookback: int = 20
    trials: int = 40
    seed: int = 0
    tolerance: int = 7
    masking_seed: int = 0
    rebase: bool | None = None
    payload: str = "bars"
    news_lookback: timedelta = timedelta(days=7)
    sectors: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.lookback < 1 or self.trials < 1 or self.tolerance < 0:
            raise ValueError("lookback and trials must be positive, tolerance not negative")
        if self.market not in MARKET_WORDS or self.universe.market != self.market:
            raise ValueError(f"universe {self.universe.name} is not of market {self.market}")
        if self.payload not in PAYLOADS:
            raise ValueError(f"payload must be one of {', '.join(PAYLOADS)}, got {self.payload}")
        if self.news_lookback <= timedelta(0):
            raise ValueError("news_lookback must be positive")

    @property
    def tool(self) -> str:
        """The tool whose result the payload is (KTD-Fin's three, for `ktd`)."""
        return PAYLOADS[self.payload]

    def rebased(self, level: MaskingLevel) -> bool:
        """Whether `level` shows money rebased in this probe (the agent's `rebase_prices`)."""
        return level is not MaskingLevel.BRIGHT and rebases(level, self.rebase)


@dataclass(frozen=True, slots=True, kw_only=True)
class Trial:
    """One drawn series: `symbol`'s bars up to the one ending at `as_of`, whose market-local
    date is `day`; `chance_date` is a uniform guesser's chance of naming `day` within the
    tolerance."""

    number: int
    symbol: str
    as_of: datetime
    day: date
    chance_date: float


@dataclass(frozen=True, slots=True, kw_only=True)
class LevelResult:
    """One attacker's result at one masking level: a `Recovery` per scored target (`TARGETS`),
    the targets not scored with why, and the trials left out of the rates."""

    level: MaskingLevel
    rebased: bool
    targets: Mapping[str, Recovery]
    skipped: Mapping[str, str]
    unanswered: int
    errors: int

    @property
    def symbol(self) -> Recovery:
        """The top-1 ticker's recovery."""
        return self.targets["ticker_top1"]

    @property
    def date(self) -> Recovery:
        """The date's recovery (within the tolerance, in trading days)."""
        return self.targets["date"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeReport:
    """One attacker's result: the probe's setup in figures, and one `LevelResult` per level."""

    attacker: str
    market: str
    interval: str
    payload: str
    lookback: int
    trials: int
    seed: int
    tolerance: int
    symbols: int
    days: int
    levels: tuple[LevelResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Drawn:
    """The trials and what scoring them needs: the candidates, the data's dates, the sessions."""

    trials: tuple[Trial, ...]
    symbols: tuple[str, ...]
    days: int
    sessions: tuple[date, ...]


def candidate_symbols(setup: ProbeSetup) -> tuple[str, ...]:
    """The symbols a trial may draw: the universe's members with bars of the interval, sorted."""
    served = setup.source.symbols(setup.interval)
    members = {instrument.symbol for instrument in setup.universe.instruments}
    return tuple(sorted(members & served))


def _series(setup: ProbeSetup, symbol: str) -> tuple[Bar, ...]:
    """Every bar of `symbol` in the interval, oldest first."""
    found = setup.source.bars_between([symbol], setup.interval, _EARLIEST, _LATEST)
    return found.get(symbol, ())


def _sessions(setup: ProbeSetup, days: Sequence[date]) -> tuple[date, ...]:
    """The market's sessions around the data's dates (a year either side), sorted."""
    calendar = calendar_for(setup.rules.calendar_id)
    first = max(calendar.first_known_session, days[0] - timedelta(days=366))
    last = min(calendar.last_known_session, days[-1] + timedelta(days=366))
    return calendar.sessions_between(first, last)


def _draw(setup: ProbeSetup) -> _Drawn:
    zone = ZoneInfo(setup.rules.timezone)
    series = {symbol: _series(setup, symbol) for symbol in candidate_symbols(setup)}
    symbols = [symbol for symbol, bars in series.items() if len(bars) >= setup.lookback]
    if not symbols:
        raise ValueError(
            f"no {setup.market} symbol has {setup.lookback} {setup.interval} bars to show"
        )
    days = sorted({bar.start_at.astimezone(zone).date() for s in symbols for bar in series[s]})
    sessions = _sessions(setup, days)
    rng = random.Random(f"openbell-deanon|{setup.seed}")  # noqa: S311  (sampling, not secrets)
    trials = []
    for number in range(1, setup.trials + 1):
        symbol = rng.choice(symbols)
        bars = series[symbol]
        last = bars[rng.randrange(setup.lookback - 1, len(bars))]
        day = last.start_at.astimezone(zone).date()
        near = sum(
            1 for other in days if abs(session_distance(sessions, day, other)) <= setup.tolerance
        )
        trials.append(
            Trial(
                number=number,
                symbol=symbol,
                as_of=last.end_at,
                day=day,
                chance_date=near / len(days),
            )
        )
    return _Drawn(trials=tuple(trials), symbols=tuple(symbols), days=len(days), sessions=sessions)


def draw_trials(setup: ProbeSetup) -> tuple[tuple[Trial, ...], int, int]:
    """The probe's trials, drawn with `setup.seed`, with the number of candidate symbols and of
    the data's dates; `ValueError` when no symbol has enough bars."""
    drawn = _draw(setup)
    return drawn.trials, len(drawn.symbols), drawn.days


async def shown_series(
    setup: ProbeSetup, gateway: PointInTimeGateway, trial: Trial, level: MaskingLevel
) -> str:
    """`trial`'s payload as its tool shows it to an agent of `level` at `trial.as_of`, masked by
    the level (see the module docstring)."""
    masker = build_masker(
        level,
        universe=setup.universe,
        rules=setup.rules,
        account_id=trial.number,
        seed=setup.masking_seed,
        rebase=setup.rebased(level),
    )
    return await shown_payload(setup, gateway, trial, masker)


def question(setup: ProbeSetup, shown: str) -> list[dict[str, Any]]:
    """The messages that ask an attacker to name the payload `shown`."""
    text = QUESTION.format(
        tool=setup.tool, market=MARKET_WORDS[setup.market], interval=setup.interval, shown=shown
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


async def run_probes(
    setup: ProbeSetup,
    levels: Sequence[MaskingLevel],
    attackers: Mapping[str, Ask],
    *,
    concurrency: int = 4,
) -> tuple[ProbeReport, ...]:
    """Show every trial at every level in `levels` to each attacker (name -> its `Ask`) and score
    the answers, one report per attacker; see the module docstring. At most `concurrency`
    questions are open at once."""
    if not levels:
        raise ValueError("the probe needs at least one masking level")
    if not attackers:
        raise ValueError("the probe needs at least one attacker")
    drawn = _draw(setup)
    gateway = PointInTimeGateway(setup.source)
    limit = asyncio.Semaphore(max(1, concurrency))
    shown = {
        level: [await shown_series(setup, gateway, trial, level) for trial in drawn.trials]
        for level in levels
    }

    async def one(ask: Ask, text: str) -> Answer | None:
        async with limit:
            try:
                reply = await ask(question(setup, text))
            except (LlmUnavailable, LlmRefused):
                return None
        return read_answer(reply)

    reports = []
    for name, ask in attackers.items():
        results = []
        for level in levels:
            answers = await asyncio.gather(*(one(ask, text) for text in shown[level]))
            results.append(_score(setup, level, drawn, shown[level], answers))
        reports.append(
            ProbeReport(
                attacker=name,
                market=setup.market,
                interval=setup.interval,
                payload=setup.payload,
                lookback=setup.lookback,
                trials=len(drawn.trials),
                seed=setup.seed,
                tolerance=setup.tolerance,
                symbols=len(drawn.symbols),
                days=drawn.days,
                levels=tuple(results),
            )
        )
    return tuple(reports)


async def run_probe(
    setup: ProbeSetup, levels: Sequence[MaskingLevel], ask: Ask, *, concurrency: int = 4
) -> ProbeReport:
    """`run_probes` with one attacker, named `model`."""
    (report,) = await run_probes(setup, levels, {"model": ask}, concurrency=concurrency)
    return report


def _score(
    setup: ProbeSetup,
    level: MaskingLevel,
    drawn: _Drawn,
    shown: Sequence[str],
    answers: Sequence[Answer | None],
) -> LevelResult:
    count = len(drawn.symbols)
    top1, top5 = 1 / count, min(TOP, count) / count
    outcomes: dict[str, list[tuple[bool, float]]] = {name: [] for name in TARGETS}
    sector_odds = sector_chance(setup.sectors, drawn.symbols)
    boards = setup.rules.price_limits is not None
    for trial, answer in zip(drawn.trials, answers, strict=True):
        if answer is None or answer.empty:
            continue
        named = [names_symbol(ticker, trial.symbol) for ticker in answer.tickers]
        in_top5 = any(named)
        on_date = answer.day is not None and (
            abs(session_distance(drawn.sessions, trial.day, answer.day)) <= setup.tolerance
        )
        outcomes["ticker_top1"].append((bool(named) and named[0], top1))
        outcomes["ticker_top5"].append((in_top5, top5))
        outcomes["date"].append((on_date, trial.chance_date))
        outcomes["joint"].append((in_top5 and on_date, top5 * trial.chance_date))
        gold = setup.sectors.get(trial.symbol)
        if gold is not None:
            said = answer.sector
            outcomes["sector"].append((said is not None and same_sector(said, gold), sector_odds))
        if boards:
            board = board_named(answer.board) if answer.board is not None else None
            outcomes["board"].append((board is board_of(trial.symbol), 1 / len(Board)))
    skipped: dict[str, str] = {}
    if not setup.sectors:
        skipped["sector"] = NO_SECTORS
    if not boards:
        skipped["board"] = NO_BOARDS
    board_shown = not level.masks_stocks or any('"board"' in text for text in shown)
    shows = {
        "ticker_top1": not level.masks_stocks,
        "ticker_top5": not level.masks_stocks,
        "date": not level.masks_dates,
        "sector": False,
        "board": board_shown,
        "joint": not level.masks_stocks and not level.masks_dates,
    }
    return LevelResult(
        level=level,
        rebased=setup.rebased(level),
        targets={
            name: recovery(outcomes[name], shown=shows[name])
            for name in TARGETS
            if name not in skipped
        },
        skipped=skipped,
        unanswered=sum(1 for a in answers if a is not None and a.empty),
        errors=sum(1 for a in answers if a is None),
    )


def probe_record(reports: Sequence[ProbeReport], **about: str) -> dict[str, Any]:
    """`reports` (one per attacker, of one probe) as a JSON-ready record, with `about` (the
    attackers' models by name, say) at its head."""
    if not reports:
        raise ValueError("no report to record")
    first = reports[0]
    return {
        **about,
        "market": first.market,
        "interval": first.interval,
        "payload": first.payload,
        "lookback": first.lookback,
        "trials": first.trials,
        "seed": first.seed,
        "tolerance_trading_days": first.tolerance,
        "symbols": first.symbols,
        "days": first.days,
        "alpha": ALPHA,
        "attackers": [
            {
                "attacker": report.attacker,
                "levels": [
                    {
                        "level": result.level.value,
                        "rebased": result.rebased,
                        **{name: recovery_record(found) for name, found in result.targets.items()},
                        "skipped": dict(result.skipped),
                        "answered": result.symbol.trials,
                        "unanswered": result.unanswered,
                        "errors": result.errors,
                    }
                    for result in report.levels
                ],
            }
            for report in reports
        ],
    }
