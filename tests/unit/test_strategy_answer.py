"""The model's answer is parsed once into code and claim; what is wrong is said in words the
model can act on."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from openbell.agents.strategy_code.writer import BadAnswer, parse_answer

CODE = "def strategy(bars):\n    return {}\n"


def text(claim: object, code: object = CODE) -> str:
    return json.dumps({"code": code, "claim": claim})


def test_a_fenced_answer_is_parsed_exactly() -> None:
    claim = {"expected_return": 0.0015, "hit_rate": "0.56", "rationale": " momentum "}
    draft = parse_answer(f"```json\n{text(claim)}\n```")
    assert draft.code == CODE
    assert draft.claim.expected_return == Decimal("0.0015")
    assert draft.claim.hit_rate == Decimal("0.56")
    assert draft.claim.rationale == "momentum"


def test_one_figure_is_enough() -> None:
    draft = parse_answer("Here it is: " + text({"hit_rate": 0.6, "rationale": "r"}))
    assert (draft.claim.expected_return, draft.claim.hit_rate) == (None, Decimal("0.6"))


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ("no json here", "one JSON object"),
        ("{not json}", "not one JSON object"),
        (text({"hit_rate": 0.5, "rationale": "r"}, code=""), '"code" must be'),
        (json.dumps({"code": CODE}), '"claim" must be'),
        (text({"hit_rate": 0.5}), "rationale"),
        (text({"rationale": "r"}), "at least one"),
        (text({"hit_rate": 1.5, "rationale": "r"}), "in [0, 1]"),
        (text({"expected_return": "NaN", "rationale": "r"}), "in [-1, 1]"),
        (text({"expected_return": True, "rationale": "r"}), "must be a number"),
    ],
)
def test_a_bad_answer_says_what_is_wrong(answer: str, words: str) -> None:
    with pytest.raises(BadAnswer, match=words.replace("[", r"\[").replace("]", r"\]")):
        parse_answer(answer)
