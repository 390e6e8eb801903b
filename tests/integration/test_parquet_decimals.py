"""Parquet exports keep money, quantities and prices as exact Arrow decimals, not text or floats."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine

from openbell.markets.domain import Instrument, Order, Rejection, RejectReason, Side
from openbell.markets.errors import OperatorError
from openbell.ops.reports import exporting
from openbell.store import exports
from openbell.store.ledger import Ledger
from openbell_testkit.reports import SLOTS, build_ledger

DECIMALS = {
    "nav": {"cash", "positions_value", "nav"},
    "orders": {"quantity", "target_weight", "confidence"},
    "fills": {"quantity", "price", "notional", "fees"},
    "cycles": set(),
}


@pytest.fixture
def built(ledger: Ledger, engine: Engine) -> Engine:
    """The report builders' ledger, on SQLite and on Postgres."""
    build_ledger(ledger)
    return engine


@pytest.mark.parametrize("table", ["nav", "orders", "fills", "cycles"])
def test_money_and_quantities_are_exact_decimals(built: Engine, tmp_path: Path, table: str) -> None:
    path = tmp_path / f"{table}.parquet"
    columns = exports.export_columns(table)
    assert exports.decimal_columns(table) == DECIMALS[table]
    written = exporting.write_parquet(
        columns, exports.export_rows(built, table), path, decimals=exports.decimal_columns(table)
    )
    expected = list(exports.export_rows(built, table))
    assert written == len(expected) > 0
    stored = pq.read_table(path)
    for name in DECIMALS[table]:
        kind = stored.schema.field(name).type
        assert pa.types.is_decimal128(kind), (name, kind)
        assert (kind.precision, kind.scale) == (38, 18)
    for name in set(columns) - DECIMALS[table]:
        assert not pa.types.is_decimal(stored.schema.field(name).type), name
    for got, want in zip(stored.to_pylist(), expected, strict=True):
        for index, name in enumerate(columns):
            if name in DECIMALS[table]:
                assert (got[name] is None) == (want[index] is None), name
                if want[index] is not None:
                    assert isinstance(got[name], Decimal)
                    assert got[name] == want[index], (name, got[name], want[index])


def test_a_value_finer_than_the_scale_is_refused_not_rounded(
    built: Engine, ledger: Ledger, tmp_path: Path
) -> None:
    fine = Decimal("0.1234567890123456789")  # 19 places: Arrow's decimal(38, 18) would round it
    account = ledger.open_account(
        ledger.ensure_agent("precise", "cash", SLOTS[0]), "us", "USD", Decimal(1000), SLOTS[0]
    )
    at = SLOTS[1]
    cycle = ledger.claim_cycle(account, at, "test", at + timedelta(minutes=5), at)
    assert cycle is not None
    instrument = Instrument(symbol="AAPL", market="us", currency="USD")
    order = Order(
        instrument=instrument, side=Side.BUY, quantity=Decimal(1), placed_at=at, confidence=fine
    )
    rejection = Rejection(reason=RejectReason.INSUFFICIENT_CASH, message="no", at=at)
    ledger.record_order(cycle_id=cycle, seq=0, order=order, outcome=rejection)
    path = tmp_path / "orders.parquet"
    with pytest.raises(OperatorError, match=r"confidence.*18 decimal places.*csv") as caught:
        exporting.write_parquet(
            exports.export_columns("orders"),
            exports.export_rows(built, "orders"),
            path,
            decimals=exports.decimal_columns("orders"),
        )
    assert str(path) in str(caught.value)
    assert not path.exists()  # no half-written file is left behind
