"""The `openbell` app: its global options, its command groups and the exit-code contract.

This module builds the typer app from the command modules (`config_file`: `init`, `config check`;
`database`: `db upgrade`, `ledger verify`; `daemon`: `run`, `cycle`; `serve`; `reports`:
`leaderboard`, `report`, `export`, `demo`; `history`: `replay`, `data import`; `experiment`;
`data_download`: `data download`; `data_universe`: `data import-universe`, `data
download-universe`; `trace`; `judge`; `positions`; `tokens`: `agent token`; `outside`: `mcp`;
`probe`: `probe deanon|recall`; `fake_llm`: `fake-llm`; `seasons`: `season
open|close|list|card`; `season_archive`: `season export|verify`), owns the global options
(`--config`, `--log-format`, `--version`; `-h` is `--help` on every command) and `main`, which
runs a command line and maps what it raises to an exit code and one line on stderr.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
import typer.main

from openbell.daemon.stopping import StartupStopped, StopRequest
from openbell.markets.errors import DatabaseDamaged, InvalidConfig, OperatorError
from openbell.ops.cli.options import (
    DEFAULT_CONFIG,
    PROG,
    GlobalOptions,
    LogFormat,
    collect_garbage,
    command_log,
    help_without_command,
    state,
)
from openbell.ops.cli.quick_params import QuickCommand, QuickGroup
from openbell.ops.config import secrets

#: The command surface, in the order `openbell --help` lists it (the commands, then the groups):
#: each name with the module and attribute of its command function or its group's typer app.
COMMANDS: dict[str, tuple[str, str]] = {
    "leaderboard": ("reports", "leaderboard_command"),
    "report": ("reports", "report_command"),
    "export": ("reports", "export_command"),
    "demo": ("reports", "demo_command"),
    "replay": ("history", "replay"),
    "experiment": ("experiment", "experiment_command"),
    "trace": ("trace", "trace_command"),
    "judge": ("judge", "judge_command"),
    "positions": ("positions", "positions_command"),
    "init": ("config_file", "init"),
    "run": ("daemon", "run"),
    "cycle": ("daemon", "cycle"),
    "serve": ("serve", "serve_command"),
    "mcp": ("outside", "mcp_command"),
    "fake-llm": ("fake_llm", "fake_llm_command"),
}
GROUPS: dict[str, tuple[str, str]] = {
    "db": ("database", "db_app"),
    "ledger": ("database", "ledger_app"),
    "config": ("config_file", "config_app"),
    "data": ("history", "data_app"),
    "agent": ("tokens", "agent_app"),
    "probe": ("probe", "probe_app"),
    "season": ("seasons", "season_app"),
}
#: Commands a group's module leaves to other modules: (group, command name, module, function).
GROUP_COMMANDS = (
    ("data", "download", "data_download", "download_command"),
    ("data", "import-universe", "data_universe", "import_universe_command"),
    ("data", "download-universe", "data_universe", "download_universe_command"),
    ("season", "export", "season_archive", "export_command"),
    ("season", "verify", "season_archive", "verify_command"),
)


def _attribute(module: str, name: str) -> Any:
    return getattr(importlib.import_module(f"openbell.ops.cli.{module}"), name)


@functools.cache
def _group_app(group: str) -> typer.Typer:
    """The typer app of `group`, with the commands other modules add to it (added once)."""
    found: typer.Typer = _attribute(*GROUPS[group])
    for name, command, module, function in GROUP_COMMANDS:
        if name == group:
            found.command(command)(_attribute(module, function))
    for info in found.registered_commands:  # typer's default class (the only one declared)
        if info.cls in (None, typer.core.TyperCommand):
            info.cls = QuickCommand
    return found


class LazyCommands(MutableMapping[str, Any]):
    """The root group's commands by name, each built (its module imported) when first asked for:
    a command imports the modules of its own command alone, and `--help`, which lists them all,
    imports every one. Built as `app.command(name)` and `app.add_typer(app, name=name)` would have
    built it, with typer's own functions and the root app's settings, as a `QuickCommand` or
    `QuickGroup` whose parameters coerce plain values without typer's pydantic adapters
    (`quick_params`)."""

    def __init__(self) -> None:
        self._built: dict[str, Any] = {}
        self._added: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name in self._added:
            return self._added[name]
        if name not in self._built:
            self._built[name] = self._build(name)
        return self._built[name]

    def _build(self, name: str) -> Any:
        settings: dict[str, Any] = {
            "pretty_exceptions_short": app.pretty_exceptions_short,
            "rich_markup_mode": app.rich_markup_mode,
        }
        holder = typer.Typer()
        if name in COMMANDS:
            holder.command(name, cls=QuickCommand)(_attribute(*COMMANDS[name]))
            return typer.main.get_command_from_info(holder.registered_commands[0], **settings)
        if name in GROUPS:
            holder.add_typer(_group_app(name), name=name, cls=QuickGroup)
            return typer.main.get_group_from_info(
                holder.registered_groups[0], suggest_commands=app.suggest_commands, **settings
            )
        raise KeyError(name)

    def __setitem__(self, name: str, command: Any) -> None:
        self._added[name] = command

    def __delitem__(self, name: str) -> None:
        del self._added[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from GROUPS
        yield from (name for name in self._added if name not in COMMANDS and name not in GROUPS)

    def __len__(self) -> int:
        return len(list(iter(self)))

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS or name in GROUPS or name in self._added


class LazyGroup(QuickGroup):
    """The root group: its commands are a `LazyCommands`; its options and theirs coerce plain
    values without typer's pydantic adapters (`quick_params`)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands()


app = typer.Typer(
    name=PROG,
    help="openbell: a live paper-trading arena for AI agents (US equities, A-shares, crypto).",
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command
    cls=LazyGroup,
)


def installed_version() -> str:
    """openbell's version, from the installed package's metadata."""
    from importlib import metadata

    try:
        return metadata.version(PROG)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"{PROG} {installed_version()}")
        raise typer.Exit(0)


#: Commands that read the ledger, print and exit: they run with the cyclic garbage collector off,
#: as `openbell.ops.entry` starts every command (their memory is freed by reference counting, and
#: the process ends within seconds). Every other command turns it back on (`_collect_garbage`).
QUICK_COMMANDS = frozenset({"leaderboard", "report", "positions", "trace", "export"})
#: Commands that turn it back on themselves, once they have imported what they run on
#: (`options.collect_garbage`).
COLLECTS_AFTER_IMPORTS = frozenset({"replay"})
#: Commands that run until SIGINT or SIGTERM and stop in order: they keep both signals caught.
KEEPS_SIGNALS = frozenset({"run", "serve", "fake-llm"})


def _collect_garbage(command: str | None) -> None:
    """Turn the cyclic garbage collector back on (`options.collect_garbage`) unless `command` is
    quick or turns it on itself."""
    if command not in QUICK_COMMANDS | COLLECTS_AFTER_IMPORTS:
        collect_garbage()


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
    ctx.obj = GlobalOptions(config=config, log_format=log_format)
    _collect_garbage(ctx.invoked_subcommand)
    if ctx.invoked_subcommand not in KEEPS_SIGNALS:
        state.stop.release_signals()
    state.stop.checkpoint("imports")
    help_without_command(ctx)


def _error(message: str, code: int) -> int:
    line = " ".join(secrets.current().mask(message).split())
    sys.stderr.write(f"{PROG}: error: {line}\n")
    sys.stderr.flush()
    return code


def main(argv: Sequence[str] | None = None, *, stop: StopRequest | None = None) -> int:
    """Run the `openbell` command line with `argv` (default: sys.argv) and return the exit code.

    `stop` is the request the console script (`entry.py`) has been recording SIGINT and SIGTERM in
    since before the imports; without one, they are caught from here on.
    """
    state.stop = stop if stop is not None else StopRequest()
    state.stop.catch_signals()
    try:
        with secrets.masked_output(sys.stdout, sys.stderr) as (out, err):
            sys.stdout, sys.stderr = out, err
            try:
                return _run_command(argv)
            finally:
                sys.stdout, sys.stderr = out.target, err.target
    finally:
        state.stop.release_signals()


def _run_command(argv: Sequence[str] | None) -> int:
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name=PROG, standalone_mode=False)
    except StartupStopped as stopped:
        if state.logging_ready:
            command_log().info("daemon_stopped", reason=stopped.reason, stage=stopped.stage)
        return stopped.exit_code
    except typer.Abort:
        return _error("aborted", 130)
    except typer.TyperException as exc:  # usage errors (exit 2) and other click-level failures
        message = exc.format_message()
        usage_ctx = getattr(exc, "ctx", None)
        if exc.exit_code == 2 and usage_ctx is not None:
            message += f" (see '{usage_ctx.command_path} --help')"
        return _error(message, exc.exit_code)
    except DatabaseDamaged as exc:
        where = f"{state.ledger}: " if state.ledger else ""
        return _error(f"database: {where}{exc}", 2)
    except OperatorError as exc:
        problems = exc.problems if isinstance(exc, InvalidConfig) else [str(exc)]
        for problem in problems[:-1]:
            _error(problem, 2)
        return _error(problems[-1], 2)
    except Exception as exc:
        database = _database_error(exc)
        if database is not None:
            where = f"{state.ledger}: " if state.ledger else ""
            return _error(f"database: {where}{database}", 2)
        if state.logging_ready:
            log = command_log()
            log.exception("command_failed")
        return _error(f"unexpected {type(exc).__name__}: {exc}", 1)
    return result if isinstance(result, int) else 0


def _database_error(exc: Exception) -> str | None:
    """The first line of `exc` if it is a database failure, else None: SQLAlchemy's errors, and
    text SQLite handed over that is not UTF-8 (a damaged schema or row: Python's sqlite3 cannot
    decode SQLite's own message about it), raised from SQLAlchemy or sqlite3.

    No SQLAlchemy error can have been raised before SQLAlchemy was imported, so a command that
    never touched a database does not import it to find out.
    """
    if "sqlalchemy.exc" not in sys.modules:
        return None
    from sqlalchemy.exc import SQLAlchemyError

    if isinstance(exc, UnicodeDecodeError) and _raised_by_the_database(exc):
        said = exc.object.decode("utf-8", "replace") if isinstance(exc.object, bytes) else ""
        return f"damaged: text that is not UTF-8 where SQLite reads its schema or rows: {said}"
    if not isinstance(exc, SQLAlchemyError):
        return None
    cause = getattr(exc, "orig", None) or exc
    return str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__


def _raised_by_the_database(exc: BaseException) -> bool:
    """Whether `exc` was raised inside SQLAlchemy or Python's sqlite3 module."""
    frame = exc.__traceback__
    while frame is not None:
        name = frame.tb_frame.f_globals.get("__name__", "")
        if name.startswith(("sqlalchemy.", "sqlite3")):
            return True
        frame = frame.tb_next
    return False
