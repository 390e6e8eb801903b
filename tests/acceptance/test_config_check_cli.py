"""`openbell config check` resolves what `run` and `replay` would (issue 28 item 4): an unset
`api_key_env`, a `python` plug-in that does not import and a command whose program is missing are
problems (exit 2, one line each) though the file is valid; `--online` asks each model endpoint
once, so a dead one is a problem and a live one is reported reachable."""

from __future__ import annotations

from pathlib import Path

from openbell.ops.wiring.fake_llm import FakeModel, serve_fake_model
from openbell_testkit.cli import clean_env, free_port, openbell

MARKET = (
    '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\nsource = "ccxt:binance"\n'
    'initial_cash = "10000"\n\n'
)


def llm(name: str, base_url: str, key_env: str | None = None) -> str:
    key = f'api_key_env = "{key_env}"\n' if key_env else ""
    return (
        f'[[agents]]\nname = "{name}"\nkind = "llm"\nmarkets = ["crypto"]\n'
        f'base_url = "{base_url}"\nmodel = "m"\n{key}\n'
    )


def test_what_a_run_would_stop_on_is_a_problem_of_the_check(tmp_path: Path) -> None:
    (tmp_path / "openbell.toml").write_text(
        MARKET
        + llm("keyed", "http://127.0.0.1:9/v1", "OPENBELL_TEST_UNSET_KEY")
        + '[[agents]]\nname = "plug"\nkind = "python"\nmarkets = ["crypto"]\n'
        'entry = "no_such_module_here:Agent"\n\n'
        '[[agents]]\nname = "cmd"\nkind = "command"\nmarkets = ["crypto"]\n'
        'command = ["no-such-program-here", "{prompt}"]\n\n'
        '[[agents]]\nname = "hold"\nkind = "buy_and_hold"\nmarkets = ["crypto"]\n',
        encoding="utf-8",
    )
    env = clean_env(without=["OPENBELL_TEST_UNSET_KEY"])
    checked = openbell(tmp_path, "config", "check", env=env)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    lines = checked.stderr.splitlines()
    assert len(lines) == 3, checked.stderr
    assert "agent 'keyed'" in lines[0]
    assert "OPENBELL_TEST_UNSET_KEY is not set" in lines[0]
    assert "agent 'plug'" in lines[1]
    assert "no_such_module_here" in lines[1]
    assert "agent 'cmd'" in lines[2]
    assert "no-such-program-here" in lines[2]
    assert "Traceback" not in checked.stderr

    env["OPENBELL_TEST_UNSET_KEY"] = "sk-set-now"
    (tmp_path / "openbell.toml").write_text(
        MARKET + llm("keyed", "http://127.0.0.1:9/v1", "OPENBELL_TEST_UNSET_KEY"),
        encoding="utf-8",
    )
    assert openbell(tmp_path, "config", "check", env=env).returncode == 0


def test_online_reaches_each_model_endpoint(tmp_path: Path) -> None:
    server = serve_fake_model(FakeModel(), port=0)
    try:
        dead = f"http://127.0.0.1:{free_port()}/v1"
        (tmp_path / "openbell.toml").write_text(
            MARKET + llm("live", server.url) + llm("also-live", server.url) + llm("dead", dead),
            encoding="utf-8",
        )
        offline = openbell(tmp_path, "config", "check")
        assert offline.returncode == 0, offline.stderr  # nothing is sent without --online
        online = openbell(tmp_path, "config", "check", "--online")
    finally:
        server.close()
    assert online.returncode == 2, online.stdout + online.stderr
    (problem,) = online.stderr.splitlines()
    assert "agent 'dead'" in problem
    assert "cannot connect" in problem

    server = serve_fake_model(FakeModel(), port=0)
    try:
        (tmp_path / "openbell.toml").write_text(
            MARKET + llm("live", server.url) + llm("also-live", server.url), encoding="utf-8"
        )
        online = openbell(tmp_path, "config", "check", "--online")
    finally:
        server.close()
    assert online.returncode == 0, online.stderr
    assert f"agent 'live', agent 'also-live': m at {server.url}: reachable (HTTP 200)" in (
        online.stdout
    )
