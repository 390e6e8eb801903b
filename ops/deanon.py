"""The de-anonymisation probe (KTD-Fin): can a model name the stock and the date of a masked series?

This module owns `run_probe`. A probe draws `trials` (symbol, window) pairs from recorded bars,
seeded: a symbol uniformly among the universe's members that have bars of the interval, then the
last bar of its window uniformly among that symbol's bars that have `lookback` bars before them.
Each trial is shown to the model at each masking level exactly as its `get_bars` tool would show
it at the decision time the window's last bar ends: the point-in-time gateway's bars ended by then,
`BarsOut` kept within the tool's result budget, its JSON masked by the level's masker
(`agents.masking.build_masker`: aliases, day labels and, when the level rebases, money in the
trial's secret unit). Each trial stands for its own account (its own aliases, day epoch and money
unit), as if each were a different masked agent. The model is asked, without tools, to name the
instrument's real ticker and the calendar date of the last bar (`QUESTION`); the answer is read
from a JSON object in its reply (`read_answer`).

A symbol is recovered when the answer names it (its ticker, its code without the exchange suffix,
or a pair's base coin; case-insensitive); a date when it is within `tolerance_days` calendar days
of the last bar's market-local date. Chance is what a guesser who draws uniformly would score:
1/N for the symbol (N the symbols a trial may draw), and for the date, per trial, the share of the
data's dates (the market-local dates of the interval's bars) within the tolerance of the true one.
`p_value` is the exact probability of at least that many hits by chance (the Poisson-binomial
tail over the trials' chances); a level recovers a target when `p_value < ALPHA`. A level that
shows the real symbol (bright, date-blind) or the real dates (bright, stock-blind) says so
(`shown`): recovering what is on the screen only shows that the model can read.

The probe reads recorded bars and calls the model; it writes nothing (no ledger, no cache). A call
that fails after the client's retries (`LlmUnavailable`, `LlmRefused`) is a miss counted under
`errors`; an unreadable answer is a miss counted under `unanswered`; a bad key or endpoint
(`LlmAuthError`) stops the probe.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Final
from zoneinfo import ZoneInfo

from openbell.agents.masking import MaskingLevel, build_masker, rebases
from openbell.agents.tools import MAX_RESULT_CHARS, BarsOut
from openbell.markets.domain import Bar
from openbell.markets.errors import LlmRefused, LlmUnavailable
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import MarketRules
from openbell.markets.universes import Universe

#: A level recovers a target when chance alone gives its hits with less than this probability.
ALPHA: Final = 0.01
#: The tool whose result the model is shown.
TOOL: Final = "get_bars"
#: How each market is named to the model (never the universe's name: masking hides it).
MARKET_WORDS: Final[Mapping[str, str]] = {
    "us": "US equities (tickers such as MSFT)",
    "cn": "China A-shares (tickers such as 600000.SH)",
    "crypto": "crypto pairs against USDT (tickers such as XYZ/USDT)",
}
SYSTEM: Final = (
    "You are an expert in financial markets and their history. You are shown a price series as "
    "a trading tool returned it, and asked which instrument it is and when it traded."
)
QUESTION: Final = (
    "The {tool} tool of a trading arena for {market} returned this {interval} price series:\n\n"
    "{shown}\n\n"
    "Which instrument is this, and on which calendar date did its last bar trade? Give the "
    "instrument's real exchange ticker (not an alias) and the date as YYYY-MM-DD, even if you "
    'must guess. Answer with one JSON object and nothing else: {{"symbol": "TICKER", "date": '
    '"YYYY-MM-DD"}}'
)
_EARLIEST: Final = datetime(1900, 1, 1, tzinfo=UTC)
_LATEST: Final = datetime(2200, 1, 1, tzinfo=UTC)
_OBJECT_RE: Final = re.compile(r"\{[^{}]*\}")
_ISO_DATE_RE: Final = re.compile(r"(\d{4})[-/](\d{1,2})[-/](\d{1,2})")

#: Asks the model `messages` (chat-completions messages) and returns the text of its reply.
Ask = Callable[[list[dict[str, Any]]], Awaitable[str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeSetup:
    """What a probe shows: a market's recorded bars of one interval, its universe and rules, and
    how the series are drawn, masked and scored (see the module docstring)."""

    market: str
    universe: Universe
    rules: MarketRules
    source: ReplaySource
    interval: str
    lookback: int = 20
    trials: int = 40
    seed: int = 0
    tolerance_days: int = 3
    masking_seed: int = 0
    rebase: bool | None = None

    def __post_init__(self) -> None:
        if self.lookback < 1 or self.trials < 1 or self.tolerance_days < 0:
            raise ValueError("lookback and trials must be positive, tolerance_days not negative")
        if self.market not in MARKET_WORDS or self.universe.market != self.market:
            raise ValueError(f"universe {self.universe.name} is not of market {self.market}")

    def rebased(self, level: MaskingLevel) -> bool:
        """Whether `level` shows money rebased in this probe (the agent's `rebase_prices`)."""
        return level is not MaskingLevel.BRIGHT and rebases(level, self.rebase)


@dataclass(frozen=True, slots=True, kw_only=True)
class Trial:
    """One drawn series: `symbol`'s bars up to the one ending at `as_of`, whose market-local
    date is `day`; `chance_date` is a uniform guesser's chance of naming `day` within tolerance."""

    number: int
    symbol: str
    as_of: datetime
    day: date
    chance_date: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What the model named: a ticker and a date, each None when its reply had none."""

    symbol: str | None
    day: date | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovery:
    """How often one target (the symbol or the date) was recovered at one level, against chance."""

    hits: int
    trials: int
    rate: float
    chance: float
    p_value: float
    shown: bool

    @property
    def above_chance(self) -> bool:
        """Whether chance alone would give these hits with probability below `ALPHA`."""
        return self.p_value < ALPHA

    @property
    def lift(self) -> float:
        """The rate over chance (how many times chance the model scored)."""
        return self.rate / self.chance if self.chance > 0 else float("inf")


@dataclass(frozen=True, slots=True, kw_only=True)
class LevelResult:
    """The probe's result at one masking level."""

    level: MaskingLevel
    rebased: bool
    symbol: Recovery
    date: Recovery
    unanswered: int
    errors: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeReport:
    """The probe's result: its setup in figures, and one `LevelResult` per level asked."""

    market: str
    interval: str
    lookback: int
    trials: int
    seed: int
    tolerance_days: int
    symbols: int
    days: int
    levels: tuple[LevelResult, ...]


def candidate_symbols(setup: ProbeSetup) -> tuple[str, ...]:
    """The symbols a trial may draw: the universe's members with bars of the interval, sorted."""
    served = setup.source.symbols(setup.interval)
    members = {instrument.symbol for instrument in setup.universe.instruments}
    return tuple(sorted(members & served))


def _series(setup: ProbeSetup, symbol: str) -> tuple[Bar, ...]:
    """Every bar of `symbol` in the interval, oldest first."""
    found = setup.source.bars_between([symbol], setup.interval, _EARLIEST, _LATEST)
    return found.get(symbol, ())


def draw_trials(setup: ProbeSetup) -> tuple[tuple[Trial, ...], int, int]:
    """The probe's trials, drawn with `setup.seed`, with the number of candidate symbols and of
    the data's dates; `ValueError` when no symbol has enough bars."""
    zone = ZoneInfo(setup.rules.timezone)
    series = {symbol: _series(setup, symbol) for symbol in candidate_symbols(setup)}
    symbols = [symbol for symbol, bars in series.items() if len(bars) >= setup.lookback]
    if not symbols:
        raise ValueError(
            f"no {setup.market} symbol has {setup.lookback} {setup.interval} bars to show"
        )
    days = sorted({bar.start_at.astimezone(zone).date() for s in symbols for bar in series[s]})
    ordinals = [day.toordinal() for day in days]
    rng = random.Random(f"openbell-deanon|{setup.seed}")  # noqa: S311  (sampling, not secrets)
    trials = []
    for number in range(1, setup.trials + 1):
        symbol = rng.choice(symbols)
        bars = series[symbol]
        last = bars[rng.randrange(setup.lookback - 1, len(bars))]
        day = last.start_at.astimezone(zone).date()
        near = sum(
            1 for ordinal in ordinals if abs(ordinal - day.toordinal()) <= setup.tolerance_days
        )
        trials.append(
            Trial(
                number=number,
                symbol=symbol,
                as_of=last.end_at,
                day=day,
                chance_date=near / len(ordinals),
            )
        )
    return tuple(trials), len(symbols), len(days)


async def shown_series(
    setup: ProbeSetup, gateway: PointInTimeGateway, trial: Trial, level: MaskingLevel
) -> str:
    """`trial`'s series as the `get_bars` tool shows it to an agent of `level` at `trial.as_of`:
    the gateway's bars ended by then, kept within the result budget, masked by the level."""
    found = await gateway.at(trial.as_of).bars(trial.symbol, setup.interval, setup.lookback)
    bars = tuple(bar for bar in found.bars if bar.end_at <= trial.as_of)
    result = BarsOut.of(as_of=trial.as_of, symbol=trial.symbol, interval=setup.interval, bars=bars)
    masker = build_masker(
        level,
        universe=setup.universe,
        rules=setup.rules,
        account_id=trial.number,
        seed=setup.masking_seed,
        rebase=setup.rebased(level),
    )
    return masker.mask_result(TOOL, result.within(MAX_RESULT_CHARS).model_dump_json())


def question(setup: ProbeSetup, shown: str) -> list[dict[str, Any]]:
    """The messages that ask the model to name the series `shown`."""
    text = QUESTION.format(
        tool=TOOL, market=MARKET_WORDS[setup.market], interval=setup.interval, shown=shown
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


def read_answer(text: str) -> Answer:
    """The ticker and date named in a reply: the last JSON object in it with a `symbol` or a
    `date` (a `YYYY-MM-DD` or `YYYY/MM/DD` date, a time after it ignored)."""
    for raw in reversed(_OBJECT_RE.findall(text)):
        try:
            found = json.loads(raw)
        except ValueError:
            continue
        if isinstance(found, dict) and ("symbol" in found or "date" in found):
            symbol = found.get("symbol")
            return Answer(
                symbol=symbol.strip() if isinstance(symbol, str) and symbol.strip() else None,
                day=_date_of(found.get("date")),
            )
    return Answer(symbol=None, day=None)


def _date_of(value: object) -> date | None:
    match = _ISO_DATE_RE.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        return None
    try:
        return date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return None


def names_symbol(answer: str, symbol: str) -> bool:
    """Whether `answer` names `symbol`: the ticker, its code without an exchange suffix
    (`600519` of `600519.SH`), or a pair's base (`BTC` of `BTC/USDT`, also `BTC-USDT`)."""
    said = answer.strip().upper().replace("-", "/")
    real = symbol.upper()
    names = {real, real.split(".", 1)[0], real.split("/", 1)[0]}
    return said in names


async def run_probe(
    setup: ProbeSetup,
    levels: Sequence[MaskingLevel],
    ask: Ask,
    *,
    concurrency: int = 4,
) -> ProbeReport:
    """Show every trial at every level in `levels` to the model behind `ask` and score its
    answers; see the module docstring. At most `concurrency` questions are open at once."""
    if not levels:
        raise ValueError("the probe needs at least one masking level")
    trials, symbols, days = draw_trials(setup)
    gateway = PointInTimeGateway(setup.source)
    limit = asyncio.Semaphore(max(1, concurrency))

    async def one(trial: Trial, level: MaskingLevel) -> Answer | None:
        shown = await shown_series(setup, gateway, trial, level)
        async with limit:
            try:
                reply = await ask(question(setup, shown))
            except (LlmUnavailable, LlmRefused):
                return None
        return read_answer(reply)

    results = []
    for level in levels:
        answers = await asyncio.gather(*(one(trial, level) for trial in trials))
        results.append(_score(setup, level, trials, answers, symbols))
    return ProbeReport(
        market=setup.market,
        interval=setup.interval,
        lookback=setup.lookback,
        trials=len(trials),
        seed=setup.seed,
        tolerance_days=setup.tolerance_days,
        symbols=symbols,
        days=days,
        levels=tuple(results),
    )


def _score(
    setup: ProbeSetup,
    level: MaskingLevel,
    trials: Sequence[Trial],
    answers: Sequence[Answer | None],
    symbols: int,
) -> LevelResult:
    symbol_hits = date_hits = 0
    for trial, answer in zip(trials, answers, strict=True):
        if answer is None:
            continue
        if answer.symbol is not None and names_symbol(answer.symbol, trial.symbol):
            symbol_hits += 1
        if answer.day is not None and abs((answer.day - trial.day).days) <= setup.tolerance_days:
            date_hits += 1
    symbol_chances = [1 / symbols] * len(trials)
    date_chances = [trial.chance_date for trial in trials]
    return LevelResult(
        level=level,
        rebased=setup.rebased(level),
        symbol=_recovery(symbol_hits, symbol_chances, shown=not level.masks_stocks),
        date=_recovery(date_hits, date_chances, shown=not level.masks_dates),
        unanswered=sum(1 for a in answers if a is not None and a.symbol is None and a.day is None),
        errors=sum(1 for a in answers if a is None),
    )


def _recovery(hits: int, chances: Sequence[float], *, shown: bool) -> Recovery:
    n = len(chances)
    return Recovery(
        hits=hits,
        trials=n,
        rate=hits / n,
        chance=sum(chances) / n,
        p_value=tail_probability(chances, hits),
        shown=shown,
    )


def tail_probability(chances: Sequence[float], hits: int) -> float:
    """P(at least `hits` successes) in independent trials with success chances `chances` (the
    Poisson-binomial upper tail, computed exactly by dynamic programming)."""
    if hits <= 0:
        return 1.0
    if hits > len(chances):
        return 0.0
    dist = [1.0]  # dist[k]: the probability of k successes so far
    for p in chances:
        step = [0.0] * (len(dist) + 1)
        for k, mass in enumerate(dist):
            step[k] += mass * (1 - p)
            step[k + 1] += mass * p
        dist = step
    return min(1.0, sum(dist[hits:]))


def probe_record(report: ProbeReport, **about: str) -> dict[str, Any]:
    """`report` as a JSON-ready record, with `about` (the agent, its model) at its head."""

    def recovery(found: Recovery) -> dict[str, Any]:
        return {
            "hits": found.hits,
            "trials": found.trials,
            "rate": found.rate,
            "chance": found.chance,
            "lift": found.lift,
            "p_value": found.p_value,
            "above_chance": found.above_chance,
            "shown": found.shown,
        }

    return {
        **about,
        "market": report.market,
        "interval": report.interval,
        "lookback": report.lookback,
        "trials": report.trials,
        "seed": report.seed,
        "tolerance_days": report.tolerance_days,
        "symbols": report.symbols,
        "days": report.days,
        "alpha": ALPHA,
        "levels": [
            {
                "level": result.level.value,
                "rebased": result.rebased,
                "symbol": recovery(result.symbol),
                "date": recovery(result.date),
                "unanswered": result.unanswered,
                "errors": result.errors,
            }
            for result in report.levels
        ],
    }
