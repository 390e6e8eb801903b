"""`openbell fake-llm` and honest replay outcomes through the real CLI (issue 28 items 2 and 4).

An LLM agent pointed at `openbell fake-llm` (no key, no network) trades in a replay, the same way
twice for one seed; a scripted fake plays its script; an agent pointed at a port nothing listens
on fails every cycle at once (no retries with back-off), and the replay exits 3 with one line
naming the agent and the first failure's cause.
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from openbell_testkit.cli import clean_env, free_port, openbell, openbell_command

START, END = "2025-11-03", "2025-11-07"  # five daily crypto slots


def llm_config(path: Path, db: Path, base_url: str, name: str = "fake") -> Path:
    path.write_text(
        f'[store]\nurl = "sqlite:///{db}"\n\n[log]\nformat = "console"\nlevel = "warning"\n\n'
        '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\nsource = "ccxt:binance"\n'
        'initial_cash = "10000"\n\n'
        f'[[agents]]\nname = "{name}"\nkind = "llm"\nmarkets = ["crypto"]\n'
        f'base_url = "{base_url}"\nmodel = "anything"\n',
        encoding="utf-8",
    )
    return path


@contextmanager
def fake_llm(cwd: Path, *args: str) -> Iterator[str]:
    """`openbell fake-llm --port 0 ARGS` in the background; yields the base URL it prints."""
    with subprocess.Popen(
        [*openbell_command(), "fake-llm", "--port", "0", *args],
        cwd=cwd,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            found = re.search(r"http://127\.0\.0\.1:\d+/v1", line)
            assert found, line
            yield found.group(0)
        finally:
            process.send_signal(signal.SIGINT)
            _out, err = process.communicate(timeout=10)
        assert process.returncode == 0, err


def fills(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as connection:
        return connection.execute("SELECT symbol, side, quantity FROM fill ORDER BY id").fetchall()


def test_an_llm_agent_trades_against_the_fake_model_the_same_way_twice(tmp_path: Path) -> None:
    with fake_llm(tmp_path, "--seed", "3") as base_url:
        runs = []
        for run in ("a", "b"):
            db = tmp_path / f"{run}.db"
            config = llm_config(tmp_path / f"{run}.toml", db, base_url)
            replayed = openbell(
                tmp_path, "-c", str(config), "replay", "--start", START, "--end", END
            )
            assert replayed.returncode == 0, replayed.stdout + replayed.stderr
            assert "5 cycles done, 0 failed" in replayed.stdout
            runs.append(fills(db))
    assert runs[0], "the fake model's agent placed no filled order"
    assert runs[0] == runs[1]


def test_a_scripted_fake_model_plays_its_script_every_cycle(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    buy = {"symbol": "ETH/USDT", "side": "buy", "shares": "0.01", "reason": "scripted"}
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "get_quote", "arguments": {"symbols": ["ETH/USDT"]}}]},
                {"tool_calls": [{"name": "place_order", "arguments": buy}]},
            ]
        ),
        encoding="utf-8",
    )
    db = tmp_path / "ledger.db"
    with fake_llm(tmp_path, "--script", str(script)) as base_url:
        config = llm_config(tmp_path / "openbell.toml", db, base_url)
        replayed = openbell(tmp_path, "-c", str(config), "replay", "--start", START, "--end", END)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert fills(db) == [("ETH/USDT", "buy", "0.01")] * 5


def test_a_replay_whose_llm_endpoint_refuses_connections_fails_fast_with_exit_3(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    dead = f"http://127.0.0.1:{free_port()}/v1"
    config = llm_config(tmp_path / "openbell.toml", db, dead, name="nobody-home")
    replayed = openbell(tmp_path, "-c", str(config), "replay", "--start", START, "--end", END)
    assert replayed.returncode == 3, replayed.stdout + replayed.stderr
    assert "0 cycles done, 5 failed" in replayed.stdout
    failing = [line for line in replayed.stdout.splitlines() if line.startswith("FAILED:")]
    assert len(failing) == 1, replayed.stdout
    assert "agent nobody-home in crypto: 0 of 5 cycles done (5 failed)" in failing[0]
    assert "LlmUnavailable" in failing[0]
    assert "cannot connect" in failing[0]
    took = re.search(r"replayed 5 slots in ([\d.]+) s", replayed.stdout)
    assert took is not None, replayed.stdout
    seconds = float(took.group(1))
    assert seconds < 10, "each cycle should fail at once, not after 5 retries with back-off"
    assert "not retried" in failing[0]


def test_a_replay_with_an_agent_that_fails_and_one_that_trades_exits_3_naming_one(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    config = llm_config(tmp_path / "openbell.toml", db, f"http://127.0.0.1:{free_port()}/v1")
    with config.open("a", encoding="utf-8") as file:
        file.write('\n[[agents]]\nname = "hold"\nkind = "buy_and_hold"\nmarkets = ["crypto"]\n')
    replayed = openbell(tmp_path, "replay", "--start", START, "--end", END)
    assert replayed.returncode == 3, replayed.stdout + replayed.stderr
    failing = [line for line in replayed.stdout.splitlines() if line.startswith("FAILED:")]
    assert [line.split(":")[1].strip() for line in failing] == ["agent fake in crypto"]
