"""Column types that keep money, quantities and instants exact on both SQLite and Postgres.

`ExactDecimal` stores a `Decimal` without loss: as canonical text on SQLite (whose `NUMERIC`
affinity silently goes through a float) and as unconstrained `NUMERIC` on Postgres. It refuses
floats, so a vendor float can never reach the ledger unconverted. `UtcDateTime` stores an aware
instant and always loads it back aware, in UTC; naive datetimes are refused on the way in.
Every money, quantity and datetime column of the store uses one of these two types.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import DateTime, Dialect, Numeric, Text
from sqlalchemy.types import TypeDecorator, TypeEngine

_BindProcessor = Callable[[Any], Any]


class ExactDecimal(TypeDecorator[Decimal]):
    """A `Decimal` column stored exactly: TEXT on SQLite, unconstrained NUMERIC on Postgres.

    Binding a float (or a bool) raises `TypeError`; an int is accepted as an exact value; a
    non-finite Decimal raises `ValueError`. Values are compared and summed in Python, never in
    SQL: on SQLite the column is text, so SQL arithmetic or ordering on it would be wrong.
    """

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(Numeric(asdecimal=True))
        return dialect.type_descriptor(Text())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if type(value) is Decimal and value.is_finite():  # nearly every value: no conversion
            return value if dialect.name == "postgresql" else str(value)
        if isinstance(value, bool) or not isinstance(value, Decimal | int):
            raise TypeError(
                f"ExactDecimal takes a Decimal (or int), got {type(value).__name__} {value!r}; "
                "convert vendor floats with Decimal(str(x)) at the adapter"
            )
        exact = Decimal(value)
        if not exact.is_finite():
            raise ValueError(f"ExactDecimal refuses the non-finite value {exact}")
        if dialect.name == "postgresql":
            return exact
        return str(exact)

    def bind_processor(self, dialect: Dialect) -> _BindProcessor | None:
        """`process_bind_param`'s processor, with a finite Decimal on SQLite (nearly every value
        a replay's batch binds) turned into its text in the same call."""
        slow = super().bind_processor(dialect)
        if dialect.name == "postgresql" or slow is None:
            return slow

        def process(value: Any) -> Any:
            if type(value) is Decimal and value.is_finite():
                return str(value)
            return slow(value)

        return process

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        """`process_result_value`'s processor, with the common values (text on SQLite, a
        Decimal on Postgres) converted in one call (`ledger verify` reads a million of them)."""
        slow = super().result_processor(dialect, coltype)
        if slow is None:
            return None

        def process(value: Any) -> Any:
            kind = type(value)
            if kind is str:
                return Decimal(value)
            if kind is Decimal:
                return value
            return slow(value)

        return process

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        if isinstance(value, Decimal):
            return value
        if isinstance(value, str):
            return Decimal(value)
        raise TypeError(f"ExactDecimal column held a {type(value).__name__}: {value!r}")


class UtcDateTime(TypeDecorator[datetime]):
    """An aware datetime column that always loads as UTC.

    Postgres stores `timestamp with time zone`; SQLite stores the UTC wall time as fixed-width text
    (so SQL comparisons between two UtcDateTime values stay correct). A naive datetime is refused
    with `ValueError`; an aware one in another zone is converted to UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"UtcDateTime takes a datetime, got {type(value).__name__}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"UtcDateTime refuses the naive datetime {value.isoformat()}")
        instant = value.astimezone(UTC)
        if dialect.name == "postgresql":
            return instant
        return instant.replace(tzinfo=None)

    def bind_processor(self, dialect: Dialect) -> _BindProcessor | None:
        """`process_bind_param`'s processor, with an instant in UTC on SQLite (nearly every value
        a replay's batch binds) written as the column's text in one call: its ISO form with a
        space and microseconds, without the offset (what SQLite's `DATETIME` writes, checked
        here once)."""
        slow = super().bind_processor(dialect)
        if dialect.name == "postgresql" or slow is None:
            return slow

        def process(value: Any) -> Any:
            if type(value) is datetime and value.tzinfo is UTC:
                return value.isoformat(" ", "microseconds")[:_SQLITE_TEXT]
            return slow(value)

        return process if process(_SAMPLE) == slow(_SAMPLE) else slow

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        """`process_result_value`'s processor, with the column's text on SQLite in the form the
        bind processor writes (nearly every value a report reads: a market view reads tens of
        thousands of NAV snapshots) read as an instant in UTC in one call, about a quarter of the
        time of the dialect's parse and `replace(tzinfo=UTC)` (checked here once to give the
        same instant); any other value goes the dialect's way."""
        slow = super().result_processor(dialect, coltype)
        if dialect.name == "postgresql" or slow is None:
            return slow

        def process(value: Any) -> Any:
            if type(value) is str and len(value) == _SQLITE_TEXT and value[10] + value[19] == " .":
                return datetime.fromisoformat(value + "+00:00")
            return slow(value)

        text = _SAMPLE.isoformat(" ", "microseconds")[:_SQLITE_TEXT]
        same = process(text) == slow(text) and process(text).tzinfo is UTC
        return process if same else slow

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"UtcDateTime column held a {type(value).__name__}: {value!r}")
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


#: The length of an instant's SQLite text, `YYYY-MM-DD HH:MM:SS.ffffff`.
_SQLITE_TEXT = 26
#: An instant whose text `UtcDateTime.bind_processor` compares with the dialect's own.
_SAMPLE = datetime(987, 6, 5, 4, 3, 2, 10, tzinfo=UTC)
