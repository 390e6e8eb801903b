"""Asking the model for a strategy: the prompt, the answer's shape, and the refusal loop.

This module owns `write_strategy`. One chat-completions call asks for a JSON object
`{"code": "<python source defining strategy(bars)>", "claim": {"expected_return": <fraction per
cycle>, "hit_rate": <fraction of cycles that gain>, "rationale": "<why>"}}` (at least one of the
two figures). The answer is parsed (`parse_answer`: a code fence around the JSON is tolerated),
the code goes through the look-ahead check (`lookahead.check_strategy`), and then through a trial
run in the sandbox on the slot's bars (the caller's `trial`). An answer that fails any of the three
goes back to the model with the reasons, up to `max_retries` more times; after that
`StrategyRefused` (an `AgentError`: the cycle fails with the last reason). Every message, answer
and refusal is in the cycle's trace, and the tokens and cost in its usage (`Recorder`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from openbell.agents.llm.client import Chat
from openbell.agents.llm.recorder import Recorder
from openbell.agents.model_json import json_object_in
from openbell.agents.strategy_code.lookahead import ALLOWED_IMPORTS, check_strategy
from openbell.agents.strategy_code.sandbox import RunResult
from openbell.markets.errors import AgentError

_MAX_RATIONALE_CHARS: Final = 4000

SYSTEM_PROMPT: Final = f"""You write a trading strategy as Python code, and state the edge you \
claim for it.

Write a module that defines `strategy(bars)`. `bars` is a dict: symbol -> pandas DataFrame of the \
bars known at the decision time, oldest first, indexed by each bar's start time (UTC), with float \
columns open, high, low, close, volume. The last row is the latest finished bar; nothing later \
exists. `strategy` returns a dict: symbol -> target weight, a fraction of the account's net asset \
value in [0, 1]; the weights sum to at most 1 (the rest stays cash; no shorting, no leverage). A \
symbol left out is sold. The function is called once per decision cycle and the account is \
rebalanced to its weights.

Rules (code that breaks one is refused before it runs):
- Import only {", ".join(sorted(ALLOWED_IMPORTS))}. No file, network or process access, no eval, \
exec, open, getattr, no names starting with "_", no frame or traceback attributes.
- No look-ahead, even in code that would be given a longer history: no negative shift, diff or \
pct_change; no backward fill or interpolate; no centred windows; no row i + k; no reversed rows; \
no re-labelling of sliced rows (.iloc[1:].reset_index()); resample only with label="right". \
Statistics over time (mean, std, min, max, rank, quantile, ...) only over a trailing window: \
.rolling(n) with a fixed n, .ewm(...), .iloc[-n:] or .tail(n); a running statistic (cummax, \
cumsum, expanding) is one too when read at the last row. Sorting the symbols and \
cross-sectional statistics of per-symbol values are fine.
- It runs with limited CPU time and memory: keep it simple and vectorised.

Answer with one JSON object and nothing else:
{{"code": "<the module's source>", "claim": {{"expected_return": <the mean return per cycle you \
expect, a fraction such as 0.001>, "hit_rate": <the share of cycles you expect to gain, in [0, \
1]>, "rationale": "<why the strategy should have this edge, and whether you expect it to \
beat buying and holding the symbols>"}}}}"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """The edge the model asserts: mean return per cycle and/or hit rate, and why."""

    rationale: str
    expected_return: Decimal | None = None
    hit_rate: Decimal | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Draft:
    """A parsed answer: the code and its claim."""

    code: str
    claim: Claim


@dataclass(frozen=True, slots=True, kw_only=True)
class Written:
    """An accepted strategy, its trial run (the cycle's run) and how many answers it took."""

    draft: Draft
    trial: RunResult
    answers: int


class BadAnswer(ValueError):
    """The answer is not a strategy with a claim; the message says why (shown to the model)."""


class StrategyRefused(AgentError):
    """Every answer the model gave in a cycle was refused; the message has the last reasons."""


Trial = Callable[[str], Awaitable[RunResult]]


def user_prompt(
    *, now: datetime, market: str, symbols: Sequence[str], interval: str, lookback: int
) -> str:
    """The first user message: the slot, the market, the symbols and the bars' shape."""
    return (
        f"Decision time: {now.isoformat()}. Market: {market}. Symbols offered now: "
        f"{', '.join(symbols) or '(none)'}. Each DataFrame holds up to {lookback} {interval} "
        "bars. Write the strategy and its claim."
    )


def parse_answer(text: str) -> Draft:
    """The draft in the model's answer `text`; `BadAnswer` saying what is wrong."""
    try:
        found = json_object_in(text)
    except ValueError as exc:
        raise BadAnswer(f"the answer is not one JSON object: {exc}") from None
    if not isinstance(found, dict):
        raise BadAnswer('answer with one JSON object {"code": ..., "claim": {...}}')
    code, claim = found.get("code"), found.get("claim")
    if not isinstance(code, str) or not code.strip():
        raise BadAnswer('"code" must be the module source, as a string')
    if not isinstance(claim, dict):
        raise BadAnswer('"claim" must be an object with expected_return, hit_rate, rationale')
    return Draft(code=code, claim=_claim(claim))


def _claim(claim: dict[str, Any]) -> Claim:
    rationale = claim.get("rationale")
    if not isinstance(rationale, str) or not rationale.strip():
        raise BadAnswer('"claim.rationale" must say why the strategy has its edge')
    expected = _fraction(claim.get("expected_return"), "expected_return", low=-1, high=1)
    hit_rate = _fraction(claim.get("hit_rate"), "hit_rate", low=0, high=1)
    if expected is None and hit_rate is None:
        raise BadAnswer('claim at least one of "expected_return" and "hit_rate"')
    return Claim(
        rationale=rationale.strip()[:_MAX_RATIONALE_CHARS],
        expected_return=expected,
        hit_rate=hit_rate,
    )


def _fraction(value: object, name: str, *, low: int, high: int) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise BadAnswer(f'"claim.{name}" must be a number')
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise BadAnswer(f'"claim.{name}" must be a number') from None
    if not number.is_finite() or not low <= number <= high:
        raise BadAnswer(f'"claim.{name}" must be in [{low}, {high}], got {value}')
    return number


async def write_strategy(
    *,
    chat: Chat,
    recorder: Recorder,
    messages: Sequence[dict[str, Any]],
    trial: Trial,
    max_retries: int,
) -> Written:
    """Ask until an answer passes parsing, the check and its trial run (see the module
    docstring); `StrategyRefused` after `max_retries` refused answers past the first."""
    conversation = list(messages)
    for message in conversation:
        recorder.trace(message["role"], content=message["content"])
    reasons = ""
    for number in range(1, max_retries + 2):
        recorder.flush()
        answer = await chat.complete(conversation, on_attempt=recorder.attempt)
        completion = answer.completion
        recorder.completion(completion.usage)
        recorder.trace(
            "assistant",
            content=completion.content,
            tokens_in=completion.usage.tokens_in,
            tokens_out=completion.usage.tokens_out,
            latency_ms=answer.latency_ms,
            request_digest=answer.request_digest or None,
            response=answer.response or None,
        )
        try:
            draft = parse_answer(completion.content)
        except BadAnswer as exc:
            recorder.errors(parse_failures=1, invalid_tool_calls=0)
            reasons = str(exc)
        else:
            refusals = check_strategy(draft.code)
            if refusals:
                reasons = "the code was refused by the look-ahead and I/O check:\n" + "\n".join(
                    f"- {refusal}" for refusal in refusals
                )
            else:
                result = await trial(draft.code)
                if result.ok:
                    return Written(draft=draft, trial=result, answers=number)
                reasons = f"the code's trial run failed ({result.outcome}): {result.error}"
        recorder.trace("refusal", content=reasons)
        feedback = f"Refused: {reasons}\nFix it and answer with the whole JSON object again."
        conversation.extend(
            [
                {"role": "assistant", "content": completion.content},
                {"role": "user", "content": feedback},
            ]
        )
    raise StrategyRefused(
        f"no acceptable strategy after {max_retries + 1} answers; last: {_one_line(reasons)}"
    )


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 500 else line[:500] + "..."
