"""Checking the ledger invariants of DESIGN §5; `openbell ledger verify` prints this report.

`verify` recomputes every account from its append-only fills, corporate-action entries and borrow
fees and compares, exactly (as `Decimal`), with what the ledger stores: the running cash balance
(initial + sells + shorts - buys - covers - fees + dividends and cash in lieu, which a short pays,
- borrow fees), the position rows (the signed sum of the fills, buy and cover +, sell and short -,
plus the shares splits added, both ways), that no fill or action crosses zero (a long stays long,
a short short), that shorts exist only in accounts allowed to short in a market that has
shorting, the fills' links to their orders and cycles, one fill per order matching it, each
fill's notional, each corporate action's entitlement (the holding before its ex-date, recomputed
from the fills) and amounts (the dividend; the split's shares and cash), every NAV snapshot at
its marks, each borrow fee (on the short the fills leave at its day's end, its amount), that no
fee is missing (every calendar day an account ended short, ended by its latest NAV snapshot, has
one per short symbol), and each margin call's cover fill. Amounts are recomputed by the money
rule of `markets.domain` (`round_money`). A breach names the account, the invariant and the
expected and actual amounts.

It reads the rows once (`facts.py`) and walks each account's in one pass per order its checks
need (`entries.py`: entry order, and each snapshot by cursors over it; `timeline.py`: time
order; `links.py`: the rows each names), so its time grows with the ledger's size, not with its
square. Each account's walk ends at a `Checkpoint` (`account.py`); given the checkpoints of an
earlier verification (`CheckpointSet`, stored by `checkpoints.py`), `verify` walks only the rows
written since. An incremental verification that cannot continue an account from its checkpoint,
or that finds a breach, verifies the whole ledger instead (`Verification.fell_back` says why), so
what it reports is what a full one reports on those rows; what it cannot see is an older row
changed in place, which is what the full verification the daemon runs on a schedule is for.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from openbell.store.margin_ledger import last_ended_day
from openbell.store.verify.account import COUNTED, Checkpoint, CheckpointSet, check_account
from openbell.store.verify.breaches import (
    ACTION_AMOUNT,
    ACTION_CURRENCY,
    ACTION_ENTITLEMENT,
    BORROW_FEE,
    CASH_BALANCE,
    CROSSES_ZERO,
    FILL_CURRENCY,
    FILL_MATCHES_ORDER,
    FILL_NOTIONAL,
    FILL_ORDER_LINK,
    MARGIN_CALL_COVER,
    MISSING_BORROW_FEE,
    NAV_SNAPSHOT,
    NEGATIVE_CASH,
    NEGATIVE_QUANTITY,
    ONE_FILL_PER_ORDER,
    ORDER_CYCLE_LINK,
    POSITION_QUANTITY,
    SHORT_NOT_ALLOWED,
    Breach,
    Collector,
    Owner,
    VerifyReport,
)
from openbell.store.verify.facts import Facts, read_facts
from openbell.store.verify.links import check_orders

__all__ = [
    "ACTION_AMOUNT",
    "ACTION_CURRENCY",
    "ACTION_ENTITLEMENT",
    "BORROW_FEE",
    "CASH_BALANCE",
    "CROSSES_ZERO",
    "FILL_CURRENCY",
    "FILL_MATCHES_ORDER",
    "FILL_NOTIONAL",
    "FILL_ORDER_LINK",
    "MARGIN_CALL_COVER",
    "MISSING_BORROW_FEE",
    "NAV_SNAPSHOT",
    "NEGATIVE_CASH",
    "NEGATIVE_QUANTITY",
    "ONE_FILL_PER_ORDER",
    "ORDER_CYCLE_LINK",
    "POSITION_QUANTITY",
    "SHORT_NOT_ALLOWED",
    "Breach",
    "Checkpoint",
    "CheckpointSet",
    "Verification",
    "VerifyReport",
    "verify",
    "verify_ledger",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Verification:
    """A verification's report, where it stopped, and why an incremental one went full."""

    report: VerifyReport
    checkpoints: CheckpointSet
    fell_back: str | None = None


def verify_ledger(engine: Engine) -> VerifyReport:
    """Check every ledger invariant on every row of the database behind `engine`."""
    return verify(engine).report


def verify(engine: Engine, since: CheckpointSet | None = None) -> Verification:
    """Check the ledger behind `engine`: every row, or with `since` the rows written after it
    (falling back to every row when an account cannot be continued or a breach is found)."""
    if since is None:
        return _full(read_facts(engine))
    checked_days = [
        last_ended_day(point.latest_at)
        for point in since.accounts.values()
        if point.latest_at is not None
    ]
    facts = read_facts(engine, since.watermarks, fees_after=min(checked_days, default=None))
    out = Collector(_owners(facts))
    checkpoints: dict[int, Checkpoint] = {}
    for account_id, account in sorted(facts.accounts.items()):
        start = since.accounts.get(account_id) or Checkpoint.empty(account)
        older = {table: facts.counts.get(account_id, {}).get(table, 0) for table in COUNTED}
        point = check_account(account, start, facts, out, older_counts=older)
        if point is None:
            return _fell_back(engine, f"account {account_id} cannot continue from its checkpoint")
        checkpoints[account_id] = point
    check_orders(facts.new_orders, facts, out)
    if out.breaches:
        return _fell_back(engine, "a breach since the checkpoints, confirmed in full")
    rows = facts.by_account.values()
    report = VerifyReport(
        accounts=len(facts.accounts),
        fills=sum(len(part.fills) for part in rows),
        snapshots=sum(len(part.snapshots) for part in rows),
        actions=sum(len(part.actions) for part in rows),
        borrow_fees=sum(len(part.fees) for part in rows),
        margin_calls=sum(len(part.margin_calls) for part in rows),
        since=since.at,
    )
    return Verification(
        report=report, checkpoints=CheckpointSet(watermarks=facts.watermarks, accounts=checkpoints)
    )


def _fell_back(engine: Engine, reason: str) -> Verification:
    full = _full(read_facts(engine))
    return Verification(report=full.report, checkpoints=full.checkpoints, fell_back=reason)


def _owners(facts: Facts) -> dict[int, Owner]:
    return {
        account.id: Owner(facts.agent_names.get(account.agent_id, "?"), account.market)
        for account in facts.accounts.values()
    }


def _full(facts: Facts) -> Verification:
    out = Collector(_owners(facts))
    checkpoints: dict[int, Checkpoint] = {}
    for account_id, account in sorted(facts.accounts.items()):
        point = check_account(account, Checkpoint.empty(account), facts, out)
        if point is not None:
            checkpoints[account_id] = point
    check_orders(facts.new_orders, facts, out)
    for breach in out.breaches:
        checkpoints.pop(breach.account_id, None)
    rows = facts.by_account.values()
    report = VerifyReport(
        accounts=len(facts.accounts),
        fills=sum(len(part.fills) for part in rows),
        snapshots=sum(len(part.snapshots) for part in rows),
        breaches=out.breaches,
        actions=sum(len(part.actions) for part in rows),
        borrow_fees=sum(len(part.fees) for part in rows),
        margin_calls=sum(len(part.margin_calls) for part in rows),
    )
    return Verification(
        report=report, checkpoints=CheckpointSet(watermarks=facts.watermarks, accounts=checkpoints)
    )
