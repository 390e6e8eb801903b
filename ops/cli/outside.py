"""`openbell mcp --account NAME`: the daemon's MCP server over stdio, for stdio-only clients.

The command serves MCP on its stdin and stdout and relays every request to the running daemon's
`/mcp` over loopback HTTP (`agents/outside/relay.py`), so a SQLite ledger keeps its one writer.
The token comes from the environment, `OPENBELL_MCP_TOKEN` (an agent token from `openbell agent
token NAME`, or the cycle token a `command` agent is given), never from an argument that `ps`
would show. The daemon's URL is `--url`, else the config's `[http] listen` (a wildcard address is
reached on loopback). Logs go to stderr: stdout is the MCP wire. The SDK and the relay are
imported only when the command runs, so `openbell --help` stays fast.
"""

from __future__ import annotations

import os
import sys
from io import TextIOWrapper
from typing import Annotated, Final

import typer

from openbell.markets.errors import ConfigError
from openbell.ops.cli.options import ConfigOption, load_command_config

TOKEN_ENV: Final = "OPENBELL_MCP_TOKEN"  # noqa: S105  (a variable name)
_WILDCARDS: Final = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104


def daemon_mcp_url(host: str, port: int) -> str:
    """The URL of `/mcp` on the daemon listening on `host:port`, reached on loopback when it
    listens on every address."""
    reached = _WILDCARDS.get(host, host)
    shown = f"[{reached}]" if ":" in reached else reached
    return f"http://{shown}:{port}/mcp"


def mcp_command(
    ctx: typer.Context,
    account: Annotated[
        str,
        typer.Option("--account", help="The agent (as named in the config) whose token this is."),
    ],
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="The daemon's MCP endpoint (default: the config's [http] listen, path /mcp).",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Serve the daemon's MCP tools over stdio (token from $OPENBELL_MCP_TOKEN)."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise ConfigError(
            f"{TOKEN_ENV} is not set: export the agent's token (`openbell agent token "
            f"{account}`) or the cycle token openbell gave the command"
        )
    if url is None:
        loaded = load_command_config(ctx, config, stream=sys.stderr)
        url = daemon_mcp_url(loaded.http.host, loaded.http.port)
    elif not url.startswith(("http://", "https://")):
        raise ConfigError(f"--url {url!r} should be an http(s) URL, e.g. http://127.0.0.1:8787/mcp")
    import functools

    import anyio

    from openbell.agents.outside.relay import relay_stdio

    # The process's own stdin and stdout: `main` wraps sys.stdout to mask secrets in what
    # people read, and the MCP wire must pass as it is.
    wire_in, wire_out = sys.__stdin__, sys.__stdout__
    if wire_in is None or wire_out is None:
        raise ConfigError("openbell mcp needs a stdin and a stdout (the MCP client's pipes)")
    stdin = anyio.wrap_file(TextIOWrapper(wire_in.buffer, encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(TextIOWrapper(wire_out.buffer, encoding="utf-8"))
    anyio.run(
        functools.partial(relay_stdio, url, token, account=account, stdin=stdin, stdout=stdout)
    )
