"""The strategy jail on its own, without the child's Python walls: a hostile script runs in the very
jail strategy code runs in (the same mounts, namespaces and start path, its own script in place of
`child.py`) and does what a strategy that got past every Python check would try. It sees only the
interpreter, the standard library and the allowed packages; no `/proc`, no network (not even the
host's loopback), none of the daemon's environment, files, ledger, configuration or processes; it
cannot write outside its own `/tmp`, and nothing it forks, `setsid` or not, outlives it."""

from __future__ import annotations

import asyncio
import json
import socket
import textwrap
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from openbell.agents.jail.process import Capture, start
from openbell.agents.jail.python_jail import SITE, package_files, python_jail
from openbell.agents.strategy_code.sandbox import CHILD_ENV, PACKAGES, strategy_jail
from openbell_testkit.jail import left_after, need_jail

SECRET = "sk-other-agent-0123456789abcdefABCDEF"  # noqa: S105  (a fake key)

HOSTILE = textwrap.dedent(
    """
    import json, os, socket, sys, time
    ledger, config, port, marker, site, project = sys.argv[1:7]
    found = {"uid": os.getuid(), "gid": os.getgid(), "pid": os.getpid(), "ppid": os.getppid()}
    found["root"] = sorted(os.listdir("/"))
    found["site"] = sorted(os.listdir(site))
    found["env"] = dict(os.environ)
    found["proc"] = os.path.exists("/proc")

    def attempt(name, action):
        try:
            found[name] = "done: " + repr(action())[:200]
        except BaseException as exc:
            found[name] = "refused: " + type(exc).__name__

    attempt("parent environ", lambda: open(f"/proc/{os.getppid()}/environ").read())
    attempt("init environ", lambda: open("/proc/1/environ").read())
    attempt("read ledger", lambda: open(ledger, "rb").read(16))
    attempt("truncate ledger", lambda: open(ledger, "w").close())
    attempt("read config", lambda: open(config).read())
    attempt("read project", lambda: open(project).read())
    attempt("list home", lambda: os.listdir(os.path.expanduser("~")))
    attempt("write usr", lambda: open("/usr/lib/openbell-jail-test", "w").close())
    attempt("write tmp", lambda: open("/tmp/" + marker, "w").close())
    attempt("connect", lambda: socket.create_connection(("127.0.0.1", int(port)), timeout=2))
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", marker])
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.3)
    found["forked"] = True
    print(json.dumps(found))
    """
)


def _jailed(script: Path, *args: str) -> tuple[int | None, str, str, set[str]]:
    """Run `script` with `args` in the strategy jail, through the runner's start path; its exit
    code, stdout, stderr and the top-level directories its mounts make."""
    jailed, found = strategy_jail()
    own = python_jail(script, packages=PACKAGES, env=CHILD_ENV)
    jail = replace(jailed.jail, mounts=own.jail.mounts)
    tops = {Path(mount.target).parts[1] for mount in jail.mounts} | {"dev", "tmp"}

    async def go() -> tuple[int | None, str, str, set[str]]:
        process = await start(own.argv(*args), jail=(jail, found), stdin=asyncio.subprocess.DEVNULL)
        out, err = Capture(1_000_000), Capture(1_000_000)
        try:
            await asyncio.wait_for(
                asyncio.gather(
                    out.drain(process.process.stdout), err.drain(process.process.stderr)
                ),
                timeout=60,
            )
            await process.process.wait()
        finally:
            await process.kill()
        return process.returncode, out.text(), err.text(), tops

    return asyncio.run(go())


def test_a_script_in_the_strategy_jail_reaches_nothing_of_the_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_jail("strategy")
    monkeypatch.setenv("OTHER_AGENT_KEY", SECRET)
    ledger = tmp_path / "var" / "openbell.db"
    ledger.parent.mkdir()
    ledger.write_bytes(b"SQLite format 3\x00" + b"\x01" * 4080)
    config = tmp_path / "openbell.toml"
    config.write_text(f'# {SECRET}\n[store]\nurl = "sqlite:///{ledger}"\n', encoding="utf-8")
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE, encoding="utf-8")
    marker = f"openbell-jail-{uuid.uuid4().hex}"
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        code, stdout, stderr, tops = _jailed(
            script, str(ledger), str(config), str(port), marker, SITE, __file__
        )
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    assert code == 0, stderr
    found: dict[str, Any] = json.loads(stdout)
    assert (found["uid"], found["gid"]) == (65534, 65534)
    assert found["pid"] == 2  # its own PID namespace, under bwrap's init
    # PWD is bwrap's, LC_CTYPE Python's own (PEP 538): nothing of the daemon's environment.
    assert found["env"] == {**CHILD_ENV, "PWD": "/", "LC_CTYPE": "C.UTF-8"}
    assert not found["proc"]
    assert set(found["root"]) == tops  # what the jail mounts, nothing else
    assert {"var", "home", "work", "srv", "opt"}.isdisjoint(tops - {Path(SITE).parts[1]})
    assert found["site"] == sorted(package_files(PACKAGES))
    for attempt in (
        "parent environ",
        "init environ",
        "read ledger",
        "truncate ledger",
        "read config",
        "read project",
        "list home",
        "write usr",
        "connect",
    ):
        assert found[attempt].startswith("refused"), (attempt, found[attempt])
    assert found["write tmp"].startswith("done")  # its own tmpfs, gone with it
    assert not (Path("/tmp") / marker).exists()  # noqa: S108  (the host's)
    assert found["forked"]
    assert left_after(marker) == [], "a process forked in the jail outlived it"
    assert SECRET not in stdout + stderr
    assert ledger.read_bytes().startswith(b"SQLite format 3\x00")
    assert ledger.stat().st_size == 4096
