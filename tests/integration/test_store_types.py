"""ExactDecimal and UtcDateTime keep values exact on real SQLite and Postgres; no float column."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import StatementError
from sqlmodel import SQLModel

import openbell.store.tables  # noqa: F401  (registers the tables)
from openbell.store.db import make_engine
from openbell.store.types import ExactDecimal, UtcDateTime

PRECISE = Decimal("1234567890.123456789012345678")  # 28 significant digits
VALUES = [
    PRECISE,
    Decimal("9876543.210987654321"),
    Decimal("0.00000001"),
    Decimal("-42.10"),
    Decimal(100000000000000000000),
    Decimal(0),
]


@pytest.fixture
def raw_engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


def _table(column_type: sa.types.TypeEngine[object]) -> tuple[sa.MetaData, sa.Table]:
    metadata = sa.MetaData()
    table = sa.Table(
        "probe",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("value", column_type),
    )
    return metadata, table


def _round_trip(engine: Engine, table: sa.Table, values: list[object]) -> list[object]:
    table.metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(table.insert(), [{"id": i, "value": v} for i, v in enumerate(values)])
    with engine.connect() as connection:
        return list(connection.scalars(sa.select(table.c.value).order_by(table.c.id)))


def test_exact_decimal_round_trips_28_significant_digits(raw_engine: Engine) -> None:
    _, table = _table(ExactDecimal())
    loaded = _round_trip(raw_engine, table, list(VALUES))
    assert loaded == VALUES
    assert all(isinstance(value, Decimal) for value in loaded)
    assert str(loaded[0]) == "1234567890.123456789012345678"


def test_plain_numeric_on_sqlite_loses_the_digits_exact_decimal_keeps(sqlite_url: str) -> None:
    """The reason ExactDecimal exists: SQLite NUMERIC goes through a float."""
    engine = make_engine(sqlite_url)
    try:
        _, table = _table(sa.Numeric(asdecimal=True))
        loaded = _round_trip(engine, table, [PRECISE])
        assert loaded[0] != PRECISE
        assert loaded[0] == Decimal("1234567890.1234567165")  # what the float kept
    finally:
        engine.dispose()


def test_exact_decimal_refuses_floats(raw_engine: Engine) -> None:
    with pytest.raises(TypeError, match="float"):
        ExactDecimal().process_bind_param(1.5, raw_engine.dialect)
    with pytest.raises(TypeError, match="bool"):
        ExactDecimal().process_bind_param(True, raw_engine.dialect)
    with pytest.raises(ValueError, match="non-finite"):
        ExactDecimal().process_bind_param(Decimal("NaN"), raw_engine.dialect)
    _, table = _table(ExactDecimal())
    table.metadata.create_all(raw_engine)
    with pytest.raises(StatementError) as caught, raw_engine.begin() as connection:
        connection.execute(table.insert(), {"id": 1, "value": 0.1})
    assert isinstance(caught.value.orig, TypeError)


def test_utc_datetime_loads_aware_utc_and_refuses_naive(raw_engine: Engine) -> None:
    _, table = _table(UtcDateTime())
    shanghai = timezone(timedelta(hours=8))
    instants = [
        datetime(2025, 10, 1, 14, 30, 0, 123456, tzinfo=UTC),
        datetime(2025, 9, 29, 9, 30, tzinfo=shanghai),
    ]
    loaded = _round_trip(raw_engine, table, list(instants))
    assert loaded == instants
    for value in loaded:
        assert isinstance(value, datetime)
        assert value.tzinfo is UTC
    assert loaded[1] == datetime(2025, 9, 29, 1, 30, tzinfo=UTC)
    with pytest.raises(StatementError) as caught, raw_engine.begin() as connection:
        connection.execute(table.insert(), {"id": 9, "value": datetime(2025, 10, 1)})  # noqa: DTZ001
    assert isinstance(caught.value.orig, ValueError)


@given(
    st.datetimes(
        max_value=datetime(9999, 12, 30),  # noqa: DTZ001  (hypothesis takes naive bounds)
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5))]),
    )
)
def test_an_instant_is_bound_on_sqlite_as_the_dialect_writes_it(value: datetime) -> None:
    # `UtcDateTime` writes an instant in UTC as its text itself (a replay binds thousands):
    # the text SQLite's `DATETIME` writes of the instant in UTC.
    dialect = sqlite.dialect()
    bind = UtcDateTime().dialect_impl(dialect).bind_processor(dialect)
    dialects = sa.DateTime().dialect_impl(dialect).bind_processor(dialect)
    assert bind is not None
    assert dialects is not None
    assert bind(value) == dialects(value.astimezone(UTC).replace(tzinfo=None))


@given(
    st.datetimes(max_value=datetime(9999, 12, 30)),  # noqa: DTZ001  (hypothesis takes naive bounds)
    st.sampled_from(["{0}", "{0:.19}", "{0:.22}", "{0}Z", "{0:.10}T{1}"]),
)
def test_an_instant_is_read_on_sqlite_as_the_dialect_reads_it(value: datetime, form: str) -> None:
    # `UtcDateTime` reads the text it writes as an instant in UTC itself (a market view reads
    # tens of thousands): the same instant the dialect's parser and `process_result_value` give.
    # Text in another form (no or fewer fractional digits, a suffix, a `T`) goes the dialect's
    # way, and gives what it gives (an error included).
    dialect = sqlite.dialect()
    read = UtcDateTime().dialect_impl(dialect).result_processor(dialect, None)
    parse = sa.DateTime().dialect_impl(dialect).result_processor(dialect, None)
    assert read is not None
    assert parse is not None
    written = value.isoformat(" ", "microseconds")
    text = form.format(written, written[11:])
    try:
        expected = parse(text).replace(tzinfo=UTC)
    except ValueError as refused:
        with pytest.raises(ValueError, match=re.escape(str(refused))):
            read(text)
        return
    found = read(text)
    assert found == expected
    assert found.tzinfo is UTC
    assert read(None) is None


def inexact_columns(metadata: sa.MetaData) -> list[str]:
    """Columns that could hold money inexactly (float, or NUMERIC that SQLite stores as float)
    or datetimes without a UTC guarantee."""
    found = []
    for table in metadata.sorted_tables:
        for column in table.columns:
            column_type = column.type
            rendered = " ".join(
                column_type.compile(dialect=dialect).upper()
                for dialect in (sqlite.dialect(), postgresql.dialect())
            )
            floaty = any(word in rendered for word in ("FLOAT", "REAL", "DOUBLE"))
            plain_numeric = isinstance(column_type, sa.Numeric)
            sqlite_numeric = "NUMERIC" in column_type.compile(dialect=sqlite.dialect()).upper()
            plain_datetime = isinstance(column_type, sa.DateTime)
            if floaty or plain_numeric or sqlite_numeric or plain_datetime:
                found.append(f"{table.name}.{column.name}: {column_type!r}")
    return found


def test_no_store_column_is_float_plain_numeric_or_naive_datetime() -> None:
    assert inexact_columns(SQLModel.metadata) == []
    money = [
        f"{table.name}.{column.name}"
        for table in SQLModel.metadata.sorted_tables
        for column in table.columns
        if isinstance(column.type, ExactDecimal)
    ]
    assert {"account.cash", "fill.price", "fill.quantity", "nav_snapshot.nav"} <= set(money)


def test_the_metadata_walk_catches_what_it_bans() -> None:
    metadata = sa.MetaData()
    sa.Table(
        "bad",
        metadata,
        sa.Column("a", sa.types.Float()),
        sa.Column("b", sa.Numeric(18, 8)),
        sa.Column("c", sa.types.DOUBLE_PRECISION()),
        sa.Column("d", sa.DateTime(timezone=True)),
        sa.Column("e", ExactDecimal()),
    )
    assert [entry.split(":")[0] for entry in inexact_columns(metadata)] == [
        "bad.a",
        "bad.b",
        "bad.c",
        "bad.d",
    ]
