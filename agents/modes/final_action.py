"""The structured final action of the non-tool decision modes: its schema, parsing and placing.

This module owns what a model must answer with when it has no tools (fixed-candidate,
memory-only, and stockbench's last stage): KTD-Fin's action object as the paper prints it,
`{"orders": [...], "overall_reason": "..."}` (the overall reason optional, a bare list of orders
accepted too), each order `{stock_id, side, confidence, reason, target_weight | shares}`: `side`
BUY or SELL in any case, `confidence` in [0, 1], exactly one size, and (`parse_final_action`) a
`reason` of at least `MIN_REASON_CHARS` characters. openbell's own spelling is accepted too:
`symbol` for `stock_id` (its `place_order` name) and lower-case sides. The pydantic models
(`FinalAction`, `OrderIntent`) refuse unknown keys; `parse_final_action` takes a model's answer
leniently: keys the action object does not have are left out and reported (`FinalAction.notes`,
which the mode puts in the cycle's finish summary, and in the feedback when the answer is refused
for another reason), never a reason to refuse it. `extract_json` finds the JSON in an answer
(reasoning in `<think>` blocks dropped, a fenced block preferred, else the first object or list
that decodes). `parse_final_action` returns a `FinalAction` or a `ValidationFeedback`: the
message fed back to the model, naming every problem and restating the format. `place_orders`
places a validated action through the loop's `call`, as the model's own `place_order` calls would
be placed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Final, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from openbell.agents.llm.completion import cut
from openbell.agents.llm.hooks import CalledTool, ToolCaller
from openbell.agents.tools import Fraction, Symbol, describe_validation_error

#: How many failed answers are fed back before the cycle ends with no trade.
MAX_RETRIES: Final = 3
MAX_ORDERS: Final = 50
MAX_OVERALL_REASON_CHARS: Final = 2000
FEEDBACK_PREFIX: Final = "Your answer could not be used"

#: The fewest characters an order's `reason` may have (KTD-Fin's hard constraint 4).
MIN_REASON_CHARS: Final = 10
#: The fewest characters KTD-Fin asks of `overall_reason`; a shorter one is noted, not refused
#: (one left out is not noted: openbell's own shape has none).
MIN_OVERALL_REASON_CHARS: Final = 20
#: The keys of the action object and of its orders; any other is left out and reported.
ACTION_KEYS: Final = frozenset({"orders", "overall_reason"})
ORDER_KEYS: Final = frozenset(
    {"stock_id", "symbol", "side", "confidence", "reason", "target_weight", "shares"}
)

ACTION_FORMAT: Final = (
    'Answer with one JSON object and nothing else: {"orders": [{"stock_id": "<id as listed>", '
    '"side": "BUY" | "SELL", "confidence": <0..1>, "reason": "<why, at least 10 characters>", '
    '"target_weight": <0..1 of NAV> OR "shares": <number>}], "overall_reason": "<your '
    'portfolio-construction rationale>"}. Give exactly one of target_weight and shares per '
    'order. {"orders": []} keeps everything as it is.'
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

    @model_validator(mode="before")
    @classmethod
    def _symbol_as_stock_id(cls, data: object) -> object:
        """openbell's `symbol` in place of `stock_id` (both: the same id)."""
        if not isinstance(data, dict) or "symbol" not in data:
            return data
        found = dict(data)
        symbol = found.pop("symbol")
        if "stock_id" in found and found["stock_id"] != symbol:
            raise ValueError("give stock_id or symbol (the same id), not two different ids")
        found.setdefault("stock_id", symbol)
        return found

    @field_validator("side", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:
        """BUY, Buy or buy."""
        return value.strip().lower() if isinstance(value, str) else value

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
    reason for the decision as a whole (KTD-Fin's `overall_reason`). `notes` (set by
    `parse_final_action`, never read from the answer) report what was left out of it or falls
    short of KTD-Fin's asks without refusing it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    orders: list[OrderIntent] = Field(max_length=MAX_ORDERS)
    overall_reason: str = Field("", max_length=MAX_OVERALL_REASON_CHARS)
    notes: tuple[str, ...] = Field((), exclude=True)


@dataclass(frozen=True, slots=True)
class ValidationFeedback:
    """Why an answer was refused: `problems`, and `message`, what the model is told."""

    problems: tuple[str, ...]
    message: str


def feedback(
    problems: Sequence[str], answer_format: str = ACTION_FORMAT, *, notes: Sequence[str] = ()
) -> ValidationFeedback:
    """The feedback for `problems` (and `notes`, said but not problems), restating
    `answer_format`."""
    listed = "\n".join(f"- {problem}" for problem in problems)
    noted = "".join(f"\nAlso: {note}" for note in notes)
    return ValidationFeedback(
        problems=tuple(problems),
        message=(
            f"{FEEDBACK_PREFIX}:\n{listed}{noted}\nFix these and answer again. {answer_format}"
        ),
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
    """The final action in `text`, or the feedback that says what to fix (see the module
    docstring: unknown keys are left out and noted, a short order reason is refused)."""
    value = extract_json(text)
    if value is None:
        return feedback(["no JSON object was found in the answer"])
    if isinstance(value, list):
        value = {"orders": value}
    value, left_out = known_keys(value)
    notes = [f"not part of the action object, ignored: {listed(left_out)}"] if left_out else []
    try:
        action = FinalAction.model_validate(value)
    except ValidationError as exc:
        return feedback([describe_validation_error(exc)], notes=notes)
    short = [
        f"orders.{index}.reason: should have at least {MIN_REASON_CHARS} characters, got "
        f"{len(order.reason.strip())}"
        for index, order in enumerate(action.orders)
        if len(order.reason.strip()) < MIN_REASON_CHARS
    ]
    if short:
        return feedback(short, notes=notes)
    if 0 < len(action.overall_reason.strip()) < MIN_OVERALL_REASON_CHARS:
        notes.append(
            f"overall_reason has {len(action.overall_reason.strip())} characters; KTD-Fin asks "
            f"for at least {MIN_OVERALL_REASON_CHARS}"
        )
    return action.model_copy(update={"notes": tuple(notes)}) if notes else action


def listed(keys: Sequence[str], most: int = 20) -> str:
    """`keys` for a note: the first `most`, each cut to 64 characters, and how many more."""
    shown = ", ".join(cut(key, 64) for key in keys[:most])
    return shown if len(keys) <= most else f"{shown} and {len(keys) - most} more"


def known_keys(value: object) -> tuple[object, list[str]]:
    """`value` without the keys an action object (`ACTION_KEYS`) or its orders (`ORDER_KEYS`)
    do not have, and where each left-out key was ("comment", "orders.0.price"), in order."""
    if not isinstance(value, dict):
        return value, []
    left_out = [str(key) for key in value if key not in ACTION_KEYS]
    kept = {key: item for key, item in value.items() if key in ACTION_KEYS}
    orders = kept.get("orders")
    if isinstance(orders, list):
        cleaned: list[object] = []
        for index, order in enumerate(orders):
            if isinstance(order, dict):
                left_out += [f"orders.{index}.{key}" for key in order if key not in ORDER_KEYS]
                order = {key: item for key, item in order.items() if key in ORDER_KEYS}
            cleaned.append(order)
        kept["orders"] = cleaned
    return kept, left_out


async def place_orders(action: FinalAction, call: ToolCaller) -> list[CalledTool]:
    """Place every order of `action`, in order, through `call`; their outcomes."""
    return [await call("place_order", intent.arguments()) for intent in action.orders]
