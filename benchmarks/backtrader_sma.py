"""The `sma_crossover` job of `replay_bench.py` in backtrader, as a script run on its own.

What a backtrader user runs: read the ten coins' daily bars (openbell's bundled
`crypto-1d.parquet`, with pandas), one `PandasData` feed per coin, and the rule (SMA50 over SMA200
of the daily closes: target weight 1/N on a cross up, 0 on a cross down; taker fee 10 bps). It
prints the final portfolio value. `whole_process.py` times it as a whole process beside `openbell
replay` on the same bars. It imports neither openbell nor anything the job does not use.

Not a test: `.venv/bin/python benchmarks/backtrader_sma.py`.
"""

from __future__ import annotations

from pathlib import Path

import backtrader as bt
import pandas as pd

BARS = Path(__file__).resolve().parent.parent / "markets" / "data" / "bars" / "crypto-1d.parquet"
PRICES = ("open", "high", "low", "close", "volume")


class SmaCross(bt.Strategy):  # type: ignore[misc]
    """The baseline's rule in backtrader: 1/N of the portfolio while SMA50 > SMA200."""

    def __init__(self) -> None:
        self.cross = {
            data: bt.ind.CrossOver(
                bt.ind.SMA(data.close, period=50), bt.ind.SMA(data.close, period=200)
            )
            for data in self.datas
        }

    def prenext(self) -> None:  # coins start on different dates: trade those that have started
        self.next()

    def next(self) -> None:
        weight = 1 / len(self.datas)
        for data in self.datas:
            if len(data) < 200:
                continue
            if self.cross[data][0] > 0:
                self.order_target_percent(data, weight)
            elif self.cross[data][0] < 0:
                self.order_target_percent(data, 0)


def frames(path: Path = BARS) -> dict[str, pd.DataFrame]:
    """One frame of float prices per symbol, indexed by the bars' naive UTC starts."""
    table = pd.read_parquet(path)
    found = {}
    for symbol, rows in table.groupby("symbol", sort=True):
        frame = rows[list(PRICES)].astype(float)
        frame.index = pd.DatetimeIndex(rows["start_at"]).tz_localize(None)
        found[str(symbol)] = frame.sort_index()
    return found


def main() -> None:
    cerebro = bt.Cerebro(stdstats=False)
    for symbol, frame in frames().items():
        cerebro.adddata(bt.feeds.PandasData(dataname=frame), name=symbol)
    cerebro.addstrategy(SmaCross)
    cerebro.broker.setcash(10_000)
    cerebro.broker.setcommission(commission=0.001)
    cerebro.run()
    print(f"final value {cerebro.broker.getvalue():.2f}")


if __name__ == "__main__":
    main()
