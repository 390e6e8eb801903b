"""The CLI's last line of defence: an unexpected failure is one redacted line and exit 1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from openbell.daemon import live
from openbell.daemon.plan import LivePlan
from openbell.ops import cli
from openbell.ops.config.schema import default_config_text
from openbell_testkit.logs import logging_restored

LEAKY = "sk-unit4f9a7c1e5b2d4f6a8c0e"


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    with logging_restored():
        yield


def test_unexpected_error_is_one_redacted_line_and_a_json_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def explode(plan: LivePlan, *_args: object, **_kwargs: object) -> int:
        api_key = LEAKY
        raise RuntimeError(f"vendor said no to {api_key}")

    monkeypatch.setattr(live, "run_live", explode)
    path = tmp_path / "openbell.toml"
    path.write_text(default_config_text(), encoding="utf-8")

    code = cli.main(["run", "--config", str(path), "--no-upgrade"])

    out, err = capsys.readouterr()
    assert code == 1
    assert err == "openbell: error: unexpected RuntimeError: vendor said no to [redacted]\n"
    records = [json.loads(line) for line in out.splitlines()]
    # Other start-up warnings may come first (a universe outside its coverage on today's date).
    assert {r["level"] for r in records[:-1]} <= {"warning"}
    record = records[-1]
    assert record["event"] == "command_failed"
    assert record["exception"][0]["exc_type"] == "RuntimeError"
    assert LEAKY not in out
    assert "Traceback" not in out + err


def test_operator_error_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["ledger", "verify", "--config", str(tmp_path / "none.toml")])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("openbell: error: ")
    assert err.count("\n") == 1
    assert out == ""


def test_a_configured_key_is_masked_in_every_form_in_all_the_command_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "sk-cli-0123456789abcdefQRS"
    escaped = key.replace("-", "\\u002d")

    def explode(plan: LivePlan, *_args: object, **_kwargs: object) -> int:
        print(f"the model said {key.removeprefix('sk-')}")
        raise RuntimeError(f"vendor said no to {escaped}")

    monkeypatch.setattr(live, "run_live", explode)
    monkeypatch.setenv("OPENBELL_UNIT_KEY", key)
    path = tmp_path / "openbell.toml"
    path.write_text(
        default_config_text() + '\n[[agents]]\nname = "llm"\nkind = "llm"\nmarkets = ["us"]\n'
        'base_url = "http://127.0.0.1:1/v1"\nmodel = "m"\napi_key_env = "OPENBELL_UNIT_KEY"\n',
        encoding="utf-8",
    )

    code = cli.main(["run", "--config", str(path), "--no-upgrade"])

    out, err = capsys.readouterr()
    assert code == 1
    assert err == "openbell: error: unexpected RuntimeError: vendor said no to [redacted]\n"
    assert "the model said [redacted]" in out
    assert escaped not in out
    assert key.removeprefix("sk-") not in out + err
