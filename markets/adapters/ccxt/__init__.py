"""The ccxt adapter: crypto spot bars, quotes and instrument facts from one exchange (asyncio).

ccxt's dicts, lists and exceptions stay inside this package; `source.py` calls the exchange and
`parse.py` turns what it returns (and raises) into `Bar`, `Quote`, `Instrument` and openbell errors.
"""

from __future__ import annotations

from openbell.markets.adapters.ccxt.source import CcxtSource

__all__ = ["CcxtSource"]
