"""A hand-built crypto ledger for the significance suite: baselines, noise agents and a skilled
one, whose NAV paths are planted through the marks of one held position.

Every account buys 0.1 BTC/USDT at 60,000 at its first slot (daily slots at 00:00 UTC from
2025-01-01) and holds it; each slot snapshot marks it at the account's own planted price path,
so the NAV is 4,000 cash plus 0.1 times that price. `buy-and-hold` follows the market path,
`cash` never buys, each `noise-NN` is the market plus mean-zero noise, `skilled` the market plus
a daily drift and noise, and `late` joins `LATE_DAYS` days after the others (noise only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

import numpy as np

from openbell.markets.domain import Instrument, Order, Side, utc
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, SnapshotKind
from openbell_testkit.store import fill_for

START = utc(2025, 1, 1)
DAYS = 160
LATE_DAYS = 60
NOISE_AGENTS = 8
PRICE = Decimal(60000)
QUANTITY = Decimal("0.1")
INITIAL = Decimal(10000)
BASELINES = {"buy-and-hold": "buy_and_hold", "cash": "cash"}
_BTC = Instrument(symbol="BTC/USDT", market="crypto", currency="USDT")


@dataclass
class Planted:
    """The NAV each account's slot snapshots hold, with their instants, by agent."""

    navs: dict[str, list[tuple[datetime, Decimal]]] = field(default_factory=dict)


def _path(returns: np.ndarray) -> list[Decimal]:
    prices = float(PRICE) * np.cumprod(np.concatenate([[1.0], 1.0 + returns]))
    return [Decimal(f"{price:.2f}") for price in prices]


def build_significance_ledger(ledger: Ledger, seed: int = 2026) -> Planted:
    """Fill `ledger` (migrated, empty) as the module docstring says."""
    rng = np.random.default_rng(seed)
    market = rng.normal(0.0005, 0.02, DAYS - 1)
    paths: dict[str, tuple[int, list[Decimal]]] = {
        "buy-and-hold": (0, _path(market)),
        "cash": (0, []),
    }
    for i in range(NOISE_AGENTS):
        paths[f"noise-{i:02d}"] = (0, _path(market + rng.normal(0.0, 0.015, DAYS - 1)))
    paths["skilled"] = (0, _path(market + 0.008 + rng.normal(0.0, 0.015, DAYS - 1)))
    late = rng.normal(0.0, 0.02, DAYS - 1 - LATE_DAYS)
    paths["late"] = (LATE_DAYS, _path(late))
    planted = Planted()
    opened_at = START - timedelta(days=1)
    for agent, (offset, prices) in paths.items():
        agent_id = ledger.ensure_agent(agent, BASELINES.get(agent, "llm"), opened_at)
        account_id = ledger.open_account(agent_id, "crypto", "USDT", INITIAL, opened_at)
        for day in range(offset, DAYS):
            at = START + timedelta(days=day)
            if day == offset:
                cycle = ledger.claim_cycle(account_id, at, "test", at + timedelta(minutes=5), at)
                assert cycle is not None
                if prices:
                    order = Order(instrument=_BTC, side=Side.BUY, quantity=QUANTITY, placed_at=at)
                    ledger.record_order(
                        cycle_id=cycle, seq=0, order=order, outcome=fill_for(order, PRICE)
                    )
                ledger.finish_cycle(cycle, CycleStatus.DONE, at)
            marks = {_BTC.symbol: prices[day - offset]} if prices else {}
            snapshot = ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, marks)
            planted.navs.setdefault(agent, []).append((at, snapshot.nav))
    return planted
