"""A flood of MCP sessions against a real `openbell replay` stays bounded, by the config's limits.

The replay (bundled crypto10 daily bars, one `mcp` agent whose token comes from `openbell agent
token`) serves `/mcp` on a loopback port while it holds the agent's first cycle open. One token
opens 1,500 sessions, three at a time, and closes none. With `[mcp] max_sessions_per_token = 3`,
exactly the last three still answer afterwards, and the replay's resident memory grows by less
than `RSS_BOUND_MIB` over the flood (before the limits, every session was kept: about 38 KiB
each, 50 MiB for this flood; `benchmarks/mcp_flood.py` measures it at any size). With
`[http] read_timeout_s = 1`, a connection that sends nothing is closed. Loopback only; the flood
stops after its 1,500 openings or 120 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from openbell_testkit.cli import clean_env, free_port, openbell, openbell_command

AGENT = "flood"
OPENINGS = 1500
WARM_UP = 200
PARALLEL = 3
CAP = 3
#: The most the replay's RSS may grow over the flood after the warm-up (measured: +3 to +7 MiB).
RSS_BOUND_MIB = 20
BUDGET_S = 120
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "flood", "version": "0"},
    },
}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


@contextlib.contextmanager
def replaying(cwd: Path, config: Path) -> Iterator[subprocess.Popen[str]]:
    command = [*openbell_command(), "--config", str(config), "replay", "--no-progress"]
    command += ["--start", "2025-11-03", "--end", "2025-11-04"]
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


async def served(url: str, headers: dict[str, str]) -> None:
    """Wait until `/mcp` answers (the replay opened the first cycle's server)."""
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(headers=headers) as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                answer = await http.post(url, json=INITIALIZE)
                if answer.status_code == 200:
                    session = answer.headers["mcp-session-id"]
                    await http.delete(url, headers={"mcp-session-id": session})
                    return
            await asyncio.sleep(0.2)
    raise AssertionError(f"the replay did not serve {url} within 60 s")


async def flood(url: str, headers: dict[str, str], pid: int) -> tuple[list[str], list[int], float]:
    """Open `OPENINGS` sessions; the ids opened, the refusals' statuses, and the RSS after the
    warm-up."""
    opened: list[str] = []
    refused: list[int] = []
    warm = [0.0]
    deadline = time.monotonic() + BUDGET_S
    remaining = iter(range(OPENINGS))

    async def worker(http: httpx.AsyncClient) -> None:
        for index in remaining:
            if time.monotonic() > deadline:
                return
            if index == WARM_UP:
                warm[0] = rss_mib(pid)
            answer = await http.post(url, json=INITIALIZE)
            if answer.status_code == 200:
                opened.append(answer.headers["mcp-session-id"])
            else:
                refused.append(answer.status_code)

    limits = httpx.Limits(max_connections=PARALLEL)
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=30) as http:
        await asyncio.gather(*(worker(http) for _ in range(PARALLEL)))
    return opened, refused, warm[0]


async def alive(url: str, headers: dict[str, str], sessions: list[str]) -> list[str]:
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        found = []
        for session in sessions:
            answer = await http.post(url, json=PING, headers={"mcp-session-id": session})
            if answer.status_code == 200:
                found.append(session)
        return found


def test_a_session_flood_against_a_replay_is_bounded(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "openbell.toml"
    config.write_text(
        f'[store]\nurl = "sqlite:///{tmp_path / "flood.db"}"\n\n'
        f'[http]\nlisten = "127.0.0.1:{port}"\nread_timeout_s = 1\n\n'
        f"[mcp]\nmax_sessions_per_token = {CAP}\n\n"
        '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\nsource = "bundled"\n'
        'initial_cash = "10000"\n\n'
        f'[[agents]]\nname = "{AGENT}"\nkind = "mcp"\nmarkets = ["crypto"]\nmax_wall_s = 540\n',
        encoding="utf-8",
    )
    issued = openbell(tmp_path, "--config", str(config), "agent", "token", AGENT)
    assert issued.returncode == 0, issued.stderr
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {issued.stdout.strip()}",
    }
    url = f"http://127.0.0.1:{port}/mcp"
    with replaying(tmp_path, config) as process:
        asyncio.run(served(url, headers))
        opened, refused, warm = asyncio.run(flood(url, headers, process.pid))
        after = rss_mib(process.pid)
        still = asyncio.run(alive(url, headers, opened))
        with socket.create_connection(("127.0.0.1", port), timeout=5) as silent:
            started = time.monotonic()
            closed = silent.recv(1) == b""
            silent_for = time.monotonic() - started
        running = process.poll() is None
    assert running, "the replay exited during the flood"
    assert len(opened) + len(refused) == OPENINGS, "the flood ran out of time"
    assert set(refused) <= {429}
    assert len(opened) >= OPENINGS - WARM_UP  # three at a time: almost always room
    assert still == opened[-CAP:]  # the config's cap, no more
    growth = after - warm
    assert growth < RSS_BOUND_MIB, f"RSS grew {growth:.1f} MiB over the flood"
    assert closed
    assert silent_for < 4  # [http] read_timeout_s = 1 reached the server
