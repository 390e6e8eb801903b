"""The OpenAPI 3.1 document of the JSON API, served at `/api/v1/openapi.json`.

This module owns that document: each path with its parameters and its response, the response
schemas generated from the pydantic models of `ops.web.schemas` (`model_json_schema`), so the
document describes what the server sends (the tests validate every response against the same
models). Built once per process.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from openbell.ops.web import concordance_schema, schemas

_REF = "#/components/schemas/{model}"


def _parameter(name: str, where: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "schema": schema,
        "description": description,
    }


_STRING = {"type": "string"}
_AGENT = _parameter("agent", "path", _STRING, "The agent's name.")
_MARKET = _parameter("market", "path", {"enum": ["us", "cn", "crypto"]}, "The market.")
_WINDOW = [
    _parameter(
        "window",
        "query",
        {"type": "string", "pattern": r"^(all|[1-9][0-9]{0,3}d)$", "default": "all"},
        "`all`, or `Nd`: the N UTC days ending with the day of the market's last slot.",
    ),
    _parameter("start", "query", {"type": "string", "format": "date"}, "First UTC day."),
    _parameter("end", "query", {"type": "string", "format": "date"}, "Last UTC day, inclusive."),
]
_SLOTS = _parameter(
    "slots",
    "query",
    {"enum": ["post-cutoff", "all"], "default": "post-cutoff"},
    "`post-cutoff`: the headline, without the slots decided inside a model's training cutoff; "
    "`all`: every slot.",
)
_LIMIT = _parameter(
    "limit",
    "query",
    {
        "type": "integer",
        "minimum": 1,
        "maximum": schemas.MAX_LIMIT,
        "default": schemas.DEFAULT_LIMIT,
    },
    "The most items in the page.",
)
_ID_CURSOR = _parameter(
    "before", "query", {"type": "integer", "minimum": 1}, "Only ids below this (the cursor)."
)
_SLOT_CURSOR = _parameter(
    "before",
    "query",
    {"type": "string", "format": "date-time"},
    "Only slots before this instant (the cursor).",
)

#: Each path: (summary, parameters, response model).
_PATHS: dict[str, tuple[str, list[dict[str, Any]], type[BaseModel]]] = {
    "/api/v1/": ("This index: every route of the API with what it returns.", [], schemas.ApiIndex),
    "/api/v1/markets": ("The markets with accounts.", [], schemas.Markets),
    "/api/v1/leaderboard/{market}": (
        (
            "A market's leaderboard: the numbers of `openbell leaderboard --format json`, with "
            "its groups of repeated runs (`seed_groups`); `bootstrap` is null (the CLI's "
            "`--bootstrap`). By default the post-cutoff headline: an agent is measured only "
            "over its slots after its model's training cutoff (`cutoffs`); `slots=all` measures "
            "every slot (the CLI's `--all-slots`)."
        ),
        [
            _MARKET,
            *_WINDOW,
            _SLOTS,
            _parameter(
                "season",
                "query",
                _STRING,
                "Name this season (default: the current one) and, without a window, rank over "
                "its dates.",
            ),
        ],
        schemas.Leaderboard,
    ),
    "/api/v1/leaderboard/{market}/significance": (
        (
            "The significance suite of a market's board: the `significance` of `openbell "
            "leaderboard --wide --format json` (deflated Sharpe, minimum track record, "
            "Holm-adjusted permutation tests against each baseline, entry-aligned returns)."
        ),
        [_MARKET, *_WINDOW],
        schemas.Significance,
    ),
    "/api/v1/agents/{agent}/{market}": (
        "An account and the URLs of its documents.",
        [_AGENT, _MARKET],
        schemas.AccountSummary,
    ),
    "/api/v1/agents/{agent}/{market}/nav": (
        "The account's slot and session-close NAV snapshots.",
        [_AGENT, _MARKET, *_WINDOW],
        schemas.NavSeries,
    ),
    "/api/v1/agents/{agent}/{market}/benchmark": (
        "The benchmark at the account's slots, normalised as the leaderboard does.",
        [_AGENT, _MARKET, *_WINDOW],
        schemas.BenchmarkSeries,
    ),
    "/api/v1/agents/{agent}/{market}/metrics": (
        "The account's metric panel: the record of `openbell report --json`.",
        [_AGENT, _MARKET, *_WINDOW],
        schemas.Metrics,
    ),
    "/api/v1/agents/{agent}/{market}/attribution": (
        "The account's factor attribution: the record of `openbell report --attribution`.",
        [_AGENT, _MARKET, *_WINDOW],
        schemas.Attribution,
    ),
    "/api/v1/agents/{agent}/{market}/concordance": (
        (
            "A strategy-code agent's FIDES concordance: each strategy's say-to-do (its newest "
            "judge's verdict), do-to-real and say-to-result gaps, its outcome against "
            "buy-and-hold of its universe, and the summary with the beat-buy-and-hold count."
        ),
        [_AGENT, _MARKET],
        concordance_schema.Concordance,
    ),
    "/api/v1/agents/{agent}/{market}/positions": (
        "The account's cash and positions: the record of `openbell positions --format json`.",
        [_AGENT, _MARKET],
        schemas.Positions,
    ),
    "/api/v1/agents/{agent}/{market}/orders": (
        "The account's orders with their fills, newest first, a page at a time.",
        [_AGENT, _MARKET, _LIMIT, _ID_CURSOR],
        schemas.OrdersPage,
    ),
    "/api/v1/agents/{agent}/{market}/fills": (
        "The account's fills, newest first, a page at a time.",
        [_AGENT, _MARKET, _LIMIT, _ID_CURSOR],
        schemas.FillsPage,
    ),
    "/api/v1/agents/{agent}/{market}/cycles": (
        "The account's cycles with their status, latest slot first, a page at a time.",
        [_AGENT, _MARKET, _LIMIT, _SLOT_CURSOR],
        schemas.CyclesPage,
    ),
    "/api/v1/seasons": (
        "The ledger's seasons with their manifest hashes, and the one the boards name.",
        [],
        schemas.Seasons,
    ),
    "/api/v1/seasons/{name}": (
        (
            "A season: its manifest (canonical JSON, hashed) and its methods card, as "
            "`openbell season card` writes it."
        ),
        [_parameter("name", "path", {"type": "string"}, "The season's name.")],
        schemas.SeasonDocument,
    ),
    "/api/v1/cycles/{cycle_id}": (
        "One cycle's trace and orders: the document of `openbell trace --json`.",
        [_parameter("cycle_id", "path", {"type": "integer", "minimum": 1}, "The cycle's id.")],
        schemas.CycleTrace,
    ),
}

#: Every response model of the API, by path (the tests validate responses against them).
RESPONSE_MODELS: dict[str, type[BaseModel]] = {path: spec[2] for path, spec in _PATHS.items()}


def _error(description: str) -> dict[str, Any]:
    content = {"application/json": {"schema": {"$ref": _REF.format(model="ErrorDocument")}}}
    return {"description": description, "content": content}


def _operation(summary: str, parameters: list[dict[str, Any]], model: str) -> dict[str, Any]:
    ok = {"application/json": {"schema": {"$ref": _REF.format(model=model)}}}
    return {
        "get": {
            "summary": summary,
            "parameters": parameters,
            "responses": {
                "200": {"description": "OK", "content": ok},
                "400": _error("A query parameter is not valid."),
                "404": _error("No such market, agent, account or cycle."),
                "405": _error("Only GET and HEAD are served."),
            },
        }
    }


@functools.cache
def route_index() -> dict[str, Any]:
    """The document of `GET /api/v1/`: each route's path template and summary, in order, and
    where the OpenAPI document is."""
    return {
        "api": "openbell arena API",
        "version": "1",
        "openapi": "/api/v1/openapi.json",
        "routes": [
            {"path": path, "method": "GET", "summary": summary}
            for path, (summary, _parameters, _model) in _PATHS.items()
        ],
    }


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of `/api/v1`."""
    models: dict[str, type[BaseModel]] = {m.__name__: m for m in RESPONSE_MODELS.values()}
    models["ErrorDocument"] = schemas.ErrorDocument
    _keys, definitions = models_json_schema(
        [(models[name], "serialization") for name in sorted(models)],
        ref_template=_REF,
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "openbell arena API",
            "version": "1",
            "description": "Read-only: the markets, leaderboards, accounts and cycles of the "
            "ledger. Decimals are exact decimal text, instants ISO 8601 UTC text.",
        },
        "paths": {
            path: _operation(summary, parameters, model.__name__)
            for path, (summary, parameters, model) in _PATHS.items()
        },
        "components": {"schemas": definitions.get("$defs", {})},
    }
