"""The live vendor adapters: yfinance, akshare and ccxt, and what their calls share."""

from __future__ import annotations
