"""How a corporate action is written to the ledger: the entry, the cash and the position.

Internal to `openbell.store`, like `orders.py` for orders: these functions run inside the
`Ledger`'s write transaction, with the account row locked. The holding an action applies to is
the one before its ex-date's open (`entitled_quantity`, negative for a short, which pays the
dividend and has its quantity scaled by a split): every fill before `ex_at` (signed), plus what
the account's earlier actions of that symbol added. That makes an action applied late (after fills
on or after its ex-date) still right: shares bought ex get nothing, shares sold ex were entitled.
An action is applied at most once per account (the unique key of `corporate_action`), and never
before an action of the same symbol with an earlier ex-date that is applied after it.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Connection, bindparam, func, select

from openbell.markets.corporate_actions import ActionKind, CorporateAction, action_effect
from openbell.markets.domain import Side, round_money
from openbell.markets.errors import LedgerBreach
from openbell.store.core_tables import CORPORATE_ACTION_TABLE, FILL_TABLE
from openbell.store.records import AppliedAction
from openbell.store.rows import row_id

if TYPE_CHECKING:
    from sqlmodel import Session

    from openbell.store.tables import AccountRow


def stored_action(
    connection: Connection, account_id: int, action: CorporateAction
) -> AppliedAction | None:
    """The entry of `action` on `account_id` if it was applied, else None."""
    row = connection.execute(
        _FIND,
        {
            "account": account_id,
            "symbol": action.symbol,
            "kind": action.kind.value,
            "ex_date": action.ex_date,
        },
    ).one_or_none()
    return None if row is None else to_applied(row, created=False)


def entitled_quantity(
    connection: Connection, account_id: int, symbol: str, ex_at: datetime
) -> Decimal:
    """What the account held of `symbol` just before `ex_at`: fills before it, plus the shares
    its actions with an earlier ex-date added."""
    held = Decimal(0)
    for fill in connection.execute(
        _FILLS_BEFORE, {"account": account_id, "symbol": symbol, "ex_at": ex_at}
    ):
        held += fill.quantity * Side(fill.side).sign
    for entry in connection.execute(
        _ACTIONS_BEFORE, {"account": account_id, "symbol": symbol, "ex_at": ex_at}
    ):
        held += entry.quantity_delta
    return held


def check_order(connection: Connection, account_id: int, action: CorporateAction) -> None:
    """Refuse (`ValueError`) an action applied after one of the same symbol with a later ex-date:
    that one's entitlement was computed without it."""
    later = connection.execute(
        _LATER, {"account": account_id, "symbol": action.symbol, "ex_at": action.ex_at}
    ).scalar_one_or_none()
    if later is not None:
        raise ValueError(
            f"account {account_id}: {action.describe()} would be applied after a later one "
            f"(ex at {later}); apply actions in ex-date order"
        )


def insert_action(
    session: Session,
    account: AccountRow,
    action: CorporateAction,
    held: Decimal,
    *,
    at: datetime,
    price: Decimal | None,
    step: Decimal,
) -> AppliedAction:
    """Apply `action` to `held` shares: move the cash and the position, and write the entry."""
    from openbell.store.tables import CorporateActionRow, PositionRow  # the ORM, where used

    account_id = row_id(account.id)
    if action.currency != account.currency:
        raise ValueError(
            f"{action.describe()} pays {action.currency} to a {account.currency} account"
        )
    effect = action_effect(action, held, price=price, step=step)
    position = session.get(PositionRow, (account_id, action.symbol), with_for_update=True)
    quantity = position.quantity if position is not None else Decimal(0)
    cost = position.cost if position is not None else Decimal(0)
    after = quantity + effect.quantity_delta
    # Nothing crosses zero: a long stays long and a short short (a position already closed takes
    # the sign of the holding the action applies to).
    if after * quantity < 0 or (quantity == 0 and after * held < 0):
        raise LedgerBreach(
            f"account {account_id}: {action.describe()} would turn {quantity} {action.symbol} "
            f"into {after}"
        )
    cost_delta = Decimal(0)
    if effect.fraction and after + effect.fraction != 0:
        share = effect.fraction / (after + effect.fraction)
        cost_delta = -round_money(cost * share, account.currency)
    account.cash += effect.cash_delta
    if after == 0:
        if position is not None:
            session.delete(position)
    elif position is None:
        session.add(
            PositionRow(
                account_id=account_id,
                symbol=action.symbol,
                quantity=after,
                cost=Decimal(0),
                updated_at=at,
            )
        )
    else:
        position.quantity = after
        position.cost = cost + cost_delta
        position.updated_at = at
    connection = session.connection()
    newest_fill = connection.execute(_LAST_FILL, {"account": account_id}).scalar_one()
    row = CorporateActionRow(
        account_id=account_id,
        symbol=action.symbol,
        kind=action.kind.value,
        ex_date=action.ex_date,
        ex_at=action.ex_at,
        ratio=action.ratio,
        cash_per_share=action.cash,
        currency=action.currency,
        source=action.source,
        quantity_before=held,
        quantity_delta=effect.quantity_delta,
        fraction=effect.fraction,
        price=price if effect.fraction else None,
        cash_delta=effect.cash_delta,
        cost_delta=cost_delta,
        after_fill_id=newest_fill,
        applied_at=at,
    )
    session.add(row)
    session.flush()
    return to_applied(row, created=True)


def to_applied(row: Any, *, created: bool) -> AppliedAction:
    """The `AppliedAction` of a `corporate_action` row (an ORM row or a Core one)."""
    return AppliedAction(
        entry_id=row_id(row.id),
        account_id=row.account_id,
        action=CorporateAction(
            symbol=row.symbol,
            kind=ActionKind(row.kind),
            ex_date=row.ex_date,
            ex_at=row.ex_at,
            currency=row.currency,
            source=row.source,
            ratio=row.ratio,
            cash=row.cash_per_share,
        ),
        quantity_before=row.quantity_before,
        quantity_delta=row.quantity_delta,
        cash_delta=row.cash_delta,
        fraction=row.fraction,
        price=row.price,
        cost_delta=row.cost_delta,
        applied_at=row.applied_at,
        created=created,
    )


_TABLE: Final = CORPORATE_ACTION_TABLE
_FIND: Final = select(_TABLE).where(
    _TABLE.c.account_id == bindparam("account"),
    _TABLE.c.symbol == bindparam("symbol"),
    _TABLE.c.kind == bindparam("kind"),
    _TABLE.c.ex_date == bindparam("ex_date"),
)
_FILLS_BEFORE: Final = select(FILL_TABLE.c.side, FILL_TABLE.c.quantity).where(
    FILL_TABLE.c.account_id == bindparam("account"),
    FILL_TABLE.c.symbol == bindparam("symbol"),
    FILL_TABLE.c.filled_at < bindparam("ex_at"),
)
_ACTIONS_BEFORE: Final = select(_TABLE.c.quantity_delta).where(
    _TABLE.c.account_id == bindparam("account"),
    _TABLE.c.symbol == bindparam("symbol"),
    _TABLE.c.ex_at < bindparam("ex_at"),
)
_LATER: Final = select(func.max(_TABLE.c.ex_at)).where(
    _TABLE.c.account_id == bindparam("account"),
    _TABLE.c.symbol == bindparam("symbol"),
    _TABLE.c.ex_at > bindparam("ex_at"),
)
_LAST_FILL: Final = select(func.max(FILL_TABLE.c.id)).where(
    FILL_TABLE.c.account_id == bindparam("account")
)
