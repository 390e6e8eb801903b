"""FIDES' concordance through the real CLI (issue 25 item 4): `openbell replay` over the bundled
crypto bars with a strategy-code agent whose scripted coder writes three strategies (one every
three cycles), `openbell judge` with a scripted judge, `openbell report` with the three gaps and
the beat-buy-and-hold count, and the judge swapped for a second model: the strategies are not run
again and only the judge's columns change. The figures are worked out again here from the ledger's
NAV snapshots and the bundled bars (the paper's definitions and the report's quote rule, written
out), and the API's
concordance document says the same as the report."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import text
from starlette.testclient import TestClient

from openbell.ops.web.api import api_app
from openbell.ops.web.concordance_schema import Concordance
from openbell.store.db import make_engine
from openbell_testkit.cli import clean_env, openbell
from openbell_testkit.jail import need_jail
from openbell_testkit.llm import ScriptedModel, completion, serve_script
from tests.acceptance.test_run import assert_ledger_verifies

CASH = """
def strategy(bars):
    return {}
"""
EQUAL = """
def strategy(bars):
    return {symbol: 0.09 for symbol in sorted(bars)}
"""
MOMENTUM = """
import pandas as pd


def strategy(bars):
    lookback = 10
    scores = {}
    for symbol, frame in bars.items():
        close = frame["close"]
        if len(close) > lookback:
            scores[symbol] = close.iloc[-1] / close.iloc[-11] - 1
    best = pd.Series(scores).sort_values(ascending=False)
    return {s: round(0.3 + 0.1 * max(-1.0, min(1.0, float(best[s]))), 6) for s in best.index[:2]}
"""
#: The coder's three answers, in the order it is asked, and what each rationale claims.
STRATEGIES = [
    (CASH, {"expected_return": 0, "rationale": "Stay in cash: in this falling market cash "
            "should beat buy-and-hold."}),
    (EQUAL, {"expected_return": 0.002, "hit_rate": 0.6, "rationale": "Hold every coin in equal "
             "weight: the 20-day uptrend should make this profitable."}),
    (MOMENTUM, {"expected_return": 0.003, "rationale": "Hold the two coins with the strongest "
                "10-day momentum, sized by it, for a higher Sharpe than buy-and-hold."}),
]  # fmt: skip
CLAIMS = [  # (beat buy-and-hold, Sharpe, profit), as the keyword parser must read them
    (True, False, False),
    (False, False, True),
    (True, True, True),
]
#: Each judge's verdict on each strategy (direction, indicators, exits, no_extra_rule).
VERDICTS = {
    "judge-a": [(1, 1, 1, 1), (1, 0, 1, 1), (1, 1, 0, 0)],
    "judge-b": [(0, 1, 1, 1), (1, 1, 1, 1), (1, 1, 1, 1)],
}
JUDGE_KEYS = {
    "say_do",
    "judge_model",
    "judged_at",
    "judge_direction",
    "judge_indicators",
    "judge_exits",
    "judge_no_extra_rule",
    "judge_rationale",
    "say_do_by_judge",
}


@pytest.fixture(autouse=True)
def _jailed() -> None:
    need_jail("strategy")


def scripted(coder: list[str], judged: list[str]) -> ScriptedModel:
    """The coder's answers in order; each judge's verdict on the strategy it is shown (the first
    answer judge-a gives on the third strategy lacks a check and is sent back)."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        if body["model"] == "coder-1":
            code, claim = STRATEGIES[len(coder)]
            coder.append(code)
            return completion(json.dumps({"code": code, "claim": claim}))
        shown = body["messages"][1]["content"]
        index = next(i for i, (code, _) in enumerate(STRATEGIES) if code.strip() in shown)
        judged.append(f"{body['model']}:{index}")
        checks = dict(
            zip(
                ("direction", "indicators", "exits", "no_extra_rule"),
                VERDICTS[body["model"]][index],
                strict=True,
            )
        )
        if body["model"] == "judge-a" and index == 2 and len(body["messages"]) == 2:
            checks.pop("exits")
        return completion(json.dumps({**checks, "rationale": f"{body['model']} on {index + 1}"}))

    return ScriptedModel([answer] * 40)


def config(db: Path, base_url: str) -> str:
    judges = "".join(
        f'[judges.{name}]\nbase_url = "{base_url}"\nmodel = "judge-{name[0]}"\n\n'
        for name in ("alpha", "beta")
    )
    return (
        f'[store]\nurl = "sqlite:///{db}"\n\n[log]\nformat = "console"\nlevel = "warning"\n\n'
        '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\n'
        'source = "ccxt:binance"\ninitial_cash = "10000"\n\n'
        # FIDES' main run has no trading costs (b = 0): a strategy's last period then holds no
        # cost of the next strategy's first trades, and a strategy in cash earns exactly 0.
        '[markets.crypto.costs]\ncommission_bps = "0"\nslippage_bps = "0"\n\n'
        f"{judges}"
        '[[agents]]\nname = "coder"\nkind = "strategy_code"\nmarkets = ["crypto"]\n'
        f'base_url = "{base_url}"\nmodel = "coder-1"\nlookback = 30\nrewrite_every = 3\n'
        'judge = "alpha"\nrebalance_band = "0"\n'
    )


def ledger_rows(db: Path) -> tuple[dict[datetime, Decimal], list[Any]]:
    """The coder's slot NAVs, and its runs (strategy, time, outcome, offered) in time order."""
    engine = make_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as connection:
            navs = connection.execute(
                text("SELECT at, nav FROM nav_snapshot WHERE kind = 'slot' ORDER BY at")
            ).all()
            runs = connection.execute(
                text(
                    "SELECT strategy_id, ran_at, outcome, offered FROM strategy_run ORDER BY ran_at"
                )
            ).all()
    finally:
        engine.dispose()
    return {_instant(row.at): Decimal(str(row.nav)) for row in navs}, list(runs)


def _instant(value: object) -> datetime:
    found = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return found.replace(tzinfo=UTC) if found.tzinfo is None else found


def quote(bars: list[pd.DataFrame], symbol: str, at: datetime) -> float:
    """The report's quote rule written out, over the bundled hourly and daily bars (finest
    first): the open of a bar starting at `at`, else the close of the last bar ended by it."""
    owns = [frame[frame["symbol"] == symbol] for frame in bars]
    for own in owns:
        starting = own[own["start_at"] == at]
        if len(starting):
            return float(starting["open"].iloc[0])
    ended = pd.concat([own[own["end_at"] <= at] for own in owns]).sort_values("end_at")
    return float(ended["close"].iloc[-1])


def sharpe(returns: list[float]) -> float:
    mean = sum(returns) / len(returns)
    if all(r == 0 for r in returns):
        return 0.0
    std = math.sqrt(sum((r - mean) ** 2 for r in returns) / (len(returns) - 1))
    return mean / std * math.sqrt(365)


def expected_outcomes(db: Path) -> list[dict[str, Any]]:
    """Each strategy's periods, R, S, and its universe's buy-and-hold R_bh, S_bh, by hand."""
    navs, runs = ledger_rows(db)
    times = sorted(navs)
    folder = resources.files("openbell.markets").joinpath("data", "bars")
    bars = [pd.read_parquet(str(folder.joinpath(f"crypto-{i}.parquet"))) for i in ("1h", "1d")]
    found: dict[int, dict[str, Any]] = {}
    for run in runs:
        entry = found.setdefault(
            run.strategy_id, {"offered": json.loads(run.offered), "spans": [], "runs": 0}
        )
        entry["runs"] += 1
        at = _instant(run.ran_at)
        later = [t for t in times if t > at]
        if run.outcome == "ok" and later:
            entry["spans"].append((at, later[0]))
    out = []
    for _, entry in sorted(found.items()):
        spans = entry["spans"]
        mine = [float(navs[end] / navs[start] - 1) for start, end in spans]
        first = spans[0][0]
        offered = entry["offered"]

        def value(at: datetime, offered: list[str] = offered, first: datetime = first) -> float:
            return sum(quote(bars, s, at) / quote(bars, s, first) for s in offered) / len(offered)

        held = [value(end) / value(start) - 1 for start, end in spans]
        out.append(
            {
                "runs": entry["runs"],
                "periods": len(spans),
                "offered": offered,
                "R": math.prod(1 + r for r in mine) - 1,
                "S": sharpe(mine),
                "R_bh": math.prod(1 + r for r in held) - 1,
                "S_bh": sharpe(held),
                "edge": sum(mine) / len(mine) - sum(held) / len(held),
            }
        )
    return out


def say_result(claims: tuple[bool, bool, bool], found: dict[str, Any]) -> float:
    """FIDES' equation (3), written out."""
    beat, on_sharpe, profit = claims
    checks = []
    if beat:
        checks.append(found["S"] > found["S_bh"] and found["R"] > found["R_bh"])
    if on_sharpe:
        checks.append(found["S"] > 0)
    if profit:
        checks.append(found["R"] > 0)
    if not checks:
        return 0.5
    return 1.0 if all(checks) else 0.0


def report(tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    shown = openbell(tmp_path, "report", "coder", "--market", "crypto", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    record: dict[str, Any] = json.loads(shown.stdout)
    return record


def test_a_fides_replay_reports_the_three_gaps_and_a_judge_swap_changes_only_its_columns(
    tmp_path: Path,
) -> None:
    coder: list[str] = []
    judged: list[str] = []
    model = scripted(coder, judged)
    db = tmp_path / "var" / "openbell.db"
    env = clean_env()
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(config(db, base_url), encoding="utf-8")
        replayed = openbell(
            tmp_path, "replay", "--start", "2025-11-01", "--end", "2025-11-09", env=env
        )
        assert replayed.returncode == 0, replayed.stderr
        assert "9 cycles done, 0 failed" in replayed.stdout + replayed.stderr
        assert coder == [CASH, EQUAL, MOMENTUM]  # one strategy every three cycles
        unjudged = report(tmp_path, env)
        first = openbell(tmp_path, "judge", "coder", "--market", "crypto", env=env)
        assert first.returncode == 0, first.stderr
        with_a = report(tmp_path, env)
        swapped = openbell(
            tmp_path, "judge", "coder", "--market", "crypto", "--judge", "beta", env=env
        )
        assert swapped.returncode == 0, swapped.stderr
        with_b = report(tmp_path, env)
    assert len(coder) == 3  # judging ran nothing again
    assert judged == ["judge-a:0", "judge-a:1", "judge-a:2", "judge-a:2", "judge-b:0",
                      "judge-b:1", "judge-b:2"]  # fmt: skip
    assert first.stdout.splitlines()[1] == (
        'strategy_2: say_do 0.75 {"direction": 1, "indicators": 0, "exits": 1, '
        '"no_extra_rule": 1} by judge-a'
    )
    assert_ledger_verifies(tmp_path)

    # Say-to-do, by hand: the mean of the four checks; before any judge, none.
    assert [unjudged[f"strategy_{n}"]["say_do"] for n in (1, 2, 3)] == [None] * 3
    assert [with_a[f"strategy_{n}"]["say_do"] for n in (1, 2, 3)] == [1.0, 0.75, 0.5]
    assert [with_b[f"strategy_{n}"]["say_do"] for n in (1, 2, 3)] == [0.75, 1.0, 1.0]
    assert with_a["concordance"]["say_do"] == 0.75
    assert with_b["concordance"]["say_do"] == pytest.approx(2.75 / 3, abs=1e-6)
    assert with_b["strategy_3"]["say_do_by_judge"] == {"judge-a": 0.5, "judge-b": 1.0}
    assert with_a["strategy_3"]["judge_rationale"] == "judge-a on 3"
    # The rule variant: lookbacks named in the prose found in the code (none named: undefined).
    rules = [with_a[f"strategy_{n}"]["say_do_rule"] for n in (1, 2, 3)]
    assert rules == [None, 0.0, 1.0]  # "20-day" is not in EQUAL; "10-day" is in MOMENTUM
    # Do-to-real, by hand: every run valid, no look-ahead; cash and equal weights never vary.
    assert [with_a[f"strategy_{n}"]["signals_vary"] for n in (1, 2, 3)] == [0, 0, 1]
    assert [with_a[f"strategy_{n}"]["do_real"] for n in (1, 2, 3)] == [
        pytest.approx(2 / 3, abs=1e-6),
        pytest.approx(2 / 3, abs=1e-6),
        1.0,
    ]
    assert [with_a[f"strategy_{n}"]["position_density"] for n in (1, 2, 3)] == [0.0, 1.0, 1.0]

    # Say-to-result and buy-and-hold, worked out from the ledger's NAVs and the bundled bars.
    outcomes = expected_outcomes(db)
    assert [o["runs"] for o in outcomes] == [3, 3, 3]
    assert [o["periods"] for o in outcomes] == [3, 3, 2]  # the last slot has no next snapshot
    beat = 0
    for n, (found, claims) in enumerate(zip(outcomes, CLAIMS, strict=True), start=1):
        entry = with_a[f"strategy_{n}"]
        assert len(found["offered"]) == 10
        for key, mine in (
            ("total_return", "R"),
            ("sharpe_ratio", "S"),
            ("buy_and_hold_return", "R_bh"),
            ("buy_and_hold_sharpe", "S_bh"),
            ("realised_edge", "edge"),
        ):
            assert entry[key] == pytest.approx(found[mine], abs=2e-6), (n, key)
        wins = found["S"] > found["S_bh"] and found["R"] > found["R_bh"]
        beat += wins
        assert entry["beats_buy_and_hold"] is wins
        assert (
            entry["claims_beat_buy_and_hold"],
            entry["claims_sharpe"],
            entry["claims_profit"],
        ) == claims
        assert entry["say_result"] == say_result(claims, found), n
    # By hand from those figures: the coins fell over the first two windows (buy-and-hold -8.8 %
    # and -3.4 %) and rose over the third (+7.9 %). Cash (FIDES' degenerate winner: R = 0, S = 0)
    # beat the fall and claimed to: say-to-result 1. Equal weights lost a little less than
    # buy-and-hold (R -3.27 % > -3.36 %) but had the worse Sharpe (-4.57 < -4.31): no beat, and its
    # profit claim fails: 0. Momentum had the better Sharpe (23.0 > 11.3) but the smaller return
    # (7.0 % < 7.9 %): no beat against its claim: 0. One of three beat buy-and-hold.
    assert [o["R_bh"] < 0 for o in outcomes] == [True, True, False]
    assert with_a["strategy_1"]["total_return"] == 0.0
    assert with_a["strategy_1"]["sharpe_ratio"] == 0.0
    assert [with_a[f"strategy_{n}"]["beats_buy_and_hold"] for n in (1, 2, 3)] == [
        True,
        False,
        False,
    ]
    assert [with_a[f"strategy_{n}"]["say_result"] for n in (1, 2, 3)] == [1.0, 0.0, 0.0]
    summary = with_a["concordance"]
    assert summary["beat_buy_and_hold"] == beat == 1
    assert summary["say_result"] == pytest.approx(1 / 3, abs=1e-6)
    assert summary["do_real"] == pytest.approx(7 / 9, abs=1e-6)
    assert summary["say_do_rule"] == 0.5
    assert summary["compared_with_buy_and_hold"] == 3
    assert summary["claimed_to_beat_buy_and_hold"] == 2
    assert summary["claimed_and_beat_buy_and_hold"] == 1

    # The swap: only the judge's columns differ, strategy by strategy and in the summary.
    for n in (1, 2, 3):
        before, after = with_a[f"strategy_{n}"], with_b[f"strategy_{n}"]
        assert {k for k in before if before[k] != after[k]} <= JUDGE_KEYS, n
        assert {k: v for k, v in before.items() if k not in JUDGE_KEYS} == {
            k: v for k, v in unjudged[f"strategy_{n}"].items() if k not in JUDGE_KEYS
        }
    assert {k for k in with_a if with_a[k] != with_b[k]} == {
        "strategy_1", "strategy_2", "strategy_3", "concordance"
    }  # fmt: skip
    assert {k for k, v in with_a["concordance"].items() if with_b["concordance"][k] != v} == {
        "say_do"
    }

    # The API's concordance document is the report's.
    engine = make_engine(f"sqlite:///{db}")
    try:
        with TestClient(api_app(engine)) as client:
            response = client.get("/agents/coder/crypto/concordance")
    finally:
        engine.dispose()
    assert response.status_code == 200, response.text
    document = Concordance.model_validate(response.json()).model_dump(mode="json")
    assert document["summary"] == with_b["concordance"]
    for entry in document["strategies"]:
        n = entry.pop("strategy")
        assert entry == with_b[f"strategy_{n}"]
