"""The arena page's "last bell" panel: per market, the slot in progress or how the last one
ended, with the cause of a slot whose data was unavailable, the decisions not run, and the next
bell.

This module owns `LastBellRow` and `last_bell_rows`, which read the body of the daemon's
`/healthz` (`daemon.health.HealthBoard.status`: the same figures, so the page and the endpoint
never disagree). Without a daemon (`openbell serve` over a ledger) there is no panel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: How each state reads on the page.
STATE_LABELS = {
    "running": "in progress",
    "done": "done",
    "failed": "failed",
    "data_unavailable": "data unavailable",
    "not_run": "decisions not run",
    "interrupted": "interrupted",
    "slot_failed": "slot failed",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class LastBellRow:
    """One market's line of the panel (every field plain text, escaped by the template)."""

    market: str
    slot_at: str
    state: str
    state_class: str
    cause: str
    cycles: str
    not_run: str
    next_bell: str


def last_bell_rows(health: Mapping[str, Any]) -> list[LastBellRow]:
    """The panel's rows from a `/healthz` body, one per watched market."""
    rows = []
    for market, found in sorted(dict(health.get("markets", {})).items()):
        bell = found.get("last_bell") or {}
        state = str(bell.get("state", "")) or "waiting"
        cause = " ".join(str(part) for part in (bell.get("cause"), bell.get("message")) if part)
        rows.append(
            LastBellRow(
                market=market,
                slot_at=_short(bell.get("slot_at")) or "none yet",
                state=STATE_LABELS.get(state, state),
                state_class="ok" if state in ("done", "waiting") else state.replace("_", "-"),
                cause=cause,
                cycles=_counts(bell.get("cycles")),
                not_run=_counts(bell.get("not_run")),
                next_bell=_short(found.get("next_bell")) or "none this fortnight",
            )
        )
    return rows


def _short(iso: object) -> str:
    """An ISO instant as `YYYY-MM-DD HH:MM UTC` (empty for none)."""
    if not iso:
        return ""
    text = str(iso)
    return f"{text[:10]} {text[11:16]} UTC" if len(text) >= 16 else text


def _counts(counts: object) -> str:
    """`{"done": 3, "skipped": 1}` as `done 3, skipped 1`."""
    if not isinstance(counts, Mapping) or not counts:
        return ""
    return ", ".join(f"{key} {value}" for key, value in sorted(counts.items()))
