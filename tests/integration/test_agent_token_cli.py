"""`openbell agent token NAME`: prints a new token once (stdout, past the masked output), with a
one-line hint on stderr; the ledger (migrated and the agent's row created if no daemon ran yet)
keeps only its hash, and a second token revokes the first. An unknown agent, or one of a kind that
does not connect, is one error line and exit 2, and nothing is written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from openbell.ops import cli
from openbell.ops.cli import tokens as agent_cli
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell_testkit.logs import logging_restored

pytestmark = pytest.mark.sqlite_only

# Until kind "mcp" is in the config (issue 12's MCP server), a `cash` agent stands in for one that
# connects: the test makes its kind a connecting kind.
CONNECTING_KIND = "cash"


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    with logging_restored():
        yield


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(agent_cli, "CONNECTING_KINDS", frozenset({CONNECTING_KIND}))
    path = tmp_path / "openbell.toml"
    path.write_text(
        f'[store]\nurl = "sqlite:///{tmp_path / "ledger.db"}"\n\n'
        '[log]\nformat = "console"\n\n'
        '[markets.us]\nuniverse = "nasdaq100"\ncadence = "daily"\nsource = "bundled"\n'
        'initial_cash = "10000"\n\n'
        f'[[agents]]\nname = "outside"\nkind = "{CONNECTING_KIND}"\nmarkets = ["us"]\n\n'
        '[[agents]]\nname = "holder"\nkind = "buy_and_hold"\nmarkets = ["us"]\n',
        encoding="utf-8",
    )
    return path


def ledger_of(config: Path) -> Ledger:
    return Ledger(make_engine(f"sqlite:///{config.parent / 'ledger.db'}"))


def issue(config: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    code = cli.main(["agent", "token", "outside", "--config", str(config)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


def test_the_token_is_printed_once_and_stored_as_its_hash(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, err = issue(config, capsys)

    token = out.strip()
    assert out == token + "\n"
    assert token.startswith("obt_")
    assert "OPENBELL_MCP_TOKEN" in err
    assert token not in err
    ledger = ledger_of(config)
    assert ledger.agent_for_token(token) == "outside"
    stored = b"".join(path.read_bytes() for path in config.parent.glob("ledger.db*"))
    assert token.encode() not in stored
    assert token.removeprefix("obt_").encode() not in stored

    second, _ = issue(config, capsys)
    assert ledger.agent_for_token(token) is None
    assert ledger.agent_for_token(second.strip()) == "outside"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("ghost", ["no agent 'ghost' in the config", "agents that connect: outside"]),
        ("holder", ["agent 'holder' is of kind 'buy_and_hold'", "does not connect"]),
    ],
)
def test_an_agent_that_cannot_connect_is_one_error_line(
    config: Path, capsys: pytest.CaptureFixture[str], name: str, words: list[str]
) -> None:
    code = cli.main(["agent", "token", name, "--config", str(config)])

    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("openbell: error: ")
    for word in words:
        assert word in err
    assert not (config.parent / "ledger.db").exists()
