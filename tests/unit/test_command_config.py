"""The `command` agent's config keys (the command as a list, the prompt's place, the environment
names passed through, the working directory, the budgets) and the agent built from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from openbell.agents.outside.command import CommandAgent
from openbell.agents.outside.hub import CycleHub
from openbell.agents.protocol import DecisionContext
from openbell.markets.domain import utc
from openbell.markets.errors import ConfigError
from openbell.markets.rules import rules_for
from openbell.markets.universes import load_universe
from openbell.ops.config.schema import CommandAgentConfig, load_config
from openbell.ops.wiring.outside_agents import openbell_relay
from openbell.ops.wiring.planning import agent_for
from openbell.ops.wiring.sandboxing import Containment

BASE = """
[markets.us]
universe = "nasdaq100"
cadence = "daily"
source = "yfinance"
initial_cash = "10000"

[[agents]]
name = "claude"
kind = "command"
markets = ["us"]
"""
#: Jails taken to run here: these tests build agents, they run none.
JAILED = Containment(probe=lambda kind: None)
COMMAND = 'command = ["claude", "-p", "{prompt}", "--mcp-config", ".mcp.json"]\n'


def load(tmp_path: Path, extra: str) -> CommandAgentConfig:
    path = tmp_path / "openbell.toml"
    path.write_text(BASE + extra, encoding="utf-8")
    agent = load_config(path).agents[0]
    assert isinstance(agent, CommandAgentConfig)
    return agent


def error(tmp_path: Path, extra: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, extra)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_defaults(tmp_path: Path) -> None:
    agent = load(tmp_path, COMMAND)
    assert agent.command == ("claude", "-p", "{prompt}", "--mcp-config", ".mcp.json")
    assert (agent.prompt, agent.env, agent.workdir, agent.keep_workdir) == (
        "argument",
        (),
        None,
        False,
    )
    assert (agent.max_tool_calls, agent.max_wall_s) == (50, 300.0)


def test_every_key_is_read_and_the_agent_built_on_the_hub(tmp_path: Path) -> None:
    agent = load(
        tmp_path,
        'command = ["python", "my_agent.py"]\nprompt = "stdin"\nenv = ["ANTHROPIC_API_KEY"]\n'
        f'workdir = "{tmp_path}"\nkeep_workdir = true\nmax_tool_calls = 7\nmax_wall_s = 90\n',
    )
    hub = CycleHub()
    built = agent_for(
        agent, "us", {"ANTHROPIC_API_KEY": "sk-ant-0123456789"}, hub=hub, containment=JAILED
    )
    assert isinstance(built, CommandAgent)
    assert (built.name, built.kind, built.hub) == ("claude", "command", hub)
    spec = built.spec
    assert spec.argv == ("python", "my_agent.py")
    assert (spec.prompt, spec.env, spec.workdir_root, spec.keep_workdir) == (
        "stdin",
        ("ANTHROPIC_API_KEY",),
        tmp_path,
        True,
    )
    assert spec.environ["ANTHROPIC_API_KEY"] == "sk-ant-0123456789"
    assert (built.budgets.max_tool_calls, built.budgets.max_wall_s) == (7, 90.0)
    assert spec.relay == openbell_relay()
    assert spec.relay[1:] == ("mcp",)
    assert Path(spec.relay[0]).name == "openbell"


def test_a_masked_command_agent_masks_with_its_accounts_map(tmp_path: Path) -> None:
    agent = load(tmp_path, COMMAND + 'masking = "blinded"\nmasking_seed = 7\n')
    assert (agent.masking, agent.masking_seed, agent.rebase_prices) == ("blinded", 7, None)
    built = agent_for(agent, "us", {}, hub=CycleHub(), containment=JAILED)
    assert isinstance(built, CommandAgent)
    bright = agent_for(load(tmp_path, COMMAND), "us", {}, hub=CycleHub(), containment=JAILED)
    assert isinstance(bright, CommandAgent)
    text = "AAPL closed at 2025-09-30"
    masked = built.masker(_context(1)).mask_text(text)
    assert "AAPL" not in masked
    assert "2025-09-30" not in masked
    assert bright.masker(_context(1)).mask_text(text) == text


def _context(account_id: int) -> DecisionContext:
    return DecisionContext(
        now=utc(2025, 10, 1, 14),
        market="us",
        agent_name="claude",
        account_id=account_id,
        cycle_id=1,
        universe=load_universe("nasdaq100"),
        rules=rules_for("us"),
        tools=None,  # type: ignore[arg-type]  # the masker factory does not call tools
    )


def test_a_baseline_is_told_which_kinds_take_a_key(tmp_path: Path) -> None:
    path = tmp_path / "openbell.toml"
    path.write_text(
        BASE.replace('kind = "command"', 'kind = "cash"') + 'masking = "blinded"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert 'only agents of kind = "command" or "llm" or "mcp" take it' in str(caught.value)


@pytest.mark.parametrize(
    ("extra", "key", "words"),
    [
        ('command = "claude -p {prompt}"\n', "command", "should be a list of arguments"),
        ("command = []\n", "command", "at least 1"),
        ('command = ["claude", "-p"]\n', "command", 'put "{prompt}" among the arguments'),
        (COMMAND + 'prompt = "stdin"\n', "command", 'takes no "{prompt}" argument'),
        (COMMAND + 'prompt = "pipe"\n', "prompt", "argument"),
        (COMMAND + 'env = ["sk-ant-123"]\n', "env", "NAME of an environment variable"),
        (COMMAND + "max_wall_s = 600\n", "max_wall_s", "540"),
        (COMMAND + "max_tool_calls = 0\n", "max_tool_calls", "greater than 0"),
        (COMMAND + 'keep_workdir = "yes"\n', "keep_workdir", "bool"),
        (COMMAND + 'comand = ["x"]\n', "comand", "command"),
        (
            COMMAND + 'model = "x"\n',
            "model",
            'only agents of kind = "llm" or "rating" or "strategy_code" take it',
        ),
        (COMMAND + "rebase_prices = true\n", "rebase_prices", "needs masking"),
        (COMMAND + 'masking = "hidden"\n', "masking", "blinded"),
    ],
)  # fmt: skip
def test_bad_values_name_the_key(tmp_path: Path, extra: str, key: str, words: str) -> None:
    message = error(tmp_path, extra)
    assert key in message
    assert words in message
