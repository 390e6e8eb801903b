"""A season's methods card: what a reader must know to judge its figures, from its manifest and
its ledger, never from boilerplate.

This module owns the card (`methods_card`): its sections, in the order the 2026 reporting
standards ask for them (point-in-time controls, universe definition and coverage, costs and
execution timing, decision cadence, seeds and repeats, models as answered with their stated
training cutoffs, budgets and spend, failures and skips, artifacts' hashes), each built from the
season's manifest (`ops.seasons.manifest`) and the cycles whose slot falls inside its window
(`store.season_facts`, `store.queries`). A card is data (`MethodsCard`: sections of lines and
tables); `to_markdown` writes it for `openbell season card`, and the web page renders the same
data through its autoescaping template. Text a model or provider reported (the identities it
answered as, a failure's reason) is hostile: Markdown escapes it (`_escaped`), the page's
autoescape does there.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Engine

from openbell.agents.llm.spend_caps import BUDGET_EXHAUSTED
from openbell.markets.errors import OpenbellError
from openbell.ops.config.schema import load_config_text
from openbell.ops.reports.contamination import CardCutoff, CutoffSettings, agent_cutoffs
from openbell.store import queries
from openbell.store.season_facts import (
    UNSUCCESSFUL,
    chain_heads,
    cycle_outcomes,
    fills_per_account,
    runs_by_kind,
    slot_spans,
    window_warnings,
)
from openbell.store.seasons import Season
from openbell.store.seed_runs import seed_runs

#: What the card says of a model's training cutoff no registry entry states.
NOT_STATED: Final = "not stated"
#: The statuses counted per account, in the order of the failures-and-skips table.
STATUSES: Final = ("done", *UNSUCCESSFUL, "claimed")
#: The agent kinds that call a model.
MODEL_KINDS: Final = frozenset({"llm", "strategy_code", "rating"})

_UNIVERSE_HEADERS: Final = (
    "market", "universe", "source", "as of", "members", "dated members", "coverage",
    "outside allowed", "partial allowed", "benchmark",
)  # fmt: skip
_COST_HEADERS: Final = (
    "market", "commission bps", "stamp duty bps", "transfer bps", "slippage bps",
    "min notional", "lot", "settlement", "price limits", "shorting",
)  # fmt: skip
_MODEL_HEADERS: Final = (
    "agent", "market", "configured", "answered as", "changed", "training cutoff",
)  # fmt: skip
_SPEND_HEADERS: Final = (
    "agent", "market", "per-cycle budgets", "dollar caps", "prices", "cycles with usage",
    "spent", "budget_exhausted skips",
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class CardTable:
    """A table of the card: its header cells and rows of cells (plain text)."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CardSection:
    """A section of the card: a title, plain-text lines, then tables."""

    title: str
    lines: tuple[str, ...] = ()
    tables: tuple[CardTable, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MethodsCard:
    """A season's methods card."""

    season: str
    manifest_sha256: str
    sections: tuple[CardSection, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Account:
    account_id: int
    agent: str
    kind: str
    market: str
    currency: str


def _accounts(engine: Engine, manifest: Mapping[str, Any], ids: Iterable[int]) -> list[_Account]:
    """The accounts the card covers: those of the manifest's agents (and of their seeds' runs,
    `NAME.seedK`) and any other with a cycle in the window."""
    agents = set(manifest.get("agents", {}))
    active = set(ids)
    return [
        _Account(
            account_id=info.account_id,
            agent=info.agent_name,
            kind=info.agent_kind,
            market=info.market,
            currency=info.currency,
        )
        for info in queries.accounts(engine)
        if info.agent_name in agents
        or info.agent_name.partition(".seed")[0] in agents
        or info.account_id in active
    ]


def _agent_config(manifest: Mapping[str, Any], agent: str) -> Mapping[str, Any]:
    agents: Mapping[str, Any] = manifest.get("agents", {})
    return agents.get(agent) or agents.get(agent.partition(".seed")[0]) or {}


def _text(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(_text(item) for item in value) or "-"
    return str(value)


def _at(value: datetime) -> str:
    return f"{value:%Y-%m-%d %H:%M} UTC"


def methods_card(engine: Engine, season: Season) -> MethodsCard:
    """The methods card of `season` from its manifest and the ledger at `engine`."""
    manifest: dict[str, Any] = json.loads(season.manifest)
    start, end = season.start_at, season.end_at
    outcomes = cycle_outcomes(engine, start, end)
    accounts = _accounts(engine, manifest, (row.account_id for row in outcomes))
    ids = [account.account_id for account in accounts]
    spans = slot_spans(engine, {a.account_id: a.market for a in accounts}, start, end)
    sections = (
        _header(season, manifest),
        _point_in_time(
            manifest,
            accounts,
            window_warnings(engine, start, end),
            runs_by_kind(engine, start, end),
        ),
        _universes(manifest, season),
        _costs(manifest),
        _cadence(manifest, spans),
        _seeds(manifest, accounts, engine),
        _models(
            manifest,
            accounts,
            queries.reported_models_of(engine, ids, start, end),
            _cutoffs(engine, season, {account.market for account in accounts}),
        ),
        _spend(manifest, accounts, queries.llm_usage_of(engine, ids, start, end), outcomes),
        _failures(accounts, outcomes, fills_per_account(engine, start, end)),
        _artifacts(
            season,
            manifest,
            chain_heads(engine, {a.account_id: f"{a.agent} in {a.market}" for a in accounts}),
        ),
    )
    return MethodsCard(
        season=season.name, manifest_sha256=season.manifest_sha256, sections=sections
    )


def _header(season: Season, manifest: Mapping[str, Any]) -> CardSection:
    code = manifest.get("code", {})
    end = "open-ended" if season.end_on is None else f"through {season.end_on} (included)"
    state = "open" if season.closed_at is None else f"closed {_at(season.closed_at)}"
    return CardSection(
        title="Season",
        lines=(
            f"Season {season.name}: slots from {season.start_on} {end}, UTC dates.",
            f"Manifest opened {_at(season.opened_at)}, before the first slot; season {state}.",
            f"Manifest SHA-256: {season.manifest_sha256}",
            (
                f"Code: {code.get('package', 'openbell')} {code.get('version', 'unknown')}, "
                f"commit {code.get('commit', 'unknown')}."
            ),
            f"Ranking: {manifest.get('ranking', {}).get('rule', '-')}.",
            f"{manifest.get('ranking', {}).get('metrics_convention', {}).get('describe', '')}",
        ),
    )


def _point_in_time(
    manifest: Mapping[str, Any],
    accounts: Sequence[_Account],
    warnings: Sequence[Any],
    runs: Mapping[str, int],
) -> CardSection:
    pit = manifest.get("point_in_time", {})
    ran = ", ".join(f"{count} by a {kind} run" for kind, count in sorted(runs.items()))
    lines = [
        f"Rule: {pit.get('rule', '-')}.",
        f"Cycles inside the window: {ran or 'none yet'}.",
    ]
    rows = []
    for market, found in manifest.get("markets", {}).items():
        data = found.get("data", {})
        files = data.get("replay_bar_files", [])
        where = (
            f"live vendor {data.get('source')}; a replay reads {len(files)} bundled bar files"
            if data.get("live")
            else f"recorded bars: {len(files)} files ({data.get('source')})"
        )
        actions = data.get("corporate_actions")
        rows.append(
            (
                market,
                where,
                "-" if actions is None else str(actions.get("file")),
                "yes" if found.get("universe", {}).get("dated_members") else "no",
            )
        )
    masking = sorted(
        {
            (account.agent, _text(_agent_config(manifest, account.agent).get("masking")))
            for account in accounts
            if "masking" in _agent_config(manifest, account.agent)
        }
    )
    lines.append(
        "Masking: "
        + ("; ".join(f"{agent} {level}" for agent, level in masking) or "no agent is masked")
        + "."
    )
    probe = pit.get("injection_probe")
    lines.append(
        "Injection probe: none." if probe is None else f"Injection probe: {json.dumps(probe)}."
    )
    lines.append(
        f"Replay warnings recorded over the window: {len(warnings)}"
        + ("." if not warnings else ": " + " | ".join(f"{w.market}: {w.message}" for w in warnings))
    )
    return CardSection(
        title="Point-in-time controls",
        lines=tuple(lines),
        tables=(
            CardTable(
                headers=("market", "data", "corporate actions", "dated membership"),
                rows=tuple(rows),
            ),
        ),
    )


def _coverage_words(universe: Mapping[str, Any], season: Season) -> str:
    coverage = universe.get("coverage")
    if coverage is None:
        return "a list taken as it is at every date (no dates vouched for)"
    start, until = coverage.get("from_date"), coverage.get("until_date")
    inside = (start is None or start <= season.start_on.isoformat()) and (
        until is None or (season.end_on is not None and season.end_on.isoformat() < until)
    )
    words = f"vouched for from {start or 'any date'} until {until or 'no end'}"
    return f"{words}; the window is {'inside' if inside else 'NOT inside'} it"


def _universes(manifest: Mapping[str, Any], season: Season) -> CardSection:
    rows = []
    for market, found in manifest.get("markets", {}).items():
        universe = found.get("universe", {})
        rows.append(
            (
                market,
                str(universe.get("name")),
                str(universe.get("source") or "-"),
                str(universe.get("as_of")),
                str(universe.get("members")),
                str(universe.get("dated_members")),
                _coverage_words(universe, season),
                _text(universe.get("allow_outside_coverage")),
                _text(universe.get("allow_partial_coverage")),
                str(found.get("benchmark") or "-"),
            )
        )
    return CardSection(
        title="Universe definition and coverage",
        tables=(
            CardTable(
                headers=_UNIVERSE_HEADERS,
                rows=tuple(rows),
            ),
        ),
    )


def _limits(rules: Mapping[str, Any]) -> str:
    limits = rules.get("price_limits")
    if not limits:
        return "none"
    boards = ", ".join(f"{board} {Decimal(pct) * 100:g}%" for board, pct in limits["board_pct"])
    return f"{boards}; ST {Decimal(limits['st_pct']) * 100:g}%; buffer {limits['buffer_pct']}"


def _shorting(shorting: Mapping[str, Any] | None) -> str:
    if not shorting:
        return "no"
    return (
        f"borrow {shorting['borrow_fee_bps_per_year']} bps/yr, margin "
        f"{shorting['initial_margin']}/{shorting['maintenance_margin']}"
    )


def _costs(manifest: Mapping[str, Any]) -> CardSection:
    rows = []
    for market, found in manifest.get("markets", {}).items():
        rules = found.get("rules", {})
        fees = rules.get("fees", {})
        shorting = rules.get("shorting")
        rows.append(
            (
                market,
                f"{fees.get('commission_bps')} (min {fees.get('commission_min')})",
                str(fees.get("stamp_duty_sell_bps")),
                str(fees.get("transfer_fee_bps")),
                str(rules.get("slippage_bps")),
                str(rules.get("min_notional")),
                f"{_text(rules.get('lot_size'))} / step {rules.get('quantity_step')}",
                f"T+{rules.get('settlement_days')}",
                _limits(rules),
                _shorting(shorting),
            )
        )
    return CardSection(
        title="Costs and execution timing",
        lines=(
            (
                "Costs in basis points of a fill's notional (commission both sides with its "
                "minimum per fill, stamp duty on sells, transfer fee both sides); slippage moves "
                "the fill price against the trader."
            ),
            (
                "Execution: an order placed at a slot fills at the quote of that slot: in a "
                "replay the open of the bar starting then; live, the quote the slot's snapshot "
                "took."
            ),
        ),
        tables=(
            CardTable(
                headers=_COST_HEADERS,
                rows=tuple(rows),
            ),
        ),
    )


def _cadence(manifest: Mapping[str, Any], spans: Sequence[Any]) -> CardSection:
    by_market = {span.market: span for span in spans}
    rows = []
    for market, found in manifest.get("markets", {}).items():
        span = by_market.get(market)
        rows.append(
            (
                market,
                str(found.get("cadence")),
                _text(found.get("slots")) if found.get("slots") else "the cadence's default",
                "0" if span is None else str(span.slots),
                "-" if span is None else _at(span.first_slot_at),
                "-" if span is None else _at(span.last_slot_at),
            )
        )
    return CardSection(
        title="Decision cadence",
        lines=("Slots recorded in the ledger inside the window, over all of a market's accounts.",),
        tables=(
            CardTable(
                headers=("market", "cadence", "slots (local)", "slots rung", "first", "last"),
                rows=tuple(rows),
            ),
        ),
    )


_SEED_KEYS: Final = ("seed", "masking_seed", "temperature")


def _seeds(
    manifest: Mapping[str, Any], accounts: Sequence[_Account], engine: Engine
) -> CardSection:
    rows = []
    for name, agent in manifest.get("agents", {}).items():
        found = {key: agent[key] for key in _SEED_KEYS if key in agent}
        if "masking_seed" in found and found["masking_seed"] is None:
            found["masking_seed"] = "secret, drawn at run time"
        if found:
            rows.append((name, "; ".join(f"{key} {_text(value)}" for key, value in found.items())))
    names = {account.agent for account in accounts}
    groups: dict[str, list[str]] = defaultdict(list)
    for run in seed_runs(engine):
        if run.agent in names:
            groups[run.group_label].append(f"{run.base_agent} seed {run.seed}")
    lines = [
        f"Repeated runs (replay --seeds): {len(groups)} groups"
        + (
            "."
            if not groups
            else ": " + "; ".join(f"{g}: {len(r)} runs" for g, r in groups.items())
        )
    ]
    if not rows:
        lines.append("No agent sets a seed, a masking seed or a temperature.")
    return CardSection(
        title="Seeds and repeats",
        lines=tuple(lines),
        tables=(CardTable(headers=("agent", "seeds"), rows=tuple(rows)),) if rows else (),
    )


def _cutoffs(
    engine: Engine, season: Season, markets: Iterable[str]
) -> dict[tuple[str, str], CardCutoff]:
    """Each model-driven agent's stated training cutoff over the season's window, by (agent,
    market): the registry of the config stored with the season (`[cutoffs."MODEL"]` over the
    bundled one), or the bundled registry when that config no longer reads."""
    try:
        config = load_config_text(season.config, shown=season.config_path, base=Path("."))
        settings = CutoffSettings.of(config)
    except (OpenbellError, ValueError):
        settings = CutoffSettings.bundled()
    return {
        (line.agent, market): line
        for market in sorted(markets)
        for line in agent_cutoffs(engine, market, season.start_at, season.end_at, settings)
    }


def _cutoff_cell(line: CardCutoff | None) -> str:
    """What the models table says of an agent's training cutoff."""
    if line is None or line.cutoff is None:
        return NOT_STATED
    inside = f"; {line.inside_slots} slots decided inside it" if line.inside_slots else ""
    return f"{line.cutoff} ({line.source or 'no source'}){inside}"


def _models(
    manifest: Mapping[str, Any],
    accounts: Sequence[_Account],
    reported: Mapping[int, Sequence[queries.ReportedModel]],
    cutoffs: Mapping[tuple[str, str], CardCutoff],
) -> CardSection:
    rows = []
    for account in accounts:
        configured = _agent_config(manifest, account.agent)
        if account.kind not in MODEL_KINDS and "model" not in configured:
            continue
        identities = reported.get(account.account_id, ())
        answered = "; ".join(
            f"{found.model or '(not reported)'}"
            + (f" fingerprint {found.fingerprint}" if found.fingerprint else "")
            + (f" revision {found.revision}" if found.revision else "")
            + f" x{found.exchanges} from {_at(found.first_slot_at)}"
            for found in identities
        )
        rows.append(
            (
                account.agent,
                account.market,
                str(configured.get("model", "-")),
                answered or "no exchange recorded",
                "yes" if len(identities) > 1 else "no",
                _cutoff_cell(cutoffs.get((account.agent, account.market))),
            )
        )
    return CardSection(
        title="Models as answered",
        lines=(
            (
                "The identity each model response reported (trace rows, migration 0021), with "
                "how many exchanges reported it; more than one is a model change. Training "
                "cutoffs as the model registry states them (docs/guide/cutoffs.md), with the "
                f"slots decided inside them, which the headline board leaves out; {NOT_STATED} "
                "where no entry states one."
            ),
        )
        if rows
        else ("No agent of this season calls a model.",),
        tables=(
            CardTable(
                headers=_MODEL_HEADERS,
                rows=tuple(rows),
            ),
        )
        if rows
        else (),
    )


_BUDGET_KEYS: Final = (
    "max_turns", "max_tool_calls", "max_tokens_per_cycle", "max_wall_s", "max_tokens",
)  # fmt: skip


def _price(configured: Mapping[str, Any]) -> str:
    price_in = configured.get("price_in_per_mtok")
    if price_in is None:
        return "unpriced"
    return f"{price_in} in / {configured.get('price_out_per_mtok')} out per Mtok"


def _spend(
    manifest: Mapping[str, Any],
    accounts: Sequence[_Account],
    usage: Mapping[int, tuple[int, Any]],
    outcomes: Sequence[Any],
) -> CardSection:
    exhausted_cycles: Counter[int] = Counter()
    for row in outcomes:
        if row.reason == BUDGET_EXHAUSTED:
            exhausted_cycles[row.account_id] += row.cycles
    rows = []
    for account in accounts:
        configured = _agent_config(manifest, account.agent)
        if account.kind not in MODEL_KINDS:
            continue
        cycles, total = usage.get(account.account_id, (0, None))
        budgets = ", ".join(
            f"{key} {configured[key]}" for key in _BUDGET_KEYS if configured.get(key) is not None
        )
        caps = ", ".join(
            f"{label} {configured[key]}"
            for key, label in (("max_usd_per_day", "day"), ("max_usd_per_season", "season"))
            if configured.get(key) is not None
        )
        spent = "-"
        if total is not None and cycles:
            cost = "unpriced" if total.cost is None else f"{total.cost.normalize():f}"
            spent = f"{cost} ({total.tokens_in} tokens in, {total.tokens_out} out)"
        rows.append(
            (
                account.agent,
                account.market,
                budgets or "-",
                caps or "none",
                _price(configured),
                str(cycles),
                spent,
                str(exhausted_cycles.get(account.account_id, 0)),
            )
        )
    return CardSection(
        title="Budgets and spend",
        lines=(
            (
                "Budgets are per cycle; dollar caps per UTC day and per season in the prices' "
                "currency (a capped agent's cycles are skipped as budget_exhausted once spent). "
                "Spend is the priced cost of the window's cycles; a model with no price is "
                "unpriced, never $0."
            ),
        )
        if rows
        else ("No agent of this season calls a model: nothing was spent on models.",),
        tables=(
            CardTable(
                headers=_SPEND_HEADERS,
                rows=tuple(rows),
            ),
        )
        if rows
        else (),
    )


def _failures(
    accounts: Sequence[_Account], outcomes: Sequence[Any], fills: Mapping[int, int]
) -> CardSection:
    counts: dict[int, Counter[str]] = defaultdict(Counter)
    reasons: Counter[tuple[str, str, str, str]] = Counter()
    names = {account.account_id: account for account in accounts}
    for row in outcomes:
        counts[row.account_id][row.status] += row.cycles
        account = names.get(row.account_id)
        if row.status in UNSUCCESSFUL and account is not None:
            key = (account.agent, account.market, row.status, row.reason or "(no reason given)")
            reasons[key] += row.cycles
    rows = tuple(
        (
            account.agent,
            account.market,
            str(sum(counts[account.account_id].values())),
            *(str(counts[account.account_id][status]) for status in STATUSES),
            str(fills.get(account.account_id, 0)),
        )
        for account in accounts
    )
    total = Counter[str]()
    for found in counts.values():
        total.update(found)
    lines = [
        "Cycles inside the window by final status: "
        + ", ".join(f"{total[status]} {status}" for status in STATUSES)
        + "."
    ]
    tables = [
        CardTable(headers=("agent", "market", "cycles", *STATUSES, "fills"), rows=rows),
    ]
    if reasons:
        tables.append(
            CardTable(
                headers=("agent", "market", "status", "reason", "cycles"),
                rows=tuple((*key, str(count)) for key, count in sorted(reasons.items())),
            )
        )
    else:
        lines.append("No cycle failed, was skipped, missed or interrupted.")
    return CardSection(title="Failures and skips", lines=tuple(lines), tables=tuple(tables))


def _artifacts(
    season: Season, manifest: Mapping[str, Any], heads: Mapping[str, str] | None
) -> CardSection:
    rows = [
        ("manifest", season.manifest_sha256),
        ("config text", hashlib.sha256(season.config.encode("utf-8")).hexdigest()),
    ]
    for market, found in manifest.get("markets", {}).items():
        data = found.get("data", {})
        rows += [
            (f"{market} bars {entry['file']}", str(entry["sha256"]))
            for entry in data.get("replay_bar_files", [])
        ]
        actions = data.get("corporate_actions")
        if actions is not None:
            rows.append((f"{market} corporate actions {actions['file']}", str(actions["sha256"])))
    if heads is None:
        chain = "Chain heads: none, no cycle of these accounts has a link (ended before 0025)."
    else:
        chain = (
            f"Chain heads: {len(heads)} accounts; `openbell season export` archives the record "
            "and `openbell season verify` checks every link from the archive alone."
        )
        rows += [(f"chain head {account}", digest) for account, digest in sorted(heads.items())]
    return CardSection(
        title="Artifacts",
        lines=(chain,),
        tables=(CardTable(headers=("artifact", "SHA-256"), rows=tuple(rows)),),
    )


_SPECIAL: Final = re.compile(r"([\\`*_\[\]<>|~])")
#: What starts a Markdown block (a heading, a list, a quote, a rule) at the start of a line.
_BLOCK_START: Final = re.compile(r"^([#+\-=])")


def _escaped(text: str, *, cell: bool = False) -> str:
    """`text` as inert Markdown: one line, every character Markdown gives a meaning escaped (and,
    outside a table `cell`, what would start a block)."""
    inert = _SPECIAL.sub(r"\\\1", " ".join(text.split()))
    return inert if cell else _BLOCK_START.sub(r"\\\1", inert)


def to_markdown(card: MethodsCard) -> str:
    """The card as a Markdown page."""
    out = [f"# Methods card: season {_escaped(card.season)}", ""]
    for section in card.sections:
        out += [f"## {section.title}", ""]
        for line in section.lines:
            if line:
                out += [_escaped(line), ""]
        for table in section.tables:
            out.append("| " + " | ".join(_escaped(h, cell=True) for h in table.headers) + " |")
            out.append("|" + "---|" * len(table.headers))
            out += [
                "| " + " | ".join(_escaped(c, cell=True) for c in row) + " |" for row in table.rows
            ]
            out.append("")
    return "\n".join(out)
