"""Building a launched outside agent (`kind = "command"`) from its `[[agents]]` entry.

This module owns the translation of a `CommandAgentConfig` into a `CommandAgent` on the run's
`CycleHub`: its command line, how the prompt is passed, the environment names passed through
(read from the daemon's environment at each launch), where its working directories go, its
budgets, the stdio form of its MCP config (this installation's `openbell mcp`), and its
containment (`sandboxing.py`: jailed, the paths it may read, the paths it must never see, the
redactor its output is masked with).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from openbell.agents.aliases import seed_of
from openbell.agents.masking import masker_for
from openbell.agents.outside.command import CommandAgent, CommandSpec
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.ops.config.schema import CommandAgentConfig
from openbell.ops.wiring.sandboxing import Containment


def openbell_relay() -> tuple[str, ...]:
    """The command line of `openbell mcp` for this installation: the console script beside this
    interpreter, else `openbell` on `PATH`."""
    beside = Path(sys.executable).with_name("openbell")
    found = str(beside) if beside.exists() else shutil.which("openbell") or "openbell"
    return (found, "mcp")


def build_command_agent(
    config: CommandAgentConfig,
    hub: CycleHub,
    environ: Mapping[str, str],
    containment: Containment | None = None,
) -> CommandAgent:
    """The agent of a `kind = "command"` entry, on `hub` (the run's MCP server's), contained as
    `containment` says (default: jailed, or a `ConfigError` where no jail can run)."""
    contain = containment if containment is not None else Containment()
    spec = CommandSpec(
        argv=config.command,
        prompt=config.prompt,
        env=config.env,
        environ=environ,
        workdir_root=None if config.workdir is None else Path(config.workdir),
        keep_workdir=config.keep_workdir,
        relay=openbell_relay(),
        sandboxed=contain.sandboxed(config.name, "command"),
        read_paths=config.read_paths,
        protected=contain.protected,
    )
    budgets = OutsideBudgets(max_tool_calls=config.max_tool_calls, max_wall_s=config.max_wall_s)
    masker = masker_for(
        config.masking, seed=seed_of(config.masking_seed), rebase=config.rebase_prices
    )
    return CommandAgent(
        name=config.name,
        hub=hub,
        spec=spec,
        budgets=budgets,
        masker=masker,
        redactor=contain.redactor,
    )
