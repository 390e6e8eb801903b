"""Where the web's market views are computed: in the caller's thread, or in a worker process.

This module owns `ViewSource` (what `ops.web.memo.ViewMemo` builds a market view with),
`InProcessViews` (`ops.reports.market_reports.market_view` on the caller's engine, in the caller's
thread) and `WorkerViews`, which computes it in one worker process instead, so that a page's first
request after a slot does not hold the GIL of the process running the daemon's cycles: a crypto view
of the 50-agent, one-year benchmark ledger is 1.1-1.6 s of Python there, and about 50 ms of
unpickling here, while the caller's thread only waits on a future. Both keep the facts of the
markets' cycles between views and read only the cycles of the latest slots again
(`ops.reports.cycle_facts`). An account's factor
attribution (`ops.evaluation.attribution`, about a second an account on the demo's ledger, growing
with its snapshots) is computed the same way. An agent's report (a few indexed queries on top of the
view, 10-20 ms) is still built in the caller's process.

The worker is started on the first view, with `spawn` (a fork of a process holding threads and
an event loop is unsafe), and opens the same ledger read-only (`store.db.ledger_address`: the
same URL, secrets to mask and statement timeout); it logs nothing, ignores SIGINT (a Ctrl-C
in the terminal stops the server, which shuts the worker down) and runs at a lower priority
(`WORKER_NICENESS`): on a machine whose cores are busy, the daemon's cycles come first and a
page waits, since the view uses a core of its own for a second or more. Errors the view raises
(`ReportError`, database errors) come back as they are. A worker that dies (killed, out of
memory) breaks the pool: it is replaced and the view asked again, once; a second failure is
`ViewWorkerFailed`, as is a view asked after `close()`. `lifespan()` closes it with the server.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Final, Protocol, TypeVar

from sqlalchemy import Engine

from openbell.markets.errors import OpenbellError
from openbell.ops.evaluation.attribution.ledger_inputs import (
    DEFAULT_ATTRIBUTION,
    AccountAttribution,
    AttributionChoice,
)
from openbell.ops.evaluation.conventions import OPENBELL, Convention, convention_named
from openbell.ops.reports import market_reports as reports
from openbell.ops.reports.cycle_facts import SealedCycleFacts
from openbell.ops.reports.market_reports import MarketView
from openbell.store.db import LedgerAddress, ledger_address

_T = TypeVar("_T")

#: How much lower the worker's scheduling priority is than the server's (`os.nice`).
WORKER_NICENESS: Final = 10


class ViewWorkerFailed(OpenbellError):
    """The view worker process died twice in a row computing a view, or was shut down."""


class ViewSource(Protocol):
    """Computes a market's view over `[start, end)` (errors as
    `ops.reports.market_reports.market_view`), and an account's attribution (errors as
    `ops.evaluation.attribution.ledger_inputs.account_attribution`)."""

    def view(self, market: str, start: datetime | None, end: datetime | None) -> MarketView: ...

    def attribution(
        self, agent: str, market: str, start: datetime | None, end: datetime | None
    ) -> AccountAttribution: ...


class InProcessViews:
    """Market views computed in the caller's thread, on `engine`, under `convention`, and
    attributions as `attribution` picks them (default: every style, every symbol with bars).
    The facts of the markets' cycles are kept between views and read again from their mark on
    (`ops.reports.cycle_facts`), unless `incremental` is False."""

    def __init__(
        self,
        engine: Engine,
        convention: Convention = OPENBELL,
        attribution: AttributionChoice = DEFAULT_ATTRIBUTION,
        *,
        incremental: bool = True,
    ) -> None:
        self._engine = engine
        self._convention = convention
        self._attribution = attribution
        #: The cycle facts kept between views (None: every view reads them whole).
        self.kept = SealedCycleFacts() if incremental else None

    def view(self, market: str, start: datetime | None, end: datetime | None) -> MarketView:
        """`ops.reports.market_reports.market_view` of the market over the window."""
        return reports.market_view(
            self._engine, market, start, end, convention=self._convention, kept=self.kept
        )

    def attribution(
        self, agent: str, market: str, start: datetime | None, end: datetime | None
    ) -> AccountAttribution:
        """The account's attribution over the window."""
        return self._attribution.of(self._engine, agent, market, start, end)


class WorkerViews:
    """Market views computed in one worker process on the ledger of `engine` (see the module),
    under `convention`. Thread-safe; requests for views wait their turn in the worker."""

    def __init__(
        self,
        engine: Engine,
        convention: Convention = OPENBELL,
        attribution: AttributionChoice = DEFAULT_ATTRIBUTION,
    ) -> None:
        self._address = ledger_address(engine)
        self._convention = convention
        self._attribution = attribution
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False

    def view(self, market: str, start: datetime | None, end: datetime | None) -> MarketView:
        """The market's view over the window, computed in the worker (a worker that died is
        replaced and asked once more)."""
        name = self._convention.name
        return self._run(f"the {market} view", _market_view, market, start, end, name)

    def attribution(
        self, agent: str, market: str, start: datetime | None, end: datetime | None
    ) -> AccountAttribution:
        """The account's attribution over the window, computed in the worker (as `view`)."""
        return self._run(
            f"the attribution of {agent} in {market}", _attribution, agent, market, start, end
        )

    def _run(self, what: str, task: Callable[..., _T], *args: object) -> _T:
        for attempt in (1, 2):
            pool = self._current_pool()
            try:
                return pool.submit(task, *args).result()
            except BrokenProcessPool:
                self._discard(pool)
                if attempt == 2:
                    raise ViewWorkerFailed(
                        f"the view worker process died twice computing {what}"
                    ) from None
            except RuntimeError:  # submitted after `close()` shut the pool down
                if self._closed:
                    raise ViewWorkerFailed("the view worker is shut down") from None
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Shut the worker down (a view it is computing is finished first) and start no other."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """A server lifespan (`daemon.http.Lifespan`): closes the worker when the server stops."""
        try:
            yield
        finally:
            await asyncio.to_thread(self.close)

    def _current_pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise ViewWorkerFailed("the view worker is shut down")
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_open_ledger,
                    initargs=(self._address, self._attribution),
                )
            return self._pool

    def _discard(self, pool: ProcessPoolExecutor) -> None:
        """Replace the broken `pool` by a new one on the next view (once, whichever thread
        finds it broken first)."""
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)


#: The worker process's read-only engine, and the attribution it computes (`_open_ledger`).
_engine: Engine | None = None
_choice: AttributionChoice = DEFAULT_ATTRIBUTION
#: The facts of the markets' cycles the worker keeps between views (`ops.reports.cycle_facts`).
_kept = SealedCycleFacts()


def _open_ledger(address: LedgerAddress, attribution: AttributionChoice) -> None:
    """The worker's initializer: yield the CPU to the server's process, leave SIGINT to the
    server, open the ledger read-only, keep the attribution's choice."""
    global _engine, _choice
    os.nice(WORKER_NICENESS)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _engine = address.open_read_only()
    _choice = attribution


def _market_view(
    market: str, start: datetime | None, end: datetime | None, convention: str
) -> MarketView:
    """In the worker: the market's view over the window, under the convention named."""
    if _engine is None:
        raise RuntimeError("the view worker's ledger is not open")
    measured = convention_named(convention)
    return reports.market_view(_engine, market, start, end, convention=measured, kept=_kept)


def _attribution(
    agent: str, market: str, start: datetime | None, end: datetime | None
) -> AccountAttribution:
    """In the worker: the account's attribution over the window."""
    if _engine is None:
        raise RuntimeError("the view worker's ledger is not open")
    return _choice.of(_engine, agent, market, start, end)
