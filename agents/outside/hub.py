"""The open cycles of outside agents: what the MCP server acts on, and the budgets it enforces.

This module owns `CycleHub`, the open cycles of the outside agents (one per account at a time),
and `OpenCycle`, one of them. The agent of kind `mcp` (or `command`) opens its account's cycle
with `CycleHub.open` for the length of its decision: the cycle's `DecisionContext` and its toolbox
are the ones the MCP tools act on, through the same step as the built-in LLM agent
(`hooks.serve_masked`: the account's masker, `Toolbox.serve`, the market rules, point-in-time).
Opening mints a cycle token (`obc_...`), kept only as its sha256 hash and valid only while the
cycle is open. Every call made on a cycle, including `wait_for_cycle` and `finish`, is one trace
row on it (`role = "tool"`, arguments, result, latency), written through `ctx.journal` right after
the call is answered: in order, the rows written together, and all of them before the cycle
closes (so the answer does not wait for the ledger, and a failed write fails the cycle's close,
never silently).

Whoever serves the cycles learns of each one closing through `CycleHub.on_close` (the MCP server
ends the closed cycle token's sessions).

Budgets are enforced here, on the server side (`OutsideBudgets`): a call past the tool-call budget
gets a `budget_exhausted` error and is not run; past the wall deadline, or once the cycle closed,
a call gets `cycle_closed`. Calls on one cycle run one at a time, and closing waits for the call
in flight, so a cycle never changes after it closed. Wall time is an injected monotonic clock.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from openbell.agents.llm.completion import cut
from openbell.agents.llm.hooks import IdentityMasker, Masker, describe_rules, serve_masked
from openbell.agents.llm.recorder import MAX_TRACE_CHARS
from openbell.agents.masking import AliasMasker
from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import ErrorCode, PortfolioOut, ToolError
from openbell.markets.domain import Fill
from openbell.store.records import RecordedOrder, TraceEntry

CYCLE_TOKEN_PREFIX: Final = "obc_"  # noqa: S105  (a prefix, not a secret)
#: The tools of the MCP server that are not the toolbox's.
WAIT_FOR_CYCLE: Final = "wait_for_cycle"
FINISH: Final = "finish"
ACCOUNT_RESOURCE: Final = "openbell://account"
RULES_RESOURCE: Final = "openbell://rules"


def token_hash(token: str) -> str:
    """The sha256 hex digest a token is kept as."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class OutsideBudgets:
    """The server-side limits of one outside agent's cycle.

    `max_tool_calls` counts the toolbox tools a client calls on the cycle (`get_bars`,
    `place_order`, ...; `wait_for_cycle` and `finish` are not counted): past it a call is answered
    `budget_exhausted` and not run. `max_wall_s` is the cycle's deadline, from its opening: past
    it the cycle closes. An outside client's model turns happen in the client and cannot be seen
    from the server, so there is no turn budget; a client's tool calls are what is counted.
    """

    max_tool_calls: int = 50
    max_wall_s: float = 300.0

    def __post_init__(self) -> None:
        for name in ("max_tool_calls", "max_wall_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


@dataclass(frozen=True, slots=True)
class Served:
    """What one MCP call answers: the JSON `text` (masked), its parsed object, whether it is an
    error."""

    text: str
    is_error: bool

    @property
    def structured(self) -> dict[str, Any]:
        """The JSON object of `text`."""
        found: dict[str, Any] = json.loads(self.text)
        return found


class OpenCycle:
    """One outside agent's open cycle; see the module docstring.

    `token` is the cycle token in clear (for a launched command; never logged), `attended` is set
    once a client asked for the cycle or called a tool on it.
    """

    def __init__(
        self,
        *,
        ctx: DecisionContext,
        budgets: OutsideBudgets,
        masker: Masker,
        monotonic: Callable[[], float],
    ) -> None:
        self.ctx = ctx
        self.budgets = budgets
        self.masker = masker
        self.token = CYCLE_TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.token_hash = token_hash(self.token)
        self._monotonic = monotonic
        self._started = monotonic()
        self._finished = asyncio.Event()
        self._lock = asyncio.Lock()
        self.attended = False
        self.closed = False
        self.tool_calls = 0
        self._unwritten: list[TraceEntry] = []
        self._writing: asyncio.Task[None] | None = None

    @property
    def seconds_left(self) -> float:
        """Wall seconds until the deadline (negative past it)."""
        return self.budgets.max_wall_s - (self._monotonic() - self._started)

    @property
    def is_open(self) -> bool:
        """Whether calls are still served: not closed, not past the deadline."""
        return not self.closed and self.seconds_left > 0

    @property
    def finished(self) -> bool:
        """Whether `finish` was called (by the client, or by openbell at the deadline)."""
        return self.ctx.tools.finished

    async def wait_finished(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the client's `finish`; whether it came."""
        try:
            async with asyncio.timeout(max(timeout_s, 0.0)):
                await self._finished.wait()
        except TimeoutError:
            return self._finished.is_set()
        return True

    def _description(self) -> dict[str, object]:
        """The cycle as `wait_for_cycle` shows it, but the account: slot, market, the rules, the
        universe offered, the seconds left and the tool calls left."""
        ctx = self.ctx
        mask = self.masker.mask_text
        return {
            "status": "open",
            "cycle_id": ctx.cycle_id,
            "agent": ctx.agent_name,
            "market": ctx.market,
            "slot_at": mask(ctx.now.isoformat()),
            "deadline_in_s": round(self.seconds_left, 3),
            "tool_calls_left": max(self.budgets.max_tool_calls - self.tool_calls, 0),
            "rules": self._rules_text(),
            "universe": mask(" ".join(self._listing())).split(),
        }

    def _rules_text(self) -> str:
        """The rules as the built-in agent is told them: under masking, without the universe's
        name and with money in the account's unit."""
        masker = self.masker
        if not isinstance(masker, AliasMasker):
            return describe_rules(self.ctx)
        money = masker.money if masker.unit is not None else None
        return masker.mask_text(describe_rules(self.ctx, masked=True, money=money))

    def _listing(self) -> list[str]:
        symbols = self.ctx.universe.symbols
        return (
            masker.listing(symbols)
            if isinstance(masker := self.masker, AliasMasker)
            else list(symbols)
        )

    async def rules(self) -> Served:
        """The `openbell://rules` resource: the market and its rules as text, traced."""
        started = self._monotonic()
        async with self._lock:
            if not self.is_open:
                return self._closed_error()
            self.attended = True
            body = {"market": self.ctx.market, "rules": self._rules_text()}
            served = Served(json.dumps(body), is_error=False)
            self._trace(f"resource:{RULES_RESOURCE}", {}, served, started)
        return served

    async def account(self, limit: int) -> Served:
        """The `openbell://account` resource: the portfolio as `get_portfolio` shows it, and the
        account's latest `limit` orders before the slot with their outcomes (under price rebasing
        without their prices), traced."""
        started = self._monotonic()
        async with self._lock:
            if not self.is_open:
                return self._closed_error()
            self.attended = True
            portfolio = await serve_masked(self.ctx, self.masker, "get_portfolio", {})
            rebased = isinstance(self.masker, AliasMasker) and self.masker.unit is not None
            orders = [
                _order_json(order, with_prices=not rebased)
                for order in await self.ctx.tools.recent_orders(limit)
            ]
            body = {
                "portfolio": json.loads(portfolio.text),
                "recent_orders": json.loads(self.masker.mask_text(json.dumps(orders))),
            }
            served = Served(json.dumps(body), is_error=False)
            self._trace(f"resource:{ACCOUNT_RESOURCE}", {}, served, started)
        return served

    async def greet(self, arguments: Mapping[str, object]) -> Served:
        """`wait_for_cycle` answered with this cycle: its description with the account in it (as
        `get_portfolio` shows it), traced on the cycle."""
        started = self._monotonic()
        async with self._lock:
            if not self.is_open:
                return self._closed_error()
            self.attended = True
            body = self._description()
            account = await serve_masked(self.ctx, self.masker, "get_portfolio", {})
            if isinstance(account.outcome, PortfolioOut):
                body["account"] = json.loads(account.text)
            served = Served(json.dumps(body), is_error=False)
            self._trace(WAIT_FOR_CYCLE, arguments, served, started)
        return served

    async def call(self, name: str, arguments: Mapping[str, object]) -> Served:
        """Run toolbox tool `name` on this cycle within its budgets, traced; `finish` ends it."""
        started = self._monotonic()
        async with self._lock:
            if not self.is_open:
                return self._closed_error()
            self.attended = True
            if name != FINISH and self.tool_calls >= self.budgets.max_tool_calls:
                served = self._error(
                    ErrorCode.BUDGET_EXHAUSTED,
                    f"Not run: this cycle's budget of {self.budgets.max_tool_calls} tool calls "
                    "is spent.",
                    "Call finish.",
                )
            else:
                if name != FINISH:
                    self.tool_calls += 1
                called = await serve_masked(self.ctx, self.masker, name, dict(arguments))
                served = Served(called.text, is_error=isinstance(called.outcome, ToolError))
            self._trace(name, arguments, served, started)
            if self.ctx.tools.finished:
                self._finished.set()
        return served

    async def close(self, reason: str) -> None:
        """Close the cycle after the call in flight, and refuse every later call; a client that
        came and did not `finish` has it called for it (traced as called by openbell). Returns
        once every trace row of the cycle is written."""
        async with self._lock:
            self.closed = True
            if self.attended and not self.ctx.tools.finished:
                started = self._monotonic()
                arguments: dict[str, object] = {"summary": f"Cycle ended by openbell: {reason}."}
                called = await serve_masked(self.ctx, self.masker, FINISH, arguments)
                served = Served(called.text, is_error=isinstance(called.outcome, ToolError))
                self._trace(FINISH, arguments, served, started, content="called by openbell")
        if self._writing is not None:
            await self._writing  # raises what a write raised

    def _closed_error(self) -> Served:
        return self._error(
            ErrorCode.CYCLE_CLOSED,
            "This cycle is closed (finished, or past its deadline); nothing more is served.",
            "Call wait_for_cycle for the next one.",
        )

    def _error(self, code: ErrorCode, message: str, hint: str) -> Served:
        error = ToolError(code=code, message=message, hint=hint, as_of=self.ctx.now)
        return Served(self.masker.mask_text(error.model_dump_json()), is_error=True)

    def _trace(
        self,
        tool: str,
        arguments: Mapping[str, object],
        served: Served,
        started: float,
        *,
        content: str = "called over MCP",
    ) -> None:
        journal = self.ctx.journal
        if journal is None:
            return
        elapsed = self._monotonic() - self._started
        entry = TraceEntry(
            cycle_id=self.ctx.cycle_id,
            role="tool",
            at=self.ctx.now + timedelta(seconds=max(elapsed, 0.0)),
            content=content,
            tool=cut(tool, 200),
            arguments=cut(json.dumps(dict(arguments), default=str), MAX_TRACE_CHARS),
            result=cut(served.text, MAX_TRACE_CHARS),
            latency_ms=round((self._monotonic() - started) * 1000),
        )
        self._unwritten.append(entry)
        if self._writing is None or self._writing.done():
            self._writing = asyncio.get_running_loop().create_task(self._write(self._writing))

    async def _write(self, before: asyncio.Task[None] | None) -> None:
        """Write the unwritten trace rows, in order, once the call that left them is answered
        (this task runs after the handler returned); an earlier write's failure is raised again
        (the rows stay unwritten)."""
        if before is not None:
            await before
        await asyncio.sleep(0)  # let the answer go out first
        journal = self.ctx.journal
        while journal is not None and self._unwritten:
            entries, self._unwritten = self._unwritten, []
            journal.append_journal(self.ctx.cycle_id, entries)


class CycleHub:
    """The open cycles of outside agents, by account; see the module docstring.

    `mcp_url` is set by whoever serves the MCP endpoint (the URL of `/mcp`), for a launched
    command's config.
    """

    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._cycles: dict[int, OpenCycle] = {}
        self._changed = asyncio.Condition()
        self._closed_listeners: list[Callable[[OpenCycle], Awaitable[None]]] = []
        self.mcp_url: str | None = None

    def on_close(self, listener: Callable[[OpenCycle], Awaitable[None]]) -> Callable[[], None]:
        """Await `listener(cycle)` each time a cycle has closed (its trace rows written), until
        the function returned is called."""
        self._closed_listeners.append(listener)
        return lambda: self._closed_listeners.remove(listener)

    @asynccontextmanager
    async def open(
        self,
        ctx: DecisionContext,
        *,
        budgets: OutsideBudgets,
        masker: Masker | None = None,
        reason: str = "deadline",
    ) -> AsyncIterator[OpenCycle]:
        """Open the cycle of `ctx` for outside calls until the block exits; then close it (see
        `OpenCycle.close`; `reason` is said in the finish openbell calls for an absent client)."""
        if ctx.account_id in self._cycles:
            raise ValueError(f"account {ctx.account_id} already has an open cycle")
        cycle = OpenCycle(
            ctx=ctx,
            budgets=budgets,
            masker=masker if masker is not None else IdentityMasker(),
            monotonic=self._monotonic,
        )
        async with self._changed:
            self._cycles[ctx.account_id] = cycle
            self._changed.notify_all()
        try:
            yield cycle
        finally:
            if self._cycles.get(ctx.account_id) is cycle:
                del self._cycles[ctx.account_id]
            await asyncio.shield(self._close(cycle, reason))

    async def _close(self, cycle: OpenCycle, reason: str) -> None:
        try:
            await cycle.close(reason)
        finally:
            for listener in list(self._closed_listeners):
                await listener(cycle)

    def by_token(self, token: str) -> OpenCycle | None:
        """The open cycle whose cycle token is `token`, if any."""
        wanted = token_hash(token)
        for cycle in self._cycles.values():
            if secrets.compare_digest(cycle.token_hash, wanted) and cycle.is_open:
                return cycle
        return None

    def waiting_any(self) -> list[OpenCycle]:
        """Every open cycle, by account."""
        return [cycle for _account, cycle in sorted(self._cycles.items()) if cycle.is_open]

    def waiting(self, agent: str, market: str | None = None) -> list[OpenCycle]:
        """The open, unfinished cycles of `agent` (in `market`, when given), oldest account
        first."""
        return [
            cycle
            for _account, cycle in sorted(self._cycles.items())
            if cycle.ctx.agent_name == agent
            and (market is None or cycle.ctx.market == market)
            and cycle.is_open
            and not cycle.finished
        ]

    async def wait_for(self, agent: str, market: str | None, timeout_s: float) -> list[OpenCycle]:
        """Wait up to `timeout_s` until `agent` has an open cycle (in `market`); those found (none
        when the wait timed out)."""
        try:
            async with asyncio.timeout(max(timeout_s, 0.0)), self._changed:
                await self._changed.wait_for(lambda: bool(self.waiting(agent, market)))
        except TimeoutError:
            pass
        return self.waiting(agent, market)


def _order_json(order: RecordedOrder, *, with_prices: bool) -> dict[str, object]:
    """One recorded order as the account resource lists it."""
    outcome = order.outcome
    body: dict[str, object] = {
        "seq": order.seq,
        "placed_at": order.placed_at.isoformat() if order.placed_at is not None else None,
        "symbol": order.symbol,
        "side": order.side.value if order.side is not None else None,
        "shares": str(order.quantity) if order.quantity is not None else None,
    }
    if isinstance(outcome, Fill):
        body["status"] = "filled"
        body["filled_shares"] = str(outcome.quantity)
        if with_prices:
            body.update(
                price=str(outcome.price), notional=str(outcome.notional), fees=str(outcome.fees)
            )
    else:
        body["status"] = "rejected"
        body["reject_reason"] = outcome.reason.value
    return body
