"""A season's manifest: what the season fixes before its first slot, as canonical JSON.

This module owns building the manifest from a config (`build_manifest`), its canonical text and
SHA-256 (`canonical_json`, `manifest_sha256`) and naming where two manifests differ
(`manifest_differences`). The manifest holds, in this order of keys (the text sorts them):

- `season`: its name and window (UTC dates);
- `code`: the package version and git commit (`ops.seasons.code_version`; `unknown` when not found);
- `markets`: each market's cadence, slots, initial cash and currency, its universe (name, source,
  as-of date, members, the dates its file vouches for and whether the config accepts a window
  outside them or partly without data), its rules with the config's costs applied (fees,
  slippage, lots, settlement, price limits, shorting), its benchmark, and its data sources: the
  configured source and the bar files a replay reads with their SHA-256 (a `replay:PATH` source's
  files, or the bundled files a replay of a live source reads), and a corporate-actions file's;
- `agents`: each agent by name, as configured (kind, markets, model and endpoint, decision mode,
  masking, budgets and dollar caps, prices), its prompts named by mode and pinned by the code
  version;
- `ranking`: the ranking rule and the metrics convention of the boards;
- `point_in_time`: the rule every agent is held to, and the injection probe if one is set;
- `sandbox`, `judges`: what the config sets there.

Nothing operational is in it (the ledger's URL, HTTP address, logging, notifications): those may
change without changing the season. Canonical JSON is sorted keys, no spaces, ASCII, so the same
manifest always has the same bytes and hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from datetime import date
from decimal import Decimal
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any, Final

from openbell.markets.barfile import bundled_path
from openbell.markets.errors import ConfigError
from openbell.markets.replay_source import bar_files
from openbell.ops.config.schema import (
    LlmAgentConfig,
    MarketConfig,
    OpenbellConfig,
    RatingAgentConfig,
    StrategyCodeAgentConfig,
)
from openbell.ops.evaluation.conventions import convention_named
from openbell.ops.seasons.code_version import CodeVersion
from openbell.ops.wiring.planning import replay_bundled_names, rules_for_market, universe_for

#: The manifest's format, its first key's value: a reader checks it before anything else.
FORMAT: Final = "openbell.season/1"
#: The keys `manifest_differences` leaves out of a config's comparison with a season: the season
#: (its name and window are the season's own) and the code that built it.
NOT_CONFIG: Final = frozenset({"format", "season", "code"})

RANKING_RULE: Final = (
    "StockBench composite: each ranked account's cumulative return, max drawdown and Sortino "
    "ratio are z-scored across the market's accounts over the same window, the composite is "
    "their mean, and accounts are ranked by it (ties share a rank); the benchmark is a row for "
    "reference and never moves a z-score"
)
POINT_IN_TIME_RULE: Final = (
    "at decision time t an agent observes only bars ended by t, news published by t, quotes "
    "stamped by t and its own account; a symbol is offered only while a member of the universe "
    "with a bar ended by t; every agent of a slot sees one snapshot; in a replay an order fills "
    "at the open of the bar starting at its slot"
)


def jsonable(value: Any) -> Any:
    """`value` as JSON values: Decimals and dates as strings, dataclasses and mappings as
    objects, tuples and sets as arrays (sets sorted), enums by value."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Enum):
        return jsonable(value.value)
    if isinstance(value, date):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in fields(value) if f.init}
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, set | frozenset):
        return sorted(jsonable(item) for item in value)
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    return value


def canonical_json(manifest: Mapping[str, Any]) -> str:
    """The manifest's canonical text: sorted keys, no spaces, ASCII."""
    return json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def manifest_sha256(text: str) -> str:
    """The SHA-256 hex digest of a manifest's canonical text."""
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _bundled_record(name: str) -> dict[str, str]:
    with resources.as_file(bundled_path(name)) as path:
        return {"file": f"bundled:{name}.parquet", "sha256": _file_sha256(path)}


def _data_sources(name: str, market: MarketConfig) -> dict[str, Any]:
    """The market's configured source and the bar files a replay of it reads, hashed."""
    files: list[dict[str, str]] = []
    if market.source_kind == "replay":
        for part in (part.strip() for part in market.source_arg.split(",")):
            if part == "bundled":
                files += [_bundled_record(n) for n in replay_bundled_names(name, market.cadence)]
            elif part:
                for path in bar_files([part]):
                    if not path.is_file():
                        raise ConfigError(f"markets.{name}: source file {path} does not exist")
                    files.append({"file": str(path), "sha256": _file_sha256(path)})
    else:
        files = [_bundled_record(n) for n in replay_bundled_names(name, market.cadence)]
    record: dict[str, Any] = {
        "source": market.source,
        "live": market.source_kind not in ("replay", "bundled"),
        "replay_bar_files": files,
        "corporate_actions": None,
    }
    if market.corporate_actions is not None:
        path = Path(market.corporate_actions)
        record["corporate_actions"] = {
            "file": market.corporate_actions,
            "sha256": _file_sha256(path) if path.is_file() else None,
        }
    return record


def _market(name: str, market: MarketConfig, start: date) -> dict[str, Any]:
    universe = universe_for(name, market, start)
    rules = rules_for_market(name, market)
    coverage = universe.coverage
    return {
        "cadence": market.cadence,
        "slots": None if market.slots is None else list(market.slot_times or ()),
        "initial_cash": str(market.initial_cash),
        "currency": rules.currency,
        "benchmark": universe.benchmark or rules.benchmark,
        "universe": {
            "name": universe.name,
            "source": universe.source,
            "as_of": universe.as_of.isoformat(),
            "members": len(universe.instruments),
            "symbols": [instrument.symbol for instrument in universe.instruments],
            "dated_members": len(universe.memberships),
            "coverage": None if coverage is None else jsonable(coverage),
            "allow_outside_coverage": market.allow_outside_coverage,
            "allow_partial_coverage": market.allow_partial_coverage,
        },
        "rules": jsonable(rules),
        "data": _data_sources(name, market),
    }


def _agent(config: OpenbellConfig, index: int) -> dict[str, Any]:
    agent = config.agents[index]
    priced = config.agents_in(agent.markets[0])
    found = next(candidate for candidate in priced if candidate.name == agent.name)
    record: dict[str, Any] = found.model_dump(mode="json")
    if isinstance(found, LlmAgentConfig):
        record["prompt"] = {
            "mode": found.mode,
            "without": list(found.without),
            "text": "the mode's prompts in openbell's code at the manifest's code version",
        }
    elif isinstance(found, StrategyCodeAgentConfig | RatingAgentConfig):
        record["prompt"] = {
            "mode": found.kind,
            "text": "the kind's prompts in openbell's code at the manifest's code version",
        }
    return record


def build_manifest(
    config: OpenbellConfig, *, name: str, start: date, end: date | None, code: CodeVersion
) -> dict[str, Any]:
    """The manifest of season `name` over `[start, end]` (UTC dates; `end` None: open-ended) run
    under `config` by `code` (see the module docstring)."""
    convention = convention_named(config.metrics.convention)
    probe = config.probe.injection
    return {
        "format": FORMAT,
        "season": {
            "name": name,
            "start": start.isoformat(),
            "end": None if end is None else end.isoformat(),
        },
        "code": code.record(),
        "markets": {
            market: _market(market, found, start)
            for market, found in config.markets.configured().items()
        },
        "agents": {agent.name: _agent(config, index) for index, agent in enumerate(config.agents)},
        "ranking": {
            "rule": RANKING_RULE,
            "metrics_convention": {**jsonable(convention), "describe": convention.describe()},
        },
        "point_in_time": {
            "rule": POINT_IN_TIME_RULE,
            "injection_probe": None if probe is None else probe.model_dump(mode="json"),
        },
        "sandbox": config.sandbox.model_dump(mode="json"),
        "judges": {name: judge.model_dump(mode="json") for name, judge in config.judges.items()},
    }


def manifest_differences(stored: Mapping[str, Any], built: Mapping[str, Any]) -> list[str]:
    """Where `built` (from a config) differs from the `stored` manifest, outside `NOT_CONFIG`:
    one line per differing field, its dotted path with both values."""
    out: list[str] = []
    for key in sorted(set(stored) | set(built)):
        if key not in NOT_CONFIG:
            _compare(key, stored.get(key, _MISSING), built.get(key, _MISSING), out)
    return out


_MISSING: Final = object()


def _shown(value: Any) -> str:
    if value is _MISSING:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, ensure_ascii=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _compare(path: str, stored: Any, built: Any, out: list[str]) -> None:
    if isinstance(stored, dict) and isinstance(built, dict):
        for key in sorted(set(stored) | set(built)):
            _compare(f"{path}.{key}", stored.get(key, _MISSING), built.get(key, _MISSING), out)
        return
    if stored != built:
        out.append(f"{path}: the season has {_shown(stored)}, the config {_shown(built)}")
