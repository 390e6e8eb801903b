"""A rating report: its five-step scale, how a model's answer is parsed into it, and the rule that
turns it into target weights.

This module owns the report's shape and `target_weights`. The model answers one JSON object
`{"ratings": [{"symbol": ..., "rating": ..., "confidence": ..., "rationale": ...}, ...]}` with
exactly one entry per offered symbol; `rating` is one of `strong_sell`, `sell`, `hold`, `buy`,
`strong_buy` (spaces and hyphens are read as underscores), `confidence` a number in [0, 1] and
`rationale` a short non-empty text (cut to 300 characters). A Market Insights report
(`with_sections`) also has, per entry, `"report"`: an object with Herculean's eight sections
(`SECTIONS`), each a non-empty text (cut to 1,500 characters). `parse_report` raises `BadReport`
saying what is wrong (the agent sends that back to the model).

The rule, `target_weights`: each rating scores points, times its confidence. Long-only (an account
that may not short): strong buy 2, buy 1, hold, sell and strong sell 0; each symbol's weight is its
share of the total score, capped at `max_weight`, rounded down to 4 decimals; the weights therefore
sum to at most 1 and the rest stays cash. With no positive score the report is all cash. A held
symbol with no weight (any hold, sell or strong sell) is sold to 0 by the agent. Signed (`signed`,
an account allowed to short): strong buy 2, buy 1, hold 0, sell -1, strong sell -2; each symbol's
weight is its score over the total of the scores' absolute values, capped at `max_weight` either
way and rounded towards zero to 4 decimals: the sells and strong sells are held short, the gross
exposure is at most 1, and a hold is closed, long or short.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, Decimal, InvalidOperation
from typing import Any, Final

from openbell.agents.model_json import json_object_in

_MAX_RATIONALE_CHARS: Final = 300
_MAX_SECTION_CHARS: Final = 1500
_WEIGHT_STEP: Final = Decimal("0.0001")
#: Herculean's eight sections of a Market Insights report, in the paper's order, with what each
#: covers (the prompt shows them).
SECTIONS: Final = {
    "executive_summary": "the executive summary",
    "thesis_and_rating": "the investment thesis and the rating",
    "price_and_technicals": "price performance and technical indicators",
    "news_and_catalysts": "news and catalysts",
    "earnings_and_filings": "earnings and filings",
    "sector_relative": "performance relative to the sector (the other offered symbols)",
    "risks": "the risks",
    "outlook_and_scenarios": "the outlook and its scenarios",
}


class Rating(enum.StrEnum):
    """The five steps of the scale, weakest first."""

    STRONG_SELL = "strong_sell"
    SELL = "sell"
    HOLD = "hold"
    BUY = "buy"
    STRONG_BUY = "strong_buy"

    @property
    def step(self) -> int:
        """The step on the scale: -2 (strong sell) .. 2 (strong buy)."""
        return list(Rating).index(self) - 2

    @property
    def exposure(self) -> Decimal:
        """Herculean's rating exposure: strong buy 1, buy 0.5, hold 0, sell -0.5, strong sell -1."""
        return Decimal(self.step) / 2

    @property
    def points(self) -> int:
        """The rule's points (long-only): strong buy 2, buy 1, the others 0."""
        return max(self.step, 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class SymbolRating:
    """One symbol's rating, the model's confidence in it (in [0, 1]) and why."""

    symbol: str
    rating: Rating
    confidence: Decimal
    rationale: str
    #: A Market Insights report's sections (`SECTIONS`, in order); empty for a plain rating.
    sections: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not Decimal(0) <= self.confidence <= Decimal(1):
            raise ValueError(f"confidence is in [0, 1], got {self.confidence}")
        if self.sections and list(self.sections) != list(SECTIONS):
            raise ValueError(f"a report has the sections {', '.join(SECTIONS)}, in order")


class BadReport(ValueError):
    """The answer is not a valid rating report; the message says why (shown to the model)."""


def parse_report(
    text: str, offered: Collection[str], *, with_sections: bool = False
) -> tuple[SymbolRating, ...]:
    """The ratings in the model's answer `text`, one per symbol of `offered`, in symbol order,
    each with its report's sections when `with_sections`; `BadReport` saying what is wrong."""
    try:
        found = json_object_in(text)
    except ValueError as exc:
        raise BadReport(f"the answer is not one JSON object: {exc}") from None
    if not isinstance(found, dict) or not isinstance(found.get("ratings"), list):
        raise BadReport('answer with one JSON object {"ratings": [...]}')
    ratings: dict[str, SymbolRating] = {}
    for index, entry in enumerate(found["ratings"]):
        rating = _entry(entry, index, with_sections=with_sections)
        if rating.symbol not in offered:
            raise BadReport(f"ratings[{index}]: {rating.symbol!r} is not an offered symbol")
        if rating.symbol in ratings:
            raise BadReport(f"ratings[{index}]: {rating.symbol!r} is rated twice")
        ratings[rating.symbol] = rating
    missing = sorted(set(offered) - set(ratings))
    if missing:
        raise BadReport(f"rate every offered symbol; missing: {', '.join(missing)}")
    return tuple(ratings[symbol] for symbol in sorted(ratings))


def _entry(entry: object, index: int, *, with_sections: bool) -> SymbolRating:
    where = f"ratings[{index}]"
    if not isinstance(entry, dict):
        raise BadReport(f"{where} must be an object with symbol, rating, confidence, rationale")
    symbol = entry.get("symbol")
    if not isinstance(symbol, str) or not symbol:
        raise BadReport(f"{where}.symbol must be the symbol, as a string")
    rating = _rating(entry.get("rating"), where)
    confidence = _confidence(entry.get("confidence"), where)
    rationale = entry.get("rationale")
    if not isinstance(rationale, str) or not rationale.strip():
        raise BadReport(f"{where}.rationale must say briefly why")
    return SymbolRating(
        symbol=symbol,
        rating=rating,
        confidence=confidence,
        rationale=rationale.strip()[:_MAX_RATIONALE_CHARS],
        sections=_sections(entry.get("report"), where) if with_sections else {},
    )


def _sections(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise BadReport(f"{where}.report must be an object with the sections {', '.join(SECTIONS)}")
    missing = [name for name in SECTIONS if name not in value]
    if missing:
        raise BadReport(f"{where}.report lacks the sections {', '.join(missing)}")
    unknown = sorted(set(value) - set(SECTIONS))
    if unknown:
        raise BadReport(f"{where}.report has unknown sections {', '.join(map(str, unknown))}")
    out: dict[str, str] = {}
    for name in SECTIONS:
        text = value[name]
        if not isinstance(text, str) or not text.strip():
            raise BadReport(f"{where}.report.{name} must be a non-empty text")
        out[name] = text.strip()[:_MAX_SECTION_CHARS]
    return out


def _rating(value: object, where: str) -> Rating:
    text = re.sub(r"[\s-]+", "_", value.strip().lower()) if isinstance(value, str) else ""
    try:
        return Rating(text)
    except ValueError:
        steps = ", ".join(rating.value for rating in Rating)
        raise BadReport(f"{where}.rating must be one of {steps}, got {value!r}") from None


def _confidence(value: object, where: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise BadReport(f"{where}.confidence must be a number in [0, 1]")
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise BadReport(f"{where}.confidence must be a number in [0, 1]") from None
    if not number.is_finite() or not 0 <= number <= 1:
        raise BadReport(f"{where}.confidence must be in [0, 1], got {value}")
    return number


def target_weights(
    ratings: Sequence[SymbolRating], *, max_weight: Decimal, signed: bool = False
) -> dict[str, Decimal]:
    """Each rated symbol's target weight under the rule of the module docstring: long-only, or
    `signed` (sells and strong sells held short)."""
    if not Decimal(0) < max_weight <= Decimal(1):
        raise ValueError(f"max_weight is in (0, 1], got {max_weight}")
    scores = {
        rating.symbol: (rating.rating.step if signed else rating.rating.points) * rating.confidence
        for rating in ratings
    }
    total = sum((abs(score) for score in scores.values()), Decimal(0))
    if total <= 0:
        return dict.fromkeys(sorted(scores), Decimal(0))
    return {
        symbol: max(-max_weight, min(max_weight, score / total)).quantize(
            _WEIGHT_STEP, rounding=ROUND_DOWN
        )
        for symbol, score in sorted(scores.items())
    }


def report_json(
    ratings: Sequence[SymbolRating], weights: Mapping[str, Decimal], *, model: str | None = None
) -> str:
    """The report as stored in the cycle's trace (`ratings` row): each rating with its weight
    (and the model that wrote it, when given: the regression's backbone). A Market Insights
    report's sections are stored in rows of their own (`sections_json`)."""
    head: dict[str, Any] = {} if model is None else {"model": model}
    return json.dumps(
        {
            **head,
            "ratings": [
                {
                    "symbol": rating.symbol,
                    "rating": rating.rating.value,
                    "confidence": str(rating.confidence),
                    "weight": str(weights.get(rating.symbol, Decimal(0))),
                    "rationale": rating.rationale,
                }
                for rating in ratings
            ],
        }
    )


def sections_json(rating: SymbolRating) -> str:
    """One symbol's Market Insights report as stored in the cycle's trace (`insight_report`
    row): its symbol, rating and sections."""
    return json.dumps(
        {"symbol": rating.symbol, "rating": rating.rating.value, "report": dict(rating.sections)}
    )


def stored_model(text: str) -> str | None:
    """The model named in a stored `ratings` row, if it names one."""
    found: dict[str, Any] = json.loads(text)
    model = found.get("model")
    return model if isinstance(model, str) else None


def stored_report(text: str) -> tuple[tuple[SymbolRating, Decimal], ...]:
    """The ratings and weights of a stored `ratings` row (`report_json`'s text)."""
    found: dict[str, Any] = json.loads(text)
    return tuple(
        (
            SymbolRating(
                symbol=entry["symbol"],
                rating=Rating(entry["rating"]),
                confidence=Decimal(entry["confidence"]),
                rationale=entry["rationale"],
            ),
            Decimal(entry["weight"]),
        )
        for entry in found["ratings"]
    )
