"""The memorisation probe: does a model "predict" the next bar where it may have read it?

This module owns `run_recall`. A probe draws `dates` questions on each side of a model's
training cutoff from recorded bars, seeded: a (symbol, bar) pair uniformly among the universe's
members' bars that have `lookback` bars up to them and a next bar, `before` when the next bar
ends before the cutoff's end (`ModelCutoff.clean_from`: the answer may be in the training data),
`after` when the last bar shown starts at or after it. A pair whose next close equals the last
close (no direction) is not drawn.

Each question shows the `get_bars` result an agent would be shown at the instant the last bar
ends (point-in-time: the next bar is not in it), twice: `unmasked` (the real symbol, dates and
prices) and `masked` (`agents.masking` at `blinded` with rebased prices: an alias for the
symbol, relabelled days, money in a secret unit, each question its own account's key, as the
de-anonymisation probe shows it, `ops.evaluation.probes.deanon`). The model is asked for the next
bar's direction (its close against the last close: `up` or `down`) and the size of the move (the
absolute return's bucket: `SIZE_BUCKETS`), and answers with a JSON object.

Each of the four cells (before/after x masked/unmasked) reports, over its answered questions,
the direction's and the size's hit rate with its exact (Clopper-Pearson) 95 % interval against
chance, and the exact one-sided binomial p-value of at least that many hits by chance. Chance
is the best constant answer's rate on the cell's own questions (the larger share of ups and
downs; the most frequent size bucket), so a model that always says "up" in a rising market is
not above it. The verdict reads the unmasked direction: "contaminated" when the before-cutoff
interval's low end is above chance and the after-cutoff one's is not (recall, not skill);
"above chance on both sides" when both are (skill, or a cutoff later than stated); else "no sign
of recall".

The probe reads recorded bars and calls the model; it writes nothing. A call that fails after
the client's retries (`LlmUnavailable`, `LlmRefused`) is counted under `errors`, a reply with no
readable direction under `unanswered`; neither is in a rate's denominator.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final, Literal

from openbell.agents.masking import MaskingLevel
from openbell.markets.domain import Bar
from openbell.markets.errors import LlmRefused, LlmUnavailable
from openbell.markets.gateway import PointInTimeGateway
from openbell.ops.config.cutoffs import ModelCutoff
from openbell.ops.evaluation.probes.deanon import (
    MARKET_WORDS,
    Ask,
    ProbeSetup,
    Trial,
    candidate_symbols,
)
from openbell.ops.evaluation.probes.deanon import shown_series as deanon_shown
from openbell.ops.evaluation.stats import binomial_upper_tail, clopper_pearson

Side = Literal["before", "after"]
Masking = Literal["unmasked", "masked"]
SIDES: Final[tuple[Side, ...]] = ("before", "after")
MASKINGS: Final[tuple[Masking, ...]] = ("unmasked", "masked")
#: The size buckets of the absolute return, by upper edge (the last has none).
SIZE_BUCKETS: Final = ("<1%", "1-2%", "2-5%", ">5%")
_SIZE_EDGES: Final = (Decimal("0.01"), Decimal("0.02"), Decimal("0.05"))
#: The level of the intervals and of the verdict.
LEVEL: Final = 0.95

SYSTEM: Final = (
    "You are an expert in financial markets and their history. You are shown what a trading "
    "tool returned, and asked what the market did next."
)
QUESTION: Final = (
    "The get_bars tool of a trading arena for {market} returned this ({interval} bars, oldest "
    "first):\n\n{shown}\n\n"
    "What did the next {interval} bar after the last one shown do? Give its direction, its close "
    'against the last close shown ("up" or "down"), and the size of the move as an absolute '
    'return, one of "<1%", "1-2%", "2-5%" or ">5%", even if you must guess. Answer with one JSON '
    'object and nothing else: {{"direction": "up" or "down", "size": "BUCKET"}}'
)
_JSON_OBJECT: Final = re.compile(r"\{[^{}]*\}")
_EARLIEST: Final = datetime(1900, 1, 1, tzinfo=UTC)
_LATEST: Final = datetime(2100, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """One drawn question: `symbol`'s bars up to the one ending at `as_of`, on `side` of the
    cutoff, with the truth of the next bar."""

    number: int
    symbol: str
    as_of: datetime
    side: Side
    direction: Literal["up", "down"]
    size: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Rate:
    """`hits` of `answered` questions, the rate's Clopper-Pearson interval at `LEVEL`, the
    chance rate and the one-sided binomial p-value of at least `hits` by chance."""

    hits: int
    answered: int
    low: float
    high: float
    chance: float
    p_value: float

    @property
    def rate(self) -> float | None:
        return self.hits / self.answered if self.answered else None

    @property
    def above_chance(self) -> bool:
        """The interval's low end is above chance."""
        return self.answered > 0 and self.low > self.chance


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One (side, masking) cell: its questions, the direction's and the size's rates."""

    side: Side
    masking: Masking
    questions: int
    errors: int
    unanswered: int
    direction: Rate
    size: Rate


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallReport:
    """The probe's four cells and its verdict."""

    market: str
    interval: str
    model: str
    cutoff: ModelCutoff
    lookback: int
    seed: int
    cells: tuple[Cell, ...]

    def cell(self, side: Side, masking: Masking) -> Cell:
        return next(c for c in self.cells if c.side == side and c.masking == masking)

    @property
    def verdict(self) -> str:
        """One line: what the unmasked direction rates say (module docstring)."""
        before = self.cell("before", "unmasked").direction
        after = self.cell("after", "unmasked").direction
        level = f"{LEVEL:.0%}"
        if before.above_chance and not after.above_chance:
            return f"contaminated: before-cutoff hit rate above chance at {level}, after-cutoff not"
        if before.above_chance and after.above_chance:
            return (
                f"above chance on both sides at {level}: skill, or a cutoff later than stated "
                "(not evidence of recall)"
            )
        return f"no sign of recall: the before-cutoff hit rate is not above chance at {level}"


def _bucket(move: Decimal) -> str:
    for edge, name in zip(_SIZE_EDGES, SIZE_BUCKETS, strict=False):
        if move < edge:
            return name
    return SIZE_BUCKETS[-1]


def draw_questions(setup: ProbeSetup, cutoff: ModelCutoff, dates: int) -> tuple[Question, ...]:
    """Up to `dates` questions on each side of `cutoff`, drawn with `setup.seed` (module
    docstring); `ValueError` when a side has none."""
    clean_from = cutoff.clean_from
    pools: dict[Side, list[tuple[str, Bar, Bar]]] = {"before": [], "after": []}
    for symbol in candidate_symbols(setup):
        found = setup.source.bars_between([symbol], setup.interval, _EARLIEST, _LATEST)
        bars = found.get(symbol, ())
        for at in range(setup.lookback - 1, len(bars) - 1):
            last, following = bars[at], bars[at + 1]
            if following.close == last.close or last.close <= 0:
                continue
            if following.end_at <= clean_from:
                pools["before"].append((symbol, last, following))
            elif last.start_at >= clean_from:
                pools["after"].append((symbol, last, following))
    rng = random.Random(f"openbell-recall|{setup.seed}")  # noqa: S311  (sampling, not secrets)
    out: list[Question] = []
    for side in SIDES:
        pool = pools[side]
        if not pool:
            raise ValueError(
                f"no {setup.market} {setup.interval} bar with {setup.lookback} bars before it "
                f"lies {side} the cutoff {cutoff.stated} ({cutoff.model}) in {setup.source.name}"
            )
        for symbol, last, following in rng.sample(pool, min(dates, len(pool))):
            move = (following.close - last.close) / last.close
            out.append(
                Question(
                    number=len(out) + 1,
                    symbol=symbol,
                    as_of=last.end_at,
                    side=side,
                    direction="up" if move > 0 else "down",
                    size=_bucket(abs(move)),
                )
            )
    return tuple(out)


def read_reply(text: str) -> tuple[str | None, str | None]:
    """The (direction, size) of a reply: its last JSON object's, each None when missing or not
    one of the allowed answers (hostile text: only the two known fields, known values)."""
    for candidate in reversed(_JSON_OBJECT.findall(text or "")):
        try:
            found = json.loads(candidate)
        except ValueError:
            continue
        if not isinstance(found, dict):
            continue
        direction = str(found.get("direction", "")).strip().lower()
        size = str(found.get("size", "")).strip().replace(" ", "")
        return (
            direction if direction in ("up", "down") else None,
            size if size in SIZE_BUCKETS else None,
        )
    return None, None


def question_messages(setup: ProbeSetup, shown: str) -> list[dict[str, Any]]:
    """The messages that ask the model about the bars `shown`."""
    text = QUESTION.format(market=MARKET_WORDS[setup.market], interval=setup.interval, shown=shown)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


async def shown_bars(
    setup: ProbeSetup, gateway: PointInTimeGateway, question: Question, masking: Masking
) -> str:
    """The `get_bars` result of `question` as an agent is shown it at its `as_of`: unmasked
    (`bright`) or `blinded` with rebased prices, its own account's key."""
    level = MaskingLevel.BRIGHT if masking == "unmasked" else MaskingLevel.BLINDED
    trial = Trial(
        number=question.number,
        symbol=question.symbol,
        as_of=question.as_of,
        day=question.as_of.date(),
        chance_date=0.0,
    )
    return await deanon_shown(setup, gateway, trial, level)


def _rate(hits: int, answered: int, chance: float) -> Rate:
    low, high = clopper_pearson(hits, answered, LEVEL)
    p_value = binomial_upper_tail(hits, answered, chance) if answered else 1.0
    return Rate(hits=hits, answered=answered, low=low, high=high, chance=chance, p_value=p_value)


def _cell(
    side: Side,
    masking: Masking,
    questions: Sequence[Question],
    replies: Sequence[tuple[str | None, str | None] | None],
) -> Cell:
    answered = [(q, r) for q, r in zip(questions, replies, strict=True) if r and r[0]]
    sized = [(q, r) for q, r in answered if r[1]]
    ups = sum(1 for q, _ in answered if q.direction == "up")
    direction_chance = max(ups, len(answered) - ups) / len(answered) if answered else 0.5
    sizes = Counter(q.size for q, _ in sized)
    size_chance = max(sizes.values()) / len(sized) if sized else 1 / len(SIZE_BUCKETS)
    return Cell(
        side=side,
        masking=masking,
        questions=len(questions),
        errors=sum(1 for r in replies if r is None),
        unanswered=sum(1 for r in replies if r is not None and not r[0]),
        direction=_rate(
            sum(1 for q, r in answered if r[0] == q.direction), len(answered), direction_chance
        ),
        size=_rate(sum(1 for q, r in sized if r[1] == q.size), len(sized), size_chance),
    )


async def run_recall(
    setup: ProbeSetup,
    cutoff: ModelCutoff,
    ask: Ask,
    *,
    model: str,
    dates: int = 40,
    concurrency: int = 4,
) -> RecallReport:
    """Ask `ask` (the model of `model`, whose training cutoff is `cutoff`) every drawn question,
    unmasked and masked, and score the answers (module docstring)."""
    questions = draw_questions(setup, cutoff, dates)
    gateway = PointInTimeGateway(setup.source)
    limit = asyncio.Semaphore(max(1, concurrency))

    async def one(text: str) -> tuple[str | None, str | None] | None:
        async with limit:
            try:
                reply = await ask(question_messages(setup, text))
            except (LlmUnavailable, LlmRefused):
                return None
        return read_reply(reply)

    cells = []
    for masking in MASKINGS:
        shown = [await shown_bars(setup, gateway, q, masking) for q in questions]
        replies = await asyncio.gather(*(one(text) for text in shown))
        for side in SIDES:
            chosen = [i for i, q in enumerate(questions) if q.side == side]
            cells.append(
                _cell(side, masking, [questions[i] for i in chosen], [replies[i] for i in chosen])
            )
    return RecallReport(
        market=setup.market,
        interval=setup.interval,
        model=model,
        cutoff=cutoff,
        lookback=setup.lookback,
        seed=setup.seed,
        cells=tuple(cells),
    )


def _rate_record(rate: Rate) -> dict[str, Any]:
    return {
        "hits": rate.hits,
        "answered": rate.answered,
        "rate": rate.rate,
        "low": rate.low,
        "high": rate.high,
        "chance": rate.chance,
        "p_value": rate.p_value,
        "above_chance": rate.above_chance,
    }


def recall_record(report: RecallReport, **about: str) -> dict[str, Any]:
    """The report as a record (`about`: extra leading keys, e.g. the agent's name)."""
    return {
        **about,
        "market": report.market,
        "interval": report.interval,
        "model": report.model,
        "cutoff": report.cutoff.stated,
        "cutoff_source": report.cutoff.source,
        "clean_from": report.cutoff.clean_from.isoformat(),
        "lookback": report.lookback,
        "seed": report.seed,
        "level": LEVEL,
        "interval_method": "Clopper-Pearson (exact binomial)",
        "chance": "the best constant answer's rate on the cell's questions",
        "verdict": report.verdict,
        "cells": [
            {
                "side": cell.side,
                "masking": cell.masking,
                "questions": cell.questions,
                "errors": cell.errors,
                "unanswered": cell.unanswered,
                "direction": _rate_record(cell.direction),
                "size": _rate_record(cell.size),
            }
            for cell in report.cells
        ],
    }


def recall_lines(report: RecallReport) -> list[str]:
    """The report as lines of text for a terminal."""

    def shown(rate: Rate) -> str:
        if not rate.answered:
            return "-"
        return (
            f"{rate.hits}/{rate.answered} = {rate.rate:.0%} [{rate.low:.0%}, {rate.high:.0%}] "
            f"vs chance {rate.chance:.0%} (p={rate.p_value:.3g})"
        )

    lines = [
        (
            f"recall probe: {report.model} ({report.market}, {report.interval} bars), cutoff "
            f"{report.cutoff.stated} ({report.cutoff.source})"
        ),
        f"{'cell':<18} {'direction':<52} size",
    ]
    for cell in report.cells:
        name = f"{cell.side}/{cell.masking}"
        lines.append(f"{name:<18} {shown(cell.direction):<52} {shown(cell.size)}")
        if cell.errors or cell.unanswered:
            lines.append(f"{'':<18} ({cell.errors} errors, {cell.unanswered} unanswered)")
    lines.append(f"{LEVEL:.0%} Clopper-Pearson intervals; verdict: {report.verdict}")
    return lines
