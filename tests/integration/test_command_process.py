"""A `command` agent's process in its jail, without an MCP client: a command that hangs is killed
at its deadline with everything it started (a child, a grandchild that left its session with
`setsid`, and a command that ignores SIGTERM), the child gets only the environment it should, its
MCP config files are written where it runs, its output (with the token masked) lands in the trace,
and its working directory is removed. A command that exits with an error before calling any tool
fails its cycle; one that cannot start is a configuration error."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from openbell.agents.outside.command import CommandAgent, CommandSpec
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.markets.domain import utc
from openbell.markets.errors import AgentError, ConfigError
from openbell.store.ledger import Ledger
from openbell.store.records import TraceEntry
from openbell.store.redact import REDACTED, Redactor
from openbell_testkit.agents import Arena, make_arena
from openbell_testkit.jail import left_after, need_jail, processes_with

SLOT = utc(2025, 9, 2, 1, 30)  # a cn session open (09:30 Shanghai)
URL = "http://127.0.0.1:9/mcp"  # never contacted: these commands talk no MCP

#: Ignores SIGTERM, starts a child and a grandchild that leaves its session (`setsid`, then a
#: second fork), each with the marker (argv[1]) in its command line, and sleeps.
HANG = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL ends it
    marker = sys.argv[1]
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)", marker]
    subprocess.Popen(sleeper)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            print("grandchild up", flush=True)
            os.execv(sys.executable, sleeper)
        os._exit(0)
    time.sleep(0.5)
    print("working on it", flush=True)
    time.sleep(600)
    """
)

SHOW = textwrap.dedent(
    """
    import json, os, sys
    print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "argv": sys.argv[1:],
                      "files": sorted(os.listdir("."))}))
    print("a warning", file=sys.stderr)
    """
)


@pytest.fixture(autouse=True)
def _jailed() -> None:
    need_jail("command")


def _run(arena: Arena, agent: CommandAgent, now: datetime) -> list[TraceEntry]:
    async def go() -> int:
        tools = await arena.toolbox(now)
        ctx = replace(arena.context(agent, tools), journal=arena.ledger)
        await agent.decide(ctx)
        return ctx.cycle_id

    cycle_id = asyncio.run(go())
    return list(arena.ledger.traces(cycle_id))


def _hub() -> CycleHub:
    hub = CycleHub()
    hub.mcp_url = URL
    return hub


def test_a_hanging_command_is_killed_at_its_deadline_with_its_grandchild(
    ledger: Ledger, tmp_path: Path
) -> None:
    arena = make_arena(ledger, "cn", agent="hangs")
    marker = f"openbell-hang-{uuid.uuid4().hex}"
    agent = CommandAgent(
        name="hangs",
        hub=_hub(),
        spec=CommandSpec(
            argv=(sys.executable, "-c", HANG, marker),
            prompt="stdin",
            environ=os.environ,
            kill_grace_s=0.5,
        ),
        budgets=OutsideBudgets(max_wall_s=1.5),
    )
    began = time.monotonic()
    traces = _run(arena, agent, SLOT)
    took = time.monotonic() - began
    assert took < 10, f"the cycle took {took:.1f} s: the command was not killed at its deadline"
    assert left_after(marker) == [], "a process the command started survived its cycle"
    roles = [entry.role for entry in traces]
    assert roles == ["process", "user", "stdout", "process"]
    assert traces[2].content == "grandchild up\nworking on it\n"
    ended = traces[-1].content or ""
    assert "still running at the deadline (1.5 s)" in ended
    assert "process group was killed" in ended
    assert "exit code -9" in ended  # SIGTERM was ignored: SIGKILL ended it


def test_the_command_gets_a_minimal_environment_its_configs_and_the_prompt(
    ledger: Ledger, tmp_path: Path
) -> None:
    arena = make_arena(ledger, "cn", agent="shows")
    environ = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "DEEPSEEK_API_KEY": "sk-daemon-secret-0123456789",
        "PASSED_KEY": "passed-value-0123456789",
    }
    agent = CommandAgent(
        name="shows",
        hub=_hub(),
        spec=CommandSpec(
            argv=(sys.executable, "-c", SHOW, "--prompt", "{prompt}"),
            env=("PASSED_KEY",),
            environ=environ,
            workdir_root=tmp_path / "work",
            relay=("/opt/openbell/bin/openbell", "mcp"),
        ),
    )
    traces = _run(arena, agent, SLOT)
    by_role = {entry.role: entry.content or "" for entry in traces}
    assert set(by_role) == {"process", "user", "stdout", "stderr"}
    assert by_role["stderr"] == "a warning\n"
    shown = json.loads(by_role["stdout"])
    env = shown["env"]
    assert "DEEPSEEK_API_KEY" not in env
    assert env["PASSED_KEY"] == REDACTED  # passed to the child, masked in the trace
    assert env["OPENBELL_MCP_TOKEN"] == REDACTED
    assert env["OPENBELL_MCP_URL"] == URL
    assert env["OPENBELL_AGENT"] == "shows"
    assert env["OPENBELL_MARKET"] == "cn"
    # LC_CTYPE: Python sets it in the child itself when the locale is C (PEP 538).
    assert set(env) - {"LC_CTYPE"} == {
        "PATH",
        "HOME",
        "TMPDIR",
        "PWD",  # bwrap's, the working directory
        "PASSED_KEY",
        "OPENBELL_MCP_URL",
        "OPENBELL_MCP_TOKEN",
        "OPENBELL_MCP_CONFIG",
        "OPENBELL_AGENT",
        "OPENBELL_MARKET",
    }
    assert shown["files"] == [".mcp.json", ".mcp.stdio.json"]
    assert env["HOME"] == env["PWD"] == shown["cwd"]  # the daemon's home is not the command's
    assert env["TMPDIR"] == "/tmp"  # noqa: S108  (the jail's own)
    assert env["OPENBELL_MCP_CONFIG"] == str(Path(shown["cwd"]) / ".mcp.json")
    prompt = shown["argv"][1]
    assert by_role["user"] == prompt
    for told in ("shows", "cn market", SLOT.isoformat(), "wait_for_cycle", "finish"):
        assert told in prompt
    assert Path(shown["cwd"]).parent == tmp_path / "work"
    assert not Path(shown["cwd"]).exists(), "the working directory was kept"


def test_the_configs_name_the_endpoint_and_a_token_for_this_cycle_only(
    ledger: Ledger, tmp_path: Path
) -> None:
    arena = make_arena(ledger, "cn", agent="keeps")
    hub = _hub()
    agent = CommandAgent(
        name="keeps",
        hub=hub,
        spec=CommandSpec(
            argv=("sh", "-c", "ls -ld .", "{prompt}"),
            environ=os.environ,
            workdir_root=tmp_path / "work",
            keep_workdir=True,
            relay=("/opt/openbell/bin/openbell", "mcp"),
        ),
    )
    traces = _run(arena, agent, SLOT)
    (copy,) = (tmp_path / "work").iterdir()  # kept, as configured
    stdout = next(entry.content for entry in traces if entry.role == "stdout") or ""
    assert stdout.startswith("drwx------")  # the working directory is the owner's alone
    http = json.loads((copy / ".mcp.json").read_text())["mcpServers"]["openbell"]
    stdio = json.loads((copy / ".mcp.stdio.json").read_text())["mcpServers"]["openbell"]
    assert http["type"] == "http"
    assert http["url"] == URL
    token = http["headers"]["Authorization"].removeprefix("Bearer ")
    assert token.startswith("obc_")
    assert stdio == {
        "type": "stdio",
        "command": "/opt/openbell/bin/openbell",
        "args": ["mcp", "--account", "keeps", "--url", URL],
        "env": {"OPENBELL_MCP_TOKEN": token},
    }
    assert oct((copy / ".mcp.json").stat().st_mode & 0o777) == "0o600"
    assert hub.by_token(token) is None  # the cycle closed: its token is dead


def test_a_command_that_fails_before_calling_any_tool_fails_its_cycle(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn", agent="crashes")
    crash = "import sys; print('no API key', file=sys.stderr); sys.exit(3)"
    agent = CommandAgent(
        name="crashes",
        hub=_hub(),
        spec=CommandSpec(argv=(sys.executable, "-c", crash, "{prompt}"), environ=os.environ),
    )
    with pytest.raises(AgentError, match="exited with code 3 before calling any openbell tool"):
        _run(arena, agent, SLOT)
    traces = ledger.traces(arena.claim(SLOT))
    assert [t.content for t in traces if t.role == "stderr"] == ["no API key\n"]
    assert (traces[-1].content or "").startswith("exited (exit code 3")


def test_a_command_that_cannot_start_is_a_config_error(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn", agent="missing")
    agent = CommandAgent(
        name="missing",
        hub=_hub(),
        spec=CommandSpec(argv=("no-such-agent-command", "{prompt}"), environ=os.environ),
    )
    with pytest.raises(ConfigError, match="agent missing: cannot start 'no-such-agent-command'"):
        _run(arena, agent, SLOT)


def test_the_commands_output_is_masked_with_every_configured_secret(ledger: Ledger) -> None:
    # A key the command was never given (another agent's): masked all the same if it shows up.
    other = "other-agents-key-Zk3Jp8Qw5Rt2Yv7X"  # no sk- prefix: no pattern knows it
    arena = make_arena(ledger, "cn", agent="echoes")
    echo = f"import sys; print({other!r}); print({other!r}, file=sys.stderr)"
    agent = CommandAgent(
        name="echoes",
        hub=_hub(),
        spec=CommandSpec(argv=(sys.executable, "-c", echo, "{prompt}"), environ=os.environ),
        redactor=Redactor([other]),
    )
    traces = _run(arena, agent, SLOT)
    shown = {entry.role: entry.content for entry in traces if entry.role in ("stdout", "stderr")}
    assert shown == {"stdout": f"{REDACTED}\n", "stderr": f"{REDACTED}\n"}


#: A stand-in daemon: starts a jailed command whose grandchild leaves its session, says so, and
#: waits (argv[1] is the marker, argv[2] a working directory). The grandchild alone shows
#: "MARKER-grandchild" in its command line; bwrap, the command and the grandchild all show MARKER.
DAEMON = textwrap.dedent(
    """
    import asyncio, os, sys
    from pathlib import Path
    from openbell.agents.jail.command_jail import command_jail, command_support
    from openbell.agents.jail.process import start

    marker, workdir = sys.argv[1], Path(sys.argv[2])
    sleeper = f"import time; time.sleep(600)  # {marker}-grand"
    script = (
        "import os, sys, time\\n"
        "if os.fork() == 0:\\n"
        "    os.setsid()\\n"
        f"    os.execv(sys.executable, [sys.executable, '-c', {sleeper!r} + 'child'])\\n"
        "time.sleep(600)\\n"
    )
    support = command_support()
    argv = [sys.executable, "-c", script]
    jail, program = command_jail(
        argv=argv, workdir=workdir, env={"PATH": os.environ["PATH"]}, base=support.jail
    )

    async def main():
        await start([program, *argv[1:]], jail=(jail, support.found), stdin=None)
        print("started", flush=True)
        await asyncio.sleep(600)

    asyncio.run(main())
    """
)


def test_nothing_a_command_started_outlives_a_daemon_killed_with_sigkill(tmp_path: Path) -> None:
    marker = f"openbell-orphan-{uuid.uuid4().hex}"
    with subprocess.Popen(
        [sys.executable, "-c", DAEMON, marker, str(tmp_path)], stdout=subprocess.PIPE, text=True
    ) as daemon:
        try:
            assert daemon.stdout is not None
            assert daemon.stdout.readline() == "started\n"
            deadline = time.monotonic() + 10
            # only the grandchild's command line holds this (the script builds it at run time):
            # the jail is whole and running when it shows
            grandchild = f"{marker}-grandchild"
            while not processes_with(grandchild) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert processes_with(grandchild), "the grandchild never started"
        finally:
            daemon.kill()
    assert left_after(marker) == [], "a jailed process outlived the daemon killed under it"
