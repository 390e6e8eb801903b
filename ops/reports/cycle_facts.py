"""The facts of a market's cycles a view reads, kept between views and read again incrementally.

This module owns `CycleFacts` (each account's cycle activity, net trades and protocol facts in a
window: `store.queries.cycle_activity_of`, `store.behaviour_facts`) and `SealedCycleFacts`, which
keeps the last facts read for each (accounts, window) and, asked again, reads only the cycles from
its mark on. A cycle that ended is sealed (`store.chain`: its orders, fills and trace are written
before it finishes, and no write changes a cycle that is not `claimed`), so the facts of the
cycles before the mark (the window's last slot, or the first slot with a cycle still `claimed`,
whichever is earlier) are the same at every later read, unless a row appears, disappears or is
replaced behind the mark (a `missed` cycle recorded late, a deleted cycle, a claim superseded by a
new row). That is told by a census of the cycles behind the mark (`store.behaviour_facts.
cycle_census`: their count, largest id and the ids' sum, one query), taken again at every read:
when it moved, the facts are read whole again. The facts kept and read again are the same values,
in the same order, as a whole read's (`tests/integration/test_incremental_view.py`).
Thread-safe; different windows are read side by side, one window's reads one at a time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine

from openbell.agents.kinds import RATINGS_TOOL
from openbell.store import queries
from openbell.store.behaviour_facts import (
    AccountTrades,
    CycleCensus,
    ProtocolFacts,
    cycle_census,
    cycle_trades_of,
    protocol_facts_of,
)
from openbell.store.queries import CycleCounts
from openbell.store.records import CycleStatus

_Key = tuple[tuple[int, ...], datetime | None, datetime | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleFacts:
    """The accounts' cycles in a window (each account's in slot order): what each did
    (`activity`), its net trades with the accounts' opening quantities (`trades`), and how it
    ended (`protocol`)."""

    activity: Mapping[int, Sequence[CycleCounts]]
    trades: Mapping[int, AccountTrades]
    protocol: Mapping[int, Sequence[ProtocolFacts]]


def read_cycle_facts(
    engine: Engine,
    account_ids: Sequence[int],
    start: datetime | None,
    end: datetime | None,
    *,
    opening: bool = True,
) -> CycleFacts:
    """The facts of the accounts' cycles in `[start, end)`, read whole (without `opening`, the
    accounts' opening quantities are left empty: `store.behaviour_facts.cycle_trades_of`)."""
    return CycleFacts(
        activity=queries.cycle_activity_of(engine, account_ids, start, end),
        trades=cycle_trades_of(engine, account_ids, start, end, with_opening=opening),
        protocol=protocol_facts_of(engine, account_ids, start, end, report_tool=RATINGS_TOOL),
    )


@dataclass(frozen=True, slots=True)
class _Kept:
    facts: CycleFacts
    mark: datetime  # the cycles before it are sealed
    behind: CycleCensus  # the census of the window's cycles before the mark
    before_start: CycleCensus | None  # of the cycles before the window (its openings)


class SealedCycleFacts:
    """The last facts read of each (accounts, window), at most `size` of them, each read again
    from its mark on (see the module)."""

    def __init__(self, size: int = 16) -> None:
        self._size = size
        self._kept: OrderedDict[_Key, _Kept] = OrderedDict()
        self._lock = threading.Lock()
        self._reading: dict[_Key, threading.Lock] = {}
        #: How many reads were whole and how many incremental (for tests and benchmarks).
        self.whole_reads = 0
        self.incremental_reads = 0

    def read(
        self,
        engine: Engine,
        account_ids: Sequence[int],
        start: datetime | None,
        end: datetime | None,
    ) -> CycleFacts:
        """The facts of the accounts' cycles in `[start, end)`, the same as `read_cycle_facts`'s."""
        key: _Key = (tuple(account_ids), start, end)
        with self._lock:
            reading = self._reading.setdefault(key, threading.Lock())
        with reading:
            with self._lock:
                kept = self._kept.get(key)
            before_start = None if start is None else cycle_census(engine, account_ids, None, start)
            facts = None
            if (
                kept is not None
                and kept.before_start == before_start
                and cycle_census(engine, account_ids, start, kept.mark) == kept.behind
            ):
                facts = _appended(
                    kept, read_cycle_facts(engine, account_ids, kept.mark, end, opening=False)
                )
                with self._lock:
                    self.incremental_reads += 1
            if facts is None:
                facts = read_cycle_facts(engine, account_ids, start, end)
                with self._lock:
                    self.whole_reads += 1
            self._keep(key, facts, before_start)
            return facts

    def _keep(self, key: _Key, facts: CycleFacts, before_start: CycleCensus | None) -> None:
        """Keep `facts` with their mark, when the three reads agree on the sealed cycles."""
        found = _sealed(facts)
        with self._lock:
            if found is None:
                self._kept.pop(key, None)
                self._reading.pop(key, None)
                return
            mark, behind = found
            self._kept[key] = _Kept(
                facts=facts, mark=mark, behind=behind, before_start=before_start
            )
            self._kept.move_to_end(key)
            while len(self._kept) > self._size:
                dropped, _ = self._kept.popitem(last=False)
                self._reading.pop(dropped, None)


def _sealed(facts: CycleFacts) -> tuple[datetime, CycleCensus] | None:
    """The mark of `facts` (the last slot, or the first with a `claimed` cycle if earlier) and
    the census of their cycles before it; None when there is no cycle, or when the three reads
    do not show the same ended cycles before the mark (a cycle written between them)."""
    slots = [cycle.slot_at for cycles in facts.activity.values() for cycle in cycles]
    if not slots:
        return None
    claimed = [
        cycle.slot_at
        for cycles in facts.activity.values()
        for cycle in cycles
        if cycle.status is CycleStatus.CLAIMED
    ]
    mark = min([max(slots), *claimed])
    ids: list[int] = []
    for account_id, cycles in facts.activity.items():
        sealed = [(c.cycle_id, c.status) for c in cycles if c.slot_at < mark]
        traded = [
            (c.cycle_id, c.status) for c in facts.trades[account_id].cycles if c.slot_at < mark
        ]
        ended = [(f.cycle_id, f.status) for f in facts.protocol[account_id]][: len(sealed)]
        if sealed != traded or sealed != ended:
            return None
        ids.extend(cycle_id for cycle_id, _ in sealed)
    return mark, CycleCensus.of(ids)


def _appended(kept: _Kept, later: CycleFacts) -> CycleFacts:
    """The kept facts before the kept mark, followed by `later` (read from the mark on)."""
    mark = kept.mark
    old = kept.facts
    activity: dict[int, list[CycleCounts]] = {}
    trades: dict[int, AccountTrades] = {}
    protocol: dict[int, list[ProtocolFacts]] = {}
    for account_id, cycles in old.activity.items():
        sealed = [cycle for cycle in cycles if cycle.slot_at < mark]
        activity[account_id] = [*sealed, *later.activity[account_id]]
        before = old.trades[account_id]
        trades[account_id] = AccountTrades(
            opening=before.opening,
            cycles=(
                *(cycle for cycle in before.cycles if cycle.slot_at < mark),
                *later.trades[account_id].cycles,
            ),
        )
        protocol[account_id] = [
            *old.protocol[account_id][: len(sealed)],
            *later.protocol[account_id],
        ]
    return CycleFacts(activity=activity, trades=trades, protocol=protocol)
