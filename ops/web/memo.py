"""Market views and agent reports remembered until the ledger changes: computed once a slot.

This module owns `ViewMemo`: it keeps the last `ops.reports.market_reports.market_view` of each
(market, window), the last `ops.reports.market_reports.report` and factor attribution of each
(agent, market, window) and any other value a caller `remember`s (the read model keeps NAV series
there), each with the `store.queries.ledger_version` it was built at, and gives it again while the
version is the same (one query of index lookups per request). A value of one market (its view, an
agent's report or attribution there, or any `remember`ed with `market`) is kept by that market's
version (`store.queries.market_version`) instead, so a slot of one market recomputes only its own
views. A leaderboard over a 50-agent, one-year ledger takes seconds to compute (it reads every NAV
snapshot and cycle of the market) but changes only when a slot writes to the ledger, so between
slots every request after the first is served from memory. A market view, and an attribution, is
built by the memo's `ops.web.view_worker.ViewSource`: in the calling thread by default, in a worker
process for the servers (`ops.web.app.web_parts`), so the recomputation after a slot does not take
the GIL from the daemon's cycles. Views of one key are built one at a time (a burst of requests
after a slot computes it once); the memo holds at most `size` values, dropping the least recently
used. Thread-safe: the API reads the ledger in Starlette's thread pool.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from sqlalchemy import Engine

from openbell.ops.evaluation.attribution.ledger_inputs import (
    DEFAULT_ATTRIBUTION,
    AccountAttribution,
    AttributionChoice,
)
from openbell.ops.evaluation.conventions import OPENBELL, Convention
from openbell.ops.reports import market_reports as reports
from openbell.ops.reports.contamination import CutoffSettings
from openbell.ops.reports.market_reports import AgentReport, MarketView
from openbell.ops.web.view_worker import InProcessViews, ViewSource
from openbell.store import queries

_Key = tuple[str | datetime | None, ...]
_T = TypeVar("_T")


class ViewMemo:
    """The market views and agent reports of one ledger, each kept until the ledger's version"""

    def __init__(
        self,
        engine: Engine,
        *,
        size: int = 128,
        views: ViewSource | None = None,
        convention: Convention = OPENBELL,
        attribution: AttributionChoice = DEFAULT_ATTRIBUTION,
        cutoffs: CutoffSettings | None = None,
    ) -> None:
        self._engine = engine
        #: The model registry (and configured models) the boards' cutoff marks are read with.
        self.cutoffs = CutoffSettings.bundled() if cutoffs is None else cutoffs
        self._views = InProcessViews(engine, convention, attribution) if views is None else views
        self._size = size
        self._values: OrderedDict[_Key, tuple[tuple[int, ...], object]] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[_Key, threading.Lock] = {}

    def view(
        self, market: str, start: datetime | None = None, end: datetime | None = None
    ) -> MarketView:
        """The market's view over `[start, end)` at the ledger's current version (errors as
        `reports.market_view`, and `ViewWorkerFailed` from a worker that keeps dying)."""
        return self.remember(
            MarketView,
            ("view", market, start, end),
            lambda: self._views.view(market, start, end),
            market=market,
        )

    def attribution(
        self, agent: str, market: str, start: datetime | None = None, end: datetime | None = None
    ) -> AccountAttribution:
        """The account's factor attribution over `[start, end)` at the ledger's current version,
        computed by the memo's `ViewSource` like a view (errors as
        `ops.evaluation.attribution.ledger_inputs.account_attribution`)."""
        return self.remember(
            AccountAttribution,
            ("attribution", agent, market, start, end),
            lambda: self._views.attribution(agent, market, start, end),
            market=market,
        )

    def report(
        self, agent: str, market: str, start: datetime | None = None, end: datetime | None = None
    ) -> AgentReport:
        """The agent's report over `[start, end)`, built on the market's `view` (errors as
        `reports.report`)."""
        return self.remember(
            AgentReport,
            ("report", agent, market, start, end),
            lambda: reports.report(
                self._engine, agent, market, start, end, view=self.view(market, start, end)
            ),
            market=market,
        )

    def remember(
        self, kind: type[_T], key: _Key, build: Callable[[], _T], *, market: str | None = None
    ) -> _T:
        """The value of `key` built at the ledger's current version: the kept one, or
        `build()`'s, kept (a `kind` instance; `key` names what it is, its first item the
        kind of value, e.g. `("nav", agent, market, start, end)`). With `market`, a value read
        from that market's rows only, the version is the market's (`queries.market_version`):
        another market's slot leaves it be."""
        version = (
            queries.ledger_version(self._engine)
            if market is None
            else queries.market_version(self._engine, market)
        )
        found = self._cached(kind, key, version)
        if found is not None:
            return found
        with self._lock:
            building = self._building.setdefault(key, threading.Lock())
        try:
            with building:
                found = self._cached(kind, key, version)
                if found is not None:
                    return found
                value = build()
                with self._lock:
                    self._values[key] = (version, value)
                    self._values.move_to_end(key)
                    while len(self._values) > self._size:
                        self._values.popitem(last=False)
                return value
        finally:
            # Built, found or failed: the key's lock goes (a failed build, such as a request for
            # a market that does not exist, must leave nothing behind per key a visitor chose).
            with self._lock:
                self._building.pop(key, None)

    def _cached(self, kind: type[_T], key: _Key, version: tuple[int, ...]) -> _T | None:
        with self._lock:
            entry = self._values.get(key)
            if entry is None or entry[0] != version:
                return None
            self._values.move_to_end(key)
            value = entry[1]
        assert isinstance(value, kind)  # noqa: S101 - each key holds one kind of value
        return value
