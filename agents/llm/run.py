"""The tool-calling loop of one LLM agent's cycle, within its budgets.

This module owns `CycleRun`: it asks the decision mode's `PromptBuilder` for the prompts (the
operator's `instructions`, if any, added to the end of the system prompt) and the tools, then
alternates model turns and tool calls until the model calls `finish`, answers without
a tool call (and the builder has nothing to add; or the builder ended the cycle because every
answer failed its validation: `invalid_answer`), or a budget runs out: turns, tool calls, tokens
(before a turn, the tokens used plus an estimate of the next request) and wall time (an injected
monotonic clock; the model call in flight is cut at the deadline). Every call the model makes is
answered, so the conversation stays valid: a parse failure, a tool not offered, or a call past
the tool-call budget gets a structured error; the others go through the `Masker` and
`ctx.tools.serve` (rows kept within the result size budget). A result still longer than a message
may be is never cut mid-JSON: the model gets a `result_too_large` notice instead (the trace keeps
the result). Arguments that do not parse and answers the decision mode could not use
(`ParseFailure`) count as the cycle's parse failures. Nothing a model writes raises out of the loop.
If the cycle ends unfinished the loop calls `finish` itself with the stop reason. A phased decision
mode (`hooks.PhasedPromptBuilder`: KTD-Fin's) is asked before every turn what it offers (its tools,
one forced by `tool_choice`, a message first), and its own tools' calls are answered by it."""

from __future__ import annotations

import asyncio
import enum
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from openbell.agents.llm.client import Chat
from openbell.agents.llm.completion import (
    CHARS_PER_TOKEN,
    ToolCall,
    assistant_message,
    cut,
    wire_json,
)
from openbell.agents.llm.hooks import (
    CalledTool,
    GivesUp,
    Masker,
    ParseFailure,
    PhasedPromptBuilder,
    PromptBuilder,
    serve_masked,
)
from openbell.agents.llm.model_watch import ModelIdentity
from openbell.agents.llm.recorder import Recorder
from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import (
    ErrorCode,
    ToolError,
    ToolOutcome,
    ToolSpec,
    function_tool,
    openai_tools,
)
from openbell.markets.errors import LlmRefused

#: Tool errors that make a call invalid (KTD-Fin's tool validity; StockBench's schema errors).
INVALID_CODES: Final = frozenset(
    {ErrorCode.UNKNOWN_TOOL, ErrorCode.INVALID_ARGUMENTS, ErrorCode.UNKNOWN_SYMBOL}
)
BUDGET_EXHAUSTED: Final = "budget_exhausted"
#: What opens the operator's instructions at the end of the system prompt (`instructions`).
INSTRUCTIONS_HEADER: Final = "Your operator's instructions:"
RESULT_TOO_LARGE: Final = "result_too_large"


@dataclass(frozen=True, slots=True, kw_only=True)
class Budgets:
    """Per-cycle limits (DESIGN §3): model turns, tool calls, tokens (in + out) and wall time.

    `max_message_chars` bounds any one message sent back to the model: a longer answer is cut, a
    longer tool result replaced by a `result_too_large` notice (valid JSON, like every result).
    """

    max_turns: int = 25
    max_tool_calls: int = 50
    max_tokens: int = 120_000
    max_wall_s: float = 600.0
    max_message_chars: int = 100_000

    def __post_init__(self) -> None:
        for name in (
            "max_turns",
            "max_tool_calls",
            "max_tokens",
            "max_wall_s",
            "max_message_chars",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


class StopReason(enum.StrEnum):
    """Why a cycle's loop ended."""

    FINISHED = "finished"  # the model called finish
    ANSWERED = "answered"  # the model answered without a tool call
    #: Every answer failed the decision mode's validation: the mode ended the cycle, no trade.
    INVALID_ANSWER = "invalid_answer"
    MAX_TURNS = "max_turns"
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_TOKENS = "max_tokens"
    MAX_WALL_S = "max_wall_s"
    REFUSED = "refused"  # the endpoint refused the request (e.g. past the context window)


class CycleRun:
    """One cycle of an LLM agent; see the module docstring."""

    def __init__(
        self,
        *,
        ctx: DecisionContext,
        chat: Chat,
        builder: PromptBuilder,
        masker: Masker,
        budgets: Budgets,
        recorder: Recorder,
        monotonic: Callable[[], float],
        instructions: str = "",
        split_on_model_change: bool = False,
    ) -> None:
        self._ctx = ctx
        self._instructions = instructions
        self._split = split_on_model_change
        self._chat = chat
        self._builder = builder
        self._masker = masker
        self._budgets = budgets
        self._recorder = recorder
        self._monotonic = monotonic
        self._started = monotonic()
        self._messages: list[dict[str, Any]] = []
        self._offered: dict[str, ToolSpec[Any]] = {}
        self._phased = builder if isinstance(builder, PhasedPromptBuilder) else None
        self._own: frozenset[str] = frozenset()  # the phased mode's own tools
        self._offers: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        self.turns = 0
        self.tool_calls = 0
        self._parse_failures = 0
        self._invalid = 0

    async def run(self) -> StopReason:
        """Run the cycle to its end; the reason it ended."""
        ctx = self._ctx
        await self._builder.prepare(ctx)
        system = self._builder.system_prompt(ctx)
        if self._instructions:
            system = f"{system}\n\n{INSTRUCTIONS_HEADER}\n{self._instructions}"
        self._send("system", self._masker.mask_text(system))
        self._send("user", self._masker.mask_text(self._builder.first_user_message(ctx)))
        names = self._builder.tool_names(ctx)
        specs = {spec.name: spec for spec in ctx.tools.specs}
        chosen = list(specs) if names is None else [name for name in names if name in specs]
        self._offered = {name: specs[name] for name in chosen}
        tools = openai_tools(list(self._offered.values())) or None
        try:
            reason = await self._loop(tools)
        finally:
            self._flush_errors()
        if isinstance(self._builder, GivesUp) and self._builder.gave_up:
            reason = StopReason.INVALID_ANSWER
        self._recorder.trace("stop", content=reason.value)
        if not ctx.tools.finished:
            await self._call(
                "finish", {"summary": f"Cycle ended by openbell: {reason.value}."}, note="auto"
            )
        return reason

    def _send(self, role: str, content: str) -> None:
        self._messages.append({"role": role, "content": content})
        self._recorder.trace(role, content=content)

    def _elapsed_s(self) -> float:
        return self._monotonic() - self._started

    def _exhausted(self) -> StopReason | None:
        budgets = self._budgets
        if self.turns >= budgets.max_turns:
            return StopReason.MAX_TURNS
        if self.tool_calls >= budgets.max_tool_calls:
            return StopReason.MAX_TOOL_CALLS
        if self._elapsed_s() >= budgets.max_wall_s:
            return StopReason.MAX_WALL_S
        next_prompt = sum(len(str(message.get("content") or "")) for message in self._messages)
        if self._recorder.tokens_used + next_prompt // CHARS_PER_TOKEN >= budgets.max_tokens:
            return StopReason.MAX_TOKENS
        return None

    async def _loop(self, tools: Sequence[dict[str, Any]] | None) -> StopReason:
        while True:
            exhausted = self._exhausted()
            if exhausted is not None:
                return exhausted
            choice = None
            if self._phased is not None:
                tools, choice = self._next_offer(self._phased)
            await self._recorder.store()  # the trace so far is stored before the model is asked
            try:
                async with asyncio.timeout(self._budgets.max_wall_s - self._elapsed_s()):
                    answer = await self._chat.complete(
                        self._messages, tools, on_attempt=self._recorder.attempt, tool_choice=choice
                    )
            except TimeoutError:
                self._recorder.trace("error", content="the model call ran past the wall budget")
                return StopReason.MAX_WALL_S
            except LlmRefused as exc:
                self._recorder.trace("error", content=str(exc))
                return StopReason.REFUSED
            self.turns += 1
            completion = answer.completion
            self._recorder.completion(completion.usage)
            if completion.reasoning:
                self._recorder.trace("reasoning", content=completion.reasoning)
            message = assistant_message(
                completion, max_content_chars=self._budgets.max_message_chars
            )
            identity = ModelIdentity(
                model=completion.model,
                fingerprint=completion.system_fingerprint,
                revision=completion.revision,
            )
            self._messages.append(message)
            self._recorder.trace(
                "assistant",
                content=completion.content,
                arguments=json.dumps(message["tool_calls"]) if completion.tool_calls else None,
                tokens_in=completion.usage.tokens_in,
                tokens_out=completion.usage.tokens_out,
                latency_ms=answer.latency_ms,
                identity=identity,
                request_digest=answer.request_digest or None,
                response=answer.response or None,
            )
            self._recorder.exchange(identity, split=self._split)
            if not completion.tool_calls:
                stop = await self._after_text(completion.content)
                if stop is not None:
                    return stop
                continue
            over = await self._answer_calls(completion.tool_calls)
            self._flush_errors()
            if self._ctx.tools.finished:
                return StopReason.FINISHED
            if over:
                return StopReason.MAX_TOOL_CALLS

    async def _after_text(self, content: str) -> StopReason | None:
        """An answer without a tool call: the builder's follow-up is sent (None), or the loop
        stops (answered, or no valid action after the mode's retries)."""
        follow = await self._builder.after_answer(self._ctx, content, self._call)
        if isinstance(follow, ParseFailure):
            self._parse_failures += 1
            if follow.feedback is None:
                return StopReason.INVALID_ANSWER
            follow = follow.feedback
        if follow is None:
            return StopReason.ANSWERED
        self._send("user", self._masker.mask_text(follow))
        return None

    def _next_offer(
        self, phased: PhasedPromptBuilder
    ) -> tuple[list[dict[str, Any]] | None, dict[str, Any] | None]:
        """What the phased mode offers the next turn: its tools (one list object per offer, so
        the wire cache encodes each once) and the forced `tool_choice`; its message is sent."""
        ctx, budgets = self._ctx, self._budgets
        offer = phased.offer(
            ctx,
            turns_left=budgets.max_turns - self.turns,
            tool_calls_left=budgets.max_tool_calls - self.tool_calls,
        )
        if offer.message is not None:
            self._send("user", self._masker.mask_text(offer.message))
        own = phased.own_tools(ctx)
        offered: dict[str, ToolSpec[Any]] = {}
        for name in offer.tools:
            spec = None if name in own else ctx.tools.spec_of(name)
            if spec is not None:
                offered[name] = spec
        self._offered = offered
        self._own = frozenset(own)  # served whether offered this turn or not
        tools = self._offers.get(offer.tools)
        if tools is None:
            tools = self._offers[offer.tools] = [
                own[name]
                if name in own
                else function_tool(name, offered[name].description, offered[name].args)
                for name in offer.tools
                if name in own or name in offered
            ]
        choice = None
        if offer.forced is not None:
            choice = {"type": "function", "function": {"name": offer.forced}}
        return tools or None, choice

    async def _answer_calls(self, calls: Sequence[ToolCall]) -> bool:
        """Answer every call of a turn; whether the tool-call budget ran out."""
        over = False
        for call in calls:
            if self.tool_calls >= self._budgets.max_tool_calls:
                over = True
                text = _loop_error(
                    BUDGET_EXHAUSTED,
                    f"Not run: this cycle's budget of {self._budgets.max_tool_calls} tool calls "
                    "is spent.",
                    "The cycle is ending.",
                )
                self._reply(call, text, call.raw_arguments, latency_ms=0)
                continue
            if self._phased is not None and call.name in self._own:
                await self._serve_own(self._phased, call)
                continue
            if call.parse_error is not None or call.arguments is None:
                self.tool_calls += 1
                self._parse_failures += 1
                error = self._error(
                    ErrorCode.INVALID_ARGUMENTS,
                    f"Could not read the arguments of {call.name or 'the call'}: "
                    f"{call.parse_error}.",
                    "Send the arguments as one JSON object matching the tool's schema.",
                )
                self._reply(call, self._masker.mask_result(call.name, error.model_dump_json()))
                continue
            if call.name not in self._offered:
                self.tool_calls += 1
                self._invalid += 1
                error = self._error(
                    ErrorCode.UNKNOWN_TOOL,
                    f"There is no tool named {cut(call.name, 64)!r} in this mode.",
                    f"Use one of: {', '.join(self._offered) or 'none (answer in text)'}.",
                )
                self._reply(call, self._masker.mask_result(call.name, error.model_dump_json()))
                continue
            started = self._monotonic()
            called = await self._run_tool(call.name, call.arguments)
            self._reply(call, called.text, latency_ms=self._ms_since(started))
        return over

    async def _serve_own(self, phased: PhasedPromptBuilder, call: ToolCall) -> None:
        """A call of the phased mode's own tool, answered by the mode (its arguments as the
        model wrote them: the mode reads and judges them)."""
        self.tool_calls += 1
        started = self._monotonic()
        reply = await phased.serve_own(self._ctx, call.name, call.raw_arguments, self._call)
        if reply.parse_failure:
            self._parse_failures += 1
        self._reply(call, self._masker.mask_text(reply.text), latency_ms=self._ms_since(started))

    def _reply(
        self,
        call: ToolCall,
        text: str,
        arguments: str | None = None,
        *,
        latency_ms: int | None = None,
    ) -> None:
        limit = self._budgets.max_message_chars
        content = text if len(text) <= limit else _too_large(call.name, len(text), limit)
        self._messages.append({"role": "tool", "tool_call_id": call.call_id, "content": content})
        self._recorder.trace(
            "tool",
            tool=call.name,
            arguments=arguments if arguments is not None else call.raw_arguments,
            result=text,
            latency_ms=latency_ms,
        )

    async def _run_tool(self, name: str, arguments: dict[str, object]) -> CalledTool:
        """Unmask, run through the toolbox, re-mask; counts the call and an invalid outcome."""
        self.tool_calls += 1
        called = await serve_masked(self._ctx, self._masker, name, arguments)
        if isinstance(called.outcome, ToolError) and called.outcome.code in INVALID_CODES:
            self._invalid += 1
        return called

    async def _call(
        self, name: str, arguments: dict[str, object], *, note: str = "mode"
    ) -> CalledTool:
        """A tool call made for the decision mode (or the loop), traced like a model's."""
        started = self._monotonic()
        if note != "auto" and self.tool_calls >= self._budgets.max_tool_calls:
            outcome: ToolOutcome = self._error(
                ErrorCode.INVALID_ARGUMENTS, "The tool-call budget is spent.", "Stop."
            )
            called = CalledTool(outcome, outcome.model_dump_json())
        else:
            called = await self._run_tool(name, arguments)
            if note == "auto":
                self.tool_calls -= 1  # the loop's own finish is not the model's call
        self._recorder.trace(
            "tool",
            content=f"called by the {note}" if note == "mode" else "called by openbell",
            tool=name,
            arguments=json.dumps(arguments, default=str),
            result=called.text,
            latency_ms=self._ms_since(started),
        )
        return called

    def _error(self, code: ErrorCode, message: str, hint: str) -> ToolError:
        return ToolError(code=code, message=message, hint=hint, as_of=self._ctx.now)

    def _ms_since(self, started: float) -> int:
        return round((self._monotonic() - started) * 1000)

    def _flush_errors(self) -> None:
        self._recorder.errors(parse_failures=self._parse_failures, invalid_tool_calls=self._invalid)
        self._parse_failures = 0
        self._invalid = 0


def _loop_error(code: str, message: str, hint: str) -> str:
    """An error of the loop itself, in the shape of a `ToolError`."""
    return wire_json({"code": code, "message": message, "hint": hint})


def _too_large(tool: str, chars: int, limit: int) -> str:
    """What the model gets instead of a result of `chars` characters, over `limit`."""
    return _loop_error(
        RESULT_TOO_LARGE,
        f"The result of {cut(tool, 64)} is {chars} characters long, over the limit of {limit} "
        "for one message, so it was not sent.",
        "Ask for less: a shorter lookback, fewer symbols or a smaller limit.",
    )
