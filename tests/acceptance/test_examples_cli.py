"""The examples run as written (issue 28 item 3): the MCP client's config and the momentum
plug-in's config in `examples/`, through the real CLI, from a working directory that is not the
repository (each command's `--db` keeps the test's ledger in its own directory).

`examples/mcp_client.toml` launches `["{python}", "mcp_client_agent.py"]`: `{python}` is the
daemon's interpreter (the one with the `mcp` SDK) and the script is found beside the config, though
each cycle runs in a fresh directory in its jail. `examples/momentum.toml` configures crypto only,
the market the plug-in's command in the docs replays."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from openbell_testkit.cli import clean_env, openbell
from openbell_testkit.jail import need_jail

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def done_cycles(db: Path) -> dict[str, tuple[int, int]]:
    """Each agent's (done cycles, fills)."""
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT agent.name, "
            "(SELECT count(*) FROM cycle WHERE cycle.account_id = account.id "
            " AND cycle.status = 'done'), "
            "(SELECT count(*) FROM fill WHERE fill.account_id = account.id) "
            "FROM account JOIN agent ON agent.id = account.agent_id"
        ).fetchall()
    return {name: (done, fills) for name, done, fills in rows}


def test_the_mcp_client_example_runs_as_written_from_anywhere(tmp_path: Path) -> None:
    need_jail("command")
    db = tmp_path / "ledger.db"
    config = EXAMPLES / "mcp_client.toml"
    replayed = openbell(
        tmp_path, "--config", str(config), "replay", "--start", "2025-11-03", "--end", "2025-11-04",
        "--db", str(db), timeout_s=300,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    cycles = done_cycles(db)
    assert cycles["py-client"][0] == 2, replayed.stdout
    assert cycles["py-client"][1] >= 1, "the example client bought nothing"
    assert not (tmp_path / "var").exists(), "--db was not the ledger written"


def test_the_momentum_plugin_example_replays_on_its_own_config(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    env = clean_env(PYTHONPATH=os.pathsep.join([str(EXAMPLES), os.environ.get("PYTHONPATH", "")]))
    replayed = openbell(
        tmp_path, "--config", str(EXAMPLES / "momentum.toml"), "replay",
        "--start", "2025-11-03", "--end", "2025-11-16", "--db", str(db), env=env,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "WARNING" not in replayed.stdout
    cycles = done_cycles(db)
    assert cycles["momentum"][0] == 14
    assert cycles["momentum"][1] > 0
