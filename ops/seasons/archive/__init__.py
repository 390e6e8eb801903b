"""A season's archive: its ledger rows as Parquet with its manifest, chain heads and published
figures (`export.py`), and the check of an archive from its files alone (`verify.py`): every
link of every account's hash chain and every leaderboard figure recomputed (`figures.py`) with
the functions the leaderboard uses. The archive's layout and the record's canonical form are in
docs/guide/season-archive.md.
"""
