"""What masking secrets costs per text the store writes (`Redactor.mask_values`, `may_mask`).

The store masks every text it writes (`store/db.py`): a statement's (or a batch's) text
parameters are first scanned together with `may_mask`, then masked one by one only when something
may be there. This measures both on realistic trace texts with three configured secrets (an
OpenAI-style project key, a DeepSeek-style hex key and a database password):

- a `get_bars` tool result of 20 daily bars of an A-share as the trace stores it (about 3 kB);
- the same bars under masking (aliases, day labels, rebased prices);
- an assistant message of about 1 kB of prose with numbers;
- one turn's journal batch (three tool results, messages and arguments), bright and masked,
  joined as `may_mask` sees them.

It prints the median time per call in microseconds. Not a test: run it by hand,
`.venv/bin/python benchmarks/redact_bench.py [--repeat N]`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime

from openbell.agents.tools import BarsOut
from openbell.markets.barfile import read_bundled
from openbell.store.redact import Redactor

SECRETS = (
    "sk-proj-" + "Xq7vR2mN9pL4sT8wK1yB6cF3hJ5dG0aZ" * 2,
    "sk-" + "3f9a1c7e5b2d4f6a8c0e9d7b5a3c1e2f",
    "correct horse battery staple 42",
)
MESSAGE = (
    "Looking at the last twenty sessions, the stock rose from 1,612.50 to 1,688.00 while the "
    "volume stayed near its average; the 5-day return is 2.4% and the 20-day volatility about "
    "1.3% a day. My cash is 412,305.77 CNY, so 200 shares cost about 337,600 before fees "
    "(commission 2.5 bps, stamp duty 5 bps on sells). I will buy 100 shares now and keep the "
    "rest in cash until the next slot, then review the position against the 20-day average. "
) * 2


def _texts() -> dict[str, str]:
    bars = read_bundled("cn-1d")
    symbol = bars.symbols[0]
    rows = bars.bars(symbol, end_by=datetime(2025, 10, 31, tzinfo=UTC))[-20:]
    result = BarsOut.of(
        as_of=rows[-1].end_at, symbol=symbol, interval="1d", bars=tuple(rows)
    ).model_dump_json()
    masked = result.replace(symbol, "asset_0228").replace("2025-", "day_+")
    return {"bars result": result, "masked bars result": masked, "assistant message": MESSAGE}


def _median_us(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    redactor = Redactor(SECRETS)
    texts = _texts()
    arguments = '{"symbol": "asset_0228", "interval": "1d", "lookback": 20}'
    batches = {
        "turn batch": [texts["bars result"], MESSAGE, arguments] * 3,
        "masked turn batch": [texts["masked bars result"], MESSAGE, arguments] * 3,
    }
    print(f"{redactor!r}, median of {args.repeat} calls")
    for name, text in texts.items():
        spent = _median_us(lambda text=text: redactor.mask_values(text), args.repeat)
        print(f"mask_values  {name:<20} {len(text):>6} chars  {spent:8.1f} us")
    for name, batch in batches.items():
        joined = "\x00".join(batch)
        spent = _median_us(lambda joined=joined: redactor.may_mask(joined), args.repeat)
        print(f"may_mask     {name:<20} {len(joined):>6} chars  {spent:8.1f} us")


if __name__ == "__main__":
    main()
