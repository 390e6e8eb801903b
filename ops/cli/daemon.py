"""`openbell run` and `openbell cycle`: the live daemon, and one cycle of it by hand.

`run` keeps SIGINT and SIGTERM caught (`app.py`): a stop before the daemon rings ends start-up at
its next checkpoint (exit 130 for SIGINT, 143 for SIGTERM, `daemon_stopped` logged once logging
is set up); once it rings, the stop is an orderly one (exit 0). Its logs are JSON lines on stdout
for journald. `cycle` runs one agent's cycle in one market, for cron use and debugging. Both take
the hidden `--fake-clock` for tests.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from openbell.markets.errors import ConfigError
from openbell.ops.cli.options import (
    ConfigOption,
    CreateOption,
    ListenOption,
    SeasonOption,
    WritingDbOption,
    check_before_writing,
    load_config_logged,
    state,
    upgrade_logged,
    with_overrides,
)

if TYPE_CHECKING:
    from pathlib import Path

    from openbell.daemon.clock import Clock
    from openbell.ops.config.schema import OpenbellConfig

#: The default of `run --lease-s`: the daemon's own (`daemon.plan.LEASE_S`, which a unit test
#: holds it to), written out so that `openbell --help` need not import the daemon.
LEASE_S = 60.0

FakeClockOption = Annotated[
    str | None,
    typer.Option(
        "--fake-clock",
        envvar="OPENBELL_FAKE_CLOCK",
        hidden=True,
        help="For tests only: run on a fake clock START[:SPEED] instead of the wall clock.",
    ),
]


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
    create: CreateOption = False,
    db: WritingDbOption = None,
    listen: ListenOption = None,
    fake_clock: FakeClockOption = None,
    season: SeasonOption = None,
) -> None:
    """Run the daemon in the foreground until SIGINT or SIGTERM; logs go to stdout. --db and
    --listen replace the config's ledger and HTTP address (a second daemon beside a first).
    --season NAME runs the ledger's season NAME with the config stored with it; a season that
    is closed or whose last date has passed is refused."""
    stop = state.stop
    if season is None:
        loaded = load_config_logged(ctx, config, sys.stdout, db=db, listen=listen)
    else:
        loaded = _season_config(ctx, season, config, db, listen, command_clock(fake_clock).now())
    stop.checkpoint("config")
    check_before_writing(loaded.store.url, create=create)
    if upgrade_db:
        upgrade_logged(loaded.store.url)
    stop.checkpoint("upgrade")
    from openbell.daemon.live import run_live
    from openbell.ops.wiring.planning import live_plan

    # The daemon's clock starts here, once the ledger is migrated: a fake clock's first instant
    # is the daemon's start, however long the start-up took.
    clock = command_clock(fake_clock)
    plan = live_plan(
        loaded, clock, stop_grace_s=stop_grace_s, heartbeat_s=heartbeat_s, lease_s=lease_s
    )
    stop.checkpoint("plan")
    from dataclasses import replace

    from openbell.ops.notify import from_config
    from openbell.store.db import make_engine

    engine = make_engine(loaded.store.url, redactor=plan.redactor)
    notifications = from_config(loaded.notify, engine)
    if notifications is not None:
        plan = replace(plan, events=notifications.take)
    try:
        code = run_live(plan, clock, stop=stop)
    finally:
        if notifications is not None:
            notifications.close(timeout_s=loaded.notify.timeout_s)
        engine.dispose()
    raise typer.Exit(code)


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
    db: WritingDbOption = None,
    fake_clock: FakeClockOption = None,
) -> None:
    """Run one agent's cycle in one market now (or at slot --at), for cron use and debugging;
    into the ledger --db instead of the config's, if given."""
    from openbell.daemon.oneshot import run_one_cycle
    from openbell.ops.wiring.planning import live_plan
    from openbell.store.migrate import upgrade

    loaded = load_config_logged(ctx, config, sys.stderr, db=db)
    upgrade(loaded.store.url)
    clock = command_clock(fake_clock)
    plan = live_plan(loaded, clock, markets=[market], agents=[agent], http=False)
    slot_at, outcome = run_one_cycle(
        plan, clock, market=market, agent=agent, at=None if at is None else at.astimezone(UTC)
    )
    status = "already run" if outcome.status is None else outcome.status.value
    typer.echo(f"{market} {agent} {slot_at.isoformat()}: {status}, {outcome.fills} fills")


def _season_config(
    ctx: typer.Context,
    name: str,
    config: Path | None,
    db: str | None,
    listen: str | None,
    now: datetime,
) -> OpenbellConfig:
    """The config of the live season `name` (`seasons.season_run_config`), logging on stdout;
    `SeasonError` once its last date has passed."""
    from openbell.markets.errors import SeasonError
    from openbell.ops.cli.seasons import season_run_config

    loaded, found = season_run_config(ctx, name, config, db=db, stream=sys.stdout)
    state.logging_ready = True
    if found.end_on is not None and now.date() > found.end_on:
        raise SeasonError(
            f"season {name!r} ended on {found.end_on}: close it (`openbell season close "
            f"{name}`) and open a new one"
        )
    return with_overrides(loaded, listen=listen)


def command_clock(fake_clock: str | None) -> Clock:
    """The clock of a command: the wall clock, or the `--fake-clock` of a test."""
    from openbell.daemon.clock import SystemClock, parse_fake_clock

    if fake_clock is None:
        return SystemClock()
    try:
        return parse_fake_clock(fake_clock)
    except ValueError as exc:
        raise ConfigError(f"--fake-clock: {exc}") from None
