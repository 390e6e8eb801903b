"""The agent protocol: what every agent, baseline or LLM, is given and must do in one cycle.

An agent is called once per decision cycle with a `DecisionContext`. It observes the market and its
account and trades only through `ctx.tools` (the toolbox bound to its account, cycle and `now`), so
the market rules and the point-in-time rule apply to every kind of agent alike. It returns nothing:
what it did is in the ledger (orders, fills) and in the toolbox (the finish summary). An agent that
talks to a model also writes its trace and usage to `ctx.journal` (the ledger, in a daemon), and a
masked one reads and stores its account's masking key through `ctx.masking_keys` (the ledger too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Protocol

from openbell.markets.domain import check_utc
from openbell.markets.rules import MarketRules
from openbell.markets.universes import Universe
from openbell.store.masking_keys import MaskingKey
from openbell.store.records import CycleUsage, JournalAppend, TraceEntry

if TYPE_CHECKING:
    from openbell.agents.toolbox import Toolbox


class Journal(Protocol):
    """Where an agent records its cycle's trace and LLM usage (`Ledger` is one)."""

    def append_journal(
        self, cycle_id: int, entries: Sequence[TraceEntry], usage: CycleUsage | None = None
    ) -> tuple[TraceEntry, ...]:
        """Append `entries` to the cycle's trace and add `usage` to its LLM usage, together; the
        stored entries, with their `seq`s."""
        ...

    def append_journals(self, appends: Sequence[JournalAppend]) -> tuple[TraceEntry, ...]:
        """Several cycles' appends, in order, together; the stored entries."""
        ...


class MaskingKeys(Protocol):
    """Where a masked agent keeps its account's masking key (`Ledger` is one)."""

    def masking_key(self, account_id: int) -> MaskingKey | None:
        """The stored key of `account_id`, or None when there is none yet."""
        ...

    def save_masking_key(self, key: MaskingKey) -> MaskingKey:
        """Store what of `key` is missing; the stored key (an earlier writer's wins)."""
        ...


class Spending(Protocol):
    """Where an agent's model spend is read from (`Ledger` is one)."""

    def llm_spend(self, account_id: int, start: datetime | None, end: datetime) -> Decimal:
        """The priced cost of the account's cycles whose slot is in `[start, end)` (`start` None:
        from the first)."""
        ...

    def season_at(self, at: datetime) -> tuple[str, datetime, datetime | None] | None:
        """The season whose window holds `at` (the last opened, if several do): its name, first
        instant and the instant after its last day (None: open-ended); None outside any."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionContext:
    """Everything an agent gets for one cycle. `now` is the slot time; nothing after it is seen.

    `universe` is the universe offered at `now` (the toolbox's: the members of that day with a bar
    ended by `now`), the only symbols an agent may be told about or buy. `roster` is the whole
    universe, every member of every date (default: `universe`), for what must stay the same from
    cycle to cycle whatever is offered (masking's alias map); it is never shown or traded from.
    `spending` is where an LLM agent with dollar caps reads what it spent before this process.
    """

    now: datetime
    market: str
    agent_name: str
    account_id: int
    cycle_id: int
    universe: Universe
    rules: MarketRules
    tools: Toolbox
    journal: Journal | None = None
    masking_keys: MaskingKeys | None = None
    roster: Universe | None = None
    spending: Spending | None = None

    def __post_init__(self) -> None:
        check_utc("now", self.now)
        universe, roster = self.universe, self.whole_universe
        checked = _within.get(id(universe))
        if universe is roster or (
            checked is not None and checked[0] is universe and checked[1] is roster
        ):
            return
        outside = sorted(set(universe.symbols) - set(roster.symbols))
        if outside:
            raise ValueError(f"offered symbols {outside} are not in the roster")
        if len(_within) >= _WITHIN_KEPT:
            _within.clear()
        _within[id(universe)] = (universe, roster)

    @property
    def whole_universe(self) -> Universe:
        """`roster`, or `universe` when no roster was given."""
        return self.roster if self.roster is not None else self.universe


#: An offered universe found within its roster, by the offered one's id (a universe is frozen, and
#: a toolbox offers the same object from slot to slot while the members offered stay the same).
_within: dict[int, tuple[Universe, Universe]] = {}
_WITHIN_KEPT = 64


class Agent(Protocol):
    """One trading agent. `decide` may call any tool any number of times within the budgets."""

    @property
    def name(self) -> str:
        """The agent's configured name (unique across the arena)."""
        ...

    @property
    def kind(self) -> str:
        """The agent's kind, e.g. `buy_and_hold` or `llm`."""
        ...

    async def decide(self, ctx: DecisionContext) -> None:
        """Observe and trade through `ctx.tools` for the cycle at `ctx.now`."""
        ...
