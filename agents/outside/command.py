"""`CommandAgent`: an outside agent that openbell launches, once per cycle, as a command line.

This module owns the agent object of `kind = "command"`. At each cycle it opens the cycle on the
`CycleHub` (like `McpAgent`), creates a fresh private working directory (mode 0700; removed after
the cycle unless `keep_workdir`), writes two MCP config files into it, and runs the command there
in its jail (`agents/jail/command_jail.py`: bubblewrap with the network kept; only this directory
writable; nothing of the daemon's processes, files or configuration visible), or, where the
operator allowed it (`sandboxed` False), as a plain subprocess in its own process group:

- `.mcp.json`, Claude Code's shape: server `openbell`, streamable HTTP at the hub's `/mcp` URL with
  `Authorization: Bearer <cycle token>`;
- `.mcp.stdio.json`, the same server as a stdio command (`openbell mcp --account NAME --url URL`,
  the token in its `env` as `OPENBELL_MCP_TOKEN`), for clients that only speak stdio.

The cycle token is valid only while this one cycle is open. The prompt (`cycle_prompt`: the
account, market, slot, deadline, and to call `wait_for_cycle`, trade through the tools and call
`finish`) is passed in place of the `{prompt}` placeholder of the command's arguments, or on
stdin. The child's environment is built from nothing: a few harmless variables (`PATH`, `HOME`,
locale, `TMPDIR`; in the jail `HOME` is the working directory and `TMPDIR` the jail's `/tmp`), the
names the config passes through, and `OPENBELL_MCP_URL`, `OPENBELL_MCP_TOKEN`,
`OPENBELL_MCP_CONFIG`, `OPENBELL_AGENT`, `OPENBELL_MARKET`: none of the daemon's own secrets reach
it.

The command runs until it exits, until `finish_grace_s` after the client's `finish`, or until
the cycle's deadline (`OutsideBudgets.max_wall_s`), whichever is first; then every process in
its jail (or its process group) gets SIGTERM and, `kill_grace_s` later, the jail is killed, and
with it everything the command started, `setsid` grandchildren included. Its stdout and stderr
(the first `max_output_bytes` of each, masked with every configured secret, the cycle token and
the passed-through values) and how it ended are trace rows on the cycle (`role` `process`,
`stdout`, `stderr`), after the rows of its MCP calls. The cycle is then done with what the client
did, except that a command that exited with an error before calling any tool fails it
(`AgentError`), and a command that cannot be started at all (not found, not executable) is a
configuration error (`ConfigError`: the account is paused).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Final, Literal

from openbell.agents.jail.bwrap import Features, Jail
from openbell.agents.jail.command_jail import command_jail, command_support
from openbell.agents.jail.process import Capture, start
from openbell.agents.kinds import COMMAND_KIND
from openbell.agents.llm.hooks import IdentityMasker, Masker
from openbell.agents.outside.hub import CycleHub, OpenCycle, OutsideBudgets
from openbell.agents.protocol import DecisionContext
from openbell.markets.errors import AgentError, ConfigError
from openbell.store.records import TraceEntry
from openbell.store.redact import Redactor

#: The placeholder of the command's arguments that the prompt replaces (`prompt = "argument"`).
PROMPT_PLACEHOLDER: Final = "{prompt}"
#: The MCP config files written into the working directory.
HTTP_CONFIG_NAME: Final = ".mcp.json"
STDIO_CONFIG_NAME: Final = ".mcp.stdio.json"
#: The name of the server in both config files.
SERVER_NAME: Final = "openbell"
#: The variable the stdio relay (`openbell mcp`) reads its token from.
TOKEN_ENV: Final = "OPENBELL_MCP_TOKEN"  # noqa: S105  (a variable name)
#: Variables every command gets from the daemon's environment, when set: nothing secret.
BASE_ENV: Final = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME")

PromptVia = Literal["argument", "stdin"]
MaskerFactory = Callable[[DecisionContext], Masker]


def _bright(ctx: DecisionContext) -> Masker:
    return IdentityMasker()


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSpec:
    """How to launch one command agent; see the module docstring.

    `argv` is the command line (its first item the program, looked up on `PATH`); with
    `prompt = "argument"` one of its items must contain `{prompt}`. `env` names the daemon's
    variables passed through (read from `environ` at each launch). `workdir_root` None: the
    system's temporary directory. `relay` is the stdio command line of `openbell mcp` that
    `.mcp.stdio.json` names (`--account` and `--url` are added).
    """

    argv: tuple[str, ...]
    prompt: PromptVia = "argument"
    env: tuple[str, ...] = ()
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    workdir_root: Path | None = None
    keep_workdir: bool = False
    max_output_bytes: int = 65_536
    finish_grace_s: float = 10.0
    kill_grace_s: float = 5.0
    relay: tuple[str, ...] = ("openbell", "mcp")
    sandboxed: bool = True
    read_paths: tuple[str, ...] = ()
    protected: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        if not self.argv or not self.argv[0]:
            raise ValueError("a command agent needs a command")
        placed = any(PROMPT_PLACEHOLDER in arg for arg in self.argv[1:])
        if self.prompt == "argument" and not placed:
            raise ValueError(f'prompt = "argument" needs {PROMPT_PLACEHOLDER} in the arguments')
        if self.prompt == "stdin" and placed:
            raise ValueError(f'prompt = "stdin" takes no {PROMPT_PLACEHOLDER} argument')
        for name in ("max_output_bytes", "finish_grace_s", "kill_grace_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


def cycle_prompt(cycle: OpenCycle) -> str:
    """What a launched agent is told: whose account, which market and slot, the deadline, and
    how to work (masked like everything else the agent sees)."""
    ctx = cycle.ctx
    text = (
        f"You are the trading agent {ctx.agent_name} of openbell, a paper-trading arena. "
        f"Your account trades the {ctx.market} market; this decision cycle is for the slot at "
        f"{ctx.now.isoformat()} and ends in {int(cycle.budgets.max_wall_s)} seconds. "
        f"Use the tools of the MCP server '{SERVER_NAME}' (configured in {HTTP_CONFIG_NAME} in "
        "this directory): call wait_for_cycle first (it returns your cash, positions, the "
        "market's rules and the symbols you may trade), research with the data tools, place "
        "orders with place_order if you want to trade, and call finish with a short summary "
        "when you are done. Only data up to the slot time exists."
    )
    return cycle.masker.mask_text(text)


class CommandAgent:
    """An agent of kind `command`; see the module docstring."""

    def __init__(
        self,
        *,
        name: str,
        hub: CycleHub,
        spec: CommandSpec,
        budgets: OutsideBudgets | None = None,
        masker: MaskerFactory = _bright,
        redactor: Redactor | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not name:
            raise ValueError("an agent needs a name")
        self._name = name
        self._hub = hub
        self._spec = spec
        self._budgets = budgets if budgets is not None else OutsideBudgets()
        self._masker = masker
        self._redactor = redactor if redactor is not None else Redactor()
        self._monotonic = monotonic

    @property
    def name(self) -> str:
        """The agent's configured name."""
        return self._name

    @property
    def kind(self) -> str:
        """Always `command`."""
        return COMMAND_KIND

    @property
    def hub(self) -> CycleHub:
        """The hub its cycles are opened on (the MCP server's)."""
        return self._hub

    @property
    def masker(self) -> MaskerFactory:
        """Each cycle's masker: its account's, under the agent's masking level."""
        return self._masker

    @property
    def spec(self) -> CommandSpec:
        """How the command is launched."""
        return self._spec

    @property
    def sandboxed(self) -> bool:
        """Whether the command runs in its jail (False only where the operator allowed it)."""
        return self._spec.sandboxed

    @property
    def budgets(self) -> OutsideBudgets:
        """The per-cycle budgets enforced by the server (the wall time is the command's too)."""
        return self._budgets

    async def decide(self, ctx: DecisionContext) -> None:
        """Open the cycle, run the command in a fresh directory until it is done or the deadline,
        kill what is left of its process group and trace its output."""
        url = self._hub.mcp_url
        if url is None:
            raise ConfigError(
                f'agent {self._name}: kind = "command" needs the daemon\'s MCP endpoint, and '
                "no HTTP server serves /mcp in this run"
            )
        async with self._hub.open(
            ctx, budgets=self._budgets, masker=self._masker(ctx), reason="deadline"
        ) as cycle:
            workdir = self._make_workdir(ctx)
            try:
                exit_code = await self._run(cycle, workdir, url)
            finally:
                if not self._spec.keep_workdir:
                    shutil.rmtree(workdir, ignore_errors=True)
            attended = cycle.attended
        if exit_code and not attended:
            raise AgentError(
                f"the command exited with code {exit_code} before calling any openbell tool "
                "(its output is in the cycle's trace)"
            )

    def _make_workdir(self, ctx: DecisionContext) -> Path:
        root = self._spec.workdir_root
        if root is not None:
            root.mkdir(parents=True, exist_ok=True)
        prefix = f"openbell-{self._name}-{ctx.cycle_id}-"
        return Path(tempfile.mkdtemp(prefix=prefix, dir=root))  # mode 0700

    async def _run(self, cycle: OpenCycle, workdir: Path, url: str) -> int | None:
        """Run the command to its end, traced; its exit code, or None when it was killed."""
        spec = self._spec
        prompt = cycle_prompt(cycle)
        http_config = write_configs(workdir, url, cycle.token, self._name, spec.relay)
        env = self._child_env(cycle, url, http_config)
        argv = [arg.replace(PROMPT_PLACEHOLDER, prompt) for arg in spec.argv]
        started = self._monotonic()
        stdin = asyncio.subprocess.PIPE if spec.prompt == "stdin" else asyncio.subprocess.DEVNULL
        try:
            if spec.sandboxed:
                jail, found, argv[0] = self._jail(workdir, env)
                process = await start(argv, jail=(jail, found), stdin=stdin)
            else:
                process = await start(argv, jail=None, stdin=stdin, env=env, cwd=workdir)
        except OSError as exc:
            raise ConfigError(
                f"agent {self._name}: cannot start {spec.argv[0]!r}: {exc.strerror or exc}"
            ) from None
        self._trace(cycle, started, "process", f"started {spec.argv[0]} (pid {process.pid})")
        self._trace(cycle, started, "user", prompt)
        out, err = Capture(spec.max_output_bytes), Capture(spec.max_output_bytes)
        readers = [
            asyncio.create_task(out.drain(process.process.stdout)),
            asyncio.create_task(err.drain(process.process.stderr)),
        ]
        try:
            await _send_prompt(process.process, prompt if spec.prompt == "stdin" else None)
            ended = await self._await_end(process.process, cycle)
        finally:
            killed = process.process.returncode is None
            await process.terminate(spec.kill_grace_s)
            await process.kill()
            await _finish_readers(readers)
        redactor = self._redactor.with_secrets(
            [cycle.token, *(spec.environ.get(name) for name in spec.env)]
        )
        for role, capture in (("stdout", out), ("stderr", err)):
            if capture.kept or capture.dropped:
                self._trace(cycle, started, role, redactor.mask(capture.text()))
        seconds = self._monotonic() - started
        how = ended if not killed else f"{ended}; its process group was killed"
        code = process.returncode
        self._trace(cycle, started, "process", f"{how} (exit code {code}, {seconds:.1f} s)")
        return None if killed else code

    def _jail(self, workdir: Path, env: Mapping[str, str]) -> tuple[Jail, Features, str]:
        """This cycle's jail (`agents/jail/command_jail.py`), the bwrap that makes it and the
        program's path; `ConfigError` when there is none here or the program cannot be found."""
        support = command_support()
        if support.jail is None or support.found is None:
            raise ConfigError(
                f"agent {self._name}: a command agent needs the bubblewrap sandbox: "
                f"{support.reason}"
            )
        spec = self._spec
        try:
            jail, program = command_jail(
                argv=spec.argv,
                workdir=workdir,
                env=env,
                relay=spec.relay,
                read_paths=spec.read_paths,
                protected=spec.protected,
                base=support.jail,
            )
        except ConfigError as exc:
            raise ConfigError(f"agent {self._name}: {exc}") from None
        return jail, support.found, program

    async def _await_end(self, process: asyncio.subprocess.Process, cycle: OpenCycle) -> str:
        """Wait for the command to exit, for `finish_grace_s` after `finish`, or for the
        deadline; how it ended, in words."""
        exited = asyncio.create_task(process.wait())
        finished = asyncio.create_task(cycle.wait_finished(cycle.seconds_left))
        try:
            await asyncio.wait(
                {exited, finished},
                timeout=max(cycle.seconds_left, 0.0),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if exited.done():
                return "exited"
            if finished.done() and finished.result():
                grace = min(self._spec.finish_grace_s, max(cycle.seconds_left, 0.0))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(exited), grace)
                if exited.done():
                    return "exited after finish"
                return f"still running {self._spec.finish_grace_s:g} s after finish"
            return f"still running at the deadline ({self._budgets.max_wall_s:g} s)"
        finally:
            for task in (exited, finished):
                task.cancel()

    def _child_env(self, cycle: OpenCycle, url: str, http_config: Path) -> dict[str, str]:
        """The command's whole environment; see the module docstring."""
        source = self._spec.environ
        env = {name: source[name] for name in (*BASE_ENV, *self._spec.env) if name in source}
        env.update(
            OPENBELL_MCP_URL=url,
            OPENBELL_MCP_TOKEN=cycle.token,
            OPENBELL_MCP_CONFIG=str(http_config),
            OPENBELL_AGENT=self._name,
            OPENBELL_MARKET=cycle.masker.mask_text(cycle.ctx.market),
        )
        return env

    def _trace(self, cycle: OpenCycle, started: float, role: str, content: str) -> None:
        journal = cycle.ctx.journal
        if journal is None:
            return
        elapsed = self._monotonic() - started
        at = cycle.ctx.now + timedelta(seconds=max(elapsed, 0.0))
        entry = TraceEntry(cycle_id=cycle.ctx.cycle_id, role=role, at=at, content=content)
        journal.append_journal(cycle.ctx.cycle_id, [entry])


def write_configs(workdir: Path, url: str, token: str, account: str, relay: Sequence[str]) -> Path:
    """Write `.mcp.json` (streamable HTTP) and `.mcp.stdio.json` (the `openbell mcp` relay) into
    `workdir`, readable by the owner only; the path of `.mcp.json`."""
    http = {
        "mcpServers": {
            SERVER_NAME: {
                "type": "http",
                "url": url,
                "headers": {"Authorization": f"Bearer {token}"},
            }
        }
    }
    stdio = {
        "mcpServers": {
            SERVER_NAME: {
                "type": "stdio",
                "command": relay[0],
                "args": [*relay[1:], "--account", account, "--url", url],
                "env": {TOKEN_ENV: token},
            }
        }
    }
    path = workdir / HTTP_CONFIG_NAME
    for target, body in ((path, http), (workdir / STDIO_CONFIG_NAME, stdio)):
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(body, file, indent=2)
    return path


async def _send_prompt(process: asyncio.subprocess.Process, prompt: str | None) -> None:
    """Write `prompt` to the command's stdin and close it (a command that does not read it, or
    has exited, is not an error)."""
    if process.stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        if prompt is not None:
            process.stdin.write(prompt.encode())
            await process.stdin.drain()
        process.stdin.close()


async def _finish_readers(readers: Sequence[asyncio.Task[None]]) -> None:
    """Let the output readers reach the end of their pipes (closed once the group is gone)."""
    _done, pending = await asyncio.wait(readers, timeout=2.0)
    for task in pending:
        task.cancel()
