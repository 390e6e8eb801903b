"""The record's canonical form and its digest: plain decimals and UTC instants, the fast
serialization equal to the reference one, and links chained in order per account."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal, localcontext

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openbell.store.digests import (
    GENESIS,
    canonical,
    chain_links,
    chained,
    cycle_records,
    decimal_text,
)

AT = datetime(2025, 9, 1, 1, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Decimal("1.50"), "1.5"),
        (Decimal("1E+2"), "100"),
        (Decimal("-0.000"), "0"),
        (Decimal("0E-8"), "0"),
        (Decimal("1.0E-7"), "0.0000001"),
        (
            Decimal("123456789012345678901234567890.123456789"),
            "123456789012345678901234567890.123456789",
        ),
        (Decimal(-7), "-7"),
        (Decimal("1.23E+5"), "123000"),
        (Decimal("-0E+3"), "0"),
        (Decimal("-1.2345E-9"), "-0.0000000012345"),
        (Decimal("0.000001"), "0.000001"),
    ],
)
def test_a_decimal_is_its_exact_value_in_plain_notation(value: Decimal, text: str) -> None:
    assert decimal_text(value) == text


def test_a_decimal_is_plain_whatever_letter_the_context_writes_exponents_with() -> None:
    with localcontext(capitals=0):
        assert decimal_text(Decimal("1.5E+3")) == "1500"
        assert decimal_text(Decimal("2E-8")) == "0.00000002"


@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_a_decimal_is_written_as_its_fixed_point_text_trimmed(value: Decimal) -> None:
    fixed = format(value, "f")
    trimmed = fixed.rstrip("0").rstrip(".") if "." in fixed else fixed
    assert decimal_text(value) == ("0" if trimmed == "-0" else trimmed)


def _cycle(
    cycle_id: int, account_id: int, slot_at: datetime, **overrides: object
) -> dict[str, object]:
    row: dict[str, object] = {
        "id": cycle_id,
        "account_id": account_id,
        "slot_at": slot_at,
        "status": "done",
        "claimed_by": "run",
        "lease_until": slot_at,
        "started_at": slot_at,
        "finished_at": slot_at + timedelta(seconds=2),
        "error_class": None,
        "error_message": None,
        "reason": None,
        **dict.fromkeys(
            (
                "tokens_in",
                "tokens_out",
                "tokens_cached",
                "usage_estimated",
                "llm_latency_ms",
                "cost",
                "parse_failures",
                "invalid_tool_calls",
                "llm_attempts",
                "llm_failed_attempts",
            )
        ),
    }
    row.update(overrides)
    return row


def _snapshot(snapshot_id: int, account_id: int, at: datetime, nav: str) -> dict[str, object]:
    return {
        "id": snapshot_id,
        "account_id": account_id,
        "at": at,
        "kind": "slot",
        "cash": Decimal(nav),
        "positions_value": Decimal(0),
        "nav": Decimal(nav),
        "last_fill_id": None,
        "last_action_id": None,
    }


def test_the_fast_serialization_is_the_canonical_one_and_instants_are_utc() -> None:
    tokyo = timezone(timedelta(hours=9))
    records = cycle_records(
        cycles=[
            _cycle(1, 7, AT, cost=Decimal("0.00120")),
            _cycle(2, 7, AT + timedelta(days=1), status="missed", reason="daemon_down"),
        ],
        traces=[
            {
                "id": 5,
                "cycle_id": 1,
                "seq": 1,
                "role": "assistant",
                "content": 'caf\u00e9 "quoted" \u2603',
                "tool": None,
                "arguments": None,
                "result": None,
                "tokens_in": 3,
                "tokens_out": 4,
                "latency_ms": 9,
                "at": AT.astimezone(tokyo),
                "model": "m",
                "fingerprint": None,
                "revision": None,
            }
        ],
        snapshots=[_snapshot(3, 7, AT, "1000.00"), _snapshot(4, 8, AT, "5")],
        marks=[
            {
                "snapshot_id": 3,
                "symbol": "X",
                "quantity": Decimal(1),
                "price": Decimal(2),
                "value": Decimal(2),
            }
        ],
    )
    first, missed = records[1], records[2]
    text = canonical(first.record)
    assert b'"at":"2025-09-01T01:30:00+00:00"' in text  # Tokyo's 10:30, in UTC
    assert b'"cost":"0.0012"' in text
    assert b'"nav":"1000"' in text
    assert b'"content":"caf\\u00e9 \\"quoted\\" \\u2603"' in text
    assert [row.table for row in first.row_digests()] == [
        "cycle",
        "trace",
        "nav_snapshot",
        "nav_mark",
    ]
    assert missed.record["nav_snapshot"] is None
    assert [row.row_id for row in missed.row_digests()] == ["2"]
    assert canonical(first.record).isascii()


_JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.decimals(allow_nan=False, allow_infinity=False)
    | st.datetimes(timezones=st.just(UTC))
)


def _record_text(value: object) -> str:
    return decimal_text(value) if isinstance(value, Decimal) else str(value).replace(" ", "T")


@given(
    st.recursive(
        _JSON_SCALARS,
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_the_serialization_is_the_json_modules_with_sorted_keys(value: object) -> None:
    # `canonical` runs the json module's C encoder made once; it writes what the module's
    # `json.dumps` (sorted keys, no whitespace, ASCII escapes, decimals and instants as text) does.
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), default=_record_text)
    assert canonical(value) == expected.encode("ascii")


def test_links_chain_per_account_in_order() -> None:
    records = cycle_records(
        cycles=[_cycle(1, 7, AT), _cycle(2, 8, AT), _cycle(3, 7, AT + timedelta(days=1))]
    )
    links = chain_links([records[1], records[2], records[3]], {8: (4, "ab" * 32)})
    assert [(link.account_id, link.seq) for link in links] == [(7, 1), (8, 5), (7, 2)]
    assert links[0].prev == GENESIS
    assert links[1].prev == "ab" * 32
    assert links[2].prev == links[0].digest
    expected = hashlib.sha256(bytes.fromhex(links[0].digest) + canonical(records[3].record))
    assert links[2].digest == expected.hexdigest() == chained(links[0].digest, records[3].record)
