"""The structured final action: JSON found in real-shaped answers, validated by schema with
feedback that names the problem, and stockbench's executability check of a plan."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from openbell.agents.modes import (
    MODES,
    FinalAction,
    ValidationFeedback,
    parse_final_action,
    prompt_for_mode,
)
from openbell.agents.modes.final_action import FEEDBACK_PREFIX
from openbell.agents.modes.stockbench_plan import check_plan
from openbell.agents.tools import PortfolioOut, PositionOut
from openbell.markets.rules import rules_for

D = Decimal
ORDER = {"stock_id": "AAPL", "side": "buy", "confidence": 0.7, "reason": "trend is up", "shares": 5}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"orders": [ORDER]}),
        f"Here is my plan:\n```json\n{json.dumps({'orders': [ORDER]})}\n```\nThanks.",
        f"<think>maybe {{not json}}</think>{json.dumps([ORDER])}",
        f"I think {{this}} is fine: {json.dumps({'orders': [ORDER]})} and that's all",
    ],
)
def test_answers_are_read(text: str) -> None:
    found = parse_final_action(text)
    assert isinstance(found, FinalAction)
    assert [(o.stock_id, o.side, o.shares, o.confidence) for o in found.orders] == [
        ("AAPL", "buy", D(5), D("0.7"))
    ]
    assert found.orders[0].arguments() == {
        "symbol": "AAPL",
        "side": "buy",
        "reason": "trend is up",
        "confidence": "0.7",
        "shares": "5",
    }


def test_ktd_fin_action_object_with_overall_reason_is_read() -> None:
    text = json.dumps({"orders": [ORDER], "overall_reason": "Trend followers; the rest in cash."})
    found = parse_final_action(f"```json\n{text}\n```")
    assert isinstance(found, FinalAction)
    assert found.overall_reason == "Trend followers; the rest in cash."
    assert [o.stock_id for o in found.orders] == ["AAPL"]
    held = parse_final_action(json.dumps({"orders": [], "overall_reason": "Nothing convinces."}))
    assert isinstance(held, FinalAction)
    assert (held.orders, held.overall_reason) == ([], "Nothing convinces.")
    too_long = parse_final_action(json.dumps({"orders": [], "overall_reason": "x" * 2001}))
    assert isinstance(too_long, ValidationFeedback)
    assert "overall_reason" in too_long.message


def test_no_orders_is_a_valid_hold() -> None:
    found = parse_final_action('{"orders": []}')
    assert isinstance(found, FinalAction)
    assert found.orders == []


@pytest.mark.parametrize(
    ("change", "mentions"),
    [
        ({"side": "short"}, "side"),
        ({"shares": -3}, "shares"),
        ({"shares": "NaN"}, "shares"),
        ({"target_weight": 0.5}, "exactly one"),
        ({"confidence": 1.5}, "confidence"),
        ({"stock_id": "AAPL; DROP TABLE"}, "stock_id"),
        ({"reason": ""}, "reason"),
        ({"reason": "up trend"}, "orders.0.reason: should have at least 10 characters, got 8"),
        ({"reason": "   short    "}, "at least 10 characters, got 5"),
        ({"side": "HOLD"}, "side"),
        ({"symbol": "MSFT"}, "not two different ids"),
        ({"confidence": None}, "confidence"),
    ],
)
def test_invalid_orders_get_feedback(change: dict[str, object], mentions: str) -> None:
    found = parse_final_action(json.dumps({"orders": [{**ORDER, **change}]}))
    assert isinstance(found, ValidationFeedback)
    assert found.message.startswith(FEEDBACK_PREFIX)
    assert mentions in found.message
    assert '{"orders"' in found.message  # the format is restated


def test_no_json_and_too_many_orders_get_feedback() -> None:
    assert isinstance(parse_final_action("I would buy some Apple."), ValidationFeedback)
    many = parse_final_action(json.dumps({"orders": [ORDER] * 51}))
    assert isinstance(many, ValidationFeedback)
    assert "orders" in many.message


def test_unknown_modes_are_refused() -> None:
    for mode in MODES:
        pairs = (("AAA", "BBB"),) if mode == "pair" else ()  # the pair mode needs its pairs
        assert prompt_for_mode(mode, pairs=pairs) is not prompt_for_mode(mode, pairs=pairs)
    with pytest.raises(ValueError, match="known: open-research"):
        prompt_for_mode("yolo")


def portfolio() -> PortfolioOut:
    return PortfolioOut(
        as_of=datetime(2025, 10, 10, 1, 30, tzinfo=UTC),
        currency="CNY",
        cash=D(10000),
        positions=[
            PositionOut(
                symbol="600519.SH",
                quantity=D(100),
                mark=D(1500),
                value=D(150000),
                weight=D("0.9375"),
            )
        ],
        positions_value=D(150000),
        nav=D(160000),
    )


def plan(*orders: dict[str, object]) -> FinalAction:
    return FinalAction.model_validate(
        {"orders": [{"confidence": 0.5, "reason": "r", **o} for o in orders]}
    )


def problems(action: FinalAction) -> list[str]:
    symbols = {
        o.stock_id: {"moutai": "600519.SH"}.get(o.stock_id, "601318.SH") for o in action.orders
    }
    return check_plan(
        action,
        symbols=symbols,
        portfolio=portfolio(),
        prices={"600519.SH": D(1500), "601318.SH": D(50)},
        rules=rules_for("cn"),
    )


def test_an_executable_plan_has_no_problems() -> None:
    assert problems(plan(
        {"stock_id": "moutai", "side": "sell", "shares": 50},
        {"stock_id": "pingan", "side": "buy", "shares": 1600},
    )) == []  # fmt: skip


@pytest.mark.parametrize(
    ("orders", "mentions"),
    [
        ([{"stock_id": "pingan", "side": "sell", "shares": 100}], "hold none"),
        ([{"stock_id": "moutai", "side": "sell", "shares": 200}], "cannot sell 200"),
        ([{"stock_id": "moutai", "side": "sell", "target_weight": 0.95}], "below the current"),
        ([{"stock_id": "pingan", "side": "buy", "shares": 150}], "whole lots of 100"),
        ([{"stock_id": "moutai", "side": "buy", "target_weight": 0.5}], "above the current"),
        ([{"stock_id": "pingan", "side": "buy", "shares": 300}], "cost about"),
        ([{"stock_id": "pingan", "side": "buy", "target_weight": 0.2}], "cost about"),
        (
            [{"stock_id": "pingan", "side": "buy", "shares": 100}] * 2,
            "more than once",
        ),
    ],
)
def test_unexecutable_plans_say_why(orders: list[dict[str, object]], mentions: str) -> None:
    found = problems(plan(*orders))
    assert any(mentions in problem for problem in found), found


#: An answer as KTD-Fin prints its action object (section 3.4 and its prompt: one JSON object, no
#: markdown; `side` BUY or SELL, `confidence` in [0, 1], a reason of at least 10 characters, one
#: of `target_weight` and `shares`, and `overall_reason`). The paper prints the fields, not a
#: whole example: the ids and the first reason are the paper's own (its blinded trace, Box C).
PAPER_ANSWER = """{"orders": [{"stock_id": "asset_0006", "side": "BUY", "confidence": 0.62, \
"reason": "20-day +27.4%, low vol 0.0255", "target_weight": 0.1}, {"stock_id": "asset_0013", \
"side": "SELL", "confidence": 0.55, "reason": "momentum faded, rank dropped", "shares": 100}], \
"overall_reason": "Concentrate in the strongest low-volatility trend; trim the laggard."}"""


def test_the_papers_action_object_is_read_as_printed() -> None:
    found = parse_final_action(PAPER_ANSWER)
    assert isinstance(found, FinalAction)
    assert [o.arguments() for o in found.orders] == [
        {
            "symbol": "asset_0006",
            "side": "buy",
            "reason": "20-day +27.4%, low vol 0.0255",
            "confidence": "0.62",
            "target_weight": "0.1",
        },
        {
            "symbol": "asset_0013",
            "side": "sell",
            "reason": "momentum faded, rank dropped",
            "confidence": "0.55",
            "shares": "100",
        },
    ]
    assert found.overall_reason.startswith("Concentrate in the strongest")
    assert found.notes == ()


@pytest.mark.parametrize("side", ["BUY", "Buy", "buy", " buy "])
def test_a_side_in_any_case_and_symbol_for_stock_id_are_read(side: str) -> None:
    order = {k: v for k, v in ORDER.items() if k != "stock_id"}
    found = parse_final_action(json.dumps({"orders": [{**order, "symbol": "AAPL", "side": side}]}))
    assert isinstance(found, FinalAction)
    assert (found.orders[0].stock_id, found.orders[0].side) == ("AAPL", "buy")
    both = parse_final_action(json.dumps([{**ORDER, "symbol": "AAPL"}]))
    assert isinstance(both, FinalAction)


def test_unknown_fields_are_left_out_and_noted_not_refused() -> None:
    text = json.dumps(
        {
            "orders": [{**ORDER, "leverage": 10, "price": "187.2"}],
            "overall_reason": "Short.",
            "comment": "my notes",
        }
    )
    found = parse_final_action(text)
    assert isinstance(found, FinalAction)
    assert [o.stock_id for o in found.orders] == ["AAPL"]
    assert found.notes == (
        "not part of the action object, ignored: comment, orders.0.leverage, orders.0.price",
        "overall_reason has 6 characters; KTD-Fin asks for at least 20",
    )
    assert "notes" not in found.model_dump()
    # refused for another reason, the feedback says what was ignored too
    refused = parse_final_action(json.dumps({"orders": [{**ORDER, "side": "hold", "x": 1}]}))
    assert isinstance(refused, ValidationFeedback)
    assert "side" in refused.message
    assert "Also: not part of the action object, ignored: orders.0.x" in refused.message
    # a flood of unknown keys is listed briefly
    many = parse_final_action(json.dumps({"orders": [ORDER], **{f"k{n}": n for n in range(30)}}))
    assert isinstance(many, FinalAction)
    assert many.notes[0].endswith("k19 and 10 more")
