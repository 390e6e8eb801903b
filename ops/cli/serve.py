"""`openbell serve`: the arena's pages and JSON API, read-only over any ledger, without the daemon.

It opens the ledger (`--db`, else the config's `[store] url`) read-only as every reading command
does (`options.open_ledger`: SQLite `mode=ro`, Postgres read-only sessions; a schema not at this
version's head, a damaged SQLite file or an empty one refused), and serves
`ops.web.app.web_parts` (the market views computed in a worker process, shut down with the
server) on `--listen` (else the config's `[http] listen`) under the config's `[http]` rules
(loopback unless `allow_remote`, the read token of `read_token_env`) until SIGINT or SIGTERM,
which end it with exit 0. `/healthz` (`ops.web.serve_health`) says whether the ledger answers and
whether a daemon writes it (the pages' "live" mark follows the same probe,
`daemon.locks.daemon_writes`); there is no `/metrics`: no daemon runs here. Like `run`, it keeps
both signals caught (`app.py`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import typer

from openbell.ops.cli.options import (
    ConfigOption,
    DbOption,
    ListenOption,
    command_log,
    load_command_config,
    open_ledger,
    state,
    with_listen,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from openbell.daemon.stopping import StopRequest
    from openbell.ops.config.schema import HttpConfig
    from openbell.ops.evaluation.attribution.ledger_inputs import AttributionChoice
    from openbell.ops.reports.contamination import CutoffSettings

#: How often the serving loop looks at the stop request, in seconds.
POLL_S = 0.1


def serve_command(
    ctx: typer.Context,
    listen: ListenOption = None,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Serve the arena's pages and JSON API read-only over a ledger, without running the daemon."""
    from openbell.ops.reports.contamination import CutoffSettings

    loaded = load_command_config(ctx, config, db=db)
    http = with_listen(loaded, listen)  # a reading config (--db alone) is not validated again
    read_token = http.read_token(os.environ)
    engine = open_ledger(loaded)
    import asyncio  # here: `openbell --help` does not pay for it

    from openbell.daemon.clock import SystemClock
    from openbell.ops.wiring.planning import attribution_choice

    try:
        asyncio.run(
            _serve(
                engine,
                http,
                read_token,
                state.stop,
                loaded.metrics.convention,
                store_url=loaded.store.url,
                attribution=attribution_choice(loaded, SystemClock().now().date()),
                cutoffs=CutoffSettings.of(loaded),
            )
        )
    finally:
        engine.dispose()


async def _serve(
    engine: Engine,
    http: HttpConfig,
    read_token: str | None,
    stop: StopRequest,
    convention: str = "openbell",
    *,
    store_url: str | None = None,
    attribution: AttributionChoice | None = None,
    cutoffs: CutoffSettings | None = None,
) -> None:
    import asyncio
    import functools

    from openbell.daemon.http import serve_http
    from openbell.daemon.locks import daemon_writes
    from openbell.ops.evaluation.conventions import convention_named
    from openbell.ops.web.app import web_parts
    from openbell.ops.web.serve_health import serve_health_routes

    url = store_url or engine.url.render_as_string(hide_password=False)
    live = functools.partial(daemon_writes, url)
    from openbell.ops.evaluation.attribution.ledger_inputs import DEFAULT_ATTRIBUTION

    parts = web_parts(
        engine,
        convention=convention_named(convention),
        live=live,
        attribution=attribution or DEFAULT_ATTRIBUTION,
        cutoffs=cutoffs,
    )
    server = await serve_http(
        http.host,
        http.port,
        routes=parts.routes,
        open_routes=[*serve_health_routes(engine, live), *parts.open_routes],
        lifespans=parts.lifespans,
        allow_remote=http.allow_remote,
        read_token=read_token,
        read_timeout_s=http.read_timeout_s,
    )
    command_log().info("serving", url=server.url, guarded=read_token is not None)
    try:
        # A signal handler sets `stop` (no asyncio.Event can be set from one): poll it.
        while not stop.is_set():  # noqa: ASYNC110
            await asyncio.sleep(POLL_S)
    finally:
        await server.close()
    command_log().info("served", reason=stop.reason)
