"""MCP session flood: how many sessions one agent token keeps open, and what they cost the daemon.

Starts a real `openbell replay` (the bundled crypto10 daily bars, one outside agent of kind `mcp`,
its token from `openbell agent token`) serving `/mcp` on a free loopback port, and, while the
replay holds the agent's first cycle open, opens `--sessions` MCP sessions with that one token:
bare `initialize` POSTs, `--parallel` at a time, none ever closed. The resident memory (VmRSS) of
the replay's process is read after `--warmup` sessions and every `--every` sessions after; at the
end every session opened is probed with a `ping` to count those still alive. Prints the openings
answered, refused and failed, the live sessions at the end, and the RSS after the warm-up, at
its peak and at the end.

Loopback only, bounded: the flood stops after `--sessions` openings or `--budget-s` seconds,
whichever comes first, and the replay is stopped (SIGTERM, then SIGKILL) on the way out. Not a
test: run it by hand, `.venv/bin/python benchmarks/mcp_flood.py [--sessions 3000]`, with
`--mcp KEY=VALUE` (repeatable) to set keys of the config's `[mcp]` section.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

AGENT = "flood"
HOST = "127.0.0.1"
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
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def openbell_command() -> list[str]:
    script = shutil.which("openbell", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "openbell.ops.cli"]


def config_text(folder: Path, port: int, mcp: list[str]) -> str:
    text = (
        f'[store]\nurl = "sqlite:///{folder / "flood.db"}"\n\n'
        f'[http]\nlisten = "{HOST}:{port}"\n\n'
        '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\nsource = "bundled"\n'
        'initial_cash = "10000"\n\n'
        f'[[agents]]\nname = "{AGENT}"\nkind = "mcp"\nmarkets = ["crypto"]\nmax_wall_s = 540\n'
    )
    if mcp:
        text += "\n[mcp]\n" + "".join(f"{item}\n" for item in mcp)
    return text


def rss_mib(pid: int) -> float:
    """The resident set size of process `pid`, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


@contextlib.contextmanager
def replaying(folder: Path, config: Path) -> Iterator[subprocess.Popen[str]]:
    """`openbell replay` of two days in the background; stopped on the way out."""
    env = {k: v for k, v in os.environ.items() if k not in {"OPENBELL_CONFIG", "NOTIFY_SOCKET"}}
    env["OPENBELL_OFFLINE"] = "1"
    command = [*openbell_command(), "--config", str(config), "replay"]
    command += ["--start", "2025-11-03", "--end", "2025-11-04", "--no-progress"]
    process = subprocess.Popen(  # noqa: S603  (our own console script)
        command,
        cwd=folder,
        env=env,
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


@dataclass
class Flood:
    opened: list[str] = field(default_factory=list)
    refused: dict[int, int] = field(default_factory=dict)
    failed: int = 0
    rss: list[tuple[int, float]] = field(default_factory=list)
    elapsed_s: float = 0.0


async def wait_until_served(url: str, headers: dict[str, str], budget_s: float) -> None:
    """Wait until `/mcp` answers an `initialize` (the replay opened its first cycle's server)."""
    deadline = time.monotonic() + budget_s
    async with httpx.AsyncClient(headers=headers) as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                answer = await http.post(url, json=INITIALIZE)
                if answer.status_code == 200:
                    session = answer.headers["mcp-session-id"]
                    await http.delete(url, headers={"mcp-session-id": session})
                    return
            await asyncio.sleep(0.2)
    raise RuntimeError(f"the replay did not serve {url} within {budget_s:g} s")


async def flood(url: str, headers: dict[str, str], pid: int, args: argparse.Namespace) -> Flood:
    found = Flood()
    deadline = time.monotonic() + args.budget_s
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(args.sessions):
        queue.put_nowait(index)
    warmed = asyncio.Event()

    async def worker(http: httpx.AsyncClient) -> None:
        while time.monotonic() < deadline:
            try:
                index = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            if index >= args.warmup and not warmed.is_set():
                await warmed.wait()
            try:
                answer = await http.post(url, json=INITIALIZE)
            except httpx.TransportError:
                found.failed += 1
                continue
            if answer.status_code == 200:
                found.opened.append(answer.headers["mcp-session-id"])
            else:
                found.refused[answer.status_code] = found.refused.get(answer.status_code, 0) + 1
            done = len(found.opened) + sum(found.refused.values()) + found.failed
            if done == args.warmup:
                found.rss.append((done, rss_mib(pid)))
                warmed.set()
            elif done > args.warmup and done % args.every == 0:
                found.rss.append((done, rss_mib(pid)))

    limits = httpx.Limits(max_connections=args.parallel)
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=30) as http:
        await asyncio.gather(*(worker(http) for _ in range(args.parallel)))
    done = len(found.opened) + sum(found.refused.values()) + found.failed
    found.rss.append((done, rss_mib(pid)))
    return found


async def live_sessions(url: str, headers: dict[str, str], sessions: list[str]) -> int:
    """How many of `sessions` still answer a `ping`."""
    alive = 0
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        for session in sessions:
            answer = await http.post(url, json=PING, headers={"mcp-session-id": session})
            alive += answer.status_code == 200
    return alive


async def measure(url: str, token: str, pid: int, args: argparse.Namespace) -> tuple[Flood, int]:
    """The flood against the replay `pid` serving `url`, and the sessions alive after it."""
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    await wait_until_served(url, headers, budget_s=60)
    started = time.monotonic()
    found = await flood(url, headers, pid, args)
    found.elapsed_s = time.monotonic() - started
    return found, await live_sessions(url, headers, found.opened)


def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        port = free_port()
        config = folder / "openbell.toml"
        config.write_text(config_text(folder, port, args.mcp), encoding="utf-8")
        issued = subprocess.run(  # noqa: S603  (our own console script)
            [*openbell_command(), "--config", str(config), "agent", "token", AGENT],
            cwd=folder,
            capture_output=True,
            text=True,
            check=True,
        )
        url = f"http://{HOST}:{port}/mcp"
        with replaying(folder, config) as process:
            found, alive = asyncio.run(measure(url, issued.stdout.strip(), process.pid, args))
            if process.poll() is not None:
                raise RuntimeError("the replay exited during the flood")
    (_, warm), *_ = found.rss
    peak = max(rss for _, rss in found.rss)
    end = found.rss[-1][1]
    print(f"openings sent: {len(found.opened) + sum(found.refused.values()) + found.failed}")
    print(f"  answered 200: {len(found.opened)}, refused: {json.dumps(found.refused)}, ", end="")
    print(f"failed: {found.failed}, in {found.elapsed_s:.1f} s")
    print(f"sessions alive at the end (answer a ping): {alive}")
    print(f"RSS after {args.warmup} sessions: {warm:.1f} MiB; peak {peak:.1f} MiB; ", end="")
    print(f"end {end:.1f} MiB; growth after the warm-up {end - warm:+.1f} MiB ", end="")
    print(f"(peak {peak - warm:+.1f})")
    print("RSS samples (openings, MiB):", ", ".join(f"{n}: {rss:.1f}" for n, rss in found.rss))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--budget-s", type=float, default=240.0)
    parser.add_argument("--mcp", action="append", default=[], help="a [mcp] key = value line")
    main(parser.parse_args())
