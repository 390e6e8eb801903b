"""The paper ledger, the store's one facade: agents, accounts, cycles, orders with their fills,
corporate actions, traces, masking keys, NAV snapshots, agent tokens, strategies with their runs
and verdicts, and hedging agents' pairs.

`Ledger` is the only writer of trading state and the only place that turns rows into domain values
(`AccountState`, `Fill`, `Rejection`) and store records (`RecordedOrder`, `NavSnapshot`). Every
caller outside `openbell.store` goes through it: the modules behind it (`accounts.py`, `cycles.py`,
`orders.py`, `agent_tokens.py`, `entitlements.py`, `snapshots.py`, `rows.py`) are private to the
store, which an import-linter contract checks. One facade costs the fewest changes (the agents, the
daemon and the tests all hold a `Ledger`) and keeps one engine, one writer and one transaction
discipline for every write. `Ledger` is made of `Accounts`, `Cycles`, `Orders` and `AgentTokens`,
each owning its concept and its transactions in its own module, rather than forwarding to them
method by method.

Writes lock the account row first (`SELECT ... FOR UPDATE` on Postgres, `BEGIN IMMEDIATE` on
SQLite), so writers of one account run one at a time and fill ids grow in commit order; a
unique-key violation left over from a race is answered with the stored row. The ledger refuses
(with `LedgerBreach`, writing nothing) an order that would make cash or a holding negative; the
rules should have rejected it. A split or cash dividend is applied the same way as an order: one
transaction per (account, action), at most once (`entitlements.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Final

from sqlalchemy import bindparam, func, select
from sqlalchemy.exc import IntegrityError

from openbell.markets.corporate_actions import CorporateAction
from openbell.markets.domain import check_utc
from openbell.store.accounts import Accounts
from openbell.store.agent_tokens import AgentTokens
from openbell.store.core_tables import CYCLE_TABLE, FILL_TABLE
from openbell.store.cycles import Cycles
from openbell.store.entitlements import (
    check_order,
    entitled_quantity,
    insert_action,
    stored_action,
)
from openbell.store.hedge_pairs import HedgePairs
from openbell.store.margin_ledger import MarginLedger
from openbell.store.masking_keys import MaskingKey, read_masking_key, save_masking_key
from openbell.store.orders import Orders
from openbell.store.records import (
    AppliedAction,
    CycleUsage,
    JournalAppend,
    NavSnapshot,
    SnapshotKind,
    TraceEntry,
)
from openbell.store.rows import get_account
from openbell.store.seasons import season_at
from openbell.store.snapshots import insert_snapshot, locked_cash, stored_snapshot
from openbell.store.strategy_judgements import StrategyJudgements
from openbell.store.strategy_runs import StrategyRuns
from openbell.store.traces import (
    append_journal,
    append_journals,
    cycle_traces,
    llm_spend,
    usage_of,
)


class Ledger(
    Accounts,
    Cycles,
    Orders,
    AgentTokens,
    StrategyRuns,
    StrategyJudgements,
    HedgePairs,
    MarginLedger,
):
    """The exact paper ledger on one engine (SQLite or Postgres), at the migrations' head.

    Its agents and accounts (`Accounts`), its cycles (`Cycles`), its orders (`Orders`) and its
    agents' bearer tokens (`AgentTokens`) each come from their own module, as do shorting
    accounts' borrow fees and margin calls (`MarginLedger`), strategy-code agents' strategies and
    runs (`StrategyRuns`) and their judges' verdicts (`StrategyJudgements`), and hedging agents'
    picked pairs (`HedgePairs`); corporate actions, traces, masking
    keys and NAV snapshots are written here, on the modules that hold their rows.
    """

    # -- corporate actions (store/entitlements.py) -------------------------------------------

    def apply_corporate_action(
        self,
        account_id: int,
        action: CorporateAction,
        *,
        at: datetime,
        price: Decimal | None = None,
        step: Decimal = Decimal(1),
    ) -> AppliedAction | None:
        """Apply `action` to what the account held of its symbol before `action.ex_at`, in one
        transaction: the cash moves by the dividend (or by the cash paid for the fraction of a
        share a split leaves, at `price`), the position by the split's new shares (whole multiples
        of `step`), and one `corporate_action` entry stamped `at` records it.

        Idempotent: an action applied before returns its entry (`created=False`) and changes
        nothing. None, and nothing written, when nothing was held before the ex-date. A short
        (negative holding) pays the dividend and has its quantity scaled by a split. Raises
        `ValueError` for an action in another currency, one applied after a later action of its
        symbol, or a split leaving a fraction without a `price`.
        """
        check_utc("at", at)
        try:
            with self._write() as session:
                account = get_account(session, account_id, lock=True)
                connection = session.connection()
                stored = stored_action(connection, account_id, action)
                if stored is not None:
                    return stored
                check_order(connection, account_id, action)
                held = entitled_quantity(connection, account_id, action.symbol, action.ex_at)
                if held == 0:
                    return None
                return insert_action(session, account, action, held, at=at, price=price, step=step)
        except IntegrityError:
            with self._engine.connect() as connection:
                stored = stored_action(connection, account_id, action)
            if stored is None:
                raise
            return stored

    def symbols_traded(
        self, account_ids: Collection[int]
    ) -> tuple[frozenset[str], datetime | None]:
        """The symbols the accounts ever filled, and their first fill's time (None: no fill).

        Only these can have been held on an ex-date, and not before that time.
        """
        if not account_ids:
            return frozenset(), None
        ids = list(account_ids)
        with self._engine.connect() as connection:
            symbols = connection.execute(_TRADED, {"accounts": ids}).scalars().all()
            first = connection.execute(_FIRST_FILL, {"accounts": ids}).scalar_one()
        return frozenset(symbols), first

    # -- traces and LLM usage (store/traces.py) ---------------------------------------------

    def append_journal(
        self, cycle_id: int, entries: Sequence[TraceEntry], usage: CycleUsage | None = None
    ) -> tuple[TraceEntry, ...]:
        """Append `entries` to the cycle's trace and add `usage` to its LLM usage, in one
        transaction; the stored entries, with their `seq`s. `ClaimLost` (nothing written) when
        this ledger claimed the cycle for a run that no longer holds it."""
        with self._writer.begin() as connection:
            fences = self._fences_of([cycle_id])
            return append_journal(connection, cycle_id, entries, usage, fences=fences)

    def append_journals(self, appends: Sequence[JournalAppend]) -> tuple[TraceEntry, ...]:
        """Several cycles' `append_journal`s, in order, in one transaction (the LLM agents of a
        slot batch their turns' traces and usage this way); the stored entries. `ClaimLost`
        (nothing written) when one of the cycles' claims is lost, as in `append_journal`."""
        with self._writer.begin() as connection:
            fences = self._fences_of([append.cycle_id for append in appends])
            return append_journals(connection, appends, fences=fences)

    def traces(self, cycle_id: int) -> list[TraceEntry]:
        """The trace of cycle `cycle_id`, in order."""
        with self._reading() as connection:
            return cycle_traces(connection, cycle_id)

    def cycle_usage(self, cycle_id: int) -> CycleUsage:
        """The LLM usage recorded on cycle `cycle_id` (zeros when none)."""
        with self._reading() as connection:
            row = connection.execute(
                select(CYCLE_TABLE).where(CYCLE_TABLE.c.id == cycle_id)
            ).first()
        if row is None:
            raise ValueError(f"no cycle {cycle_id}")
        return usage_of(row)

    def llm_spend(self, account_id: int, start: datetime | None, end: datetime) -> Decimal:
        """The priced cost of the account's cycles whose slot is in `[start, end)` (`start` None:
        from the first): `agents.protocol.Spending`."""
        check_utc("end", end)
        with self._engine.connect() as connection:
            return llm_spend(connection, account_id, start, end)

    def season_at(self, at: datetime) -> tuple[str, datetime, datetime | None] | None:
        """The season whose window holds `at` (`store.seasons.season_at`):
        `agents.protocol.Spending`."""
        check_utc("at", at)
        found = season_at(self._engine, at)
        return None if found is None else (found.name, found.start_at, found.end_at)

    # -- masking keys (store/masking_keys.py) -----------------------------------------------

    def masking_key(self, account_id: int) -> MaskingKey | None:
        """The stored masking key of `account_id`, or None when it has never been masked."""
        return read_masking_key(self._engine, account_id)

    def save_masking_key(self, key: MaskingKey) -> MaskingKey:
        """Store what of `key` is missing (an existing key and its aliases never change); the
        stored key."""
        return save_masking_key(self._writer, key)

    # -- NAV -------------------------------------------------------------------------------

    def find_nav_snapshot(
        self, account_id: int, at: datetime, kind: SnapshotKind
    ) -> NavSnapshot | None:
        """The snapshot of (account, `at`, `kind`) if one was written, else None."""
        check_utc("at", at)
        with self._engine.connect() as connection:
            return stored_snapshot(connection, account_id, at, SnapshotKind(kind))

    def write_nav_snapshot(
        self,
        account_id: int,
        at: datetime,
        kind: SnapshotKind,
        marks: Mapping[str, Decimal],
        *,
        cycle_id: int | None = None,
    ) -> NavSnapshot:
        """Write the account's NAV at `at`: cash plus every holding valued at its mark.

        `marks` must price every symbol held (others are ignored). Idempotent: a snapshot already
        written for (account, at, kind), the unique key of `nav_snapshot`, is returned unchanged
        (and `marks` are not looked at), so a resumed cycle never writes a second one. With
        `cycle_id` (a slot snapshot written by its cycle), `ClaimLost` (nothing written) when
        this ledger claimed that cycle for a run that no longer holds it.
        """
        check_utc("at", at)
        kind = SnapshotKind(kind)
        try:
            with self._writer.begin() as connection:
                cash = locked_cash(connection, account_id)
                if cycle_id is not None:
                    self._check_fences(connection, [cycle_id])
                stored = stored_snapshot(connection, account_id, at, kind)
                if stored is not None:
                    return stored
                return insert_snapshot(connection, account_id, cash, at, kind, marks)
        except IntegrityError:
            with self._engine.connect() as connection:
                stored = stored_snapshot(connection, account_id, at, kind)
            if stored is None:
                raise
            return stored


_TRADED: Final = (
    select(FILL_TABLE.c.symbol)
    .where(FILL_TABLE.c.account_id.in_(bindparam("accounts", expanding=True)))
    .distinct()
)
_FIRST_FILL: Final = select(func.min(FILL_TABLE.c.filled_at)).where(
    FILL_TABLE.c.account_id.in_(bindparam("accounts", expanding=True))
)
