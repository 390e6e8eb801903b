"""A real third-party MCP client, the MCP Inspector's CLI (`@modelcontextprotocol/inspector` from
the npm registry), talks to openbell's `/mcp`: it lists the tools and calls `get_portfolio` with the
bearer token. It runs as a `command` agent in a replay, so it reads the `.mcp.json` openbell writes
for the cycle (`--config .mcp.json --server openbell`: the URL and the `Authorization` header), and
the URL and token openbell puts in its environment (`--header "Authorization: Bearer ..."`).

Skipped only where `npx` is absent. The package (a pinned version) is fetched once into npm's own
cache by a first `npx` run outside the cycle, so the cycle's deadline does not include a download.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from openbell.agents.baselines import build_agent
from openbell.agents.outside.command import CommandAgent, CommandSpec
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import utc
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus
from openbell_testkit.jail import need_jail
from openbell_testkit.replay import cn_daily

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
NPX = shutil.which("npx")
pytestmark = pytest.mark.skipif(NPX is None, reason="npx is not installed")


@pytest.fixture(autouse=True)
def _jailed() -> None:
    need_jail("command")


@pytest.fixture(scope="module")
def inspector() -> list[str]:
    """The inspector's command line, its package already in npm's cache."""
    assert NPX is not None
    argv = [NPX, "-y", INSPECTOR, "--cli"]
    fetched = subprocess.run(
        [*argv, "--help"], capture_output=True, text=True, timeout=600, check=False
    )
    assert fetched.returncode == 0, fetched.stderr[-2000:]
    return argv


def test_the_mcp_inspector_lists_the_tools_and_calls_one(
    sqlite_url: str, inspector: list[str]
) -> None:
    cli = " ".join(inspector)
    config = "--config .mcp.json --server openbell"
    # Both ways to name the server: the config file openbell wrote, and the URL with the header.
    header = '--header "Authorization: Bearer $OPENBELL_MCP_TOKEN"'
    script = (
        f"{cli} {config} --method tools/list && echo '-- call --' && "
        f'{cli} "$OPENBELL_MCP_URL" --transport http {header} '
        "--method tools/call --tool-name get_portfolio"
    )
    agent = CommandAgent(
        name="inspector",
        hub=CycleHub(),
        spec=CommandSpec(
            argv=("sh", "-c", script, "{prompt}"),  # the prompt is $0: the inspector needs none
            environ=os.environ,
        ),
        budgets=OutsideBudgets(max_wall_s=120),
    )
    upgrade(sqlite_url)
    market = cn_daily(agent, build_agent("cash", "cash", market="cn"))
    run_replay(
        ReplayPlan(
            store_url=sqlite_url,
            start_at=utc(2025, 9, 1),
            end_at=utc(2025, 9, 2),
            markets=(market,),
        )
    )
    engine = make_engine(sqlite_url)
    (account,) = [a for a in queries.accounts(engine, "cn") if a.agent_name == "inspector"]
    (cycle,) = queries.cycle_activity(engine, account.account_id)
    assert cycle.status is CycleStatus.DONE
    traces = Ledger(engine).traces(cycle.cycle_id)
    stdout = "".join(t.content or "" for t in traces if t.role == "stdout")
    stderr = "".join(t.content or "" for t in traces if t.role == "stderr")
    ended = [t.content or "" for t in traces if t.role == "process"][-1]
    assert "exit code 0" in ended, f"{ended}\n{stderr[-3000:]}"
    listed, called = stdout.split("-- call --")
    for tool in ("wait_for_cycle", "get_bars", "get_portfolio", "place_order", "finish"):
        assert f'"{tool}"' in listed
    assert '"cash"' in called
    assert '"nav"' in called
    (portfolio,) = [t for t in traces if t.role == "tool" and t.tool == "get_portfolio"]
    assert portfolio.result is not None
    assert '"cash"' in portfolio.result
