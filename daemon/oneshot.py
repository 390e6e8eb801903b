"""One cycle on demand: what `openbell cycle --market M --agent A [--at T]` runs.

This module owns `run_one_cycle`: the cycle of one agent's account in one market at one slot, run
now through the same desks and `CycleRunner` as the daemon (retrying source, live fill prices, the
claim under a lease). Without `at` it runs the market's current slot (the latest at or before now);
`at` must be a slot of a session (an instant the market's bell rings) that has rung by the clock:
a cycle of a slot still to come is refused, since it would see, and fill at, prices of a time that
has not come. A cycle that already has a row is not run again: the claim makes a cycle happen at
most once, whoever asks.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from openbell.daemon.clock import Clock
from openbell.daemon.live import new_run_id
from openbell.daemon.plan import LivePlan, build_desks
from openbell.daemon.runner import CycleOutcome, CycleRunner
from openbell.markets.errors import ConfigError
from openbell.store.cache import SqlBarCache
from openbell.store.db import check_schema, make_engine
from openbell.store.ledger import Ledger


def run_one_cycle(
    plan: LivePlan, clock: Clock, *, market: str, agent: str, at: datetime | None
) -> tuple[datetime, CycleOutcome]:
    """Run `agent`'s cycle in `market` at `at` (default: the current slot); its slot and outcome.

    Raises `ConfigError` when `at` is not a slot of the market or is later than the clock's now,
    or when there has been no slot lately.
    """
    (spec,) = [found for found in plan.markets if found.market == market]
    now = clock.now()
    slot_at = at if at is not None else spec.latest_slot(now)
    if slot_at is None:
        raise ConfigError(f"market {market} has had no slot in the last week: nothing to run now")
    if slot_at > now:
        raise ConfigError(
            f"--at {slot_at.isoformat()} has not rung yet (it is {now.isoformat()} now): "
            "a cycle runs at a slot that has come"
        )
    if not spec.is_slot(slot_at):
        raise ConfigError(
            f"--at {slot_at.isoformat()} is not a slot of market {market} "
            f"({spec.cadence} bells, in sessions only)"
        )
    engine = make_engine(plan.store_url, redactor=plan.redactor)
    try:
        check_schema(engine)
        ledger = Ledger(engine)
        desks, accounts = build_desks([spec], ledger, now, clock=clock, cache=SqlBarCache(engine))
        chosen = [(account, found) for account, found in accounts[market] if found.name == agent]
        runner = CycleRunner(
            ledger=ledger,
            desks=desks,
            run_id=f"cycle:{new_run_id()}",
            lease=spec.bell.grace + timedelta(seconds=plan.decide_timeout_s),
            decide_timeout_s=plan.decide_timeout_s,
        )
        report = asyncio.run(runner.run_slot(market, slot_at, chosen, now))
    finally:
        engine.dispose()
    return slot_at, report.outcomes[0]
