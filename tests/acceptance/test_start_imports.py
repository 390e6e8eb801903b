"""What a command imports: a replay of baselines and the leaderboard load only what they use.

Start-up is most of a short replay (issue 29): a replay whose config enrols only baselines must not
import the web app, the MCP server and hub, the LLM client and its modes, the strategy-code and
command jails, the factor model (lightgbm) or the live daemon's scheduler and health board, nor
the libraries only those need. The real console script's entry runs each command in a subprocess
that then writes the names in `sys.modules`; the test lists what must not be among them.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openbell_testkit.cli import BASELINE_KINDS, TIMEOUT_S, clean_env

#: openbell's modules a run of baselines has no use for (a name stands for its submodules too).
NOT_FOR_BASELINES = (
    "openbell.ops.web",
    "openbell.ops.wiring.llm_agents",
    "openbell.ops.wiring.strategy_agents",
    "openbell.ops.wiring.rating_agents",
    "openbell.ops.wiring.outside_agents",
    "openbell.daemon.http",
    "openbell.daemon.mcp_http",
    "openbell.daemon.scheduler",
    "openbell.daemon.health",
    "openbell.agents.llm",
    "openbell.agents.modes",
    "openbell.agents.ktd",  # KTD-Fin's research tools: only a toolbox asked for one imports them
    "openbell.agents.research_tools",
    "openbell.agents.strategy_code",
    "openbell.agents.jail",
    "openbell.agents.factor_model",
    "openbell.agents.rating.agent",  # its `report` module is data the reports read
    "openbell.agents.rating.quality_judge",
    "openbell.agents.outside.hub",
    "openbell.agents.outside.agent",
    "openbell.agents.outside.command",
)
#: Libraries only the web app, MCP, the LLM client, the live sources or the factor model use.
LIBRARIES_NOT_FOR_BASELINES = (
    "starlette",
    "uvicorn",
    "jinja2",
    "mcp",
    "httpx",
    "apscheduler",
    "prometheus_client",
    "lightgbm",
    "pandas",
    "scipy",
    "yfinance",
    "akshare",
    "ccxt",
)

#: What neither command imports any more (issue 29, start-up): Alembic (a new SQLite ledger and
#: one at the head are upgraded without it), the postgresql dialect (for a SQLite ledger), pygments
#: (structlog is imported without rich), pyarrow's compute functions (the bar files' checks run in
#: numpy), the command-line modules of other commands, typer's pydantic adapters (plain
#: values are coerced without them: `ops/cli/quick_params.py`), and the ORM: SQLModel, SQLAlchemy's
#: `orm` and the row classes (both commands read and write through `store/core_tables.py`).
NOT_AT_START = (
    "sqlmodel",
    "sqlalchemy.orm",
    "openbell.store.tables",
    "typer._adapters",
    "alembic",
    "pyarrow.compute",
    "mako",
    "pygments",
    "sqlalchemy.dialects.postgresql",
    "openbell.ops.cli.serve",
    "openbell.ops.cli.trace",
    "openbell.ops.cli.probe",
)
#: ... nor, for a replay without a progress bar, rich; nor the leaderboard's modules.
NOT_FOR_A_REPLAY = (
    "rich",
    "openbell.ops.cli.reports",
    "openbell.ops.cli.seasons",
    "openbell.ops.cli.daemon",
    "openbell.ops.reports",
)
#: ... nor, for the leaderboard, the replay's and the config's planning (a ledger without seasons).
NOT_FOR_THE_LEADERBOARD = (
    "openbell.ops.cli.history",
    "openbell.ops.wiring.planning",
    "openbell.ops.seasons.opening",
    "openbell.daemon.replay",
    "openbell.agents.baselines",
)

#: Run the console script's entry with the arguments after the output path, then write the names
#: of the modules it imported to that path.
SNAPSHOT = """
import json, sys
from openbell.ops.entry import main
out = sys.argv.pop(1)
code = main()
with open(out, "w") as file:
    json.dump(sorted(sys.modules), file)
sys.exit(code)
"""

START, END = "2025-11-03", "2025-11-09"


def imported_by(cwd: Path, *args: str) -> list[str]:
    """The modules an `openbell ARGS` process had imported when it finished (successfully)."""
    names = run_script(cwd, SNAPSHOT, cwd / "modules.json", *args)
    assert isinstance(names, list)
    return [str(name) for name in names]


def run_script(cwd: Path, script: str, out: Path, *args: str) -> Any:
    """Run `script` (which runs `openbell ARGS` and writes what it saw to `out` as JSON) in a
    fresh interpreter; what it wrote, once the command has succeeded."""
    result = subprocess.run(
        [sys.executable, "-c", script, str(out), *args],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text())


def unwanted(names: list[str], also: tuple[str, ...] = ()) -> list[str]:
    """The names among `names` that a run of baselines must not import (nor any of `also`)."""
    banned = (*NOT_FOR_BASELINES, *LIBRARIES_NOT_FOR_BASELINES, *NOT_AT_START, *also)
    return [name for name in names if any(name == b or name.startswith(f"{b}.") for b in banned)]


@pytest.fixture(scope="module")
def baseline_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("start-imports")
    config = workdir / "openbell.toml"
    agents = "".join(
        f'\n[[agents]]\nname = "{kind}"\nkind = "{kind}"\nmarkets = ["crypto"]\n'
        + ("seed = 7\n" if kind == "random" else "")
        for kind in BASELINE_KINDS
    )
    config.write_text(
        f"""
[store]
url = "sqlite:///{(workdir / "ledger.db").as_posix()}"

[markets.crypto]
universe = "crypto10"
cadence = "daily"
source = "ccxt:binance"
initial_cash = "10000"
{agents}"""
    )
    return config


def test_the_banned_names_are_real_modules() -> None:
    """A rename must not leave the guard watching a name nothing imports any more."""
    for name in (
        *NOT_FOR_BASELINES,
        *LIBRARIES_NOT_FOR_BASELINES,
        *NOT_AT_START,
        *NOT_FOR_A_REPLAY,
        *NOT_FOR_THE_LEADERBOARD,
    ):
        assert importlib.util.find_spec(name) is not None, name


def test_a_replay_of_baselines_imports_no_web_mcp_llm_or_strategy_code(
    baseline_config: Path,
) -> None:
    names = imported_by(
        baseline_config.parent,
        *("--config", str(baseline_config), "replay", "--market", "crypto"),
        *("--start", START, "--end", END, "--no-progress"),
    )
    assert {"openbell.daemon.replay", "openbell.agents.baselines"} <= set(names)
    assert unwanted(names, NOT_FOR_A_REPLAY) == []


def test_the_leaderboard_imports_no_agent_machinery(baseline_config: Path) -> None:
    ledger = baseline_config.parent / "ledger.db"
    if not ledger.exists():  # the replay test writes it; alone, this test replays first
        imported_by(
            baseline_config.parent,
            *("--config", str(baseline_config), "replay", "--market", "crypto"),
            *("--start", START, "--end", END, "--no-progress"),
        )
    names = imported_by(baseline_config.parent, "leaderboard", "--db", str(ledger))
    assert "openbell.ops.reports.market_reports" in names
    assert unwanted(names, NOT_FOR_THE_LEADERBOARD) == []


#: Run the console script's entry with the arguments, counting the garbage collector's runs before
#: and after the replay's planning module is imported, and whether it is on at the end.
COLLECTIONS = """
import gc, json, sys
from openbell.ops.entry import main
out = sys.argv.pop(1)
runs = {"during the imports": 0, "after them": 0}
def count(phase, info):
    planning = sys.modules.get("openbell.ops.wiring.planning")
    done = getattr(planning, "replay_from_config", None) is not None
    if phase == "start":
        runs["after them" if done else "during the imports"] += 1
gc.callbacks.append(count)
code = main()
with open(out, "w") as file:
    json.dump({**runs, "on": gc.isenabled()}, file)
sys.exit(code)
"""


def test_a_replay_collects_garbage_only_once_its_modules_are_imported(
    baseline_config: Path,
) -> None:
    """Building the imports' classes would trigger hundreds of collections that free nothing
    (`app.COLLECTS_AFTER_IMPORTS`); the replay itself runs with the collector on."""
    folder = baseline_config.parent
    runs = run_script(
        folder,
        COLLECTIONS,
        folder / "collections.json",
        *("--config", str(baseline_config), "replay", "--market", "crypto"),
        *("--start", START, "--end", END, "--no-progress", "--db", str(folder / "collections.db")),
    )
    assert runs["during the imports"] == 0
    assert runs["on"] is True
