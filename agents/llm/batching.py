"""Group commit of the LLM agents' journals: one transaction per turn of the event loop.

This module owns `JournalBatch`. The agents of a slot run concurrently on one event loop, and each
hands its turn's trace entries and usage to the batch of its journal (`batch_for`, one per
journal) instead of writing them itself, then awaits `stored`. The first hand-off of a loop turn
schedules one write (`loop.call_soon`) of everything handed in until it runs, as one
`Journal.append_journals` transaction: the agents whose model answers were handled in the same
turn of the loop (a hundred of them, when their answers arrive together) write their turns
together, and each sends its next request only once its turn is stored. `write_now` writes what
is pending at once (a cycle's last flush: its trace is whole when it returns).

A write that fails is tried again one cycle at a time, so one cycle's bad write fails that cycle
only; its error is kept on the cycle's `Handed` ticket and raised by the cycle's next flush
(`Handed.check`). Entries handed in but not yet written when the process dies are lost, as the
rows of a turn not yet flushed always were: the trace is kept up to about the last model request.

A journal that holds a cycle's appends in memory until it writes them itself (a replay's unit of
work, `ReplayLedger`, says so through `BufferedJournal.journal_buffered`) has no transaction to
share: such a cycle's hand-off is appended at once, and its agent sends its next request without
waiting for the loop turn's other agents. (Held for one write, a hundred agents' answers handled
in one loop turn all waited for the last of them to be handled before any request left, and
stayed bunched turn after turn: with the replay's in-memory journal that wait bought nothing.)
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Sequence
from typing import Final, Protocol, runtime_checkable

from openbell.agents.protocol import Journal
from openbell.store.records import CycleUsage, JournalAppend, TraceEntry


@runtime_checkable
class BufferedJournal(Protocol):
    """A journal that may hold a cycle's appends in memory until it writes them (a replay's unit
    of work)."""

    def journal_buffered(self, cycle_id: int) -> bool:
        """Whether appending to `cycle_id`'s journal now only adds to memory (no transaction)."""
        ...


class Handed:
    """A cycle's hand-off to a `JournalBatch`: `written` once stored, `error` if it could not be."""

    __slots__ = ("append", "error", "written")

    def __init__(self, append: JournalAppend) -> None:
        self.append = append
        self.written = False
        self.error: Exception | None = None

    def check(self) -> None:
        """Raise the error of a failed write (the cycle must not go on as if it were stored)."""
        if self.error is not None:
            raise self.error


class JournalBatch:
    """Writes the journal appends handed in during one turn of the event loop together."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._buffered: Callable[[int], bool] | None = (
            journal.journal_buffered if isinstance(journal, BufferedJournal) else None
        )
        self._pending: list[Handed] = []
        self._scheduled_on: asyncio.AbstractEventLoop | None = None
        self._wrote: asyncio.Future[None] | None = None
        #: Writes made (transactions, but for a buffered journal's appends), and the appends in
        #: them (for the benchmark and tests).
        self.transactions = 0
        self.appends = 0

    def hand(
        self, cycle_id: int, entries: Sequence[TraceEntry], usage: CycleUsage | None
    ) -> Handed:
        """Queue one cycle's entries and usage for the next write; written at once when no event
        loop runs, or when the journal buffers the cycle's appends in memory (and none of the
        cycle's is still queued, so its entries stay in order)."""
        handed = Handed(JournalAppend(cycle_id=cycle_id, entries=tuple(entries), usage=usage))
        if (
            self._buffered is not None
            and self._buffered(cycle_id)
            and all(queued.append.cycle_id != cycle_id for queued in self._pending)
        ):
            self._write([handed])
            return handed
        self._pending.append(handed)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.write_now()
            return handed
        if self._scheduled_on is not loop:
            self._scheduled_on = loop
            self._wrote = loop.create_future()
            loop.call_soon(self.write_now)
        return handed

    async def stored(self, handed: Handed) -> None:
        """Wait until `handed` has been written (or failed: then raise its error)."""
        while not handed.written and handed.error is None:
            wrote = self._wrote
            if wrote is None or wrote.get_loop() is not asyncio.get_running_loop():
                self.write_now()  # scheduled on no loop, or on another one
                continue
            await asyncio.shield(wrote)
        handed.check()

    def write_now(self) -> None:
        """Write everything pending, in one transaction (then one cycle at a time if it fails)."""
        pending, self._pending, self._scheduled_on = self._pending, [], None
        wrote, self._wrote = self._wrote, None
        try:
            self._write(pending)
        finally:
            if wrote is not None and not wrote.done():
                wrote.set_result(None)

    def _write(self, pending: list[Handed]) -> None:
        if not pending:
            return
        self.transactions += 1
        self.appends += len(pending)
        try:
            self._journal.append_journals([handed.append for handed in pending])
        except Exception:  # noqa: BLE001 (tried again one by one, the error kept per cycle)
            self._one_by_one(pending)
            return
        for handed in pending:
            handed.written = True

    def _one_by_one(self, pending: list[Handed]) -> None:
        for handed in pending:
            try:
                self._journal.append_journals([handed.append])
            except Exception as exc:  # noqa: BLE001 (raised by the cycle's next flush)
                handed.error = exc
            else:
                handed.written = True


_BATCHES: Final[weakref.WeakKeyDictionary[Journal, JournalBatch]] = weakref.WeakKeyDictionary()


def batch_for(journal: Journal) -> JournalBatch:
    """The one batch of `journal` (shared by every cycle journaling to it), made on first use; a
    journal that cannot be weakly referenced gets a batch of its own each time."""
    try:
        batch = _BATCHES.get(journal)
    except TypeError:
        return JournalBatch(journal)
    if batch is None:
        batch = _BATCHES[journal] = JournalBatch(journal)
    return batch
