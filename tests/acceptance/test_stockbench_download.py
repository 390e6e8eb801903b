"""StockBench's setting with one download (issue 25, item 5): `openbell data download` of the
DJIA-20 over 2025-03-03..2025-06-30, then `openbell replay` of all 20 members, and StockBench's
ablations changing what the model is shown, and only that.

The download runs the real command line in a subprocess whose only network is a fake Yahoo
(`python -m openbell_testkit.yahoo_history ...`: recorded wire shapes, synthetic numbers); the
replays are the plain `openbell` command, offline. A second download asks Yahoo for nothing. A
scripted model on 127.0.0.1 plays a `stockbench` agent three times over the same sessions: with
every input, `without = ["news"]` and `without = ["news", "fundamentals"]`; the texts it is shown
differ by exactly the news lines, then by exactly the fundamentals stage, and the three ledgers
hold the same orders.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openbell_testkit.cli import assert_one_error_line, clean_env, openbell
from openbell_testkit.llm import Body, ScriptedModel, completion, serve_script
from openbell_testkit.yahoo_history import URL_LOG_ENV

TIMEOUT_S = 300
WINDOW = ("--start", "2025-03-03", "--end", "2025-06-30")
DOWNLOAD = ("data", "download", "--market", "us", "--universe", "djia20", *WINDOW)


def fake_yahoo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`openbell ARGS` with the fake Yahoo as its only network, its URLs logged to urls.log."""
    env = clean_env(**{URL_LOG_ENV: str(cwd / "urls.log")})
    env.pop("OPENBELL_OFFLINE")
    return subprocess.run(
        [sys.executable, "-m", "openbell_testkit.yahoo_history", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def logged(cwd: Path) -> list[str]:
    log = cwd / "urls.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stockbench")
    done = fake_yahoo(root, *DOWNLOAD, "--out", "data", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "20/20 symbols complete" in done.stdout, done.stdout
    return root


def config(root: Path, ledger: str, agents: str) -> Path:
    path = root / f"{ledger}.toml"
    path.write_text(
        f'[store]\nurl = "sqlite:///{(root / f"{ledger}.db").as_posix()}"\n\n'
        '[markets.us]\nuniverse = "djia20"\ncadence = "daily"\nsource = "replay:data"\n'
        'corporate_actions = "data/corporate_actions.csv"\ninitial_cash = "100000"\n\n' + agents,
        encoding="utf-8",
    )
    return path


NEWS_NOTE = (
    "News: the top 5 items of the last 48 h, if any, each stock's in an untrusted envelope (its "
    "age and title)."
)


def test_the_download_says_what_it_holds_and_a_second_asks_yahoo_nothing(workdir: Path) -> None:
    first = logged(workdir)
    assert any("/v8/finance/chart/GS?" in url for url in first)
    assert any("/fundamentals-timeseries/" in url for url in first)
    assert any("/xhr/ncp" in url for url in first)
    again = fake_yahoo(workdir, *DOWNLOAD, "--out", "data", "--no-progress")
    assert again.returncode == 0, again.stderr
    assert logged(workdir) == first  # no request at all
    assert "bars 0 fetched / 20 already there" in again.stdout
    assert (
        'replay it with, in [markets.us]: source = "replay:data", '
        'corporate_actions = "data/corporate_actions.csv"'
    ) in again.stdout


def test_the_download_refuses_to_run_offline(tmp_path: Path) -> None:
    done = openbell(tmp_path, *DOWNLOAD)  # the test kit's environment sets OPENBELL_OFFLINE
    assert done.returncode == 2
    assert_one_error_line(done, "OPENBELL_OFFLINE is set")


def test_one_download_replays_all_twenty_members(workdir: Path) -> None:
    agents = "".join(
        f'[[agents]]\nname = "{kind}"\nkind = "{kind}"\nmarkets = ["us"]\n'
        for kind in ("equal_weight", "cash")
    )
    path = config(workdir, "baselines", agents)
    done = openbell(workdir, "replay", "--config", str(path), *WINDOW, timeout_s=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert "coverage: markets.us djia20 20/20 members, 83 sessions 2025-03-03..2025-06-30" in (
        done.stdout
    )
    assert "166 cycles done, 0 failed, 0 skipped" in done.stdout
    assert "WARNING" not in done.stdout
    verified = openbell(workdir, "ledger", "verify", "--config", str(path), timeout_s=TIMEOUT_S)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    held = openbell(workdir, "positions", "--config", str(path), "--format", "json")
    assert held.returncode == 0, held.stderr
    (equal,) = [a for a in json.loads(held.stdout)["accounts"] if a["agent"] == "equal_weight"]
    assert len(equal["positions"]) == 20
    board = openbell(
        workdir, "leaderboard", "--config", str(path), "--convention", "stockbench", "-f", "json"
    )
    assert board.returncode == 0, board.stderr
    (found,) = json.loads(board.stdout)["leaderboards"]
    assert found["convention"]["sortino"] == "rms-of-negatives"
    assert found["periods_per_year"] == 1.0


def decide(body: Body) -> Body:
    """Each cycle: pick AAPL and MSFT; buy AAPL up to 10 % of NAV while none is held, then hold."""
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    if "pick the stocks" in users[-1]:
        return completion(json.dumps({"selected": ["AAPL", "MSFT"]}))
    if "\nAAPL | held 0 |" in users[0]:
        buy = {"stock_id": "AAPL", "action": "increase", "target_weight": 0.1}
        return completion(json.dumps({"decisions": [{**buy, "confidence": 0.6, "reason": "r"}]}))
    return completion(json.dumps({"decisions": []}))


def shown(model: ScriptedModel) -> collections.Counter[str]:
    """Every line of every system and user message the model was shown, each cycle's messages
    once (from the cycle's last request, which repeats the earlier ones)."""
    cycles: list[list[dict[str, Any]]] = []
    for body in model.requests:
        messages = body["messages"]
        if len(messages) == 2 or not cycles:  # a cycle's first request: system and overview
            cycles.append(messages)
        else:
            cycles[-1] = messages
    return collections.Counter(
        line
        for messages in cycles
        for message in messages
        if message["role"] in ("system", "user")
        for line in message["content"].splitlines()
    )


def ablated(workdir: Path, name: str, without: str) -> tuple[collections.Counter[str], str]:
    model = ScriptedModel([decide] * 100)
    with serve_script(model) as base_url:
        agent = (
            '[[agents]]\nname = "bench"\nkind = "llm"\nmarkets = ["us"]\n'
            f'base_url = "{base_url}"\nmodel = "scripted-1"\nmode = "stockbench"\n{without}'
        )
        path = config(workdir, name, agent)
        window = ("--start", "2025-03-10", "--end", "2025-03-12")
        done = openbell(workdir, "replay", "--config", str(path), *window, timeout_s=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert "3 cycles done, 0 failed" in done.stdout
    fills = openbell(workdir, "export", "fills", "--config", str(path))
    assert fills.returncode == 0, fills.stderr
    return shown(model), fills.stdout


def test_the_ablations_change_what_the_model_is_shown_and_only_that(workdir: Path) -> None:
    full, full_fills = ablated(workdir, "full", "")
    no_news, no_news_fills = ablated(workdir, "no-news", 'without = ["news"]\n')
    neither, neither_fills = ablated(workdir, "neither", 'without = ["news", "fundamentals"]\n')
    # The same orders and fills in every run.
    assert full_fills == no_news_fills == neither_fills
    assert full_fills.count("\n") == 2  # the header and the one AAPL buy
    # The full run showed news and the downloaded fundamentals of the picks.
    news = [line for line in full if line.startswith("    news ")]
    assert len(news) >= 3
    assert any(line.startswith("AAPL: {") and "market_cap" in line for line in full)
    # Without news: the news lines and the note that announces them, nothing else.
    assert no_news - full == collections.Counter()
    assert full - no_news == collections.Counter(
        {line: full[line] for line in news} | {NEWS_NOTE: 3}
    )
    # Without news and fundamentals: the fundamentals stage is gone (the pick request, the
    # fundamentals and their stage line), and the stages are counted three, not four.
    dropped = no_news - neither
    added = neither - no_news
    assert {line[:40] for line in added} == {
        "You are a trading agent managing a paper"[:40],
        "Stage 1 of 3, overview (stock_id | held "[:40],
        "Stage 2 of 3: Answer with one JSON objec"[:40],
    }
    assert sum(added.values()) == 9  # three lines a cycle
    assert {line.split(":")[0].split(",")[0] for line in dropped} == {
        "You are a trading agent managing a paper account. You have no tools",
        "Stage 1 of 4",
        "Stage 2 of 4",
        "AAPL",
        "MSFT",
        "Stage 3 of 4",
    }
    assert sum(dropped.values()) == 3 * 7  # seven lines a cycle
