"""The akshare adapter: A-share and index bars, quotes, news, corporate actions, index members.

akshare's frames with their Chinese column names stay inside this package; `source.py` calls the
library (rate-limited, memoised, under a deadline) and `parse.py` turns what it returns into `Bar`,
`Quote`, `NewsItem`, `CorporateAction` and `Universe`.
"""

from __future__ import annotations

from openbell.markets.adapters.akshare.source import AkshareSource

__all__ = ["AkshareSource"]
