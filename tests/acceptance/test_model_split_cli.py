"""`on_model_change` through the real CLI: two LLM agents of one scripted server on 127.0.0.1 that
answers under another `system_fingerprint` from the third session on. The agent left at `flag`
keeps one account, marked on the leaderboard; the agent set to `split` is two rows, its account
up to the change and `NAME~2` from it, unmarked, and the ledger verifies."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx

from openbell_testkit.cli import assert_ledger_verifies, clean_env, openbell
from openbell_testkit.llm import CN_STOCK, Body, ScriptedModel, finish, serve_script, tool_turn


def changing_server(body: Body) -> httpx.Response:
    """Buys a lot of ICBC, then finishes; build `fp_a` before 2025-10-15, `fp_b` from it."""
    day = re.search(r"Now: \d{4}-\d{2}-(\d{2})", body["messages"][1]["content"])
    assert day is not None
    fingerprint = "fp_b" if int(day.group(1)) >= 15 else "fp_a"
    if any(message["role"] == "tool" for message in body["messages"]):
        payload = finish("Bought.")
    else:
        payload = tool_turn(("place_order", {"symbol": CN_STOCK, "side": "buy", "shares": 100}))
    return httpx.Response(200, json=payload | {"system_fingerprint": fingerprint})


def test_flag_marks_the_account_and_split_starts_a_new_one(tmp_path: Path) -> None:
    env = clean_env()
    model = ScriptedModel([changing_server] * 100)
    with serve_script(model) as base_url:
        agents = "".join(
            f'[[agents]]\nname = "{name}"\nkind = "llm"\nmarkets = ["cn"]\n'
            f'base_url = "{base_url}"\nmodel = "scripted-1"\non_model_change = "{policy}"\n\n'
            for name, policy in (("flagger", "flag"), ("splitter", "split"))
        )
        (tmp_path / "openbell.toml").write_text(
            f'[store]\nurl = "sqlite:///{tmp_path / "var" / "openbell.db"}"\n\n'
            '[log]\nformat = "console"\nlevel = "warning"\n\n'
            '[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
            'initial_cash = "100000"\n\n' + agents,
            encoding="utf-8",
        )
        replayed = openbell(
            tmp_path, "replay", "--start", "2025-10-13", "--end", "2025-10-17", env=env
        )
    assert replayed.returncode == 0, replayed.stderr
    assert "10 cycles done, 0 failed" in replayed.stdout + replayed.stderr

    board = openbell(tmp_path, "leaderboard", "--format", "json", env=env)
    assert board.returncode == 0, board.stderr
    (market,) = json.loads(board.stdout)["leaderboards"]
    rows = {row["agent"]: row for row in market["rows"] if row["agent"] is not None}
    assert set(rows) == {"flagger", "splitter", "splitter~2"}
    assert rows["flagger"]["model_changed"] is True
    # The old account's last cycle holds the answer that showed the change (not acted on); the
    # new account's exchanges are all of one identity.
    assert rows["splitter"]["model_changed"] is True
    assert rows["splitter~2"]["model_changed"] is False
    assert rows["splitter"]["cycles"] == 3  # two done, the third skipped at the change
    assert rows["splitter~2"]["cycles"] == 3  # from the change's slot on
    assert_ledger_verifies(tmp_path)
