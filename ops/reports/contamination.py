"""Training-cutoff marks on a market's board, and its post-cutoff headline.

This module owns which slots of a board are inside a model's training window and the board that
leaves them out. An account whose agent asks a model (`MODEL_KINDS`) decides each slot with that
model; its models are the identities its exchanges reported in the window (the trace's `model`,
`docs/guide/model-identity.md`) and, when the caller has the config, the configured `model`. Each
is looked up in the registry (`ops.config.cutoffs`):

- `clean`: every model is known and no slot of the window is before the latest cutoff;
- `inside`: every model is known and `inside_slots` of the account's slots (its slot snapshots,
  one a decided slot) are before the latest cutoff (`ModelCutoff.clean_from`): those decisions
  were made with the future possibly in the training data;
- `unknown`: a model has no registry entry, or the account reported none (an outside agent, a
  strategy-code or rating agent without a configured model): never taken as clean;
- `no_model`: the baselines and Python agents, which ask no model.

The headline board (`headline_board`) measures each `inside` account only over its slots from
the cutoff on: its NAV series cut to the points at or after `clean_from` (so its returns are
those of the decisions taken after the cutoff, from the positions it carried in), re-ranked with
everyone else on the composite. An account with no slot after its cutoff leaves the headline.
The behaviour columns, the model usage and the final NAV stay the window's. The significance
suite and the bootstraps keep measuring the whole window (they say so in their own notes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal

from sqlalchemy import Engine

from openbell.agents.kinds import (
    COMMAND_KIND,
    LLM_KIND,
    MCP_KIND,
    RATING_KIND,
    STRATEGY_CODE_KIND,
)
from openbell.ops.config.cutoffs import CutoffRegistry, ModelCutoff, bundled_registry
from openbell.ops.evaluation.ranking import Entrant, composite_rank
from openbell.ops.evaluation.return_metrics import compute_panel
from openbell.ops.reports.market_reports import Leaderboard, LeaderboardRow, MarketView, market_view

if TYPE_CHECKING:
    from openbell.ops.config.schema import OpenbellConfig

#: The agent kinds that decide with a model.
MODEL_KINDS: Final = frozenset({LLM_KIND, STRATEGY_CODE_KIND, RATING_KIND, MCP_KIND, COMMAND_KIND})
#: The views of a board: the post-cutoff headline (the default) or every slot.
SlotsView = Literal["post-cutoff", "all"]
CutoffStatus = Literal["clean", "inside", "unknown", "no_model"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCutoff:
    """One account's cutoff: its models, the entry deciding its cutoff (the latest of its
    models'), the status (module docstring) and how many of its window's slots are inside."""

    name: str
    kind: str
    models: tuple[str, ...]
    status: CutoffStatus
    entry: ModelCutoff | None
    slots: int
    inside_slots: int
    #: The model names the registry does not know.
    unknown_models: tuple[str, ...] = ()

    @property
    def cutoff(self) -> str | None:
        """The stated cutoff (as the provider writes it), when known."""
        return None if self.entry is None else self.entry.stated

    @property
    def source(self) -> str | None:
        """Where the cutoff is stated, when known."""
        return None if self.entry is None else self.entry.source

    @property
    def clean_from(self) -> datetime | None:
        """The first instant after the cutoff, when known."""
        return None if self.entry is None else self.entry.clean_from

    @property
    def mark(self) -> str | None:
        """The mark after the agent's name on a board: None when nothing is to be said."""
        if self.status == "inside":
            return f"inside cutoff: {self.inside_slots} slots"
        if self.status == "unknown":
            return "cutoff unknown"
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class CutoffMarks:
    """The cutoff of each account of a board, and which view of it is shown."""

    agents: tuple[AgentCutoff, ...]
    view: SlotsView = "post-cutoff"

    def of(self, name: str) -> AgentCutoff | None:
        """The cutoff of the agent `name`, if it is on the board."""
        return next((agent for agent in self.agents if agent.name == name), None)

    @property
    def excluded(self) -> tuple[AgentCutoff, ...]:
        """The accounts with slots inside their model's cutoff."""
        return tuple(agent for agent in self.agents if agent.status == "inside")

    @property
    def dropped(self) -> tuple[str, ...]:
        """The accounts the headline leaves out: every slot inside the cutoff."""
        return tuple(a.name for a in self.excluded if a.inside_slots >= a.slots)

    def note(self) -> str:
        """The board's line about its cutoffs."""
        unknown = sum(1 for agent in self.agents if agent.status == "unknown")
        tail = f"; {unknown} with cutoff unknown (not excluded)" if unknown else ""
        if self.view == "all":
            return (
                f"all slots: {len(self.excluded)} agents have slots inside their model's "
                f"training cutoff (marked){tail}"
            )
        dropped = f" ({', '.join(self.dropped)} left out: no slot after it)" if self.dropped else ""
        return (
            f"headline: post-cutoff slots only; {len(self.excluded)} agents had in-window slots "
            f"excluded{dropped}{tail}"
        )


@dataclass(frozen=True, slots=True)
class CutoffSettings:
    """What the marks are read with: the model registry and, where the caller has the config,
    each model-driven agent's configured model (agent name -> model)."""

    registry: CutoffRegistry
    configured: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def bundled(cls) -> CutoffSettings:
        """The bundled registry, no configured models (a reader without the config)."""
        return cls(bundled_registry())

    @classmethod
    def of(cls, config: OpenbellConfig) -> CutoffSettings:
        """The config's registry (`[cutoffs."MODEL"]` over the bundled one) and models."""
        configured = {
            agent.name: model
            for agent in config.agents
            if isinstance(model := getattr(agent, "model", None), str)
        }
        return cls(config.cutoff_registry(), configured)


def cutoff_marks(
    view: MarketView, settings: CutoffSettings | None = None, *, slots: SlotsView = "post-cutoff"
) -> CutoffMarks:
    """The cutoff of each account of `view` by `settings` (default: the bundled registry)."""
    settings = CutoffSettings.bundled() if settings is None else settings
    registry, configured = settings.registry, settings.configured
    found = []
    for account in view.accounts:
        info = account.info
        stamps = [point.at for point in account.slot_navs]
        names = [m.model for m in account.models if m.model]
        if info.agent_name in configured:
            names.append(configured[info.agent_name])
        names = list(dict.fromkeys(names))
        entries = {name: registry.find(name) for name in names}
        unknown = tuple(name for name, entry in entries.items() if entry is None)
        known = [entry for entry in entries.values() if entry is not None]
        entry = max(known, key=lambda e: e.clean_from) if known else None
        status: CutoffStatus
        if info.agent_kind not in MODEL_KINDS and not names:
            status, entry = "no_model", None
        elif unknown or entry is None:
            status = "unknown"
        else:
            inside = sum(1 for at in stamps if at < entry.clean_from)
            status = "inside" if inside else "clean"
        inside = 0 if entry is None or status != "inside" else inside
        found.append(
            AgentCutoff(
                name=info.agent_name,
                kind=info.agent_kind,
                models=tuple(names),
                status=status,
                entry=entry,
                slots=len(stamps),
                inside_slots=inside,
                unknown_models=unknown,
            )
        )
    return CutoffMarks(agents=tuple(found), view=slots)


def headline_board(view: MarketView, marks: CutoffMarks) -> Leaderboard:
    """The view's board with its `cutoffs` set: under the post-cutoff view, each `inside` account
    measured over its slots from its cutoff on and the rows re-ranked (module docstring); under
    `all`, the board as it is, marked."""
    board = view.leaderboard
    if marks.view == "all" or not marks.excluded:
        return replace(board, cutoffs=marks)
    by_at = {point.at: point for point in view.benchmark_navs}
    rows = {row.name: row for row in board.rows}
    entrants: list[Entrant] = []
    panels = {}
    for account in view.accounts:
        name = account.info.agent_name
        mark = marks.of(name)
        navs = account.navs
        if mark is not None and mark.status == "inside" and mark.clean_from is not None:
            if name in marks.dropped:
                continue
            navs = tuple(point for point in navs if point.at >= mark.clean_from)
            aligned = [by_at.get(point.at) for point in navs]
            reference = [p for p in aligned if p is not None]
            panel = compute_panel(
                navs,
                periods_per_year=board.periods_per_year,
                benchmark=reference if len(reference) == len(aligned) else None,
                convention=board.convention,
            )
        else:
            panel = rows[name].panel
        panels[name] = panel
        entrants.append(Entrant(name=name, panel=panel))
    bench = next(row for row in board.rows if row.is_benchmark)
    entrants.append(Entrant(name=bench.name, panel=bench.panel, is_benchmark=True))
    panels[bench.name] = bench.panel
    ranked = [
        replace(rows[r.name], ranking=r, panel=panels[r.name]) for r in composite_rank(entrants)
    ]
    return replace(board, rows=tuple(ranked), cutoffs=marks)


def with_marks(row: LeaderboardRow, marks: CutoffMarks | None) -> dict[str, Any]:
    """The fields a leaderboard row's record gains from its board's marks: the status and the
    inside slots of a marked row (`inside` or `unknown`); empty for the others, the benchmark and
    on a board without marks (the board's `cutoffs` record has every account)."""
    found = None if marks is None or row.is_benchmark else marks.of(row.name)
    if found is None or found.mark is None:
        return {}
    return {"cutoff_status": found.status, "inside_cutoff_slots": found.inside_slots}


def agent_cutoff_record(agent: AgentCutoff) -> dict[str, Any]:
    """One account's cutoff as a record."""
    return {
        "name": agent.name,
        "kind": agent.kind,
        "models": list(agent.models),
        "status": agent.status,
        "cutoff": agent.cutoff,
        "source": agent.source,
        "clean_from": None if agent.clean_from is None else agent.clean_from.isoformat(),
        "slots": agent.slots,
        "inside_slots": agent.inside_slots,
        "unknown_models": list(agent.unknown_models),
    }


def cutoffs_record(marks: CutoffMarks) -> dict[str, Any]:
    """A board's cutoff marks as a record."""
    return {
        "view": marks.view,
        "note": marks.note(),
        "excluded": [agent.name for agent in marks.excluded],
        "dropped": list(marks.dropped),
        "agents": [agent_cutoff_record(agent) for agent in marks.agents],
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class CardCutoff:
    """One agent's line of a methods card: its model(s), the cutoff and its source, and how many
    of its slots in the window were decided inside the cutoff."""

    agent: str
    model: str | None
    cutoff: str | None
    source: str | None
    inside_slots: int
    status: CutoffStatus


def card_cutoffs(marks: CutoffMarks) -> tuple[CardCutoff, ...]:
    """The per-agent cutoff lines a methods card states (the model-driven agents only): build
    `marks` with `cutoff_marks(view, CutoffSettings.of(config))` over the card's window (or
    call `agent_cutoffs`)."""
    return tuple(
        CardCutoff(
            agent=agent.name,
            model=", ".join(agent.models) or None,
            cutoff=agent.cutoff,
            source=agent.source,
            inside_slots=agent.inside_slots,
            status=agent.status,
        )
        for agent in marks.agents
        if agent.status != "no_model"
    )


def agent_cutoffs(
    engine: Engine,
    market: str,
    start: datetime | None,
    end: datetime | None,
    settings: CutoffSettings | None = None,
) -> tuple[CardCutoff, ...]:
    """The methods card's cutoff lines of `market`'s agents over `[start, end)`: each
    model-driven agent's model(s), stated cutoff, its source and its slots decided inside it
    (`settings`: `CutoffSettings.of(config)`, default the bundled registry)."""
    view = market_view(engine, market, start, end)
    return card_cutoffs(cutoff_marks(view, settings, slots="all"))
