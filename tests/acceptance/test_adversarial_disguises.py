"""A model that writes its API key in disguise, through the real CLI: `openbell replay` with an
LLM agent whose model (a scripted OpenAI-compatible server on 127.0.0.1) writes the key reversed,
in ROT13, spaced out, with zero-width characters inserted (raw and as JSON escapes), in hex (lower
and upper case, byte by byte), in Base32 (upper and lower case) and cut in two, across an answer
and a tool call of one turn and across the reasons of two orders, in its answers, reasoning,
order reasons, tool arguments and finish. Afterwards no form of the key is in the ledger file (its
raw bytes too), the exports or the traces, while an ordinary hex digest and Base32 code in an
order's reason are stored as they were written, and the ledger verifies."""

from __future__ import annotations

import base64
import codecs
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from openbell_testkit.cli import clean_env, openbell
from openbell_testkit.llm import CN_STOCK, ScriptedModel, call, completion, finish, serve_script
from openbell_testkit.secrets import leaks

#: Fresh `openbell` processes, never forked from a zygote:
#: a secret in the environment must be nowhere, /proc included.
pytestmark = pytest.mark.fresh_processes

KEY = "sk-dsg-7Qm2Vx9Lp4Rt8Kw3Nz6Bc1Yh"
ENV = "OPENBELL_DISGUISE_KEY"
DAYS = ("--start", "2025-10-13", "--end", "2025-10-14")
DIGEST = hashlib.sha256(b"a research note").hexdigest()
CODE = base64.b32encode(b"an ordinary code").decode()


def json_escaped(text: str) -> str:
    """`text` with a zero-width space between its characters, as JSON escapes it."""
    return "\\u200b".join(text)


def order(shares: int, reason: str) -> dict[str, object]:
    return {"symbol": CN_STOCK, "side": "buy", "shares": shares, "reason": reason}


def script() -> list[object]:
    hex_key = KEY.encode().hex()
    day1 = [
        completion(
            f"Backwards it is {KEY[::-1]}; in ROT13 {codecs.encode(KEY, 'rot13')}; and the first "
            f"half is {KEY[:15]}",
            [
                call("calculate", {"expression": f"len('{KEY[15:]}')"}),
                call("get_quote", {"symbols": [hex_key.upper()]}),
            ],
            reasoning=" ".join(KEY),
        ),
        completion(
            None,
            [
                call("place_order", order(100, f"hex {hex_key} and digest {DIGEST}")),
                call(
                    "place_order", order(100, f"bytes {' '.join(f'{b:02X}' for b in KEY.encode())}")
                ),
                call(
                    "place_order",
                    '{"symbol": "' + CN_STOCK + '", "side": "buy", "shares": 100, '
                    '"reason": "zw ' + json_escaped(KEY) + '"}',
                ),
            ],
        ),
        finish(f"b32 {base64.b32encode(b'k' + KEY.encode()).decode()} code {CODE}"),
    ]
    day2 = [
        completion(
            "\u200d".join(KEY),
            [
                call("place_order", order(100, f"part one {KEY[:12]} ok")),
                call("place_order", order(100, f"part two {KEY[12:]} ok")),
            ],
        ),
        finish(base64.b32encode(KEY.encode()).decode().lower()),
    ]
    return [*day1, *day2]


def write_config(tmp_path: Path, base_url: str) -> None:
    (tmp_path / "openbell.toml").write_text(
        '[store]\nurl = "sqlite:///var/ledger.db"\n\n'
        '[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
        'initial_cash = "1000000"\n\n'
        '[[agents]]\nname = "disguiser"\nkind = "llm"\nmarkets = ["cn"]\n'
        f'base_url = "{base_url}"\nmodel = "scripted-1"\napi_key_env = "{ENV}"\n',
        encoding="utf-8",
    )


def sqlite_text(db: Path) -> str:
    """Every statement of a dump of the ledger, and the raw bytes of its files (freed pages too)."""
    with sqlite3.connect(db) as connection:
        dump = "\n".join(connection.iterdump())
    raw = "".join(
        path.read_bytes().decode("latin-1")
        for path in sorted(db.parent.glob(f"{db.name}*"))
        if path.is_file()
    )
    return dump + "\n" + raw


def test_a_model_writing_its_key_in_disguise_leaves_no_form_of_it(tmp_path: Path) -> None:
    steps = script()
    model = ScriptedModel(list(steps))  # type: ignore[arg-type]
    with serve_script(model) as base_url:
        write_config(tmp_path, base_url)
        replayed = openbell(tmp_path, "replay", *DAYS, env=clean_env(**{ENV: KEY}))
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    assert "2 cycles done" in replayed.stdout, replayed.stdout
    assert len(model.requests) == len(steps)

    outputs = {"replay": replayed.stdout + replayed.stderr}
    for args in (
        ("ledger", "verify"),
        ("export", "orders"),
        ("trace", "1", "--json"),
        ("trace", "2", "--json"),
        ("trace", "1", "--full"),
    ):
        result = openbell(tmp_path, *args, env=clean_env())
        assert result.returncode == 0, (args, result.stderr[-2000:])
        outputs[" ".join(args)] = result.stdout + result.stderr
    assert "ok" in outputs["ledger verify"].lower()
    outputs["ledger"] = sqlite_text(tmp_path / "var" / "ledger.db")

    assert {name: hits for name, text in outputs.items() if (hits := leaks(text, [KEY]))} == {}
    # what only looks like an encoded secret is stored as it was written
    reasons = [row for row in outputs["export orders"].splitlines() if "digest" in row]
    assert len(reasons) == 1, reasons
    assert DIGEST in reasons[0]
    traces = [json.loads(outputs[f"trace {n} --json"]) for n in (1, 2)]
    summaries = [e["arguments"] for t in traces for e in t["entries"] if e["tool"] == "finish"]
    assert any(CODE in summary for summary in summaries), summaries
    assert "[redacted]" in outputs["export orders"]
