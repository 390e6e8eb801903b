"""The rating report: parsing the model's answer (refusals say why), the rule from ratings to
target weights (a parameter table), and the calibration figures."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from openbell.agents.rating.report import (
    SECTIONS,
    BadReport,
    Rating,
    SymbolRating,
    parse_report,
    report_json,
    sections_json,
    stored_model,
    stored_report,
    target_weights,
)
from openbell.ops.evaluation.rating_report import Scored, calibration, spearman

OFFERED = {"AAA", "BBB", "CCC"}


def rated(**ratings: tuple[str, str]) -> list[SymbolRating]:
    return [
        SymbolRating(
            symbol=symbol, rating=Rating(rating), confidence=Decimal(conf), rationale="why"
        )
        for symbol, (rating, conf) in ratings.items()
    ]


def answer(*entries: dict[str, object]) -> str:
    return json.dumps({"ratings": list(entries)})


def entry(symbol: str, rating: object = "buy", confidence: object = 0.5) -> dict[str, object]:
    return {"symbol": symbol, "rating": rating, "confidence": confidence, "rationale": "trend"}


@pytest.mark.parametrize(
    ("ratings", "max_weight", "expected"),
    [
        # Strong buy scores 2, buy 1: shares of the total.
        (
            {"AAA": ("strong_buy", "1"), "BBB": ("buy", "1"), "CCC": ("hold", "1")},
            "1",
            {"AAA": "0.6666", "BBB": "0.3333", "CCC": "0"},
        ),
        # Confidence scales the points.
        (
            {"AAA": ("strong_buy", "0.5"), "BBB": ("buy", "1"), "CCC": ("sell", "1")},
            "1",
            {"AAA": "0.5", "BBB": "0.5", "CCC": "0"},
        ),
        # The cap per name: the rest stays cash.
        (
            {"AAA": ("strong_buy", "1"), "BBB": ("buy", "0.2"), "CCC": ("strong_sell", "1")},
            "0.25",
            {"AAA": "0.25", "BBB": "0.0909", "CCC": "0"},
        ),
        # No positive score: all cash.
        (
            {"AAA": ("hold", "1"), "BBB": ("sell", "0.9"), "CCC": ("buy", "0")},
            "0.5",
            {"AAA": "0", "BBB": "0", "CCC": "0"},
        ),
        # A single buy takes the whole share, up to the cap.
        ({"AAA": ("buy", "0.3")}, "0.4", {"AAA": "0.4"}),
    ],
)
def test_the_rule_maps_ratings_to_weights(
    ratings: dict[str, tuple[str, str]], max_weight: str, expected: dict[str, str]
) -> None:
    weights = target_weights(rated(**ratings), max_weight=Decimal(max_weight))
    assert weights == {symbol: Decimal(weight) for symbol, weight in expected.items()}
    assert sum(weights.values()) <= 1


def test_a_valid_answer_parses_in_symbol_order() -> None:
    text = (
        "```json\n"
        + answer(
            entry("CCC", "Strong Sell", 0.9),
            entry("AAA", "strong-buy", "0.8"),
            entry("BBB", "hold", 0),
        )
        + "\n```"
    )
    found = parse_report(text, OFFERED)
    assert [(r.symbol, r.rating, r.confidence) for r in found] == [
        ("AAA", Rating.STRONG_BUY, Decimal("0.8")),
        ("BBB", Rating.HOLD, Decimal(0)),
        ("CCC", Rating.STRONG_SELL, Decimal("0.9")),
    ]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I think AAA will rise.", "one JSON object"),
        (json.dumps({"ratings": "AAA buy"}), '{"ratings": [...]}'),
        (answer(entry("AAA"), entry("BBB")), "missing: CCC"),
        (answer(entry("AAA"), entry("BBB"), entry("CCC"), entry("AAA")), "rated twice"),
        (answer(entry("AAA"), entry("BBB"), entry("ZZZ")), "'ZZZ' is not an offered symbol"),
        (answer(entry("AAA", "outperform"), entry("BBB"), entry("CCC")), "must be one of"),
        (answer(entry("AAA", confidence=1.5), entry("BBB"), entry("CCC")), "in [0, 1]"),
        (answer(entry("AAA", confidence=True), entry("BBB"), entry("CCC")), "a number"),
        (
            answer(
                {"symbol": "AAA", "rating": "buy", "confidence": 0.5}, entry("BBB"), entry("CCC")
            ),
            "rationale",
        ),
    ],
)
def test_a_bad_answer_is_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(BadReport) as refused:
        parse_report(text, OFFERED)
    assert reason in str(refused.value)


def test_a_stored_report_reads_back() -> None:
    ratings = rated(AAA=("strong_buy", "0.7"), BBB=("sell", "0.4"))
    weights = target_weights(ratings, max_weight=Decimal("0.5"))
    back = stored_report(report_json(ratings, weights))
    assert back == ((ratings[0], Decimal("0.5")), (ratings[1], Decimal(0)))


def test_spearman_with_ties_and_without_spread() -> None:
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # Ties take the average rank: ranks (1.5, 1.5, 3) against (1, 2, 3).
    assert spearman([0, 0, 1], [1, 2, 3]) == pytest.approx(0.8660254)
    assert spearman([1, 1], [1, 2]) is None
    assert spearman([1], [1]) is None


def test_calibration_figures() -> None:
    at = datetime(2025, 1, 1, tzinfo=UTC)

    def one(rating: str, value: float) -> Scored:
        return Scored(symbol="AAA", slot_at=at, rating=Rating(rating), next_return=value)

    found = calibration(
        [
            one("strong_buy", 0.04),
            one("buy", 0.01),
            one("buy", -0.03),
            one("sell", -0.02),
            one("strong_sell", 0.01),
            one("hold", 0.0),
        ]
    )
    assert found["rating_pairs"] == 6
    assert found["rating_buy_count"] == 2
    assert found["rating_buy_mean_return"] == pytest.approx(-0.01)
    assert found["rating_strong_buy_mean_return"] == pytest.approx(0.04)
    assert found["rating_buy_hit_rate"] == pytest.approx(2 / 3, abs=1e-6)
    assert found["rating_sell_hit_rate"] == pytest.approx(0.5)
    assert found["rating_rank_correlation"] == pytest.approx(
        spearman([2, 1, 1, -1, -2, 0], [0.04, 0.01, -0.03, -0.02, 0.01, 0.0]), abs=1e-6
    )


@pytest.mark.parametrize(
    ("ratings", "max_weight", "expected"),
    [
        # Signed: strong buy 2, sell -1, strong sell -2, over the sum of the absolute scores.
        (
            {"AAA": ("strong_buy", "1"), "BBB": ("sell", "1"), "CCC": ("strong_sell", "1")},
            "1",
            {"AAA": "0.4", "BBB": "-0.2", "CCC": "-0.4"},
        ),
        # The cap holds either way; rounding is towards zero: -1/3 is -0.3333.
        (
            {"AAA": ("buy", "1"), "BBB": ("strong_sell", "1"), "CCC": ("hold", "1")},
            "0.5",
            {"AAA": "0.3333", "BBB": "-0.5", "CCC": "0"},
        ),
        # Only sells: the account is all short, its gross exposure 1.
        ({"AAA": ("sell", "0.5"), "BBB": ("sell", "0.5")}, "1", {"AAA": "-0.5", "BBB": "-0.5"}),
        # No score at all: flat.
        ({"AAA": ("hold", "1"), "BBB": ("buy", "0")}, "1", {"AAA": "0", "BBB": "0"}),
    ],
)
def test_the_signed_rule_holds_sells_short(
    ratings: dict[str, tuple[str, str]], max_weight: str, expected: dict[str, str]
) -> None:
    weights = target_weights(rated(**ratings), max_weight=Decimal(max_weight), signed=True)
    assert weights == {symbol: Decimal(weight) for symbol, weight in expected.items()}
    assert sum(abs(weight) for weight in weights.values()) <= 1


def test_the_rating_exposure_is_herculeans() -> None:
    assert [rating.exposure for rating in Rating] == [
        Decimal(-1),
        Decimal("-0.5"),
        Decimal(0),
        Decimal("0.5"),
        Decimal(1),
    ]


def _sections(**overrides: object) -> dict[str, object]:
    found: dict[str, object] = {name: f"the {name}" for name in SECTIONS}
    found.update(overrides)
    return found


def test_a_market_insights_report_parses_with_its_eight_sections() -> None:
    entries = [{**entry(symbol), "report": _sections()} for symbol in sorted(OFFERED)]
    found = parse_report(answer(*entries), OFFERED, with_sections=True)
    assert list(found[0].sections) == list(SECTIONS)
    assert len(SECTIONS) == 8
    assert found[0].sections["risks"] == "the risks"
    back = json.loads(sections_json(found[0]))
    assert back == {"symbol": "AAA", "rating": "buy", "report": _sections()}
    stored = report_json(found, {}, model="scripted-1")
    assert stored_model(stored) == "scripted-1"
    assert [rating.symbol for rating, _ in stored_report(stored)] == sorted(OFFERED)


@pytest.mark.parametrize(
    ("report", "reason"),
    [
        (None, "report must be an object"),
        (_sections(risks=""), "report.risks must be a non-empty text"),
        ({k: v for k, v in _sections().items() if k != "outlook_and_scenarios"}, "lacks"),
        (_sections(appendix="x"), "unknown sections appendix"),
    ],
)
def test_a_report_without_its_sections_is_refused(report: object, reason: str) -> None:
    entries = [{**entry(symbol), "report": report} for symbol in sorted(OFFERED)]
    with pytest.raises(BadReport) as refused:
        parse_report(answer(*entries), OFFERED, with_sections=True)
    assert reason in str(refused.value)
