"""The arena's web routes over a ledger: what the daemon's server and `openbell serve` mount.

This module owns `web_routes(engine)`, the read routes of the arena (the JSON API under
`/api/v1` and the pages), which `daemon.http.serve_http` puts behind the read token, and
`web_parts(engine)`, what the daemon (its `LivePlan.web` factory) and `openbell serve` mount:
those routes with their market views computed in a worker process (`ops.web.view_worker`), and
the lifespan that shuts the worker down with the server. Every route only reads the ledger.
"""

from __future__ import annotations

from sqlalchemy import Engine
from starlette.routing import BaseRoute

from openbell.daemon.http import HealthView, WebParts
from openbell.ops.evaluation.attribution.ledger_inputs import DEFAULT_ATTRIBUTION, AttributionChoice
from openbell.ops.evaluation.conventions import OPENBELL, Convention
from openbell.ops.reports.contamination import CutoffSettings
from openbell.ops.web.api import api_routes
from openbell.ops.web.memo import ViewMemo
from openbell.ops.web.pages import Liveness, page_routes
from openbell.ops.web.view_worker import ViewSource, WorkerViews


def _never() -> bool:
    return False


def web_routes(
    engine: Engine,
    *,
    views: ViewSource | None = None,
    convention: Convention = OPENBELL,
    live: Liveness = _never,
    health: HealthView | None = None,
    attribution: AttributionChoice = DEFAULT_ATTRIBUTION,
    cutoffs: CutoffSettings | None = None,
) -> list[BaseRoute]:
    """The arena's read routes over the ledger of `engine`, sharing one memo of its views, which
    come from `views` (default: computed in the request's thread, under `convention`); `live`
    says whether a daemon writes the ledger (the pages' header says so); `health` is the
    daemon's, for the arena's last-bell panel (None: no daemon); `attribution` is what the
    config's `[attribution]` picks (used by views computed in the request's thread)."""
    memo = ViewMemo(
        engine, views=views, convention=convention, attribution=attribution, cutoffs=cutoffs
    )
    pages = page_routes(engine, memo=memo, live=live, health=health)
    return [*api_routes(engine, memo=memo), *pages]


def web_parts(
    engine: Engine,
    *,
    worker: bool = True,
    convention: Convention = OPENBELL,
    live: Liveness = _never,
    health: HealthView | None = None,
    attribution: AttributionChoice = DEFAULT_ATTRIBUTION,
    cutoffs: CutoffSettings | None = None,
) -> WebParts:
    """What a server mounts over `engine` (made by `store.db.make_engine`): the read routes, with
    the market views computed under `convention` in a worker process closed by the parts'
    lifespan (in the request's thread without `worker`); `live` as for `web_routes` (the daemon
    passes one that always says yes), and the daemon's `health` on the arena page when a daemon
    serves them; the agents' attributions as `attribution` picks them (the config's
    `[attribution]`); `cutoffs` what the boards' training-cutoff marks are read with (default:
    the bundled registry)."""
    if not worker:
        return WebParts(
            routes=web_routes(
                engine,
                convention=convention,
                live=live,
                health=health,
                attribution=attribution,
                cutoffs=cutoffs,
            )
        )
    views = WorkerViews(engine, convention, attribution)
    return WebParts(
        routes=web_routes(engine, views=views, live=live, health=health, cutoffs=cutoffs),
        lifespans=[views.lifespan],
    )
