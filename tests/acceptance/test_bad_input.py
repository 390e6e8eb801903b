"""Broken input through the real `openbell` console script: one line naming the culprit, exit 2.

A replay bar file with a zero or negative price or a high below its low is refused by `replay` and
by `cycle --at`, naming the file and the bar, and the cycle is not left `claimed`. `cycle --at`
takes an instant in any zone (converted to UTC) and refuses a slot that has not rung yet by the
clock. An unknown agent, or one not enrolled in the market, is named. A Postgres server that
accepts TCP connections but never answers ends `ledger verify` within its connect timeout, and a
query blocked on a lock ends at the one-shot commands' statement timeout.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy.engine import make_url

from openbell_testkit.cli import (
    CRYPTO_1H,
    assert_one_error_line,
    config_text,
    cycle,
    cycle_rows,
    openbell,
)
from openbell_testkit.postgres import PgServer

BAD_SYMBOL = "BTC/USDT"
BAD_START = "2025-11-03T03:00:00+00:00"
#: The connect timeout of a Postgres URL that sets none (docs/reference/command-line.md).
DEFAULT_CONNECT_TIMEOUT_S = 10
#: How much longer than a baseline run of the same command (its start-up and stop, which a loaded
#: machine stretches) a timed-out run may take beyond its timeout.
SLACK_S = 3.0


def _crypto_config(source: Path, store_url: str = "sqlite:///var/openbell.db") -> str:
    return f"""
[store]
url = "{store_url}"

[markets.crypto]
universe = "crypto10"
cadence = "hourly"
source = "replay:{source.as_posix()}"
initial_cash = "10000"

[[agents]]
name = "random"
kind = "random"
markets = ["crypto"]
seed = 3
"""


def _broken_bars(folder: Path, column: str, value: Decimal) -> Path:
    """A copy of the bundled crypto hourly file whose BTC bar at BAD_START has `column` = value."""
    table = pq.read_table(CRYPTO_1H)
    symbols = table.column("symbol").to_pylist()
    starts = [at.isoformat() for at in table.column("start_at").to_pylist()]
    row = next(
        n
        for n, (s, at) in enumerate(zip(symbols, starts, strict=True))
        if (s, at) == (BAD_SYMBOL, BAD_START)
    )
    values = table.column(column).to_pylist()
    if column == "high":  # below the bar's low, still positive
        value = table.column("low")[row].as_py() - value
    values[row] = value
    index = table.schema.get_field_index(column)
    table = table.set_column(index, column, pa.array(values, type=table.schema.field(column).type))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "crypto-1h.parquet"
    pq.write_table(table, path)  # the schema's metadata is kept: an openbell bar file but this bar
    return path


BROKEN = {
    "zero price": ("close", Decimal(0), ["close", "not positive"]),
    "negative price": ("low", Decimal(-1), ["low", "not positive"]),
    "high below low": ("high", Decimal(1), ["high", "below low"]),
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_bar_file_is_named_by_replay(tmp_path: Path, case: str) -> None:
    column, value, words = BROKEN[case]
    path = _broken_bars(tmp_path / "bars", column, value)
    (tmp_path / "openbell.toml").write_text(_crypto_config(path.parent), encoding="utf-8")
    result = openbell(tmp_path, "replay", "--start", "2025-11-03", "--end", "2025-11-03")
    assert result.returncode == 2, result.stderr
    assert_one_error_line(result, str(path), BAD_SYMBOL, BAD_START, *words)
    assert result.stdout == ""


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_bar_file_is_named_by_cycle_at_and_leaves_no_claim(
    tmp_path: Path, case: str
) -> None:
    column, value, words = BROKEN[case]
    path = _broken_bars(tmp_path / "bars", column, value)
    (tmp_path / "openbell.toml").write_text(_crypto_config(path), encoding="utf-8")
    result = cycle(tmp_path, "2025-11-03T05:00Z")
    assert result.returncode == 2, result.stderr
    assert_one_error_line(result, str(path), BAD_SYMBOL, BAD_START, *words)
    assert [row.status for row in cycle_rows(tmp_path) if row.status == "claimed"] == []


def test_cycle_at_takes_any_zone(tmp_path: Path) -> None:
    (tmp_path / "openbell.toml").write_text(_crypto_config(CRYPTO_1H), encoding="utf-8")
    result = cycle(tmp_path, "2025-11-03T13:00+08:00")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("crypto random 2025-11-03T05:00:00+00:00: done, ")
    assert [(row.slot_at.isoformat(), row.status) for row in cycle_rows(tmp_path)] == [
        ("2025-11-03T05:00:00+00:00", "done")
    ]


def test_cycle_at_refuses_a_slot_that_has_not_rung(tmp_path: Path) -> None:
    (tmp_path / "openbell.toml").write_text(_crypto_config(CRYPTO_1H), encoding="utf-8")
    far = cycle(tmp_path, "2030-01-01T00:00+00:00")
    assert far.returncode == 2, far.stderr
    assert_one_error_line(far, "--at 2030-01-01T00:00:00+00:00", "has not rung")
    fake = ("--fake-clock", "2025-11-03T05:30:00Z")
    ahead = cycle(tmp_path, "2025-11-03T06:00+00:00", *fake)
    assert ahead.returncode == 2, ahead.stderr
    assert_one_error_line(ahead, "--at 2025-11-03T06:00:00+00:00", "has not rung")
    assert cycle_rows(tmp_path) == []
    rung = cycle(tmp_path, "2025-11-03T05:00+00:00", *fake)
    assert rung.returncode == 0, rung.stderr
    assert [row.status for row in cycle_rows(tmp_path)] == ["done"]


def test_cycle_names_an_unknown_agent(tmp_path: Path) -> None:
    extra = '[[agents]]\nname = "crypto-only"\nkind = "cash"\nmarkets = ["crypto"]\n'
    (tmp_path / "openbell.toml").write_text(config_text() + "\n" + extra, encoding="utf-8")
    unknown = openbell(tmp_path, "cycle", "--market", "crypto", "--agent", "nobody")
    assert unknown.returncode == 2, unknown.stderr
    assert_one_error_line(unknown, "'nobody'", "crypto-only")
    elsewhere = openbell(tmp_path, "cycle", "--market", "us", "--agent", "crypto-only")
    assert elsewhere.returncode == 2, elsewhere.stderr
    assert_one_error_line(elsewhere, "'crypto-only'", "not enrolled in us", "crypto")


@pytest.fixture
def silent_server() -> Iterator[int]:
    """The port of a TCP server on 127.0.0.1 that accepts every connection and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        for connection in accepted:
            connection.close()
        listener.close()


@pytest.mark.parametrize(
    ("query", "timeout_s"), [("", DEFAULT_CONNECT_TIMEOUT_S), ("?connect_timeout=3", 3)]
)
def test_ledger_verify_gives_up_on_a_silent_postgres(
    tmp_path: Path, silent_server: int, query: str, timeout_s: float
) -> None:
    def verify_on(port: int) -> tuple[subprocess.CompletedProcess[str], float]:
        url = f"postgresql+psycopg://openbell@127.0.0.1:{port}/openbell{query}"
        (tmp_path / "openbell.toml").write_text(_crypto_config(CRYPTO_1H, url), encoding="utf-8")
        return _timed(tmp_path, "ledger", "verify")

    refused, baseline_s = verify_on(_closed_port())  # refused at once: start-up and stop only
    assert refused.returncode == 2, refused.stderr
    assert_one_error_line(refused, "database", "refused")
    result, elapsed_s = verify_on(silent_server)
    assert result.returncode == 2, result.stderr
    assert_one_error_line(
        result, f"127.0.0.1:{silent_server}", f"no answer within {timeout_s:g} s", "connect_timeout"
    )
    again, after_s = verify_on(_closed_port())  # a baseline on each side: a machine's load drifts
    assert again.returncode == 2, again.stderr
    assert timeout_s <= elapsed_s < max(baseline_s, after_s) + timeout_s + SLACK_S


@pytest.mark.postgres
def test_a_blocked_one_shot_query_ends_at_the_statement_timeout(
    tmp_path: Path, pg_server: PgServer
) -> None:
    url = pg_server.fresh_schema_url()
    config = _crypto_config(CRYPTO_1H, url).replace(
        "[store]\n", "[store]\nstatement_timeout_s = 2\n"
    )
    (tmp_path / "openbell.toml").write_text(config, encoding="utf-8")
    assert openbell(tmp_path, "db", "upgrade").returncode == 0
    before, before_s = _timed(tmp_path, "ledger", "verify")  # a baseline on each side of the
    assert before.returncode == 0, before.stderr  # blocked run: a machine's load drifts
    parsed = make_url(url)  # the options (search_path) as a keyword: libpq reads no '+' as space
    conninfo = parsed.set(drivername="postgresql", query={}).render_as_string(False)
    with psycopg.connect(conninfo, **parsed.query) as holder:  # holding the strongest lock
        holder.execute("LOCK TABLE account IN ACCESS EXCLUSIVE MODE")
        result, elapsed_s = _timed(tmp_path, "ledger", "verify")
        holder.rollback()
    assert result.returncode == 2, result.stderr
    assert_one_error_line(result, "statement timeout")
    unblocked, after_s = _timed(tmp_path, "ledger", "verify")
    assert unblocked.returncode == 0, unblocked.stderr
    assert 2 <= elapsed_s < max(before_s, after_s) + 2 + SLACK_S


def _timed(workdir: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """The command's result and how long it took, in seconds."""
    started_s = time.monotonic()
    result = openbell(workdir, *args, timeout_s=120)
    return result, time.monotonic() - started_s


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: one the kernel just handed out, taken back."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
