"""The real CLI replaying LLM agents whose scripted model (a real HTTP server on 127.0.0.1) answers
exactly as KTD-Fin's prompt asks, with the paper's action object as printed: `openbell replay`
places their orders (fills in the ledger), with no parse failure and the protocol completed every
cycle, bright (fixed-candidate, real tickers) and blinded (memory-only, aliases). A model whose
every answer is refused trades nothing, and its cycles do not count as completing the protocol.

KTD-Fin prints its action object's fields (section 3.4, its prompt's hard constraints and output
format), not a whole example answer: `answer` fills them in as printed, with upper-case `BUY`,
`confidence`, `target_weight`, the reason of the paper's blinded trace (Box C) and an
`overall_reason`, in one JSON object without markdown.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from openbell_testkit.cli import openbell
from openbell_testkit.llm import Body, ScriptedModel, completion, serve_script

CYCLES = 3
AGENTS = (
    ("paper", "fixed-candidate", "bright"),
    ("paper-blinded", "memory-only", "blinded"),
    ("refused", "fixed-candidate", "bright"),
)


def answer(stock_id: str) -> str:
    """KTD-Fin's action object, as its prompt's output format asks (one JSON object)."""
    return json.dumps(
        {
            "orders": [
                {
                    "stock_id": stock_id,
                    "side": "BUY",
                    "confidence": 0.62,
                    "reason": "20-day +27.4%, low vol 0.0255",
                    "target_weight": 0.1,
                }
            ],
            "overall_reason": "Concentrate in the strongest low-volatility trend; keep the rest "
            "in cash.",
        }
    )


def model_answer(body: Body) -> Body:
    user = body["messages"][1]["content"]
    if body["model"] == "scripted-refused":
        order = json.loads(answer("601398.SH"))
        order["orders"][0]["side"] = "HOLD"
        return completion(json.dumps(order))
    if body["model"] == "scripted-paper-blinded":
        ids = re.findall(r"asset_\d{4}", user.split("Stock ids you may trade:")[1])
        return completion(answer(ids[0]))
    table = user.split("candidates by score")[1]
    return completion(answer(re.findall(r"\d{6}\.S[HZ]", table)[0]))


def config(tmp_path: Path, base_url: str) -> str:
    agents = "".join(
        f'\n[[agents]]\nname = "{name}"\nkind = "llm"\nmarkets = ["cn"]\n'
        f'base_url = "{base_url}"\nmodel = "scripted-{name}"\nmode = "{mode}"\n'
        f'masking = "{masking}"\nmasking_seed = 7\n'
        for name, mode, masking in AGENTS
    )
    return (
        f'[store]\nurl = "sqlite:///{tmp_path / "ledger.db"}"\n\n'
        '[log]\nformat = "console"\nlevel = "warning"\n\n'
        '[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
        f'initial_cash = "1000000"\n{agents}'
    )


def fills_by_agent(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT agent.name, count(fill.id) FROM agent JOIN account ON account.agent_id = "
            'agent.id LEFT JOIN "fill" ON "fill".account_id = account.id GROUP BY agent.name'
        ).fetchall()
    return {name: int(count) for name, count in rows}


def test_the_papers_action_object_trades_and_completes_the_protocol(tmp_path: Path) -> None:
    model = ScriptedModel([model_answer] * 100)
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(config(tmp_path, base_url), encoding="utf-8")
        replayed = openbell(tmp_path, "replay", "--start", "2025-10-13", "--end", "2025-10-15")
    assert replayed.returncode == 0, replayed.stderr
    assert f"{CYCLES * len(AGENTS)} cycles done, 0 failed" in replayed.stdout + replayed.stderr

    fills = fills_by_agent(tmp_path / "ledger.db")
    assert fills["paper"] >= 1
    assert fills["paper-blinded"] >= 1
    assert fills.get("refused", 0) == 0

    records = {}
    for name, _mode, _masking in AGENTS:
        reported = openbell(tmp_path, "report", name, "--market", "cn", "--json")
        assert reported.returncode == 0, reported.stderr
        records[name] = json.loads(reported.stdout)
    for name in ("paper", "paper-blinded"):
        assert (records[name]["parse_failures"], records[name]["protocol_completion"]) == (0, 1.0)
        assert records[name]["llm_decisions"] == CYCLES
    # Refused four times a cycle (an answer and three retries), then the no-trade fallback.
    assert records["refused"]["parse_failures"] == 4 * CYCLES
    assert records["refused"]["protocol_completion"] == 0.0

    traced = openbell(tmp_path, "trace", "1")
    assert traced.returncode == 0, traced.stderr
    assert "Concentrate in the strongest low-volatility trend" in traced.stdout
