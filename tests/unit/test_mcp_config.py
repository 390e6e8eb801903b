"""`kind = "mcp"` agents in the config: their budgets and masking, unknown keys refused, and the
agent built from an entry (its cycles opened on the run's one hub, its budgets the server's); the
`[mcp]` limits and `[http] read_timeout_s`, checked and carried to the live and replay plans."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from openbell.agents.outside.agent import McpAgent
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.agents.outside.limits import McpLimits
from openbell.daemon.clock import SimulatedClock
from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import McpAgentConfig, load_config
from openbell.ops.wiring.planning import OFFLINE_ENV, agent_for, live_plan, replay_plan

NOW = datetime(2025, 10, 1, 15, 0, tzinfo=UTC)
BASE = """\
[markets.us]
universe = "nasdaq100"
cadence = "daily"
source = "yfinance"
initial_cash = "10000"

[[agents]]
name = "claude-code"
kind = "mcp"
markets = ["us"]
"""


def load(tmp_path: Path, text: str) -> McpAgentConfig:
    path = tmp_path / "openbell.toml"
    path.write_text(text, encoding="utf-8")
    [agent] = load_config(path).agents
    assert isinstance(agent, McpAgentConfig)
    return agent


def error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "openbell.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value)


def test_an_mcp_agent_has_server_side_budgets_and_masking(tmp_path: Path) -> None:
    agent = load(
        tmp_path,
        BASE + 'max_tool_calls = 12\nmax_wall_s = 90\nmasking = "stock-blind"\nmasking_seed = 3\n',
    )
    assert (agent.max_tool_calls, agent.max_wall_s) == (12, 90.0)
    assert (agent.masking, agent.masking_seed) == ("stock-blind", 3)
    hub = CycleHub()
    built = agent_for(agent, "us", hub=hub)
    assert isinstance(built, McpAgent)
    assert (built.name, built.kind, built.hub) == ("claude-code", "mcp", hub)
    assert built.budgets == OutsideBudgets(max_tool_calls=12, max_wall_s=90.0)


def test_defaults(tmp_path: Path) -> None:
    agent = load(tmp_path, BASE)
    assert (agent.max_tool_calls, agent.max_wall_s, agent.masking) == (50, 300.0, "bright")


@pytest.mark.parametrize(
    ("extra", "key", "words"),
    [
        ("max_turns = 5\n", "agents[0].max_turns", 'only agents of kind = "llm"'),
        ("model = 'x'\n", "agents[0].model", 'only agents of kind = "llm"'),
        ("max_wall_s = 600\n", "agents[0].max_wall_s", "540"),
        ("max_tool_calls = 0\n", "agents[0].max_tool_calls", "greater than 0"),
        ("rebase_prices = true\n", "agents[0].rebase_prices", "needs masking"),
        ("tokne = 'x'\n", "agents[0].tokne", "unknown key"),
    ],
)
def test_bad_entries_name_the_key(tmp_path: Path, extra: str, key: str, words: str) -> None:
    message = error(tmp_path, BASE + extra)
    assert f": {key}: " in message, message
    assert words in message, message


def test_a_baseline_refuses_the_outside_keys(tmp_path: Path) -> None:
    text = BASE.replace('kind = "mcp"', 'kind = "cash"') + 'masking = "blinded"\n'
    assert 'only agents of kind = "command" or "llm" or "mcp" take it' in error(tmp_path, text)


LIMITS = """
[http]
read_timeout_s = 2.5

[mcp]
max_sessions_per_token = 2
max_requests_in_flight = 5
session_idle_s = 30
max_request_bytes = 65536
"""


def test_the_mcp_limits_and_the_read_timeout_reach_the_plans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OFFLINE_ENV, "1")
    path = tmp_path / "openbell.toml"
    path.write_text(LIMITS + BASE, encoding="utf-8")
    config = load_config(path)
    wanted = McpLimits(
        max_sessions_per_token=2,
        max_requests_in_flight=5,
        session_idle_s=30.0,
        max_request_bytes=65536,
    )
    assert config.mcp.limits() == wanted
    live = live_plan(config, SimulatedClock(NOW), http=False)
    assert (live.mcp_limits, live.http_read_timeout_s) == (wanted, 2.5)
    replay, _ = replay_plan(config, start=NOW.date(), end=NOW.date(), market="us", resume=False)
    assert (replay.mcp_limits, replay.mcp_read_timeout_s) == (wanted, 2.5)


def test_the_mcp_limits_default_to_small_numbers(tmp_path: Path) -> None:
    path = tmp_path / "openbell.toml"
    path.write_text(BASE, encoding="utf-8")
    config = load_config(path)
    assert config.mcp.limits() == McpLimits()
    assert McpLimits().max_sessions_per_token == 4
    assert config.http.read_timeout_s == 10.0


@pytest.mark.parametrize(
    ("section", "key", "words"),
    [
        ("[mcp]\nmax_sessions_per_token = 0\n", "mcp.max_sessions_per_token", "greater than 0"),
        ("[mcp]\nmax_sessions = 3\n", "mcp.max_sessions", "unknown key"),
        ("[mcp]\nsession_idle_s = -1\n", "mcp.session_idle_s", "greater than 0"),
        ("[mcp]\nmax_request_bytes = 10\n", "mcp.max_request_bytes", "1024"),
        ("[http]\nread_timeout_s = 0\n", "http.read_timeout_s", "greater than 0"),
    ],
)
def test_bad_limits_name_the_key(tmp_path: Path, section: str, key: str, words: str) -> None:
    message = error(tmp_path, section + BASE)
    assert f": {key}: " in message, message
    assert words in message, message
