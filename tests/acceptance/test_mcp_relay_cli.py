"""`openbell mcp --account NAME` refuses in one line, with exit 2 and no traceback, to start without
a token in `OPENBELL_MCP_TOKEN`, with a bad `--url`, or when no daemon answers at the URL (from
`--url`, or from the config's `[http] listen`); and a token never appears in what it prints."""

from __future__ import annotations

from pathlib import Path

from openbell_testkit.cli import clean_env, openbell
from openbell_testkit.offline import closed_port

TOKEN = "obc_relay-test-token-0123456789abcdef"  # noqa: S105  (a made-up token)


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("openbell: error: ")
    assert "Traceback" not in stderr
    return lines[0]


def test_without_a_token_it_says_which_variable_to_set(tmp_path: Path) -> None:
    done = openbell(
        tmp_path,
        "mcp",
        "--account",
        "claude",
        "--url",
        "http://127.0.0.1:9/mcp",
        env=clean_env(without={"OPENBELL_MCP_TOKEN"}),
    )
    assert done.returncode == 2
    line = _one_error_line(done.stderr)
    assert "OPENBELL_MCP_TOKEN is not set" in line
    assert "openbell agent token claude" in line
    assert done.stdout == ""


def test_with_no_daemon_at_the_url_it_says_so_in_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/mcp"
    done = openbell(
        tmp_path,
        "mcp",
        "--account",
        "claude",
        "--url",
        url,
        env=clean_env(OPENBELL_MCP_TOKEN=TOKEN),
    )
    assert done.returncode == 2
    line = _one_error_line(done.stderr)
    assert f"cannot reach the openbell daemon at {url}: is it running?" in line
    assert TOKEN not in done.stderr + done.stdout
    assert done.stdout == ""


def test_the_url_comes_from_the_configs_http_listen(tmp_path: Path) -> None:
    port = closed_port()
    config = tmp_path / "openbell.toml"
    config.write_text(
        f'[http]\nlisten = "0.0.0.0:{port}"\nallow_remote = true\n\n'
        '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\nsource = "bundled"\n'
        'initial_cash = "10000"\n'
    )
    done = openbell(
        tmp_path,
        "--config",
        str(config),
        "mcp",
        "--account",
        "claude",
        env=clean_env(OPENBELL_MCP_TOKEN=TOKEN),
    )
    assert done.returncode == 2
    line = _one_error_line(done.stderr.replace("\n{", "{"))  # a JSON log line may precede it
    assert f"http://127.0.0.1:{port}/mcp" in line  # a wildcard listen is reached on loopback


def test_a_url_that_is_not_http_is_refused(tmp_path: Path) -> None:
    done = openbell(
        tmp_path,
        "mcp",
        "--account",
        "claude",
        "--url",
        "127.0.0.1:8787",
        env=clean_env(OPENBELL_MCP_TOKEN=TOKEN),
    )
    assert done.returncode == 2
    assert "should be an http(s) URL" in _one_error_line(done.stderr)
