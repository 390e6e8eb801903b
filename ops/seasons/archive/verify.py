"""Checking an archive from its files alone, with no database: `openbell season verify DIR`.

`verify_archive` reads the archive (`reading.load_tables`), then checks, in order, and stops at
the first thing that does not match, which it names (`Mismatch`: the table, the row's id, the
account, its agent and the cycle's slot where there is one):

1. the manifest: its sha256 is the one the heads name;
2. every account's chain, link by link (`seq` from 1, each `prev` the digest before it): the
   record of the link's cycle is rebuilt from the archived rows and the link's digest recomputed;
   where it differs, the row that changed (or was added or removed) is named by comparing each
   row's own digest with the one `tables/row_digests.parquet` lists, else the link itself;
3. each account's last link is the head `heads.json` publishes, and every chain has a head;
4. every archived row has the digest `tables/row_digests.parquet` lists (this is what checks the
   rows no link covers: agents, accounts, corporate actions, borrow fees, close snapshots), and
   that list has the sha256 the heads give;
5. the leaderboard figures (`figures.archive_figures`, recomputed from the NAV snapshots) equal
   the figures published at export (`figures.json`), when the archive has them.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from openbell.markets.errors import ReportError
from openbell.ops.evaluation.conventions import OPENBELL, convention_named
from openbell.ops.seasons.archive.export import (
    FIGURES,
    HEADS,
    MANIFEST,
    ROW_DIGEST_KINDS,
    ROW_DIGESTS,
    listed_digest,
)
from openbell.ops.seasons.archive.figures import archive_figures, compare_figures, windows_of
from openbell.ops.seasons.archive.parquet import read_table
from openbell.ops.seasons.archive.reading import (
    all_records,
    duplicate,
    load_tables,
    row_digests,
)
from openbell.store.digests import GENESIS, RECORD_FORMAT, CycleRecord, chained


@dataclass(frozen=True, slots=True, kw_only=True)
class Mismatch:
    """The first thing in an archive that does not match: where, and how."""

    table: str
    row_id: str | None
    account_id: int | None = None
    agent: str | None = None
    slot_at: datetime | None = None
    detail: str

    def __str__(self) -> str:
        where = [f"table {self.table}"]
        if self.row_id is not None:
            where.append(f"row {self.row_id}")
        if self.account_id is not None:
            shown = f"account {self.account_id}"
            where.append(shown if self.agent is None else f"{shown} ({self.agent})")
        if self.slot_at is not None:
            where.append(f"slot {self.slot_at.isoformat()}")
        return f"{', '.join(where)}: {self.detail}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What `verify_archive` found: the first mismatch (None: the archive verifies), how much
    it checked, and the figures it recomputed."""

    name: str
    mismatch: Mismatch | None
    links: int = 0
    accounts: int = 0
    rows: int = 0
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether everything matched."""
        return self.mismatch is None


def verify_archive(directory: Path) -> Verdict:
    """Check the archive in `directory` (see the module docstring); `ReportError` for a
    directory that is not an archive or a file that cannot be read."""
    heads = _read_json(directory / HEADS)
    if heads.get("format") != RECORD_FORMAT:
        raise ReportError(f"{HEADS}: record format {heads.get('format')!r}, not {RECORD_FORMAT}")
    name = str(heads.get("name", ""))
    manifest = (directory / MANIFEST).read_bytes() if (directory / MANIFEST).is_file() else b""
    if hashlib.sha256(manifest).hexdigest() != heads.get("manifest_sha256"):
        return Verdict(
            name=name,
            mismatch=Mismatch(table=MANIFEST, row_id=None, detail="its sha256 is not the heads'"),
        )
    tables = load_tables(directory)
    twice = duplicate(tables)
    if twice is not None:
        return Verdict(
            name=name, mismatch=Mismatch(table=twice[0], row_id=twice[1], detail="appears twice")
        )
    agents = _agents(tables)
    records = all_records(tables)
    listed = _listed(directory)
    current = {(table, key): digest for table, key, _, digest in row_digests(tables, records)}
    mismatch, links, tips = _check_chains(tables, records, agents, _Rows(listed, current))
    if mismatch is None:
        mismatch = _check_heads(heads, tips, agents)
    if mismatch is None:
        mismatch = _check_rows(heads, listed, current)
    if mismatch is not None:
        mismatch = _with_trace_id(mismatch, tables["trace"])
    figures: dict[str, Any] = {}
    if mismatch is None:
        published = _read_json(directory / FIGURES) if (directory / FIGURES).is_file() else None
        convention = _convention(published)
        windows = None if published is None else windows_of(published)
        figures = archive_figures(
            tables["account"], tables["agent"], tables["nav_snapshot"], convention, windows
        )
        if published is not None:
            found = compare_figures(published, figures)
            if found is not None:
                mismatch = Mismatch(table=FIGURES, row_id=None, detail=str(found))
    return Verdict(
        name=name,
        mismatch=mismatch,
        links=links,
        accounts=len(tips),
        rows=len(current),
        figures=figures,
    )


def _with_trace_id(found: Mismatch, traces: Sequence[Mapping[str, Any]]) -> Mismatch:
    """A trace row named by its id (records know it by `cycle_id/seq`), when the archive has it."""
    if found.table != "trace" or found.row_id is None or "/" not in found.row_id:
        return found
    cycle, seq = found.row_id.split("/", 1)
    for row in traces:
        if str(row["cycle_id"]) == cycle and str(row["seq"]) == seq:
            detail = f"{found.detail} (cycle {cycle}, seq {seq})"
            return replace(found, row_id=str(row["id"]), detail=detail)
    return found


def _read_json(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise ReportError(f"{path.parent} is not an archive: no {path.name}") from None
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path.name}: not readable JSON ({exc})") from exc
    if not isinstance(found, dict):
        raise ReportError(f"{path.name}: not a JSON object")
    return found


def _convention(published: Mapping[str, Any] | None) -> Any:
    names = {board.get("convention") for board in (published or {}).values()}
    names.discard(None)
    if len(names) > 1:
        raise ReportError(f"{FIGURES}: boards of several conventions ({sorted(names)})")
    return convention_named(names.pop()) if names else OPENBELL


def _agents(tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[int, str]:
    names = {int(row["id"]): str(row["name"]) for row in tables["agent"]}
    return {int(row["id"]): names.get(int(row["agent_id"]), "?") for row in tables["account"]}


@dataclass(frozen=True, slots=True)
class _Rows:
    """The rows' digests as listed at export (`listed`: table, row id, linked cycle, digest) and
    as the archive's rows give them now (`current`)."""

    listed: Sequence[tuple[str, str, int | None, str]]
    current: Mapping[tuple[str, str], str]

    def changed(self, record: CycleRecord) -> tuple[str, str, str] | None:
        """The first row of `record` that is not as listed (or a listed row of its cycle that is
        missing), as (table, row id, what); None when every row is as listed."""
        kept = {(table, key): digest for table, key, _, digest in self.listed}
        now = [(row.table, row.row_id) for row in record.row_digests()]
        for table, key in now:
            if (table, key) not in kept:
                return (table, key, "a row the record did not have")
            if kept[(table, key)] != self.current.get((table, key)):
                return (table, key, "the row differs from the one recorded")
        present = set(now)
        for table, key, cycle_id, _ in self.listed:
            if cycle_id == record.cycle_id and (table, key) not in present:
                return (table, key, "a recorded row is missing")
        return None


def _check_chains(
    tables: Mapping[str, Sequence[Mapping[str, Any]]],
    records: Mapping[int, CycleRecord],
    agents: Mapping[int, str],
    rows: _Rows,
) -> tuple[Mismatch | None, int, dict[int, tuple[int, str]]]:
    """Walk every account's chain; the first mismatch, the links checked, the accounts' tips."""
    chains: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for link in tables["cycle_digest"]:
        chains[int(link["account_id"])].append(link)
    tips: dict[int, tuple[int, str]] = {}
    checked = 0
    for account_id in sorted(chains):
        prev, seq = GENESIS, 0
        for link in sorted(chains[account_id], key=lambda row: int(row["seq"])):
            cycle_id = int(link["cycle_id"])
            record = records.get(cycle_id)
            found = _link_mismatch(link, record, account_id, prev, seq, rows)
            if found is not None:
                table, row_id, detail = found
                return (
                    Mismatch(
                        table=table,
                        row_id=row_id,
                        account_id=account_id,
                        agent=agents.get(account_id),
                        slot_at=None if record is None else record.slot_at,
                        detail=detail,
                    ),
                    checked,
                    tips,
                )
            prev, seq = str(link["digest"]), int(link["seq"])
            checked += 1
        tips[account_id] = (seq, prev)
    return None, checked, tips


def _link_mismatch(
    link: Mapping[str, Any],
    record: CycleRecord | None,
    account_id: int,
    prev: str,
    seq: int,
    rows: _Rows,
) -> tuple[str, str, str] | None:
    """What does not match at `link` (after `prev`, the account's `seq`-th), as (table, row id,
    what); None when it matches."""
    cycle = str(link["cycle_id"])
    if int(link["seq"]) != seq + 1:
        return ("cycle_digest", cycle, f"link {link['seq']} after {seq}")
    if link["prev"] != prev:
        return ("cycle_digest", cycle, "its prev is not the digest before it")
    if record is None:
        return ("cycle", cycle, "the linked cycle is not in the archive")
    if record.account_id != account_id:
        return ("cycle", cycle, "the cycle is another account's")
    if chained(prev, record.record) == link["digest"]:
        return None
    changed = rows.changed(record)
    if changed is not None:
        return changed
    return ("cycle_digest", cycle, "its digest is not its record's")


def _check_heads(
    heads: Mapping[str, Any], tips: Mapping[int, tuple[int, str]], agents: Mapping[int, str]
) -> Mismatch | None:
    published = {
        int(head["account_id"]): (int(head["seq"]), str(head["digest"]))
        for head in heads.get("heads", [])
    }
    for account_id in sorted(set(published) | set(tips)):
        if published.get(account_id) != tips.get(account_id):
            return Mismatch(
                table=HEADS,
                row_id=None,
                account_id=account_id,
                agent=agents.get(account_id),
                detail=(
                    f"the chain ends at {tips.get(account_id)}, "
                    f"the heads say {published.get(account_id)}"
                ),
            )
    return None


def _listed(directory: Path) -> list[tuple[str, str, int | None, str]]:
    path = directory / "tables" / f"{ROW_DIGESTS}.parquet"
    if not path.is_file():
        raise ReportError(f"{directory} holds no tables/{ROW_DIGESTS}.parquet")
    return [
        (str(row["table"]), str(row["row_id"]), row["cycle_id"], str(row["digest"]))
        for row in read_table(path, ROW_DIGEST_KINDS)
    ]


def _check_rows(
    heads: Mapping[str, Any],
    listed: Sequence[tuple[str, str, int | None, str]],
    current: Mapping[tuple[str, str], str],
) -> Mismatch | None:
    """Every archived row as listed, and the list as the heads give it."""
    kept = {(table, key): digest for table, key, _, digest in listed}
    for (table, key), digest in current.items():
        if (table, key) not in kept:
            return Mismatch(table=table, row_id=key, detail="a row the archive did not list")
        if kept[(table, key)] != digest:
            return Mismatch(table=table, row_id=key, detail="the row differs from the one archived")
    for table, key in kept:
        if (table, key) not in current:
            return Mismatch(table=table, row_id=key, detail="an archived row is missing")
    if listed_digest(listed) != heads.get("row_digests_sha256"):
        return Mismatch(
            table=f"tables/{ROW_DIGESTS}.parquet",
            row_id=None,
            detail="its sha256 is not the heads'",
        )
    return None
