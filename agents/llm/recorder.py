"""The trace and usage bookkeeping of one LLM agent's cycle.

This module owns `Recorder`: every message, reasoning, tool call with its result, failed request
to the model (an `attempt` row: its error, message and latency), error and stop of a cycle becomes
a `TraceEntry` (secrets masked, then each text field cut to `MAX_TRACE_CHARS`). It also turns each
completion's usage into a `CycleUsage` increment (cost from the model's `Prices`), counts every
request and failed request with their latency, and adds the parse-failure and invalid-tool-call
counts. Entries and usage are held until `flush`, which hands them to the journal's
`JournalBatch` (`batching.py`). Before every model request the loop awaits `store`: the batch
writes the turns of every cycle handed in during that turn of the event loop in one transaction
(a hundred agents share one SQLite writer), so a cycle cut short keeps its trace up to its last
model request. The last flush, when the cycle ends however it ends, writes at once, so a cycle's
trace is whole when `decide` returns. A write that failed raises in the cycle that handed it.
Trace times are the decision time plus the monotonic time elapsed since the cycle started: agents
never read the wall clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Final

import structlog

from openbell.agents.llm.batching import Handed, batch_for
from openbell.agents.llm.client import Attempt
from openbell.agents.llm.completion import Usage, cut
from openbell.agents.llm.model_watch import ModelIdentity, ModelWatch
from openbell.agents.protocol import DecisionContext
from openbell.markets.errors import ModelSplit
from openbell.store.records import CycleUsage, TraceEntry
from openbell.store.redact import Redactor

#: Each stored text field of a trace row is cut to this many characters.
MAX_TRACE_CHARS: Final = 65_536
_PER_MTOK: Final = Decimal(1_000_000)

log = structlog.stdlib.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Prices:
    """A model's prices per million tokens; cached input tokens at `cached_per_mtok` (default:
    the input price)."""

    in_per_mtok: Decimal
    out_per_mtok: Decimal
    cached_per_mtok: Decimal | None = None

    def __post_init__(self) -> None:
        for price in (self.in_per_mtok, self.out_per_mtok, self.cached_per_mtok):
            if price is not None and (not price.is_finite() or price < 0):
                raise ValueError(f"prices must be finite and non-negative, got {price}")

    def cost(self, usage: Usage) -> Decimal:
        """The cost of `usage`, exactly."""
        cached_price = (
            self.cached_per_mtok if self.cached_per_mtok is not None else self.in_per_mtok
        )
        uncached = usage.tokens_in - usage.tokens_cached
        total = (
            uncached * self.in_per_mtok
            + usage.tokens_cached * cached_price
            + usage.tokens_out * self.out_per_mtok
        )
        return total / _PER_MTOK


class Recorder:
    """Writes one cycle's trace and usage; see the module docstring."""

    def __init__(
        self,
        ctx: DecisionContext,
        *,
        redact: Redactor,
        prices: Prices | None,
        monotonic: Callable[[], float],
        watch: ModelWatch | None = None,
    ) -> None:
        self._ctx = ctx
        self._watch = watch
        self._redact = redact
        self._prices = prices
        self._monotonic = monotonic
        self._started = monotonic()
        self.usage = CycleUsage()
        self._pending: list[TraceEntry] = []
        self._handed: list[Handed] = []
        # Marks the cycle as an LLM cycle (usage columns set) even if no answer ever comes.
        self._pending_usage: CycleUsage | None = CycleUsage(cost=self._zero_cost())

    def _zero_cost(self) -> Decimal | None:
        return Decimal(0) if self._prices is not None else None

    def _text(self, text: str | None) -> str | None:
        return None if text is None else cut(self._redact.mask(text), MAX_TRACE_CHARS)

    def trace(
        self,
        role: str,
        *,
        content: str | None = None,
        tool: str | None = None,
        arguments: str | None = None,
        result: str | None = None,
        tokens_in: int | None = None,
        tokens_out: int | None = None,
        latency_ms: int | None = None,
        identity: ModelIdentity | None = None,
        request_digest: str | None = None,
        response: str | None = None,
    ) -> None:
        """Record one trace row (redacted and cut), written at the next `flush`; an exchange's
        row carries the model `identity` its response reported, and the exchange as recorded
        (`answers.py`): the request's digest and the `response` body (redacted, never cut: a
        re-run is answered with it)."""
        entry = TraceEntry(
            cycle_id=self._ctx.cycle_id,
            role=role,
            at=self._ctx.now + timedelta(seconds=self._monotonic() - self._started),
            content=self._text(content),
            tool=None if tool is None else cut(self._redact.mask(tool), 200),
            arguments=self._text(arguments),
            result=self._text(result),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            latency_ms=latency_ms,
            model=None if identity is None else identity.model,
            fingerprint=None if identity is None else identity.fingerprint,
            revision=None if identity is None else identity.revision,
            request_digest=request_digest,
            response=None if response is None else self._redact.mask(response),
        )
        self._pending.append(entry)

    def exchange(self, identity: ModelIdentity, *, split: bool = False) -> None:
        """Note the identity an exchange's response reported; when it differs from the account's
        previous one (`ModelWatch`), record a `model_changed` row and log it, and with `split`
        raise `ModelSplit` (the answer is not acted on: the account is split)."""
        if self._watch is None:
            return
        previous = self._watch.observe(self._ctx.account_id, identity)
        if previous is None:
            return
        log.warning(
            "model_changed",
            agent=self._ctx.agent_name,
            account_id=self._ctx.account_id,
            cycle_id=self._ctx.cycle_id,
            before=previous.describe(),
            after=identity.describe(),
        )
        self.trace(
            "model_changed",
            content=f"the model answered as {identity.describe()} (before: {previous.describe()})"
            + ("; the account is split: the agent goes on in a new account" if split else ""),
        )
        if split:
            raise ModelSplit(previous.describe(), identity.describe())

    def attempt(self, attempt: Attempt) -> None:
        """Count one request to the model and its latency; a failed one is also an `attempt`
        row: "attempt N failed, ERROR: MESSAGE; retrying in S s" (or "; gave up")."""
        self._add(
            CycleUsage(
                llm_attempts=1,
                llm_failed_attempts=0 if attempt.ok else 1,
                llm_latency_ms=attempt.latency_ms,
                cost=self._zero_cost(),
            )
        )
        if attempt.ok:
            return
        then = (
            "gave up" if attempt.retry_in_s is None else f"retrying in {attempt.retry_in_s:.1f} s"
        )
        self.trace(
            "attempt",
            content=f"attempt {attempt.number} failed, {attempt.error}: {attempt.message}; {then}",
            latency_ms=attempt.latency_ms,
        )

    def completion(self, usage: Usage) -> None:
        """Add one completion's tokens and cost (its latency came with its `attempt`)."""
        self._add(
            CycleUsage(
                tokens_in=usage.tokens_in,
                tokens_out=usage.tokens_out,
                tokens_cached=usage.tokens_cached,
                usage_estimated=usage.estimated,
                cost=self._prices.cost(usage) if self._prices is not None else None,
            )
        )

    def errors(self, *, parse_failures: int, invalid_tool_calls: int) -> None:
        """Add parse failures and invalid tool calls."""
        if parse_failures or invalid_tool_calls:
            self._add(
                CycleUsage(
                    parse_failures=parse_failures,
                    invalid_tool_calls=invalid_tool_calls,
                    cost=self._zero_cost(),
                )
            )

    def _add(self, delta: CycleUsage) -> None:
        self.usage = self.usage + delta
        pending = self._pending_usage
        self._pending_usage = delta if pending is None else pending + delta

    def flush(self, *, now: bool = False) -> None:
        """Hand the entries and usage recorded since the last flush to the journal's batch, to be
        written together with the other cycles' of this turn of the event loop; with `now`, write
        everything pending at once. Raises the error of an earlier hand-off that failed.

        Without a journal they are dropped (nothing is kept in memory but the usage total).
        """
        journal = self._ctx.journal
        entries, usage = self._pending, self._pending_usage
        self._pending, self._pending_usage = [], None
        if journal is None:
            return
        batch = batch_for(journal)
        if entries or usage is not None:
            self._handed.append(batch.hand(self._ctx.cycle_id, entries, usage))
        if now:
            batch.write_now()
        for handed in self._handed:
            handed.check()
        self._handed = [handed for handed in self._handed if not handed.written]

    async def store(self) -> None:
        """`flush`, then wait until what was handed is written (with the other cycles' of this
        turn of the event loop, in one transaction)."""
        self.flush()
        journal = self._ctx.journal
        if journal is None:
            return
        batch = batch_for(journal)
        for handed in self._handed:
            await batch.stored(handed)
        self._handed = []

    @property
    def tokens_used(self) -> int:
        """Tokens in and out so far in this run."""
        return self.usage.tokens_in + self.usage.tokens_out
