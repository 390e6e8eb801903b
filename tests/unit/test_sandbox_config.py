"""`[sandbox]` and the containment of untrusted agents: where no jail can run, a strategy-code or
command agent is one config error naming it and why, unless `allow_unsandboxed`, which runs it
without, warns at every start and lists it in `/healthz`; unknown keys and relative `read_paths`
are refused; the run's protected paths and redactor come from the config."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from openbell.agents.outside.command import CommandAgent
from openbell.agents.outside.hub import CycleHub
from openbell.agents.strategy_code.agent import StrategyCodeAgent
from openbell.daemon.health import HealthBoard, MarketWatch
from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import CommandAgentConfig, OpenbellConfig, load_config
from openbell.ops.wiring.planning import agent_for, market_plan, unsandboxed
from openbell.ops.wiring.sandboxing import Containment, JailKind, containment_for
from openbell.store.redact import REDACTED

BASE = """
[store]
url = "sqlite:///var/ledger.db"

[markets.crypto]
universe = "crypto10"
cadence = "daily"
source = "ccxt:binance"
initial_cash = "10000"

[[agents]]
name = "coder"
kind = "strategy_code"
markets = ["crypto"]
base_url = "https://api.deepseek.com/v1"
model = "deepseek-chat"
api_key_env = "DEEPSEEK_API_KEY"

[[agents]]
name = "claude"
kind = "command"
markets = ["crypto"]
command = ["claude", "-p", "{prompt}"]
read_paths = ["/opt/claude"]
"""
KEY = "sk-deepseek-0123456789abcdef"
ENVIRON = {"DEEPSEEK_API_KEY": KEY}


def loaded(tmp_path: Path, extra: str = "") -> OpenbellConfig:
    path = tmp_path / "openbell.toml"
    path.write_text(extra + BASE, encoding="utf-8")
    return load_config(path)


def nowhere(kind: JailKind) -> str | None:
    return f"no {kind} jail on this test machine"


def test_sandbox_defaults_to_jailing_and_rejects_unknown_keys(tmp_path: Path) -> None:
    assert loaded(tmp_path).sandbox.allow_unsandboxed is False
    assert loaded(tmp_path, "[sandbox]\nallow_unsandboxed = true\n").sandbox.allow_unsandboxed
    with pytest.raises(ConfigError, match=r"sandbox\.jail"):
        loaded(tmp_path, "[sandbox]\njail = false\n")
    with pytest.raises(ConfigError, match=r"allow_unsandboxed"):
        loaded(tmp_path, '[sandbox]\nallow_unsandboxed = "yes"\n')


def test_read_paths_must_be_absolute(tmp_path: Path) -> None:
    (claude,) = [a for a in loaded(tmp_path).agents if isinstance(a, CommandAgentConfig)]
    assert claude.read_paths == ("/opt/claude",)
    path = tmp_path / "openbell.toml"
    path.write_text(BASE.replace('"/opt/claude"', '"opt/claude"'), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"read_paths\[0\]: should be an absolute path"):
        load_config(path)


@pytest.mark.parametrize("name", ["coder", "claude"])
def test_without_a_jail_an_untrusted_agent_is_one_config_error(tmp_path: Path, name: str) -> None:
    config = loaded(tmp_path)
    (agent,) = [a for a in config.agents if a.name == name]
    with pytest.raises(ConfigError) as caught:
        agent_for(agent, "crypto", ENVIRON, hub=CycleHub(), containment=Containment(probe=nowhere))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"agent {name}: kind = ")
    assert f"no {agent.kind} jail on this test machine" in message
    assert "[sandbox] allow_unsandboxed = true" in message


def test_allowed_unsandboxed_agents_run_warned_and_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    config = loaded(tmp_path, "[sandbox]\nallow_unsandboxed = true\n")
    contain = Containment(allow_unsandboxed=True, probe=nowhere)
    with capture_logs() as logs:
        plan = market_plan(
            "crypto",
            config.markets.configured()["crypto"],
            config.agents,
            clock=None,
            as_of=datetime(2025, 11, 1, tzinfo=UTC).date(),
            hub=CycleHub(),
            containment=contain,
        )
    coder, claude = plan.agents
    assert isinstance(coder, StrategyCodeAgent)
    assert isinstance(claude, CommandAgent)
    assert (coder.sandboxed, claude.sandboxed) == (False, False)
    warned = [line for line in logs if line["event"] == "agent_unsandboxed"]
    assert [(line["agent"], line["log_level"]) for line in warned] == [
        ("coder", "warning"),
        ("claude", "warning"),
    ]
    assert unsandboxed([plan]) == ("claude", "coder")
    day = timedelta(days=1)
    board = HealthBoard(
        {"crypto": MarketWatch(cadence=day, grace=timedelta(hours=1))},
        lambda _m, at: at - day,
        lambda _m, at: at + day,
        unsandboxed=unsandboxed([plan]),
    )
    _healthy, body = board.status(datetime(2025, 11, 1, tzinfo=UTC))
    assert body["unsandboxed_agents"] == ["claude", "coder"]


def test_jailed_agents_are_not_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    config = loaded(tmp_path)
    plan = market_plan(
        "crypto",
        config.markets.configured()["crypto"],
        config.agents,
        clock=None,
        as_of=datetime(2025, 11, 1, tzinfo=UTC).date(),
        hub=CycleHub(),
        containment=Containment(probe=lambda kind: None),
    )
    assert all(getattr(agent, "sandboxed", True) for agent in plan.agents)
    assert unsandboxed([plan]) == ()


def test_the_containment_of_a_config_protects_its_ledger_and_masks_its_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    contain = containment_for(loaded(tmp_path), ENVIRON)
    assert contain.protected == (tmp_path, tmp_path / "var" / "ledger.db")
    assert contain.allow_unsandboxed is False
    assert contain.redactor.mask(f"key {KEY} seen") == f"key {REDACTED} seen"
