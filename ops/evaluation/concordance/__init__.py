"""FIDES' concordance of strategy-code agents: the say-to-do judge, the three gaps, buy-and-hold
over a strategy's own periods, and the records `openbell report`, `openbell judge` and the API
show (`judge.py`, `gaps.py`, `buy_and_hold.py`, `record.py`)."""
