"""Seasons for the commands: opening one from a config, and the config a season runs under.

This module owns what `openbell season open`, `run --season` and `replay --season` do with a
season beyond storing it (`store.seasons`): `new_season` builds the manifest of a config
(`ops.seasons.manifest`) and the season's record, opened at the time it is given;
`season_config` is the config stored with a season, which the season's runs load; and
`check_unchanged` refuses a config whose manifest differs from the season's, naming every
differing field (a season's config cannot change while it is open: close it and open another).
A season whose code differs from the running openbell's is run, with a warning
(`code_differences`): the code is not part of the config.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime
from pathlib import Path
from typing import Final

from openbell.markets.errors import InvalidConfig, SeasonError
from openbell.ops.config.schema import OpenbellConfig, load_config_text
from openbell.ops.seasons.code_version import CodeVersion
from openbell.ops.seasons.manifest import (
    build_manifest,
    canonical_json,
    manifest_differences,
    manifest_sha256,
)
from openbell.store.seasons import Season

#: What a season may be called: it names a page (`/seasons/NAME`) and a command's argument.
SEASON_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def new_season(
    config: OpenbellConfig,
    *,
    name: str,
    start: date,
    end: date | None,
    config_text: str,
    config_path: Path,
    code: CodeVersion,
    now: datetime,
) -> Season:
    """The season `name` over `[start, end]` under `config` (read from `config_text` at
    `config_path`), opened `now` by `code`; `SeasonError` for an end before the start."""
    if not SEASON_NAME.fullmatch(name):
        raise SeasonError(
            f"season name {name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit"
        )
    if end is not None and end < start:
        raise SeasonError(f"season {name!r}: --end {end} is before --start {start}")
    manifest = canonical_json(build_manifest(config, name=name, start=start, end=end, code=code))
    return Season(
        name=name,
        manifest=manifest,
        manifest_sha256=manifest_sha256(manifest),
        start_on=start,
        end_on=end,
        opened_at=now,
        closed_at=None,
        config=config_text,
        config_path=str(config_path.absolute()),
    )


def season_config(season: Season) -> OpenbellConfig:
    """The config stored with `season`, as its runs load it (command agents' relative paths
    against the directory of the file it was opened from)."""
    return load_config_text(
        season.config,
        shown=f"season {season.name}'s config",
        base=Path(season.config_path).parent,
    )


def check_unchanged(
    season: Season, given: OpenbellConfig, *, shown: str, code: CodeVersion
) -> None:
    """Refuse `given` (the config file `shown`) for `season` unless its manifest is the
    season's: `InvalidConfig`, one line per differing field."""
    stored = json.loads(season.manifest)
    built = build_manifest(
        given, name=season.name, start=season.start_on, end=season.end_on, code=code
    )
    differences = manifest_differences(stored, built)
    if differences:
        raise InvalidConfig(
            [
                f"{shown}: differs from season {season.name}'s manifest (a season's config "
                f"cannot change while it is open: close it and open a new one): {line}"
                for line in differences
            ]
        )


def code_differences(season: Season, code: CodeVersion) -> dict[str, tuple[str, str]]:
    """What of the running `code` differs from the code that opened `season`: each of
    `version` and `commit` that does, with (the season's, the running one's)."""
    stored = json.loads(season.manifest).get("code", {})
    running = code.record()
    return {
        key: (str(stored.get(key)), running[key])
        for key in ("version", "commit")
        if stored.get(key) != running[key]
    }


def refuse_closed(season: Season) -> None:
    """`SeasonError` when `season` is closed: a closed season is never run again."""
    if season.closed_at is not None:
        raise SeasonError(
            f"season {season.name!r} was closed at {season.closed_at:%Y-%m-%d %H:%M} UTC; "
            "open a new season to run again"
        )


def season_record(season: Season) -> dict[str, str | None]:
    """A season as the boards and the API name it: its name, window, when it was opened and
    closed (None: open) and its manifest's SHA-256."""
    return {
        "name": season.name,
        "start": season.start_on.isoformat(),
        "end": None if season.end_on is None else season.end_on.isoformat(),
        "opened_at": season.opened_at.isoformat(),
        "closed_at": None if season.closed_at is None else season.closed_at.isoformat(),
        "manifest_sha256": season.manifest_sha256,
    }
