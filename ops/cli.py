"""The `openbell` command line: the entry point that wires config, logging, store and daemon.

This module owns the command surface (`init`, `db upgrade`, `ledger verify`, `run`, `cycle`), the
global options (`--config`, `--log-format`, and the hidden `--fake-clock` for tests) and the
exit-code contract: 0 success, 1 a ledger breach (or `init` refusing to overwrite, or an
unexpected failure), 2 anything an operator must fix (bad
config, bad input, schema drift, unreachable database), 130 interrupted. Every error is one line on
stderr, `openbell: error: ...`, never a traceback. One-shot commands print their result on stdout
and log to stderr; `run` logs JSON lines on stdout for journald.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, TextIO

import structlog
import typer
from sqlalchemy.exc import SQLAlchemyError

from openbell.daemon.clock import Clock, SystemClock, parse_fake_clock
from openbell.daemon.live import run_live
from openbell.daemon.oneshot import run_one_cycle
from openbell.markets.errors import ConfigError, OperatorError
from openbell.ops.cli_common import ConfigOption
from openbell.ops.cli_replay import register as register_replay_commands
from openbell.ops.cli_reports import register as register_report_commands
from openbell.ops.cli_trace import register as register_trace_command
from openbell.ops.config import OpenbellConfig, default_config_text, load_config
from openbell.ops.logs import configure_logging, redact_text
from openbell.ops.running import live_plan
from openbell.store.db import check_schema, make_engine, parse_url
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
)
db_app = typer.Typer(help="Manage the ledger database schema.", rich_markup_mode=None)
ledger_app = typer.Typer(help="Check the paper-trading ledger.", rich_markup_mode=None)
app.add_typer(db_app, name="db")
app.add_typer(ledger_app, name="ledger")
register_report_commands(app)  # leaderboard, report, export, demo
register_replay_commands(app)  # replay, data import
register_trace_command(app)  # trace


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
) -> None:
    ctx.obj = _Globals(config=config, log_format=log_format)
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


@db_app.command("upgrade")
def db_upgrade(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Apply the schema migrations to the [store] database, up to this version's head."""
    loaded = _load(ctx, config, sys.stderr)
    revision = upgrade(loaded.store.url)
    log.info("db_upgraded", revision=revision, store_url=_shown_url(loaded.store.url))
    typer.echo(f"database at revision {revision}")


@ledger_app.command("verify")
def ledger_verify(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Check every ledger invariant: print a summary (exit 0), or each breach (exit 1)."""
    loaded = _load(ctx, config, sys.stderr)
    engine = make_engine(loaded.store.url)
    try:
        check_schema(engine)
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
    loaded = _load(ctx, config, sys.stdout)
    if upgrade_db:
        revision = upgrade(loaded.store.url)
        log.info("db_upgraded", revision=revision, store_url=_shown_url(loaded.store.url))
    clock = _clock(fake_clock)
    plan = live_plan(loaded, clock, stop_grace_s=stop_grace_s, heartbeat_s=heartbeat_s)
    raise typer.Exit(run_live(plan, clock, stop=threading.Event(), handle_signals=True))


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
            help="The slot (e.g. 2026-11-30T14:30+00:00); default: the current slot.",
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
    slot_at, outcome = run_one_cycle(plan, clock, market=market, agent=agent, at=at)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `openbell` command line with `argv` (default: sys.argv) and return the exit code."""
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name=PROG, standalone_mode=False)
    except typer.Abort:
        return _error("aborted", 130)
    except typer.TyperException as exc:  # usage errors (exit 2) and other click-level failures
        message = exc.format_message()
        usage_ctx = getattr(exc, "ctx", None)
        if exc.exit_code == 2 and usage_ctx is not None:
            message += f" (see '{usage_ctx.command_path} --help')"
        return _error(message, exc.exit_code)
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
