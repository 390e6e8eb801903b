"""A plain Python MCP client that trades one openbell cycle: the smallest outside agent.

It needs only the official MCP SDK (`pip install mcp`), not openbell. It reads where the server is
and its token from the MCP config file openbell writes for a `command` agent (`.mcp.json` in the
working directory, or `--config PATH`), or from the environment (`OPENBELL_MCP_URL` and
`OPENBELL_MCP_TOKEN`), then:

1. `wait_for_cycle`: the slot, the account (cash, positions), the rules and the symbols;
2. `get_bars` and `get_portfolio` for the symbol it trades (`--symbol`, default the first offered);
3. `place_order`: buys `--weight` of the account (default 0.1) when it holds none of the symbol;
4. `finish` with a summary.

With `--transport stdio` it talks to the stdio form of the server instead (`.mcp.stdio.json`:
`openbell mcp --account NAME`, which relays to the daemon). What it does is printed on stdout,
which openbell keeps in the cycle's trace.

Run it as a `command` agent:

    [[agents]]
    name = "py-client"
    kind = "command"
    markets = ["us"]
    command = ["python", "examples/mcp_client_agent.py"]
    prompt = "stdin"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

SERVER = "openbell"


def _server_entry(config: Path) -> dict[str, Any]:
    entry: dict[str, Any] = json.loads(config.read_text(encoding="utf-8"))["mcpServers"][SERVER]
    return entry


def http_target(config: Path | None) -> tuple[str, str]:
    """The URL of `/mcp` and the bearer token: from `config`, else `.mcp.json` here, else the
    environment."""
    path = config or Path(".mcp.json")
    if path.exists():
        entry = _server_entry(path)
        token = entry["headers"]["Authorization"].removeprefix("Bearer ")
        return entry["url"], token
    return os.environ["OPENBELL_MCP_URL"], os.environ["OPENBELL_MCP_TOKEN"]


def stdio_target(config: Path | None) -> StdioServerParameters:
    """The stdio server command of `config` (default `.mcp.stdio.json` here)."""
    entry = _server_entry(config or Path(".mcp.stdio.json"))
    env = {**os.environ, **entry.get("env", {})}
    return StdioServerParameters(command=entry["command"], args=entry["args"], env=env)


def _result(called: Any) -> dict[str, Any]:
    """A tool result's JSON object (its structured content, or its text)."""
    if isinstance(called.structured_content, dict):
        found: dict[str, Any] = called.structured_content
        return found
    parsed: dict[str, Any] = json.loads(called.content[0].text)
    return parsed


async def trade(client: Client, symbol: str | None, weight: str) -> None:
    """One cycle: wait for it, look, maybe buy, finish."""
    cycle = _result(await client.call_tool("wait_for_cycle", {}))
    print(f"cycle {cycle.get('cycle_id')} at {cycle.get('slot_at')} in {cycle.get('market')}")
    chosen = symbol or cycle["universe"][0]
    bars = _result(await client.call_tool("get_bars", {"symbol": chosen, "lookback": 5}))
    closes = [bar["close"] for bar in bars.get("bars", [])]
    print(f"{chosen} last closes: {', '.join(closes)}")
    portfolio = _result(await client.call_tool("get_portfolio", {}))
    held = {position["symbol"] for position in portfolio["positions"]}
    print(f"cash {portfolio['cash']} {portfolio['currency']}, holding {sorted(held) or 'nothing'}")
    if chosen in held:
        summary = f"held {chosen}; no order"
    else:
        order = {
            "symbol": chosen,
            "side": "buy",
            "target_weight": weight,
            "reason": "example client: a small starter position",
            "confidence": "0.5",
        }
        placed = await client.call_tool("place_order", order)
        outcome = _result(placed)
        print(f"order: {outcome.get('status')} {outcome.get('message', '')}")
        summary = f"bought {chosen} to {weight} of NAV: {outcome.get('status')}"
    finished = _result(await client.call_tool("finish", {"summary": summary}))
    print(f"finished: {finished.get('summary', summary)}")


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=("http", "stdio"), default="http")
    parser.add_argument("--config", type=Path, help="the MCP config file (default: ./.mcp.json)")
    parser.add_argument("--symbol", help="the symbol to trade (default: the first offered)")
    parser.add_argument("--weight", default="0.1", help="target weight of a buy (default 0.1)")
    args = parser.parse_args(argv)
    if not sys.stdin.isatty():
        sys.stdin.read()  # the prompt, when given on stdin: this agent needs no instructions
    if args.transport == "stdio":
        async with Client(stdio_target(args.config)) as client:
            await trade(client, args.symbol, args.weight)
        return 0
    url, token = http_target(args.config)
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        await trade(client, args.symbol, args.weight)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
