"""What a rating agent's model is told, and the evidence of a Market Insights report.

This module owns the rater's system prompt (`system_prompt`: the scale, the rule the account trades
by, long-only or signed, and the answer's shape, with Herculean's eight sections when the agent
writes Market Insights reports), the first user message (`user_prompt`) and the evidence of each
symbol (`evidence`). Plain ratings show each symbol's closes, oldest first. A Market Insights
report's evidence adds what Herculean's weekly aggregator gives its agents, in openbell's terms:
the symbol's return over the closes shown and over the last 5, the mean of the same return over
the other offered symbols (the peers of the sector-relative section), and the news of the last 7
days (at most 3 items, through the toolbox's `get_news`, so point-in-time holds, in the untrusted
envelope of `agents/untrusted.py`; "none" where the source has none). The judge is shown the
same evidence for the symbol it scores. Money and returns are shown as the data has them; nothing
here reads the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Final

from openbell.agents.protocol import DecisionContext
from openbell.agents.rating.report import SECTIONS, Rating
from openbell.agents.tools import ToolError
from openbell.agents.untrusted import RULE, envelope
from openbell.markets.domain import Bar

#: The news a Market Insights report is shown: the last 7 days, 3 items a symbol.
NEWS_HOURS: Final = 168
NEWS_ITEMS: Final = 3
#: The short return of the evidence, in closes.
SHORT_CLOSES: Final = 5

_SCALE: Final = ", ".join(rating.value for rating in Rating)
_LONG_ONLY: Final = (
    "The account is long-only: it holds the strong buys and buys, weighted by rating and "
    "confidence, and sells everything else."
)
_SIGNED: Final = (
    "The account may short: it holds the strong buys and buys long and the sells and strong "
    "sells short, each weighted by rating and confidence, and closes the holds."
)


def system_prompt(*, signed: bool, insights: bool) -> str:
    """The rater's system prompt (see the module docstring)."""
    role = (
        "you write a Market Insights report for every offered symbol: a structured report, a "
        f"rating on the scale {_SCALE}, your confidence in it (a number in [0, 1]) and a "
        "one-sentence rationale"
        if insights
        else f"you write a short market-insights report: a rating for every offered symbol on the "
        f"scale {_SCALE}, your confidence in it (a number in [0, 1]) and a one-sentence rationale"
    )
    entry = '{"symbol": "<symbol>", "rating": "<one of the scale>", "confidence": <0..1>, '
    entry += '"rationale": "<why>"'
    if insights:
        entry += ', "report": {' + ", ".join(f'"{name}": "<text>"' for name in SECTIONS) + "}"
    sections = (
        "\nEach report has these sections, in this order, each a few sentences grounded in the "
        "evidence (say so where the evidence has nothing): "
        + "; ".join(f"{name}: {what}" for name, what in SECTIONS.items())
        + "."
        if insights
        else ""
    )
    return (
        f"You are an equity and crypto research analyst. At each decision time {role}. You see "
        "each symbol's recent closes, oldest first, and what the evidence says; nothing later "
        f"exists. {RULE} "
        f"{_SIGNED if signed else _LONG_ONLY}{sections}\n\n"
        "Answer with one JSON object and nothing else:\n"
        f'{{"ratings": [{entry}}}, ...]}} with exactly one entry per offered symbol.'
    )


def _change(closes: Sequence[Decimal], count: int) -> Decimal | None:
    """The return over the last `count` closes (the last over the one `count` - 1 before it)."""
    if len(closes) < count or count < 2 or closes[-count] <= 0:
        return None
    return closes[-1] / closes[-count] - 1


def _percent(value: Decimal | None) -> str:
    return "n/a" if value is None else f"{value * 100:.2f}%"


async def evidence(
    ctx: DecisionContext, bars: Mapping[str, Sequence[Bar]], *, insights: bool
) -> dict[str, str]:
    """Each symbol's evidence, as the rater and the judge are shown it (module docstring)."""
    closes = {symbol: [bar.close for bar in series] for symbol, series in sorted(bars.items())}
    out = {symbol: f"{symbol}: {' '.join(map(str, found))}" for symbol, found in closes.items()}
    if not insights:
        return out
    whole = {symbol: _change(found, len(found)) for symbol, found in closes.items()}
    for symbol, found in closes.items():
        peers = [value for other, value in whole.items() if other != symbol and value is not None]
        peer_mean = sum(peers, Decimal(0)) / len(peers) if peers else None
        news = await ctx.tools.get_news(symbol, lookback_hours=NEWS_HOURS, limit=NEWS_ITEMS)
        items = [] if isinstance(news, ToolError) else news.items
        headlines = (
            envelope([f"{item.published_at.isoformat()} {item.title}" for item in items])
            if items
            else "none"
        )
        out[symbol] = (
            f"{out[symbol]}\n  return over these {len(found)} closes "
            f"{_percent(whole[symbol])}, over the last {SHORT_CLOSES} "
            f"{_percent(_change(found, SHORT_CLOSES))}; the peers' mean return over the same "
            f"closes {_percent(peer_mean)}\n  news of the last 7 days: {headlines}"
        )
    return out


def user_prompt(ctx: DecisionContext, shown: Mapping[str, str], interval: str) -> str:
    """The first user message: the decision time, the market and each symbol's evidence."""
    lines = [
        (
            f"Decision time: {ctx.now.isoformat()}. Market: {ctx.market}. Recent {interval} "
            "closes per symbol, oldest first:"
        )
    ]
    lines.extend(shown[symbol] for symbol in sorted(shown))
    lines.append("Write the report.")
    return "\n".join(lines)
