"""How the de-anonymisation probe scores an attacker's answers, KTD-Fin's way.

This module owns reading an answer (`read_answer`), deciding each target's hit, and the figures
a level reports. An answer names up to five tickers (most likely first), a date, a sector and a
board. The targets (`TARGETS`):

- `ticker_top1`: the first ticker names the symbol (`names_symbol`: its ticker, its code without
  the exchange suffix, or a pair's base coin; case-insensitive); `ticker_top5`: one of the first
  five does (a longer list earns nothing more);
- `date`: the date is within `tolerance` trading days of the last bar's market-local date,
  counted on the market's calendar (`session_distance`: the sessions passed going from the true
  date to the answer; a weekend answer after a Friday is 0 away);
- `sector`: the sector equals the gold one (case and spacing ignored); scored only on trials
  whose symbol the setup's sector map names, skipped without a map;
- `board`: the board names the A-share listing board of the symbol (`board_named`: main,
  ChiNext, STAR or Beijing, in English or Chinese); skipped outside A-shares;
- `joint`: KTD-Fin's strict joint success, `ticker_top5` and `date` both.

As the paper reports them, a rate is over the answered trials only (a call that failed after the
client's retries, or a reply with nothing readable, is left out and counted apart), with a Wilson
score interval (`wilson`, 95 %). Chance is what a uniform guesser would score (per trial; the
level's chance is their mean): 1/N for the top-1 ticker and min(5, N)/N for the top five (N the
symbols a trial may draw), for the date the share of the data's dates within the tolerance of
the true one, 1/S for the sector (S the distinct sectors of the candidates), 1/4 for the board
(four boards), and for the joint score the product of the top-5 and the date chances.
`p_value` is the exact probability of at least that many hits by chance (the Poisson-binomial
tail over the answered trials' chances); a target is recovered when it is below `ALPHA`.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Final

from openbell.markets.rules import Board

#: A level recovers a target when chance alone gives its hits with less than this probability.
ALPHA: Final = 0.01
#: The normal quantile of a two-sided 95 % interval.
Z_95: Final = 1.959963984540054
#: How many tickers of an answer count.
TOP: Final = 5
#: The targets a level scores, in the order they are shown.
TARGETS: Final = ("ticker_top1", "ticker_top5", "date", "sector", "board", "joint")
_OBJECT_RE: Final = re.compile(r"\{[^{}]*\}")
_ISO_DATE_RE: Final = re.compile(r"(\d{4})[-/](\d{1,2})[-/](\d{1,2})")
#: Words naming each board, checked in this order (the first found wins).
_BOARD_WORDS: Final = (
    (Board.CHINEXT, ("chinext", "创业板", "gem")),
    (Board.STAR, ("star", "科创板", "sci-tech")),
    (Board.BEIJING, ("beijing", "bse", "北交所", "北京")),
    (Board.MAIN, ("main", "主板", "sme")),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What the attacker named: up to `TOP` tickers (most likely first), a date, a sector and a
    board, each empty or None when its reply had none."""

    tickers: tuple[str, ...] = ()
    day: date | None = None
    sector: str | None = None
    board: str | None = None

    @property
    def empty(self) -> bool:
        """Whether the reply named nothing the probe can score."""
        return not self.tickers and self.day is None and self.sector is None and self.board is None


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def read_answer(text: str) -> Answer:
    """What a reply names: the last JSON object in it with any of `tickers` (a list; `symbol` or
    `ticker`, one string, are read as a list of one), `date` (`YYYY-MM-DD` or `YYYY/MM/DD`, a time
    after it ignored), `sector` and `board`."""
    keys = {"tickers", "symbol", "ticker", "date", "sector", "board"}
    for raw in reversed(_OBJECT_RE.findall(text)):
        try:
            found = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(found, dict) or not keys & set(found):
            continue
        listed = found.get("tickers")
        named = (
            [item for item in listed if isinstance(item, str)]
            if isinstance(listed, list)
            else [found.get("symbol", found.get("ticker"))]
        )
        tickers = tuple(t for t in (_text(item) for item in named) if t is not None)
        return Answer(
            tickers=tickers[:TOP],
            day=_date_of(found.get("date")),
            sector=_text(found.get("sector")),
            board=_text(found.get("board")),
        )
    return Answer()


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


def board_named(answer: str) -> Board | None:
    """The A-share board `answer` names (`"ChiNext"`, `"STAR Market"`, `"主板"`, `"main"`),
    None when it names none."""
    said = answer.casefold()
    for board, words in _BOARD_WORDS:
        if any(word in said for word in words):
            return board
    return None


def same_sector(answer: str, gold: str) -> bool:
    """Whether `answer` is the sector `gold` (case and inner spacing ignored)."""

    def plain(text: str) -> str:
        return " ".join(text.casefold().replace("&", " and ").split())

    return plain(answer) == plain(gold)


def session_distance(sessions: Sequence[date], truth: date, answer: date) -> int:
    """How many trading days `answer` is from `truth`: the sessions of `sessions` (sorted) passed
    going from one to the other (`truth < s <= answer` forward, `answer <= s < truth` back)."""
    if answer >= truth:
        return bisect.bisect_right(sessions, answer) - bisect.bisect_right(sessions, truth)
    return bisect.bisect_left(sessions, truth) - bisect.bisect_left(sessions, answer)


def wilson(hits: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of `hits` successes in `n` trials (`z`: the normal quantile,
    95 % by default); (0, 1) when `n` is 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= hits <= n:
        raise ValueError(f"hits must be in [0, {n}], got {hits}")
    p = hits / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # At 0 or n hits one end is exactly 0 or 1; rounding would leave it a hair inside.
    low = 0.0 if hits == 0 else max(0.0, centre - half)
    high = 1.0 if hits == n else min(1.0, centre + half)
    return low, high


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovery:
    """How often one target was recovered at one level: `hits` of `trials` answered trials (the
    rate's denominator), its Wilson 95 % interval, against chance."""

    hits: int
    trials: int
    rate: float
    low: float
    high: float
    chance: float
    p_value: float
    shown: bool

    @property
    def above_chance(self) -> bool:
        """Whether chance alone would give these hits with probability below `ALPHA`."""
        return self.p_value < ALPHA

    @property
    def lift(self) -> float:
        """The rate over chance (how many times chance the attacker scored)."""
        return self.rate / self.chance if self.chance > 0 else float("inf")


def recovery(outcomes: Sequence[tuple[bool, float]], *, shown: bool) -> Recovery:
    """The recovery of (hit, chance) outcomes, one per scored trial."""
    n = len(outcomes)
    hits = sum(1 for hit, _ in outcomes if hit)
    low, high = wilson(hits, n)
    chances = [chance for _, chance in outcomes]
    return Recovery(
        hits=hits,
        trials=n,
        rate=hits / n if n else 0.0,
        low=low,
        high=high,
        chance=sum(chances) / n if n else 0.0,
        p_value=tail_probability(chances, hits),
        shown=shown,
    )


def recovery_record(found: Recovery) -> dict[str, object]:
    """`found` as a JSON-ready record."""
    return {
        "hits": found.hits,
        "trials": found.trials,
        "rate": found.rate,
        "wilson_95": [found.low, found.high],
        "chance": found.chance,
        "lift": found.lift,
        "p_value": found.p_value,
        "above_chance": found.above_chance,
        "shown": found.shown,
    }


def sector_chance(sectors: Mapping[str, str], symbols: Sequence[str]) -> float:
    """A uniform guesser's chance of naming a sector: 1 over the candidates' distinct sectors."""
    distinct = {" ".join(sectors[s].casefold().split()) for s in symbols if s in sectors}
    return 1 / len(distinct) if distinct else 0.0
