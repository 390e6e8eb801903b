"""An LLM agent whose API key is rejected (HTTP 401, `LlmAuthError`) pauses its own account, the
same live and in replay: its cycle is `failed` with the error class, `account_paused` is logged
once, its later slots are not run, and the slot's other agents run normally. A replay finishes the
other accounts and then stops with `AccountsPaused` (exit 2 from the command line, one error line
naming the account); the live daemon goes on with the others."""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from structlog.testing import capture_logs

from openbell.agents.baselines import build_agent
from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.daemon.clock import ScaledClock
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import utc
from openbell.markets.errors import AccountsPaused
from openbell.ops.cli import main
from openbell.store.migrate import upgrade
from openbell_testkit.live import (
    START_AT,
    crypto_plan,
    cycles,
    migrated,
    query,
    running,
    verifies,
)
from openbell_testkit.llm import ScriptedModel, serve_script
from openbell_testkit.replay import cn_daily

SESSIONS = 5  # 2025-09-01 .. 2025-09-05
#: One hourly slot every 6 real seconds, so the 30-minute grace is 3 real seconds: at 1800 (a grace
#: of 1 s) a loaded machine can hold the bell past it and record `buy-and-hold`'s cycle `missed`,
#: as it did to `test_live_daemon.py`'s daemon.
SPEED = 600.0


def rejected(body: object) -> httpx.Response:
    return httpx.Response(401, json={"error": {"message": "Incorrect API key provided"}})


def locked_out_agent(name: str = "locked-out") -> LlmAgent:
    """An LLM agent whose every request is answered 401."""
    model = ScriptedModel([rejected] * 1000)
    client = ChatClient(
        ClientConfig(base_url="https://llm.test/v1", model="m-1", api_key="sk-bad"),
        http=model.client(),
    )
    return LlmAgent(name=name, client=client)


def cycles_by_agent(url: str) -> dict[str, list[tuple[str, str | None]]]:
    """Each agent's cycles in slot order: (status, error_class)."""
    rows = query(
        url,
        "SELECT agent.name, cycle.status, cycle.error_class FROM cycle "
        "JOIN account ON account.id = cycle.account_id "
        "JOIN agent ON agent.id = account.agent_id ORDER BY cycle.slot_at",
    )
    found: dict[str, list[tuple[str, str | None]]] = {}
    for name, status, error_class in rows:
        found.setdefault(name, []).append((status, error_class))
    return found


def paused_events(logs: list[dict[str, object]]) -> list[dict[str, object]]:
    return [entry for entry in logs if entry["event"] == "account_paused"]


def test_a_rejected_key_pauses_its_account_in_a_replay_and_the_others_finish(
    sqlite_url: str,
) -> None:
    upgrade(sqlite_url)
    market = cn_daily(locked_out_agent(), build_agent("buy_and_hold", "buy-and-hold", market="cn"))
    plan = ReplayPlan(
        store_url=sqlite_url, start_at=utc(2025, 9, 1), end_at=utc(2025, 9, 6), markets=(market,)
    )
    with capture_logs() as logs, pytest.raises(AccountsPaused) as raised:
        run_replay(plan)
    found = cycles_by_agent(sqlite_url)
    assert found["locked-out"] == [("failed", "LlmAuthError")]
    assert found["buy-and-hold"] == [("done", None)] * SESSIONS
    [paused] = paused_events(logs)
    assert (paused["agent"], paused["market"], paused["reason"]) == (
        "locked-out",
        "cn",
        "LlmAuthError",
    )
    assert raised.value.account_ids == (paused["account_id"],)
    assert "locked-out" in str(raised.value)
    assert not [entry for entry in logs if entry["event"] == "slot_failed"]


def test_a_rejected_key_makes_the_replay_command_exit_2_with_one_error_line(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model = ScriptedModel([rejected] * 1000)
    path = tmp_path / "openbell.toml"
    with serve_script(model) as base_url:
        path.write_text(
            f"""
[store]
url = "{sqlite_url}"

[markets.crypto]
universe = "crypto10"
cadence = "hourly"
source = "ccxt:binance"
initial_cash = "10000"
allow_partial_coverage = true  # two of the coins have no bundled hourly bars that week

[[agents]]
name = "locked-out"
kind = "llm"
markets = ["crypto"]
base_url = "{base_url}"
model = "m-1"

[[agents]]
name = "buy-and-hold"
kind = "buy_and_hold"
markets = ["crypto"]
""",
            encoding="utf-8",
        )
        code = main(
            [
                "replay",
                "--config",
                str(path),
                "--market",
                "crypto",
                "--start",
                "2025-11-03",
                "--end",
                "2025-11-03",
            ]
        )
    lines = capsys.readouterr().err.splitlines()
    errors = [line for line in lines if not line.startswith("{")]  # not a JSON log line
    assert code == 2
    assert len(errors) == 1, lines
    assert errors[0].startswith("openbell: error: ")
    assert "locked-out" in errors[0]
    assert sum('"event": "account_paused"' in line for line in lines) == 1
    found = cycles_by_agent(sqlite_url)
    assert found["locked-out"] == [("failed", "LlmAuthError")]
    assert len(found["buy-and-hold"]) == 24
    assert {status for status, _ in found["buy-and-hold"]} == {"done"}


def test_a_rejected_key_pauses_its_account_live_and_the_daemon_goes_on(sqlite_url: str) -> None:
    url = migrated(sqlite_url)
    agents = (locked_out_agent(), build_agent("buy_and_hold", "buy-and-hold", market="crypto"))
    clock = ScaledClock(START_AT - timedelta(minutes=1), speed=SPEED)
    with capture_logs() as logs, running(crypto_plan(url, agents=agents), clock):
        target = START_AT + timedelta(hours=3.2)
        time.sleep(max(0.0, (target - clock.now()).total_seconds() / clock.speed))
    found = cycles_by_agent(url)
    # Its later slots are not run: once their grace ends, each is recorded missed, paused.
    first, *later = found["locked-out"]
    assert first == ("failed", "LlmAuthError")
    assert later
    assert set(later) == {("missed", None)}
    reasons = query(
        url,
        "SELECT DISTINCT cycle.reason FROM cycle JOIN account ON account.id = cycle.account_id "
        "JOIN agent ON agent.id = account.agent_id "
        "WHERE agent.name = 'locked-out' AND cycle.status = 'missed'",
    )
    assert [reason for (reason,) in reasons] == ["account_paused"]
    statuses = Counter(status for status, _ in found["buy-and-hold"])
    assert statuses["done"] >= 3
    assert set(statuses) <= {"done", "interrupted"}
    [paused] = paused_events(logs)
    assert (paused["agent"], paused["market"], paused["reason"]) == (
        "locked-out",
        "crypto",
        "LlmAuthError",
    )
    assert not [entry for entry in logs if entry["event"] == "slot_failed"]
    assert len({row.slot_at for row in cycles(url)}) >= 3
    assert verifies(url)
