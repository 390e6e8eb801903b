"""`openbell agent token NAME`: the bearer token an agent that connects uses to reach its account.

This module owns the `agent` command group. `agent token` issues a new token for a configured
agent of a kind that connects (`CONNECTING_KINDS`), revoking its earlier one, and prints it once
with the variable an MCP client reads it from (`TOKEN_ENV`); the ledger keeps only its hash
(`Ledger.issue_agent_token`). The ledger is upgraded to the schema head and the agent's row
created if no daemon has run it yet, so a token can be issued before the first `openbell run`.
"""

from __future__ import annotations

import sys
from typing import Annotated, Final

import typer

from openbell.ops.cli.options import (
    ConfigOption,
    help_without_command,
    load_command_config,
    open_ledger,
    upgrade_logged,
)

#: Agent kinds that connect to the MCP server with a bearer token.
CONNECTING_KINDS: Final = frozenset({"mcp"})
#: The environment variable an MCP client (and `openbell mcp`) reads the agent's token from.
TOKEN_ENV: Final = "OPENBELL_MCP_TOKEN"  # noqa: S105  (a variable's name)

agent_app = typer.Typer(help="Manage the agents that connect.", rich_markup_mode=None)


@agent_app.callback(invoke_without_command=True)
def _agent(ctx: typer.Context) -> None:
    """Manage the agents that connect."""
    help_without_command(ctx)


@agent_app.command("token")
def token_command(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(help="The agent's name in the config.", show_default=False)
    ],
    config: ConfigOption = None,
) -> None:
    """Print a new bearer token for the agent NAME, once; its earlier token stops working."""
    from openbell.daemon.clock import SystemClock
    from openbell.markets.errors import NoSuchAgent
    from openbell.ops.config import secrets
    from openbell.store.ledger import Ledger

    loaded = load_command_config(ctx, config)
    agent = next((agent for agent in loaded.agents if agent.name == name), None)
    if agent is None:
        known = sorted(a.name for a in loaded.agents if a.kind in CONNECTING_KINDS)
        raise NoSuchAgent(
            f"no agent {name!r} in the config; agents that connect: {', '.join(known) or 'none'}"
        )
    if agent.kind not in CONNECTING_KINDS:
        kinds = " or ".join(f'kind = "{kind}"' for kind in sorted(CONNECTING_KINDS))
        raise NoSuchAgent(
            f"agent {name!r} is of kind {agent.kind!r}, which does not connect; "
            f"only agents of {kinds} take a token"
        )
    now = SystemClock().now()
    upgrade_logged(loaded.store.url)
    engine = open_ledger(loaded, writable=True)
    try:
        ledger = Ledger(engine)
        ledger.ensure_agent(agent.name, agent.kind, now)
        token = ledger.issue_agent_token(agent.name, now)
    finally:
        engine.dispose()
    secrets.show_once(token, sys.stdout)
    typer.echo(
        f"shown once; give it to {name}'s MCP client as {TOKEN_ENV} "
        "(a new `openbell agent token` revokes it)",
        err=True,
    )
