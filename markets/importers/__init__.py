"""Importers: one-off conversions of vendor data files into canonical bar files.

Each importer parses one vendor's file families into `Bar`s (UTC `[start_at, end_at)`, exact
Decimals), counts what it had to drop and why, and writes `openbell.markets.barfile` files. Vendor
shapes never leave their importer module.
"""

from __future__ import annotations
