"""The `openbell` command line: the entry point that wires config, logging, store and daemon.

This module owns the command surface (`init`, `config check`, `db upgrade`, `ledger verify`, `run`,
`cycle`), the global options (`--config`, `--log-format`, `--version`, and the hidden
`--fake-clock` for tests; `-h` is `--help` on every command) and the exit-code contract: 0
success, 1 a ledger breach (or `init` refusing to overwrite, or an unexpected failure), 2 anything
an operator must fix (bad config, bad input, schema drift, unreachable database), 130 interrupted.
Every error is one line on stderr, `openbell: error: ...`, never a traceback (a config file with
several problems gets one such line per problem). One-shot commands print their result on stdout
and log to stderr; `run` logs JSON lines on stdout for journald. While a command runs, stdout and
stderr go through `secrets.MaskedStream`: once the config is loaded, no configured secret can be
printed, in any form.

SIGINT and SIGTERM are caught from the first moment (`entry.py`, `daemon.stopping`). Every command
but `run` gets their launch dispositions back once the command is known (Ctrl-C interrupts it, 130).
`run` keeps them: a stop before the daemon rings ends start-up at its next checkpoint (exit 130
for SIGINT, 143 for SIGTERM, `daemon_stopped` logged once logging is set up); once it rings, the
stop is an orderly one (exit 0).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from importlib import metadata
from pathlib import Path
from typing import Annotated, TextIO

import structlog
import typer
from sqlalchemy.exc import SQLAlchemyError

from openbell.daemon.clock import Clock, SystemClock, parse_fake_clock
from openbell.daemon.live import run_live
from openbell.daemon.oneshot import run_one_cycle
from openbell.daemon.plan import LEASE_S
from openbell.daemon.stopping import StartupStopped, StopRequest
from openbell.markets.errors import ConfigError, OperatorError
from openbell.ops import secrets
from openbell.ops.cli_common import ConfigOption, DbOption, load_command_config, open_ledger
from openbell.ops.cli_positions import register as register_positions_command
from openbell.ops.cli_replay import register as register_replay_commands
from openbell.ops.cli_reports import register as register_report_commands
from openbell.ops.cli_trace import register as register_trace_command
from openbell.ops.config import InvalidConfig, OpenbellConfig, default_config_text, load_config
from openbell.ops.logs import configure_logging, redact_text
from openbell.ops.planning import live_plan
from openbell.store.db import parse_url
from openbell.store.migrate import upgrade
from openbell.store.verify import verify_ledger

PROG = "openbell"
DEFAULT_CONFIG = Path("openbell.toml")

log = structlog.stdlib.get_logger(__name__)


class LogFormat(StrEnum):
    """Values of `--log-format`."""

    json = "json"
    console = "console"


@dataclass(frozen=True)
class _Globals:
    config: Path
    log_format: LogFormat | None


@dataclass
class _State:
    logging_ready: bool = False
    stop: StopRequest = field(default_factory=StopRequest)


_state = _State()

FakeClockOption = Annotated[
    str | None,
    typer.Option(
        "--fake-clock",
        envvar="OPENBELL_FAKE_CLOCK",
        hidden=True,
        help="For tests only: run on a fake clock START[:SPEED] instead of the wall clock.",
    ),
]

app = typer.Typer(
    name=PROG,
    help="openbell: a live paper-trading arena for AI agents (US equities, A-shares, crypto).",
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command
)
db_app = typer.Typer(help="Manage the ledger database schema.", rich_markup_mode=None)
ledger_app = typer.Typer(help="Check the paper-trading ledger.", rich_markup_mode=None)
config_app = typer.Typer(help="Check the config file.", rich_markup_mode=None)
app.add_typer(db_app, name="db")
app.add_typer(ledger_app, name="ledger")
app.add_typer(config_app, name="config")
register_report_commands(app)  # leaderboard, report, export, demo
register_replay_commands(app)  # replay, data import
register_trace_command(app)  # trace
register_positions_command(app)  # positions


def _help_without_command(ctx: typer.Context) -> None:
    """A group called without a command prints its help and exits 2, as a usage error does."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(2)


@db_app.callback(invoke_without_command=True)
def _db(ctx: typer.Context) -> None:
    """Manage the ledger database schema."""
    _help_without_command(ctx)


@ledger_app.callback(invoke_without_command=True)
def _ledger(ctx: typer.Context) -> None:
    """Check the paper-trading ledger."""
    _help_without_command(ctx)


def installed_version() -> str:
    """openbell's version, from the installed package's metadata."""
    try:
        return metadata.version(PROG)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"{PROG} {installed_version()}")
        raise typer.Exit(0)


@config_app.callback(invoke_without_command=True)
def _config(ctx: typer.Context) -> None:
    """Check the config file."""
    _help_without_command(ctx)


@app.callback(invoke_without_command=True)
def _global_options(
    ctx: typer.Context,
    config: Annotated[
        Path,
        typer.Option(
            "--config",
            "-c",
            envvar="OPENBELL_CONFIG",
            help="Path of the TOML config file.",
            dir_okay=False,
        ),
    ] = DEFAULT_CONFIG,
    log_format: Annotated[
        LogFormat | None,
        typer.Option(
            "--log-format",
            help="Log as JSON lines (journald) or console lines; default: the config's log.format.",
            case_sensitive=False,
        ),
    ] = None,
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_print_version,
            is_eager=True,
            expose_value=False,
            help="Print openbell's version and exit.",
        ),
    ] = False,
) -> None:
    ctx.obj = _Globals(config=config, log_format=log_format)
    if ctx.invoked_subcommand != "run":
        _state.stop.release_signals()
    _state.stop.checkpoint("imports")
    _help_without_command(ctx)


def _globals(ctx: typer.Context) -> _Globals:
    found = ctx.find_object(_Globals)
    return found if found is not None else _Globals(config=DEFAULT_CONFIG, log_format=None)


def _load(ctx: typer.Context, config: Path | None, log_stream: TextIO) -> OpenbellConfig:
    """Load the config file and configure logging from it (and from --log-format)."""
    options = _globals(ctx)
    loaded = load_config(config or options.config)
    fmt = options.log_format.value if options.log_format else loaded.log.format
    configure_logging(
        fmt, loaded.log.level, log_stream, third_party_level=loaded.log.third_party_level
    )
    _state.logging_ready = True
    secrets.activate(loaded, os.environ)
    return loaded


def _shown_url(url: str) -> str:
    return parse_url(url).render_as_string(hide_password=True)


@app.command()
def init(
    ctx: typer.Context,
    config: ConfigOption = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a default config: SQLite under ./var/, all three markets, baseline agents only.

    The file needs no API key. Refuses to overwrite an existing file unless --force is given.
    """
    path = config or _globals(ctx).config
    if path.exists() and not force:
        typer.echo(f"{PROG}: error: {path} already exists; pass --force to overwrite it", err=True)
        raise typer.Exit(1)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(default_config_text(), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    typer.echo(f"wrote {path}")


@config_app.command("check")
def config_check(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Validate the config file: print what it configures (exit 0), or every problem in it, one
    line each naming the key (exit 2)."""
    path = config or _globals(ctx).config
    loaded = load_config(path)
    markets = ", ".join(loaded.markets.configured())
    agents = len(loaded.agents)
    typer.echo(f"{path}: ok (markets {markets}; {agents} agent{'' if agents == 1 else 's'})")


@db_app.command("upgrade")
def db_upgrade(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Apply the schema migrations to the [store] database, up to this version's head."""
    loaded = _load(ctx, config, sys.stderr)
    revision = upgrade(loaded.store.url)
    log.info("db_upgraded", revision=revision, store_url=_shown_url(loaded.store.url))
    typer.echo(f"database at revision {revision}")


@ledger_app.command("verify")
def ledger_verify(ctx: typer.Context, config: ConfigOption = None, db: DbOption = None) -> None:
    """Check every ledger invariant: print a summary (exit 0), or each breach (exit 1)."""
    engine = open_ledger(load_command_config(ctx, config, db=db))
    try:
        report = verify_ledger(engine)
    finally:
        engine.dispose()
    if report.ok:
        typer.echo(report.summary())
        return
    for line in report.lines():
        typer.echo(line)
    typer.echo(report.summary())
    raise typer.Exit(1)


@app.command()
def run(
    ctx: typer.Context,
    config: ConfigOption = None,
    heartbeat_s: Annotated[
        float,
        typer.Option("--heartbeat-s", min=0.05, help="Seconds between daemon_heartbeat lines."),
    ] = 60.0,
    stop_grace_s: Annotated[
        float,
        typer.Option(
            "--stop-grace-s", min=0, help="On SIGTERM, seconds running cycles get to finish."
        ),
    ] = 30.0,
    lease_s: Annotated[
        float,
        typer.Option(
            "--lease-s",
            min=1,
            help="Seconds a cycle's claim holds unrenewed: how soon a peer (or this daemon, "
            "after a failed slot) may take the cycle over. Keep it well inside the grace windows.",
        ),
    ] = LEASE_S,
    upgrade_db: Annotated[
        bool,
        typer.Option(
            "--upgrade/--no-upgrade",
            help="Apply pending schema migrations before starting.",
        ),
    ] = True,
    fake_clock: FakeClockOption = None,
) -> None:
    """Run the daemon in the foreground until SIGINT or SIGTERM; logs go to stdout."""
    stop = _state.stop
    loaded = _load(ctx, config, sys.stdout)
    stop.checkpoint("config")
    if upgrade_db:
        revision = upgrade(loaded.store.url)
        log.info("db_upgraded", revision=revision, store_url=_shown_url(loaded.store.url))
    stop.checkpoint("upgrade")
    clock = _clock(fake_clock)
    plan = live_plan(
        loaded, clock, stop_grace_s=stop_grace_s, heartbeat_s=heartbeat_s, lease_s=lease_s
    )
    stop.checkpoint("plan")
    raise typer.Exit(run_live(plan, clock, stop=stop))


@app.command()
def cycle(
    ctx: typer.Context,
    market: Annotated[str, typer.Option("--market", help="The market: us, cn or crypto.")],
    agent: Annotated[str, typer.Option("--agent", help="The agent's configured name.")],
    at: Annotated[
        datetime | None,
        typer.Option(
            "--at",
            formats=["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M%z"],
            help=(
                "The slot, an instant in any zone (e.g. 2026-11-30T14:30+00:00), that has rung; "
                "default: the current slot."
            ),
            show_default=False,
        ),
    ] = None,
    config: ConfigOption = None,
    fake_clock: FakeClockOption = None,
) -> None:
    """Run one agent's cycle in one market now (or at slot --at), for cron use and debugging."""
    loaded = _load(ctx, config, sys.stderr)
    upgrade(loaded.store.url)
    clock = _clock(fake_clock)
    plan = live_plan(loaded, clock, markets=[market], agents=[agent], http=False)
    slot_at, outcome = run_one_cycle(
        plan, clock, market=market, agent=agent, at=None if at is None else at.astimezone(UTC)
    )
    status = "already run" if outcome.status is None else outcome.status.value
    typer.echo(f"{market} {agent} {slot_at.isoformat()}: {status}, {outcome.fills} fills")


def _clock(fake_clock: str | None) -> Clock:
    if fake_clock is None:
        return SystemClock()
    try:
        return parse_fake_clock(fake_clock)
    except ValueError as exc:
        raise ConfigError(f"--fake-clock: {exc}") from None


def _error(message: str, code: int) -> int:
    line = " ".join(redact_text(message).split())
    sys.stderr.write(f"{PROG}: error: {line}\n")
    sys.stderr.flush()
    return code


def main(argv: Sequence[str] | None = None, *, stop: StopRequest | None = None) -> int:
    """Run the `openbell` command line with `argv` (default: sys.argv) and return the exit code.

    `stop` is the request the console script (`entry.py`) has been recording SIGINT and SIGTERM in
    since before the imports; without one, they are caught from here on.
    """
    _state.stop = stop if stop is not None else StopRequest()
    _state.stop.catch_signals()
    try:
        with secrets.masked_output(sys.stdout, sys.stderr) as (out, err):
            sys.stdout, sys.stderr = out, err
            try:
                return _run_command(argv)
            finally:
                sys.stdout, sys.stderr = out.target, err.target
    finally:
        _state.stop.release_signals()


def _run_command(argv: Sequence[str] | None) -> int:
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name=PROG, standalone_mode=False)
    except StartupStopped as stopped:
        if _state.logging_ready:
            log.info("daemon_stopped", reason=stopped.reason, stage=stopped.stage)
        return stopped.exit_code
    except typer.Abort:
        return _error("aborted", 130)
    except typer.TyperException as exc:  # usage errors (exit 2) and other click-level failures
        message = exc.format_message()
        usage_ctx = getattr(exc, "ctx", None)
        if exc.exit_code == 2 and usage_ctx is not None:
            message += f" (see '{usage_ctx.command_path} --help')"
        return _error(message, exc.exit_code)
    except InvalidConfig as exc:
        for problem in exc.problems[:-1]:
            _error(problem, 2)
        return _error(exc.problems[-1], 2)
    except OperatorError as exc:
        return _error(str(exc), 2)
    except SQLAlchemyError as exc:
        cause = getattr(exc, "orig", None) or exc
        first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        return _error(f"database: {first}", 2)
    except Exception as exc:
        if _state.logging_ready:
            log.exception("command_failed")
        return _error(f"unexpected {type(exc).__name__}: {exc}", 1)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
