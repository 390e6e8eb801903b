"""Trading costs come from the config: KTD-Fin's A-share costs reproduced from a config alone.

KTD-Fin charges 5 bps on a buy and 15 bps on a sell (stamp duty included), a CNY 5 minimum cost
per order, and fills at the next open (no slippage). Here those are `[markets.cn.costs]` keys (the
minimum is the commission's, so a sell pays its stamp duty above it); a replay of the bundled
A-share bars through the config loader must fill every order at the bar's open and charge exactly
those fees, and the live plan must carry the same rules. A market without a costs table keeps the
default rules, and the commented costs table in the `openbell init` template states those
defaults.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from openbell.daemon.clock import SimulatedClock
from openbell.markets.domain import utc
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import FeeSchedule, rules_for
from openbell.ops.config.schema import CostsConfig, default_config_text, load_config
from openbell.ops.wiring.planning import (
    OFFLINE_ENV,
    live_plan,
    replay_from_config,
    rules_for_market,
)
from openbell.store import exports
from openbell.store.db import make_engine
from openbell.store.verify import verify_ledger
from openbell_testkit.offline import refuse_network

KTD_FIN_COSTS = """
[markets.cn.costs]                       # KTD-Fin: buy 5 bps, sell 15 bps, CNY 5 minimum
commission_bps = "5"
commission_min = "5"
stamp_duty_sell_bps = "10"
transfer_fee_bps = "0"
slippage_bps = "0"
"""

CONFIG = """\
[store]
url = "{url}"

[markets.cn]
universe = "sse50"
cadence = "daily"
source = "akshare"
initial_cash = "1000000"  # KTD-Fin's
# January 2025 is before the dates sse50.toml vouches for (2025-09-30 on).
allow_outside_coverage = true
{costs}
[[agents]]
name = "random"
kind = "random"
markets = ["cn"]
seed = 3
"""

CENT = Decimal("0.01")


def cents(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def replay_fills(tmp_path: Path, costs: str) -> list[dict[str, object]]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    path = tmp_path / "openbell.toml"
    path.write_text(CONFIG.format(url=url, costs=costs), encoding="utf-8")
    replay_from_config(
        load_config(path),
        start=date(2025, 1, 6),
        end=date(2025, 1, 24),
        market="cn",
        resume=False,
        show_progress=False,
    )
    engine = make_engine(url)
    try:
        assert verify_ledger(engine).ok
        columns = exports.export_columns("fills")
        return [
            dict(zip(columns, row, strict=True)) for row in exports.export_rows(engine, "fills")
        ]
    finally:
        engine.dispose()


def test_a_config_alone_reproduces_ktd_fins_a_share_costs(tmp_path: Path) -> None:
    fills = replay_fills(tmp_path, KTD_FIN_COSTS)
    sides = {fill["side"] for fill in fills}
    assert sides == {"buy", "sell"}, sides
    bars = ReplaySource.from_bundled("cn", names=["cn-1d"])
    minimum = {True: 0, False: 0}
    for fill in fills:
        notional, fees = fill["notional"], fill["fees"]
        assert isinstance(notional, Decimal)
        assert isinstance(fees, Decimal)
        # No slippage: the fill is at the open of the daily bar starting at the slot.
        filled_at = fill["filled_at"]
        assert isinstance(filled_at, datetime)
        quote = bars.quote_at(str(fill["symbol"]), filled_at)
        assert quote is not None
        assert fill["price"] == quote.price
        commission = max(cents(notional * Decimal("0.0005")), Decimal(5))
        minimum[commission == 5] += 1
        if fill["side"] == "buy":
            # 5 bps with the CNY 5 minimum, without the transfer fee.
            assert fees == commission
        else:
            # 5 bps commission (at least CNY 5) and 10 bps stamp duty, each billed to the cent.
            assert fees == commission + cents(notional * Decimal("0.0010"))
            if commission > 5:
                assert abs(fees - notional * Decimal("0.0015")) <= CENT
    # orders below and above CNY 10,000 (where the minimum binds, and where it does not)
    assert minimum[True] > 0, minimum
    assert minimum[False] > 0, minimum


def test_without_a_costs_table_the_default_rules_apply(tmp_path: Path) -> None:
    fills = replay_fills(tmp_path, "")
    buy = next(fill for fill in fills if fill["side"] == "buy")
    notional = buy["notional"]
    assert isinstance(notional, Decimal)
    # The default: commission 2.5 bps with a CNY 5 minimum, transfer fee 0.1 bps.
    expected = max(cents(notional * Decimal("0.00025")), Decimal(5))
    assert buy["fees"] == expected + cents(notional * Decimal("0.00001"))


def test_the_live_plan_carries_the_configured_costs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refuse_network(monkeypatch, with_curl=True)
    monkeypatch.setenv(OFFLINE_ENV, "1")
    text = default_config_text().replace(
        'initial_cash = "100000"',
        'initial_cash = "100000"\nlimit_buffer_pct = "0.005"\n' + KTD_FIN_COSTS,
        1,
    )
    text += '\n[markets.us.costs]\nmin_notional = "1"\nslippage_bps = "2"\n'
    path = tmp_path / "openbell.toml"
    path.write_text(text, encoding="utf-8")
    plan = live_plan(load_config(path), SimulatedClock(utc(2026, 11, 30, 15)), http=False)
    rules = {market.market: market.market_rules for market in plan.markets}
    assert rules["cn"].fees == FeeSchedule(
        commission_bps=Decimal(5),
        commission_min=Decimal(5),
        stamp_duty_sell_bps=Decimal(10),
        transfer_fee_bps=Decimal(0),
    )
    assert rules["cn"].slippage_bps == 0
    limits = rules["cn"].price_limits
    assert limits is not None
    assert limits.buffer_pct == Decimal("0.005")  # KTD-Fin's 9.5 / 19.5 / 29.5 %
    assert rules["cn"].min_notional == rules_for("cn").min_notional
    assert (rules["us"].min_notional, rules["us"].slippage_bps) == (Decimal(1), Decimal(2))
    assert rules["us"].fees == rules_for("us").fees
    assert rules["crypto"] == rules_for("crypto")


def test_the_templates_commented_costs_are_the_defaults(tmp_path: Path) -> None:
    keys = "|".join(CostsConfig.model_fields)
    commented = re.compile(rf"^# (\[markets\.cn\.costs\]|(?:{keys}) = )", re.MULTILINE)
    text = commented.sub(r"\1", default_config_text())
    assert "\n[markets.cn.costs]" in text
    path = tmp_path / "openbell.toml"
    path.write_text(text, encoding="utf-8")
    cn = load_config(path).markets.cn
    assert cn is not None
    assert None not in cn.costs.model_dump().values()
    assert rules_for_market("cn", cn) == rules_for("cn")
