"""Secrets never reach the ledger, on SQLite and Postgres: an LLM agent whose model echoes its key
(raw, JSON-escaped, percent-encoded, without its `sk-` prefix) into an order's reason, tool
arguments, tool names, its answers and its finish, and a cycle failing with the key in its error,
leave no form of the key in any text column of any table; the engine masks by value at the write
boundary, so numbers and instants are stored exactly and the ledger still verifies."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
from collections.abc import Iterator
from decimal import Decimal
from urllib.parse import quote

import httpx
import pytest
from sqlalchemy import Column, Engine, Integer, MetaData, String, Table, Text, select, text
from sqlalchemy.engine import make_url
from sqlmodel import SQLModel

from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus
from openbell.store.redact import REDACTED as REDACTED_MARK
from openbell.store.redact import Redactor
from openbell.store.replay_batch import insert_rows
from openbell.store.types import ExactDecimal, UtcDateTime
from openbell.store.verify import verify_ledger
from openbell_testkit.agents import US_OPEN, make_arena
from openbell_testkit.llm import ScriptedModel, call, completion, finish, tool_turn
from openbell_testkit.secrets import leaks

KEY = "sk-stored-0123456789abcdefXYZ"
#: A secret made of digits only: masked in text, but never inside a stored number.
PIN = "7777777777"


@pytest.fixture
def guarded(db_url: str) -> Iterator[Engine]:
    """An engine on a migrated database that masks `KEY` and `PIN` in everything it writes."""
    upgrade(db_url)
    engine = make_engine(db_url, redactor=Redactor([KEY, PIN]))
    yield engine
    engine.dispose()


def all_text(engine: Engine, *, text_only: bool = False) -> str:
    """Every value of every column (or of every text column) of every table, one per line."""
    values: list[str] = []
    with engine.connect() as connection:
        for table in SQLModel.metadata.sorted_tables:
            columns = [
                c for c in table.columns if not text_only or isinstance(c.type, String | Text)
            ]
            for row in connection.execute(select(*columns)) if columns else ():
                values.extend(str(value) for value in row if value is not None)
    return "\n".join(values)


def echoing_model() -> list[object]:
    """A model that repeats its key every way it can think of, through every text it writes."""
    escaped = KEY.replace("-", "\\u002d")
    bare = KEY.removeprefix("sk-")
    raw_arguments = (
        '{"symbol": "AAPL", "side": "buy", "shares": 1, "reason": "key ' + escaped + '"}'
    )
    return [
        completion(f"My key is {KEY}.", [call("place_order", raw_arguments)], reasoning=bare),
        tool_turn(
            (
                "place_order",
                {"symbol": "AAPL", "side": "buy", "shares": 1, "reason": f"again {KEY}"},
            ),
            ("get_news", {"query": KEY.replace("-", "%2D")[:100]}),
            (f"tool_{bare}", {"x": 1}),
            ("get_quote", {"symbols": [bare]}),
            ("calculate", {"expression": f"{PIN} * 2"}),
        ),
        finish(f"done, {bare} and {json.dumps(KEY)}"),
    ]


def run_llm_cycle(ledger: Ledger, script: list[object]) -> int:
    model = ScriptedModel(list(script))  # type: ignore[arg-type]
    arena = make_arena(ledger, "us", agent="echo")

    async def scenario() -> int:
        async with httpx.AsyncClient(transport=httpx.MockTransport(model.handler)) as http:
            client = ChatClient(
                ClientConfig(base_url="https://llm.test/v1", model="scripted-1", api_key=KEY),
                http=http,
            )
            agent = LlmAgent(name="echo", client=client)
            tools = await arena.toolbox(US_OPEN)
            ctx = dataclasses.replace(arena.context(agent, tools), journal=ledger)
            await agent.decide(ctx)
            return ctx.cycle_id

    return asyncio.run(scenario())


def test_a_model_echoing_its_key_leaves_no_form_of_it_in_the_ledger(guarded: Engine) -> None:
    ledger = Ledger(guarded)
    cycle_id = run_llm_cycle(ledger, echoing_model())
    ledger.finish_cycle(
        cycle_id,
        CycleStatus.FAILED,
        US_OPEN,
        error_class="RuntimeError",
        error_message=f"vendor said no to {KEY} ({json.dumps({'k': KEY})})",
    )
    stored = all_text(guarded)
    assert "[redacted]" in stored
    assert leaks(stored, [KEY]) == []
    assert leaks(all_text(guarded, text_only=True), [PIN]) == []
    orders = ledger.cycle_orders(cycle_id)
    assert len(orders) == 2  # the orders themselves were placed, with masked reasons
    assert verify_ledger(guarded).ok


def test_numbers_and_instants_are_stored_exactly_even_when_they_look_like_a_secret(
    guarded: Engine,
) -> None:
    ledger = Ledger(guarded)
    arena = make_arena(ledger, "us", cash=Decimal(PIN), agent="rich")
    assert arena.cash(US_OPEN) == Decimal(PIN)
    cycle_id = arena.claim(US_OPEN)
    ledger.finish_cycle(cycle_id, CycleStatus.SKIPPED, US_OPEN, reason=f"pin {PIN}")
    assert f"pin {PIN}" not in all_text(guarded)
    with guarded.connect() as connection:
        raw = connection.execute(
            text("SELECT cash, initial_cash FROM account WHERE id = :id"), {"id": arena.account_id}
        ).one()
    assert [str(value) for value in raw] == [PIN, PIN]  # stored exactly, not masked
    assert verify_ledger(guarded).ok


@pytest.mark.postgres
def test_the_store_urls_own_password_is_masked_without_being_configured(pg_url: str) -> None:
    password = "store-pa55word-0123"  # noqa: S105  (the test server trusts any password)
    url = make_url(pg_url).set(password=password).render_as_string(hide_password=False)
    upgrade(url)
    engine = make_engine(url)
    try:
        ledger = Ledger(engine)
        arena = make_arena(ledger, "us", agent="plain")
        cycle_id = arena.claim(US_OPEN)
        ledger.finish_cycle(
            cycle_id,
            CycleStatus.FAILED,
            US_OPEN,
            error_class="OperationalError",
            error_message=f"could not connect with {password} ({quote(password)})",
        )
        stored = all_text(engine)
        assert "could not connect with [redacted]" in stored
        assert leaks(stored, [password]) == []
    finally:
        engine.dispose()


def test_a_secret_or_token_in_one_row_of_a_large_batch_is_masked(guarded: Engine) -> None:
    # A batch is checked in one scan of all its texts; the rows that hold something are masked
    # row by row, the others are stored as they are.
    token = "obt_Zq3_x-9AbCdEfGhIjKlMnOpQrStUvWxYz0123456789a"  # noqa: S105  (a test value)
    notes = [f"ordinary note {n}, price 187.30" for n in range(500)]
    notes[17] = f"paid with {KEY.replace('-', '%2D')}"
    notes[250] = f"token {token} here"
    notes[499] = f"ends with {KEY.removeprefix('sk-')}"
    with guarded.begin() as connection:
        connection.execute(text("CREATE TABLE many_notes (n integer, note text, amount text)"))
        connection.execute(
            text("INSERT INTO many_notes (n, note, amount) VALUES (:n, :note, :amount)"),
            [{"n": n, "note": note, "amount": PIN} for n, note in enumerate(notes)],
        )
        stored = connection.execute(text("SELECT n, note, amount FROM many_notes ORDER BY n"))
        rows = list(stored)
    assert [row.note for row in rows if REDACTED_MARK in row.note] == [
        f"paid with {REDACTED_MARK}",
        f"token {REDACTED_MARK} here",
        f"ends with {REDACTED_MARK}",
    ]
    assert leaks("\n".join(row.note for row in rows), [KEY, token]) == []
    assert {row.amount for row in rows} == {PIN}  # an exact number is never masked
    assert [row.note for row in rows if REDACTED_MARK not in row.note] == [
        note for n, note in enumerate(notes) if n not in (17, 250, 499)
    ]


def test_a_batch_with_nothing_to_mask_is_stored_as_it_is(guarded: Engine) -> None:
    notes = [f"note {n}: {KEY[:5]} and 5% of NAV" for n in range(300)]
    with guarded.begin() as connection:
        connection.execute(text("CREATE TABLE plain_notes (n integer, note text)"))
        connection.execute(
            text("INSERT INTO plain_notes (n, note) VALUES (:n, :note)"),
            [{"n": n, "note": note} for n, note in enumerate(notes)],
        )
        stored = connection.execute(text("SELECT note FROM plain_notes ORDER BY n")).scalars()
        assert list(stored) == notes


@pytest.mark.postgres
def test_a_secret_in_an_array_parameter_is_masked(pg_url: str) -> None:
    # A replay batch inserts each column as one array on Postgres (`replay_batch.insert_rows`).
    engine = make_engine(pg_url, redactor=Redactor([KEY]))
    notes = ["ordinary", f"paid with {KEY}", "2025-09-01 00:00:00"]
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE array_notes (note text)")
            connection.exec_driver_sql(
                "INSERT INTO array_notes (note) SELECT * FROM unnest(%s::text[])", (notes,)
            )
            stored = connection.exec_driver_sql("SELECT note FROM array_notes").scalars().all()
    finally:
        engine.dispose()
    assert sorted(stored) == sorted(["ordinary", f"paid with {REDACTED_MARK}", notes[2]])


def test_a_replay_batch_masks_its_texts_and_keeps_its_numbers_and_instants(guarded: Engine) -> None:
    # A replay batch (`replay_batch.insert_rows`) names the parameters that may hold text, so the
    # engine's scan leaves its typed columns out: what is in a text column is still masked, and a
    # number or an instant is stored as it is, also one whose digits are a secret.
    table = Table(
        "batch_notes",
        MetaData(),
        Column("n", Integer, primary_key=True),
        Column("note", Text),
        Column("amount", ExactDecimal),
        Column("at", UtcDateTime),
    )
    table.create(guarded)
    notes = [f"note {n}, 5% of NAV" for n in range(300)]
    notes[123] = f"paid with {KEY}"
    notes[299] = f"pin {PIN}"
    rows = [
        {"n": n, "note": note, "amount": Decimal(PIN), "at": US_OPEN}
        for n, note in enumerate(notes)
    ]
    with guarded.begin() as connection:
        insert_rows(connection, table, rows)
        stored = list(connection.execute(select(table).order_by(table.c.n)))
    assert [row.n for row in stored if REDACTED_MARK in row.note] == [123, 299]
    assert leaks("\n".join(row.note for row in stored), [KEY, PIN]) == []
    assert [row.note for row in stored if REDACTED_MARK not in row.note] == [
        note for n, note in enumerate(notes) if n not in (123, 299)
    ]
    assert {row.amount for row in stored} == {Decimal(PIN)}
    assert {row.at for row in stored} == {US_OPEN}


def test_a_disguised_secret_or_one_cut_into_pieces_across_a_batch_is_masked(
    guarded: Engine,
) -> None:
    # The store masks the texts of one write together: a key in two halves, in two rows of one
    # batch (also a replay batch, which scans its text columns only), and the cheap disguises
    # (reversed, spaced out with zero-width characters, hex, Base32), each in its own row.
    table = Table(
        "split_notes",
        MetaData(),
        Column("n", Integer, primary_key=True),
        Column("note", Text),
        Column("amount", ExactDecimal),
    )
    table.create(guarded)
    notes = [f"note {n}, 5% of NAV" for n in range(200)]
    notes[40] = f"first half {KEY[:15]} is here"
    notes[160] = f"and {KEY[15:]} is the rest"
    notes[70] = f"backwards {KEY[::-1]}"
    notes[80] = "spaced " + "\u200b ".join(KEY)
    notes[90] = f"hex {KEY.encode().hex().upper()}"
    notes[100] = f"b32 {base64.b32encode(b'x' + KEY.encode()).decode()}"
    marked = {40, 70, 80, 90, 100, 160}
    rows = [{"n": n, "note": note, "amount": Decimal(PIN)} for n, note in enumerate(notes)]
    with guarded.begin() as connection:
        insert_rows(connection, table, rows)
        connection.execute(text("CREATE TABLE split_plain (n integer, note text)"))
        connection.execute(
            text("INSERT INTO split_plain (n, note) VALUES (:n, :note)"),
            [{"n": n, "note": note} for n, note in enumerate(notes)],
        )
        batch = connection.execute(select(table.c.note).order_by(table.c.n)).scalars()
        plain = connection.execute(text("SELECT note FROM split_plain ORDER BY n")).scalars()
        stored = {"replay batch": list(batch), "executemany": list(plain)}
    for name, found in stored.items():
        assert leaks("\n".join(found), [KEY]) == [], name
        assert [n for n, note in enumerate(found) if REDACTED_MARK in note] == sorted(marked)
        assert found[40] == f"first half {REDACTED_MARK} is here"
        assert found[160] == f"and {REDACTED_MARK} is the rest"
        assert [note for n, note in enumerate(found) if n not in marked] == [
            note for n, note in enumerate(notes) if n not in marked
        ]
