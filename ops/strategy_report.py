"""The concordance gap of a strategy-code agent (FIDES): each strategy's claimed edge against the
realised outcome, as a report record.

This module owns `concordance_record`, which `openbell report AGENT` adds to the panel of an
account of kind `strategy_code`: one entry per strategy the model wrote (`strategy_1`,
`strategy_2`, ... oldest first), each with when it was written, its runs (and the failed ones),
the claimed and the realised mean return per cycle and hit rate, and the gaps (claimed minus
realised: positive when the model over-claimed). The realised figures are the ledger's
(`Ledger.strategy_concordance`: slot NAV to next slot NAV over the cycles the strategy's runs gave
weights).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from openbell.store.ledger import Ledger
from openbell.store.strategy_runs import Concordance

STRATEGY_CODE_KIND = "strategy_code"


def concordance_record(engine: Engine, account_id: int) -> dict[str, Any]:
    """`strategy_N` -> the claim, the outcome and the gaps of the account's N-th strategy."""
    found = Ledger(engine).strategy_concordance(account_id)
    return {f"strategy_{index}": _entry(gap) for index, gap in enumerate(found, start=1)}


def _entry(gap: Concordance) -> dict[str, Any]:
    claimed = gap.strategy
    return {
        "written_at": claimed.written_at.isoformat(),
        "answers": claimed.answers,
        "runs": gap.runs,
        "failed_runs": gap.failed_runs,
        "periods": gap.periods,
        "claimed_return": _text(claimed.claimed_return),
        "realised_return": _round(gap.realised_return),
        "return_gap": _round(gap.return_gap),
        "claimed_hit_rate": _text(claimed.claimed_hit_rate),
        "realised_hit_rate": _round(gap.realised_hit_rate),
        "hit_rate_gap": _round(gap.hit_rate_gap),
    }


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
