"""The yfinance adapter: US equities bars, quotes, news, fundamentals and corporate actions.

yfinance's frames and dicts stay inside this package; `source.py` calls the library and `parse.py`
turns what it returns into `Bar`, `Quote`, `NewsItem`, `Fundamentals` and `CorporateAction`.
"""

from __future__ import annotations

from openbell.markets.adapters.yfinance.source import YahooSource

__all__ = ["YahooSource"]
