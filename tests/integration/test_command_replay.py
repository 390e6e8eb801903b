"""`command` agents in a replay, end to end: the example MCP client (`examples/mcp_client_agent.py`,
the official SDK's client) is launched at each bell and trades over streamable HTTP, and again
over stdio through `openbell mcp` (the SDK's stdio client running the relay, which talks to the
replay's `/mcp`); fills land in the ledger, the ledger verifies, and every MCP call and the
command's output are trace rows. The command runs in its jail (the example, the venv and the
relay bound read-only). A command that hangs is killed at its deadline with everything it started
(a `setsid` grandchild too: nothing is left after the replay) and its cycle is recorded done,
with the kill in its trace."""

from __future__ import annotations

import os
import sys
import textwrap
import time
import uuid
from decimal import Decimal
from pathlib import Path

from openbell.agents.baselines import build_agent
from openbell.agents.outside.command import CommandAgent, CommandSpec
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import ReplayReport, run_replay
from openbell.markets.domain import Rejection, utc
from openbell.ops.wiring.outside_agents import openbell_relay
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus
from openbell.store.verify import verify_ledger
from openbell_testkit.jail import left_after, need_jail
from openbell_testkit.llm import CN_STOCK
from openbell_testkit.replay import cn_daily

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp_client_agent.py"
SESSIONS = 2  # 2025-09-01 .. 2025-09-02
CALLS = ["wait_for_cycle", "get_bars", "get_portfolio"]


def _replay(url: str, agent: CommandAgent, sessions: int = SESSIONS) -> ReplayReport:
    upgrade(url)
    market = cn_daily(agent, build_agent("buy_and_hold", "buy-and-hold", market="cn"))
    return run_replay(
        ReplayPlan(
            store_url=url,
            start_at=utc(2025, 9, 1),
            end_at=utc(2025, 9, 1 + sessions),
            markets=(market,),
        )
    )


def _client(name: str, tmp_path: Path, *transport: str) -> CommandAgent:
    need_jail("command")
    return CommandAgent(
        name=name,
        hub=CycleHub(),
        spec=CommandSpec(
            argv=(sys.executable, str(EXAMPLE), "--symbol", CN_STOCK, *transport),
            prompt="stdin",
            environ=os.environ,
            workdir_root=tmp_path / "work",
            relay=openbell_relay(),
        ),
        budgets=OutsideBudgets(max_wall_s=60),
    )


def _cycles(url: str, name: str) -> tuple[Ledger, list[queries.CycleCounts]]:
    """The ledger (verified) and the cycles of agent `name`."""
    engine = make_engine(url)
    verified = verify_ledger(engine)
    assert verified.ok, verified.lines()
    (account,) = [a for a in queries.accounts(engine, "cn") if a.agent_name == name]
    return Ledger(engine), queries.cycle_activity(engine, account.account_id)


def _assert_traded(url: str, name: str, tmp_path: Path) -> None:
    ledger, counted = _cycles(url, name)
    assert [c.status for c in counted] == [CycleStatus.DONE] * SESSIONS
    cycles = [c.cycle_id for c in counted]
    first = ledger.cycle_orders(cycles[0])
    fills = [o.outcome for o in first if not isinstance(o.outcome, Rejection)]
    assert [f.symbol for f in fills] == [CN_STOCK]
    assert fills[0].quantity > 0
    assert fills[0].quantity % Decimal(100) == 0  # an A-share lot
    for later in cycles[1:]:
        assert not ledger.cycle_orders(later)  # it holds afterwards
    for position, cycle in enumerate(cycles):
        traces = ledger.traces(cycle)
        tools = [t.tool for t in traces if t.role == "tool"]
        ordered = ["place_order"] if position == 0 else []
        assert tools == [*CALLS, *ordered, "finish"]
        stdout = "".join(t.content or "" for t in traces if t.role == "stdout")
        assert f"{CN_STOCK} last closes:" in stdout
        assert "finished:" in stdout
        ended = [t.content or "" for t in traces if t.role == "process"][-1]
        assert ended.startswith("exited")
        assert "exit code 0" in ended
    assert not list((tmp_path / "work").iterdir())  # each working directory was removed


def test_a_command_agent_trades_in_a_replay_over_streamable_http(
    sqlite_url: str, tmp_path: Path
) -> None:
    done = _replay(sqlite_url, _client("py-client", tmp_path))
    assert (done.slots, done.cycles_done, done.cycles_failed) == (SESSIONS, 2 * SESSIONS, 0)
    _assert_traded(sqlite_url, "py-client", tmp_path)


def test_a_command_agent_trades_in_a_replay_over_stdio_through_openbell_mcp(
    sqlite_url: str, tmp_path: Path
) -> None:
    done = _replay(sqlite_url, _client("stdio-client", tmp_path, "--transport", "stdio"))
    assert (done.slots, done.cycles_done, done.cycles_failed) == (SESSIONS, 2 * SESSIONS, 0)
    _assert_traded(sqlite_url, "stdio-client", tmp_path)


#: Starts a child and a grandchild that leaves its session (`setsid`, then a second fork), each
#: with the marker (argv[1]) in its command line, says so and sleeps.
HANG = textwrap.dedent(
    """
    import os, subprocess, sys, time
    marker = sys.argv[1]
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)", marker]
    subprocess.Popen(sleeper)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, sleeper)
        os._exit(0)
    time.sleep(0.5)
    print("thinking", flush=True)
    time.sleep(600)
    """
)


def test_a_command_that_hangs_is_killed_at_its_deadline_and_its_cycle_recorded(
    sqlite_url: str, tmp_path: Path
) -> None:
    need_jail("command")
    marker = f"openbell-hang-{uuid.uuid4().hex}"
    agent = CommandAgent(
        name="hangs",
        hub=CycleHub(),
        spec=CommandSpec(
            argv=(sys.executable, "-c", HANG, marker, "{prompt}"),
            environ=os.environ,
            kill_grace_s=1.0,
        ),
        budgets=OutsideBudgets(max_wall_s=2.0),
    )
    began = time.monotonic()
    done = _replay(sqlite_url, agent, sessions=1)
    assert time.monotonic() - began < 30
    assert (done.cycles_done, done.cycles_failed) == (2, 0)
    ledger, (counted,) = _cycles(sqlite_url, "hangs")
    assert counted.status is CycleStatus.DONE
    cycle = counted.cycle_id
    assert not ledger.cycle_orders(cycle)
    traces = ledger.traces(cycle)
    assert [t.content for t in traces if t.role == "stdout"] == ["thinking\n"]
    ended = [t.content or "" for t in traces if t.role == "process"][-1]
    assert "still running at the deadline (2 s)" in ended
    assert "process group was killed" in ended
    assert left_after(marker) == [], "a process the command started survived the replay"
