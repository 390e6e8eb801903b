"""The structured final action of the non-tool decision modes: its schema, parsing and placing.

This module owns what a model must answer with when it has no tools (fixed-candidate,
memory-only, and stockbench's last stage): KTD-Fin's action object `{"orders": [...],
"overall_reason": "..."}` (the overall reason optional, a bare list of orders accepted too), each
order `{stock_id, side, confidence, reason, shares | target_weight}`, validated by the pydantic
`FinalAction` (unknown keys refused, exactly one size). `extract_json`
finds the JSON in an answer (reasoning in `<think>` blocks dropped, a fenced block preferred, else
the first object or list that decodes). `parse_final_action` returns a `FinalAction` or a
`ValidationFeedback`: the message fed back to the model, naming every problem and restating the
format. `place_orders` places a validated action through the loop's `call`, as the model's own
`place_order` calls would be placed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from openbell.agents.llm.hooks import CalledTool, ToolCaller
from openbell.agents.tools import Fraction, Symbol, describe_validation_error

#: How many failed answers are fed back before the cycle ends with no trade.
MAX_RETRIES: Final = 3
MAX_ORDERS: Final = 50
MAX_OVERALL_REASON_CHARS: Final = 2000
FEEDBACK_PREFIX: Final = "Your answer could not be used"

ACTION_FORMAT: Final = (
    'Answer with one JSON object and nothing else: {"orders": [{"stock_id": "<symbol>", '
    '"side": "buy" | "sell", "shares": <number> OR "target_weight": <0..1 of NAV>, '
    '"confidence": <0..1>, "reason": "<one sentence>"}], "overall_reason": "<why, overall>"}. '
    'Give exactly one of shares and target_weight per order. {"orders": []} keeps everything '
    "as it is."
)

_THINK_RE: Final = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE_RE: Final = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


class OrderIntent(BaseModel):
    """One order of a final action, in the model's vocabulary (`stock_id` may be an alias)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stock_id: Symbol
    side: Literal["buy", "sell"]
    confidence: Fraction
    reason: str = Field(min_length=1, max_length=2000)
    shares: Annotated[Decimal, Field(gt=0, allow_inf_nan=False)] | None = None
    target_weight: Fraction | None = None

    @model_validator(mode="after")
    def _one_size(self) -> Self:
        if (self.shares is None) == (self.target_weight is None):
            raise ValueError("give exactly one of shares and target_weight")
        return self

    def arguments(self) -> dict[str, object]:
        """The `place_order` arguments of this order (decimals as strings, exactly)."""
        out: dict[str, object] = {
            "symbol": self.stock_id,
            "side": self.side,
            "reason": self.reason,
            "confidence": str(self.confidence),
        }
        if self.shares is not None:
            out["shares"] = str(self.shares)
        if self.target_weight is not None:
            out["target_weight"] = str(self.target_weight)
        return out


class FinalAction(BaseModel):
    """A validated final action: the orders to place now (none: hold) and, optionally, the
    reason for the decision as a whole (KTD-Fin's `overall_reason`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    orders: list[OrderIntent] = Field(max_length=MAX_ORDERS)
    overall_reason: str = Field("", max_length=MAX_OVERALL_REASON_CHARS)


@dataclass(frozen=True, slots=True)
class ValidationFeedback:
    """Why an answer was refused: `problems`, and `message`, what the model is told."""

    problems: tuple[str, ...]
    message: str


def feedback(problems: Sequence[str], answer_format: str = ACTION_FORMAT) -> ValidationFeedback:
    """The feedback for `problems`, restating `answer_format`."""
    listed = "\n".join(f"- {problem}" for problem in problems)
    return ValidationFeedback(
        problems=tuple(problems),
        message=f"{FEEDBACK_PREFIX}:\n{listed}\nFix these and answer again. {answer_format}",
    )


def extract_json(text: str) -> object | None:
    """The JSON value in a model's answer (see the module docstring), or None."""
    text = _THINK_RE.sub("", text).strip()
    candidates = [match.group(1).strip() for match in _FENCE_RE.finditer(text)] + [text]
    decoder = json.JSONDecoder(parse_float=Decimal)
    for candidate in candidates:
        for index, char in enumerate(candidate):
            if char not in "{[":
                continue
            try:
                value: object = decoder.raw_decode(candidate, index)[0]
            except (json.JSONDecodeError, RecursionError):
                continue
            return value
    return None


def parse_final_action(text: str) -> FinalAction | ValidationFeedback:
    """The final action in `text`, or the feedback that says what to fix."""
    value = extract_json(text)
    if value is None:
        return feedback(["no JSON object was found in the answer"])
    if isinstance(value, list):
        value = {"orders": value}
    try:
        return FinalAction.model_validate(value)
    except ValidationError as exc:
        return feedback([describe_validation_error(exc)])


async def place_orders(action: FinalAction, call: ToolCaller) -> list[CalledTool]:
    """Place every order of `action`, in order, through `call`; their outcomes."""
    return [await call("place_order", intent.arguments()) for intent in action.orders]
