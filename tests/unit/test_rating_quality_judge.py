"""The judge of Market Insights reports: its verdict parsed (refusals say why), the score of
Herculean's formula `q_d = 10 * met / items` and its mean over the three dimensions worked out by
hand, the stored verdict read back exactly, and a scripted judge at the HTTP boundary that answers
badly once, then well, or not at all."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal

import httpx
import pytest

from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.rating.quality_judge import (
    JUDGE_PROMPT,
    RUBRIC,
    BadVerdict,
    ReportJudge,
    parse_verdict,
    stored_verdict,
    verdict_json,
)
from openbell.agents.rating.report import SECTIONS, Rating, SymbolRating
from openbell_testkit.llm import ScriptedModel, completion


def marks(accuracy: int, fidelity: int, reasoning: int) -> dict[str, object]:
    """A verdict meeting the first `n` items of each dimension."""
    counts = {"content_accuracy": accuracy, "evidence_fidelity": fidelity}
    counts["reasoning_quality"] = reasoning
    found: dict[str, object] = {
        dimension: [i < counts[dimension] for i in range(len(items))]
        for dimension, items in RUBRIC.items()
    }
    found["rationale"] = "checked"
    return found


def test_the_score_is_herculeans_formula() -> None:
    verdict = parse_verdict(json.dumps(marks(4, 2, 1)), "judge-1")
    # q = 10 * 4/4, 10 * 2/4, 10 * 1/4 = 10, 5, 2.5; Q = 17.5 / 3.
    assert verdict.dimension_score("content_accuracy") == Decimal(10)
    assert verdict.dimension_score("evidence_fidelity") == Decimal(5)
    assert verdict.dimension_score("reasoning_quality") == Decimal("2.5")
    assert verdict.quality == Decimal("17.5") / 3
    back = stored_verdict(verdict_json("AAA", verdict))
    assert (back.symbol, back.judge_model, back.error) == ("AAA", "judge-1", None)
    assert back.counts == {
        "content_accuracy": (4, 4),
        "evidence_fidelity": (2, 4),
        "reasoning_quality": (1, 4),
    }
    assert back.quality == verdict.quality


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("looks fine to me", "one JSON object"),
        (json.dumps({**marks(1, 1, 1), "content_accuracy": [True]}), "list of 4 booleans"),
        (json.dumps({**marks(1, 1, 1), "evidence_fidelity": [1, 0, 0, 0]}), "booleans"),
        (json.dumps({**marks(1, 1, 1), "rationale": " "}), "rationale"),
    ],
)
def test_a_bad_verdict_is_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(BadVerdict) as refused:
        parse_verdict(text, "judge-1")
    assert reason in str(refused.value)


def _rated() -> SymbolRating:
    return SymbolRating(
        symbol="AAA",
        rating=Rating.BUY,
        confidence=Decimal("0.6"),
        rationale="rising",
        sections={name: f"{name} text" for name in SECTIONS},
    )


def _judge(model: ScriptedModel) -> ReportJudge:
    return ReportJudge(
        ChatClient(
            ClientConfig(base_url="https://judge.test/v1", model="judge-1", max_retries=0),
            http=model.client(),
        )
    )


def test_a_judge_that_answers_badly_once_is_asked_again() -> None:
    model = ScriptedModel(
        [
            completion("all good", usage=(300, 10)),
            completion(json.dumps(marks(3, 4, 2)), usage=(350, 40)),
        ]
    )
    verdict = asyncio.run(_judge(model).judge(evidence="AAA: 1 2 3", rating=_rated()))
    assert verdict.error is None
    assert verdict.quality == (Decimal("7.5") + 10 + 5) / 3
    assert (verdict.tokens_in, verdict.tokens_out) == (650, 50)
    first = model.requests[0]["messages"]
    assert first[0]["content"] == JUDGE_PROMPT
    assert "AAA: 1 2 3" in first[1]["content"]
    assert "Committed rating: buy" in first[1]["content"]
    assert "risks text" in first[1]["content"]
    assert "Refused: answer with one JSON object" in model.requests[1]["messages"][-1]["content"]


def test_a_judge_that_never_answers_gives_a_verdict_with_its_error() -> None:
    model = ScriptedModel([httpx.Response(400, json={"error": {"message": "bad request"}})])
    verdict = asyncio.run(_judge(model).judge(evidence="AAA", rating=_rated()))
    assert verdict.quality is None
    assert verdict.error is not None
    assert verdict.error.startswith("no verdict: LlmRefused")
    assert stored_verdict(verdict_json("AAA", verdict)).quality is None
